package drill

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Sample is the EtcdCluster's status as the drill saw it at one moment.
type Sample struct {
	At                            time.Time
	Available, AllReady, Tolerant bool
	// Degraded is Degraded's message while it is True.
	Degraded string
	// Waiting is Progressing's message while the hub waits for something.
	Waiting                string
	Operation              *etcdfedv1.MembershipOperation
	ReadyMembers, Replicas int
	Members                []MemberSample
}

// MemberSample is one member in a Sample.
type MemberSample struct {
	Name, Cluster, Zone string
	Incarnation         int64
	Ready               bool
}

// SampleOf takes a Sample of ec seen at at.
func SampleOf(ec *etcdfedv1.EtcdCluster, at time.Time) Sample {
	st := ec.Status
	s := Sample{At: at, Replicas: int(ec.Spec.Replicas), ReadyMembers: int(st.ReadyMembers),
		Available: meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionAvailable),
		AllReady:  meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionAllMembersReady),
		Tolerant:  meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionFailureTolerant)}
	if c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionDegraded); c != nil && c.Status == "True" {
		s.Degraded = c.Message
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionProgressing); c != nil && c.Status != "True" && c.Reason == etcdfedv1.ReasonWaiting {
		s.Waiting = c.Message
	}
	if st.Operation != nil {
		s.Operation = st.Operation.DeepCopy()
	}
	for _, m := range st.Members {
		s.Members = append(s.Members, MemberSample{Name: m.Name, Cluster: m.Cluster, Zone: m.Zone, Incarnation: m.Incarnation, Ready: m.Ready})
	}
	return s
}

// Evacuated: every member is a ready voter outside zone and nothing is in
// flight.
func Evacuated(s Sample, zone Zone) bool {
	if !healthy(s) {
		return false
	}
	for _, m := range s.Members {
		if zone.Contains(m.Cluster, m.Zone) {
			return false
		}
	}
	return true
}

// Healed: Available, every member a ready voter, nothing in flight,
// failure tolerant again when the ring was before the drill, and Degraded
// no longer naming the zone, its member clusters or its members (the hub
// sees the returned zone again; a problem elsewhere is not the drill's).
func Healed(s Sample, zone Zone, p Plan) bool {
	return healthy(s) && s.Available && (s.Tolerant || !p.Tolerant) && !names(s.Degraded, zoneWords(zone, p))
}

// zoneWords are the names that tie a message to the drilled zone.
func zoneWords(zone Zone, p Plan) []string {
	return slices.Concat([]string{zone.Name}, p.Clusters, p.Members)
}

func healthy(s Sample) bool {
	if s.Operation != nil || !s.AllReady || s.ReadyMembers != s.Replicas || len(s.Members) != s.Replicas {
		return false
	}
	for _, m := range s.Members {
		if !m.Ready {
			return false
		}
	}
	return true
}

// AnalyzeInput is the input of Analyze.
type AnalyzeInput struct {
	// Samples in the order they were taken.
	Samples []Sample
	Zone    Zone
	Plan    Plan
	// Failed is when the failure began; Restored when the restore began
	// (zero: never).
	Failed, Restored time.Time
}

// Move is a member that changed failure domain or incarnation.
type Move struct {
	Member      string
	From, To    string // cluster/zone
	Incarnation int64
	At          time.Time
}

// Timeline is what Analyze reads from the samples. A nil time did not
// happen while the drill watched.
type Timeline struct {
	// Detected is the first Degraded naming the zone or a member cluster
	// in it; DetectedBy is its message.
	Detected   *time.Time
	DetectedBy string
	// MemberDegraded is the first Degraded naming a member of the zone.
	MemberDegraded *time.Time
	// FirstMove is the first membership change of a member of the zone
	// (MoveLeader aside); FirstMoveBy describes it.
	FirstMove   *time.Time
	FirstMoveBy string
	// Evacuated is the first moment, while the zone was failed, every
	// member was a ready voter outside it with nothing in flight.
	Evacuated *time.Time
	// Healed is the first moment after the restore the ring was healed
	// (see Healed).
	Healed *time.Time
	// Unavailable sums the time Available was not True after the
	// failure; LongestUnavailable is the longest stretch.
	Unavailable, LongestUnavailable time.Duration
	Moves                           []Move
}

// Analyze reads the drill's timeline from the status samples.
func Analyze(in AnalyzeInput) Timeline {
	var tl Timeline
	zoneNames := append([]string{in.Zone.Name}, in.Plan.Clusters...)
	restored := !in.Restored.IsZero()
	last := map[string]MemberSample{}
	var downSince *time.Time
	var prev *Sample
	for i := range in.Samples {
		s := in.Samples[i]
		after := !s.At.Before(in.Failed)
		// Moves count from the first sample on (members that moved before
		// the failure are not the drill's business, but they are rare:
		// the drill starts only when nothing is in flight).
		for _, m := range s.Members {
			if m.Cluster == "" {
				continue
			}
			p, ok := last[m.Name]
			if ok && after && (p.Cluster != m.Cluster || p.Zone != m.Zone || p.Incarnation != m.Incarnation) {
				tl.Moves = append(tl.Moves, Move{Member: m.Name, From: p.Cluster + "/" + p.Zone, To: m.Cluster + "/" + m.Zone, Incarnation: m.Incarnation, At: s.At})
			}
			last[m.Name] = m
		}
		if !after {
			prev = &in.Samples[i]
			continue
		}
		if tl.Detected == nil && s.Degraded != "" && names(s.Degraded, zoneNames) {
			tl.Detected, tl.DetectedBy = ptr(s.At), s.Degraded
		}
		if tl.MemberDegraded == nil && s.Degraded != "" && names(s.Degraded, in.Plan.Members) {
			tl.MemberDegraded = ptr(s.At)
		}
		if op := s.Operation; tl.FirstMove == nil && op != nil && op.Type != etcdfedv1.OperationMoveLeader && slices.Contains(in.Plan.Members, op.Member) {
			tl.FirstMove = ptr(s.At)
			tl.FirstMoveBy = strings.TrimSpace(fmt.Sprintf("%s %s (%s)", op.Type, op.Member, op.Reason))
		}
		if tl.Evacuated == nil && (!restored || s.At.Before(in.Restored)) && Evacuated(s, in.Zone) {
			tl.Evacuated = ptr(s.At)
		}
		if tl.Healed == nil && restored && !s.At.Before(in.Restored) && Healed(s, in.Zone, in.Plan) {
			tl.Healed = ptr(s.At)
		}
		// Availability: a sample's state holds until the next sample.
		if prev != nil && !prev.At.Before(in.Failed) && !prev.Available {
			tl.Unavailable += s.At.Sub(prev.At)
		}
		switch {
		case !s.Available && downSince == nil:
			downSince = ptr(s.At)
		case s.Available && downSince != nil:
			tl.LongestUnavailable = max(tl.LongestUnavailable, s.At.Sub(*downSince))
			downSince = nil
		}
		prev = &in.Samples[i]
	}
	if downSince != nil && prev != nil {
		tl.LongestUnavailable = max(tl.LongestUnavailable, prev.At.Sub(*downSince))
	}
	return tl
}

// names reports whether msg names one of words as a whole word (so that
// zone-1 does not match zone-10 or zone-1a).
func names(msg string, words []string) bool {
	for _, w := range words {
		if w == "" {
			continue
		}
		if regexp.MustCompile(`(^|[^A-Za-z0-9_.-])` + regexp.QuoteMeta(w) + `($|[^A-Za-z0-9_-])`).MatchString(msg) {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
