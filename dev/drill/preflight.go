package drill

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Mode is how the drill fails the zone.
type Mode string

// Modes.
const (
	// ModeCordon cordons the zone in the EtcdCluster's spec
	// (spec.topology.cordonedZones): the hub moves its members away one at
	// a time. Works on every deployment; needs only the hub.
	ModeCordon Mode = "cordon"
	// ModeKill kills the zone's processes as a power loss would (local
	// environment only).
	ModeKill Mode = "kill"
	// ModePartition cuts the zone's network off (local environment only,
	// as root).
	ModePartition Mode = "partition"
)

// Modes lists every mode.
var Modes = []Mode{ModeCordon, ModeKill, ModePartition}

// ErrNotReady says the ring is not in a state a drill may start from.
var ErrNotReady = errors.New("drill: the ring is not ready for a drill")

// ErrBadInput says the drill's arguments cannot work.
var ErrBadInput = errors.New("drill: invalid input")

// Zone names the failure domain a drill fails: a zone name (that zone in
// every member cluster that has it) or "cluster/zone" (one member
// cluster's zone only), the syntax of spec.topology.cordonedZones.
type Zone struct {
	// Cluster is empty for a bare zone name.
	Cluster, Name string
}

// ParseZone parses a zone argument.
func ParseZone(s string) (Zone, error) {
	parts := strings.Split(s, "/")
	switch {
	case s == "":
		return Zone{}, fmt.Errorf("%w: no zone given", ErrBadInput)
	case len(parts) == 1:
		return Zone{Name: s}, nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return Zone{Cluster: parts[0], Name: parts[1]}, nil
	}
	return Zone{}, fmt.Errorf("%w: zone %q: want ZONE or CLUSTER/ZONE", ErrBadInput, s)
}

func (z Zone) String() string {
	if z.Cluster == "" {
		return z.Name
	}
	return z.Cluster + "/" + z.Name
}

// Contains reports whether a member in cluster and zone is in z.
func (z Zone) Contains(cluster, zone string) bool {
	return zone == z.Name && (z.Cluster == "" || z.Cluster == cluster)
}

// ParseMode parses a mode argument.
func ParseMode(s string) (Mode, error) {
	if slices.Contains(Modes, Mode(s)) {
		return Mode(s), nil
	}
	return "", fmt.Errorf("%w: mode %q: want cordon, kill or partition", ErrBadInput, s)
}

// Plan is what Preflight found: the members and member clusters in the
// zone, and whether today's placement is failure tolerant.
type Plan struct {
	Members  []string
	Clusters []string
	Replicas int
	Tolerant bool
}

// Preflight says whether ec may be drilled by failing zone with mode for
// duration (0: until the hub has moved the zone's members), and why not.
// A drill starts only from a ring that is Available with every member a
// ready voter, no membership change in flight and the latest spec acted
// on, and only on a zone that holds members but not a quorum of them. A
// cordon drill needs a zone not cordoned already; a failure held until the
// hub has moved the members (duration 0, not a cordon) needs a ring whose
// failurePolicy.automatic is not false.
func Preflight(ec *etcdfedv1.EtcdCluster, zone Zone, mode Mode, duration time.Duration) (Plan, error) {
	key := ec.Namespace + "/" + ec.Name
	if err := checkReady(ec); err != nil {
		return Plan{}, err
	}
	st := ec.Status
	replicas := int(ec.Spec.Replicas)
	p := Plan{Replicas: replicas, Tolerant: meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionFailureTolerant)}
	var elsewhere []string
	for _, m := range st.Members {
		if zone.Contains(m.Cluster, m.Zone) {
			p.Members = append(p.Members, m.Name)
			if !slices.Contains(p.Clusters, m.Cluster) {
				p.Clusters = append(p.Clusters, m.Cluster)
			}
		} else if d := m.Cluster + "/" + m.Zone; !slices.Contains(elsewhere, d) {
			elsewhere = append(elsewhere, d)
		}
	}
	sort.Strings(p.Members)
	sort.Strings(p.Clusters)
	sort.Strings(elsewhere)
	quorum := replicas/2 + 1
	switch {
	case len(p.Members) == 0:
		return Plan{}, fmt.Errorf("%w: zone %s holds no member of EtcdCluster %s (its members are in %s)", ErrBadInput, zone, key, strings.Join(elsewhere, ", "))
	case replicas-len(p.Members) < quorum:
		return Plan{}, fmt.Errorf("%w: zone %s holds %d of the %d members of EtcdCluster %s: failing it loses quorum (%d needed); drill a zone with fewer members",
			ErrBadInput, zone, len(p.Members), replicas, key, quorum)
	}
	if mode == ModeCordon {
		for _, c := range ec.Spec.Topology.CordonedZones {
			if c == zone.String() {
				return Plan{}, fmt.Errorf("%w: zone %s is already cordoned in EtcdCluster %s: uncordon it before drilling it", ErrBadInput, zone, key)
			}
		}
	}
	if duration == 0 && ec.Spec.FailurePolicy.Automatic != nil && !*ec.Spec.FailurePolicy.Automatic && mode != ModeCordon {
		return Plan{}, fmt.Errorf("%w: EtcdCluster %s has failurePolicy.automatic=false, so the hub will not move the zone's members: give --duration to hold the failure for a fixed time", ErrBadInput, key)
	}
	return p, nil
}

// checkReady says why ec is not in a state a drill may start from:
// Available with every member a ready voter, no membership change in
// flight and the latest spec acted on.
func checkReady(ec *etcdfedv1.EtcdCluster) error {
	notReady := func(format string, args ...any) error {
		return fmt.Errorf("%w: EtcdCluster %s/%s %s", ErrNotReady, ec.Namespace, ec.Name, fmt.Sprintf(format, args...))
	}
	st := ec.Status
	replicas := int(ec.Spec.Replicas)
	switch {
	case ec.DeletionTimestamp != nil:
		return notReady("is being deleted")
	case st.ClusterID == "":
		return notReady("has not formed yet")
	case st.ObservedGeneration < ec.Generation:
		return notReady("has a spec change the hub has not acted on yet (generation %d, observed %d)", ec.Generation, st.ObservedGeneration)
	case st.Operation != nil:
		return notReady("has a membership change in flight (%s %s, step %s): wait until it is done", st.Operation.Type, st.Operation.Member, st.Operation.Step)
	}
	for _, t := range []string{etcdfedv1.ConditionAvailable, etcdfedv1.ConditionAllMembersReady} {
		c := meta.FindStatusCondition(st.Conditions, t)
		if c == nil {
			return notReady("has no %s condition yet", t)
		}
		if c.Status != "True" {
			return notReady("is not %s (%s: %s)", t, c.Reason, c.Message)
		}
	}
	if int(st.ReadyMembers) != replicas || len(st.Members) != replicas {
		return notReady("has %d ready of %d members (spec.replicas %d)", st.ReadyMembers, len(st.Members), replicas)
	}
	return nil
}
