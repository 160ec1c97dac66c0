package topology

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Leader placement (rule 16): where the ring's leader should be, and
// whether to move leadership there now. DecideLeader is pure; the hub
// feeds it the members, the leader, the ring's health, the operation in
// flight and the times it recorded, and carries out the move as an
// operation of its planner (with etcd's MoveLeader).
//
// Hysteresis: leadership is moved only after the ring has been healthy and
// the leader outside the wanted place for Settle (the clock restarts when
// the ring is not healthy), and never twice within MinInterval. With Auto,
// the leader's zone stays wanted while its quorum round trip is within
// AutoMargin of the best one, so measurement noise moves nothing.

// LeaderPlacement is how the leader is placed (the API's strings).
type LeaderPlacement string

const (
	// LeaderNone: leadership stays where elections put it.
	LeaderNone LeaderPlacement = "None"
	// LeaderPreferred: the first preferred Place holding a ready voter.
	LeaderPreferred LeaderPlacement = "Preferred"
	// LeaderAuto: the domain whose nearest quorum is closest.
	LeaderAuto LeaderPlacement = "Auto"
)

// LeaderReason says why the leader is or is not moved (the API's strings).
type LeaderReason string

const (
	LeaderNotWanted         LeaderReason = "NotWanted"
	LeaderInPlace           LeaderReason = "InPlace"
	LeaderUnknown           LeaderReason = "LeaderUnknown"
	LeaderNoMeasurements    LeaderReason = "NoMeasurements"
	LeaderNoCandidate       LeaderReason = "NoCandidate"
	LeaderRingUnhealthy     LeaderReason = "RingUnhealthy"
	LeaderOperationInFlight LeaderReason = "OperationInFlight"
	LeaderSettling          LeaderReason = "Settling"
	LeaderRateLimited       LeaderReason = "RateLimited"
	LeaderMove              LeaderReason = "Moving"
)

// Place is one preferred place: a cluster, a zone, or both; "" matches
// any.
type Place struct {
	Cluster string
	Zone    string
}

// Matches reports whether d is in the place.
func (p Place) Matches(d Domain) bool {
	return (p.Cluster == "" || p.Cluster == d.Cluster) && (p.Zone == "" || p.Zone == d.Zone)
}

func (p Place) String() string {
	switch {
	case p.Cluster == "":
		return "zone " + p.Zone
	case p.Zone == "":
		return "cluster " + p.Cluster
	}
	return "zone " + p.Zone + " of cluster " + p.Cluster
}

// LeaderPolicy is spec.leader, defaults resolved.
type LeaderPolicy struct {
	Placement LeaderPlacement
	Preferred []Place
	// Settle: how long the leader must have been outside the wanted
	// place on a healthy ring before it is moved.
	Settle time.Duration
	// MinInterval: the least time between two moves.
	MinInterval time.Duration
}

// AutoMargin: with Auto, the leader's domain stays wanted while its
// quorum round trip is at most the best one plus this share of it (and
// AutoSlack), so that jitter in the measurements moves nothing.
const (
	AutoMarginPercent = 20
	AutoSlack         = 500 * time.Microsecond
)

// RoundTrip is the measured round trip between two member clusters (the
// spokes' matrix); ok is false when it is not known. Round trips inside a
// member cluster count as none.
type RoundTrip func(fromCluster, toCluster string) (rtt time.Duration, ok bool)

// LeaderMember is one etcd member as leader placement sees it.
type LeaderMember struct {
	Name   string
	Domain Domain
	// Voter: not a learner. Ready: started, answering, recorded ready.
	Voter, Ready bool
}

// LeaderInput is everything DecideLeader looks at.
type LeaderInput struct {
	Policy  LeaderPolicy
	Members []LeaderMember
	// Leader is the leader's name, "" when unknown.
	Leader string
	// Unhealthy says why not every member is a ready voter ("" when
	// every one is).
	Unhealthy string
	// Busy names the operation in flight or due first ("" when none):
	// it needs a stable leader.
	Busy string
	// Now is the hub's clock; OutsideSince is when the leader was first
	// found outside the wanted place on a healthy ring (zero: not),
	// LastMoved when leadership was last moved for its placement.
	Now          time.Time
	OutsideSince time.Time
	LastMoved    time.Time
	// RoundTrip is the measured matrix, nil when there is none.
	RoundTrip RoundTrip
}

// LeaderDecision is DecideLeader's answer.
type LeaderDecision struct {
	// MoveTo is the member to hand leadership to now, "" for none.
	MoveTo string
	// Wanted says where the leader is wanted, "" for nowhere in
	// particular.
	Wanted string
	// InPlace: the leader is where it is wanted.
	InPlace bool
	Reason  LeaderReason
	Message string
	// OutsideSince is the value to record (zero: clear).
	OutsideSince time.Time
	// RequeueAfter is when to look again (settle or interval end), 0 for
	// no particular time.
	RequeueAfter time.Duration
}

// DecideLeader decides where the leader is wanted and whether to move it
// there now.
func DecideLeader(in LeaderInput) LeaderDecision {
	if in.Policy.Placement == "" || in.Policy.Placement == LeaderNone {
		return LeaderDecision{Reason: LeaderNotWanted, Message: "leadership stays where etcd's elections put it (spec.leader.placement None)"}
	}
	lead, known := leaderMember(in)
	if !known {
		return LeaderDecision{Reason: LeaderUnknown, Message: "no leader is known", OutsideSince: in.OutsideSince}
	}
	w := wanted(in)
	out := LeaderDecision{Wanted: w.describe}
	if w.why != "" {
		out.Reason, out.Message = w.why, w.message
		return out
	}
	if slices.Contains(w.members, lead.Name) {
		out.InPlace, out.Reason = true, LeaderInPlace
		out.Message = fmt.Sprintf("%s leads in %s, where it is wanted", lead.Name, lead.Domain)
		return out
	}
	to := w.members[0]
	where := fmt.Sprintf("%s leads in %s; wanted in %s", lead.Name, lead.Domain, w.describe)
	if in.Unhealthy != "" {
		// The clock starts again once every member is a ready voter: a
		// flapping link keeps it at zero.
		out.Reason = LeaderRingUnhealthy
		out.Message = fmt.Sprintf("%s; not moved while the ring is not healthy: %s", where, in.Unhealthy)
		return out
	}
	out.OutsideSince = in.OutsideSince
	if out.OutsideSince.IsZero() || out.OutsideSince.After(in.Now) {
		out.OutsideSince = in.Now
	}
	if in.Busy != "" {
		out.Reason = LeaderOperationInFlight
		out.Message = fmt.Sprintf("%s; not moved while %s", where, in.Busy)
		return out
	}
	if left := out.OutsideSince.Add(in.Policy.Settle).Sub(in.Now); left > 0 {
		out.Reason, out.RequeueAfter = LeaderSettling, left
		out.Message = fmt.Sprintf("%s; moved to %s once the ring has been healthy with the leader outside for %s (since %s)",
			where, to, in.Policy.Settle, out.OutsideSince.UTC().Format(time.RFC3339))
		return out
	}
	if !in.LastMoved.IsZero() {
		if left := in.LastMoved.Add(in.Policy.MinInterval).Sub(in.Now); left > 0 {
			out.Reason, out.RequeueAfter = LeaderRateLimited, left
			out.Message = fmt.Sprintf("%s; leadership was moved at %s, the next move not before %s (at most one per %s)",
				where, in.LastMoved.UTC().Format(time.RFC3339), in.LastMoved.Add(in.Policy.MinInterval).UTC().Format(time.RFC3339), in.Policy.MinInterval)
			return out
		}
	}
	out.MoveTo, out.Reason = to, LeaderMove
	out.Message = fmt.Sprintf("%s; moving leadership to %s", where, to)
	return out
}

// WantedLeaders lists the ready voters leadership is wanted on, most
// wanted first; nil when the policy wants nothing in particular, Auto
// lacks measurements, or no wanted place holds a ready voter. A member
// that must lose leadership (a roll, a drain) is passed not ready.
func WantedLeaders(in LeaderInput) []string {
	if in.Policy.Placement == "" || in.Policy.Placement == LeaderNone {
		return nil
	}
	w := wanted(in)
	if w.why != "" {
		return nil
	}
	return w.members
}

func leaderMember(in LeaderInput) (LeaderMember, bool) {
	for _, m := range in.Members {
		if m.Name == in.Leader && in.Leader != "" {
			return m, true
		}
	}
	return LeaderMember{}, false
}

// want is where the leader is wanted: the members it may be (in the order
// to move to), or why there is nowhere.
type want struct {
	members  []string
	describe string
	why      LeaderReason
	message  string
}

// wanted finds the members the leader is wanted on. For Preferred: the
// ready voters of the first place that holds one. For Auto: those of the
// domains whose quorum round trip is within AutoMargin of the best (the
// best first); the leader's own domain counts as wanted within that
// margin.
func wanted(in LeaderInput) want {
	var ready []LeaderMember
	for _, m := range in.Members {
		if m.Voter && m.Ready {
			ready = append(ready, m)
		}
	}
	switch in.Policy.Placement {
	case LeaderPreferred:
		for i, p := range in.Policy.Preferred {
			var here []LeaderMember
			for _, m := range ready {
				if p.Matches(m.Domain) {
					here = append(here, m)
				}
			}
			if len(here) > 0 {
				return want{members: byVotersHere(in.Members, here), describe: fmt.Sprintf("preferred[%d] (%s)", i, p)}
			}
		}
		var ps []string
		for _, p := range in.Policy.Preferred {
			ps = append(ps, p.String())
		}
		return want{why: LeaderNoCandidate, describe: strings.Join(ps, ", "),
			message: fmt.Sprintf("no ready voter in any preferred place (%s): leadership stays where it is", strings.Join(ps, "; "))}
	case LeaderAuto:
		return autoWanted(in, ready)
	}
	return want{why: LeaderNotWanted, message: fmt.Sprintf("unknown placement %q: leadership stays where it is", in.Policy.Placement)}
}

// byVotersHere orders candidates: those of the domain holding the most
// voters first (with 5 over 3 zones, 2/2/1, a zone of 2: a write needs
// one vote from another zone, not two), then by name.
func byVotersHere(all, candidates []LeaderMember) []string {
	votersIn := map[Domain]int{}
	for _, m := range all {
		if m.Voter {
			votersIn[m.Domain]++
		}
	}
	c := slices.Clone(candidates)
	slices.SortFunc(c, func(a, b LeaderMember) int {
		return cmp.Or(cmp.Compare(votersIn[b.Domain], votersIn[a.Domain]), CompareNames(a.Name, b.Name))
	})
	names := make([]string, len(c))
	for i, m := range c {
		names[i] = m.Name
	}
	return names
}

// quorumRoundTrip is how long a leader in d waits for a quorum: the
// round trip to the (quorum-1)-th nearest other voter (the leader votes
// for itself). ok is false when a round trip it needs is unknown.
func quorumRoundTrip(d Domain, voters []LeaderMember, rt RoundTrip) (time.Duration, bool) {
	if len(voters) == 0 {
		return 0, false
	}
	need := len(voters)/2 + 1 - 1 // other voters' acknowledgements
	var rtts []time.Duration
	self := false
	for _, v := range voters {
		if v.Domain == d && !self {
			self = true // the leader itself
			continue
		}
		if v.Domain.Cluster == d.Cluster {
			rtts = append(rtts, 0)
			continue
		}
		r, ok := rt(d.Cluster, v.Domain.Cluster)
		if !ok {
			r, ok = rt(v.Domain.Cluster, d.Cluster)
		}
		if ok {
			rtts = append(rtts, r)
		}
	}
	if need == 0 {
		return 0, true
	}
	slices.Sort(rtts)
	// Unknown round trips are not counted: a domain is judged only on
	// what was measured, and only when enough was.
	if len(rtts) < need {
		return 0, false
	}
	return rtts[need-1], true
}

func autoWanted(in LeaderInput, ready []LeaderMember) want {
	if in.RoundTrip == nil {
		return want{why: LeaderNoMeasurements, message: "placement Auto: no round trips between member clusters are measured yet; leadership stays where it is"}
	}
	var voters []LeaderMember
	for _, m := range in.Members {
		if m.Voter {
			voters = append(voters, m)
		}
	}
	type scored struct {
		d   Domain
		rtt time.Duration
	}
	var ds []scored
	seen := map[Domain]bool{}
	for _, m := range ready {
		if seen[m.Domain] {
			continue
		}
		seen[m.Domain] = true
		if r, ok := quorumRoundTrip(m.Domain, voters, in.RoundTrip); ok {
			ds = append(ds, scored{m.Domain, r})
		}
	}
	if len(ds) == 0 {
		return want{why: LeaderNoMeasurements, message: "placement Auto: the measured round trips do not cover a quorum from any member's zone; leadership stays where it is"}
	}
	votersIn := map[Domain]int{}
	for _, v := range voters {
		votersIn[v.Domain]++
	}
	slices.SortFunc(ds, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.rtt, b.rtt), cmp.Compare(votersIn[b.d], votersIn[a.d]), compareDomains(a.d, b.d))
	})
	best := ds[0].rtt
	limit := best + best*AutoMarginPercent/100 + AutoSlack
	var good []scored
	for _, s := range ds {
		if s.rtt <= limit {
			good = append(good, s)
		}
	}
	var names []string
	var where []string
	for _, s := range good {
		var here []LeaderMember
		for _, m := range ready {
			if m.Domain == s.d {
				here = append(here, m)
			}
		}
		names = append(names, byVotersHere(in.Members, here)...)
		where = append(where, fmt.Sprintf("%s (quorum round trip %s)", s.d, s.rtt))
	}
	return want{members: names, describe: "nearest quorum: " + strings.Join(where, ", ")}
}
