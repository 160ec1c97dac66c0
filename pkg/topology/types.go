package topology

import (
	"errors"
	"fmt"
	"strings"
)

// MaxMembers bounds both Input.Replicas and the number of current members.
// The API allows 1 to 9 replicas; the bound leaves room for a scale-down
// from a state larger than the spec without letting a bad input make the
// search slow.
const MaxMembers = 15

// Sentinel errors returned (wrapped) by Plan for inputs it cannot work with.
var (
	ErrInvalidReplicas = errors.New("topology: invalid replicas")
	ErrInvalidDomain   = errors.New("topology: invalid domain")
	ErrInvalidMember   = errors.New("topology: invalid member")
)

// Domain is a failure domain: one zone of one member cluster.
type Domain struct {
	// Cluster is the name of the member cluster.
	Cluster string
	// Zone is the value of the topology.kubernetes.io/zone label. Zone names
	// are global failure zones: the same name in two clusters is the same
	// physical zone (see the package documentation).
	Zone string
}

// String returns "cluster/zone".
func (d Domain) String() string { return d.Cluster + "/" + d.Zone }

// Unschedulable says why a domain takes no members. The empty value means
// the domain is schedulable.
type Unschedulable string

// Reasons a domain is unschedulable. Members in an unschedulable domain are
// evacuated when another domain has room; no new member is placed there.
const (
	// Unhealthy: the domain has failed (for example its zone was declared
	// failed by the hub).
	Unhealthy Unschedulable = "Unhealthy"
	// ZoneCordoned: the user cordoned the zone to evacuate it on purpose.
	ZoneCordoned Unschedulable = "ZoneCordoned"
	// ClusterCordoned: the user cordoned the member cluster.
	ClusterCordoned Unschedulable = "ClusterCordoned"
	// NoSchedulableNode: no node of the zone takes new pods (every one
	// cordoned or not Ready), and a member there has failed beyond its
	// grace period: it cannot start again in place.
	NoSchedulableNode Unschedulable = "NoSchedulableNode"
	// MemberNotStarting: a member's pod has stayed Pending in the
	// domain's member cluster for the member grace while another member
	// runs the same spec (the hub's hub/planner/pending.go): the cluster
	// takes no new member, and the domain keeps only its members that do
	// start, so the one that does not moves out.
	MemberNotStarting Unschedulable = "MemberNotStarting"
	// Unlisted is set by Plan on a domain that holds a member but is not in
	// Input.Domains (for example a member cluster removed from the topology).
	Unlisted Unschedulable = "Unlisted"
)

// DomainInfo describes one failure domain offered to the placement.
type DomainInfo struct {
	Domain
	// Unschedulable is empty when the domain may take members, else why not.
	Unschedulable Unschedulable
	// Capacity is the most members the domain may hold; 0 means no limit.
	Capacity int
}

// String returns the domain and, when set, why it is unschedulable and its
// capacity: "c1/a (ZoneCordoned, capacity 2)".
func (d DomainInfo) String() string {
	var notes []string
	if d.Unschedulable != "" {
		notes = append(notes, string(d.Unschedulable))
	}
	if d.Capacity > 0 {
		notes = append(notes, fmt.Sprintf("capacity %d", d.Capacity))
	}
	if len(notes) == 0 {
		return d.Domain.String()
	}
	return fmt.Sprintf("%s (%s)", d.Domain, strings.Join(notes, ", "))
}

// Member is one current etcd member and where it lives.
type Member struct {
	// Name is the member's stable name, e.g. "main-0".
	Name string
	// Domain is where the member's current incarnation runs.
	Domain Domain
	// Healthy reports whether the member is up and in the cluster.
	Healthy bool
}

// Input is everything Plan needs. The order of Domains and Members does not
// matter.
type Input struct {
	// Replicas is the desired number of members, 0 to MaxMembers.
	Replicas int
	// NamePrefix is put before the ordinal of a new member: "main-" gives
	// "main-0", "main-1", ... New members take the lowest free ordinals.
	NamePrefix string
	// Domains are the failure domains, each listed once.
	Domains []DomainInfo
	// Members are the current members, at most MaxMembers.
	Members []Member
	// Leader is the name of the current leader; empty (or a name not in
	// Members) means unknown.
	Leader string
	// Prefer lists the leader's preferred places, most wanted first
	// (spec.leader.preferred). When everything above ties, members go to
	// the domains of the first places: with 5 members over 3 zones
	// (2/2/1), a preferred zone holds 2, so a leader there needs one
	// vote from another zone. It never moves a member by itself.
	Prefer []Place
}

// Action is the kind of a Step.
type Action string

// Actions. A Move is an etcd replace: remove the member, then add a new
// incarnation under the same name in the target domain.
const (
	Add    Action = "Add"
	Remove Action = "Remove"
	Move   Action = "Move"
)

// Reason says why a Step is in the plan.
type Reason string

// Reasons for a Step.
const (
	// ScaleUp: an Add because Replicas exceeds the current member count.
	ScaleUp Reason = "ScaleUp"
	// ScaleDown: a Remove because the current member count exceeds Replicas.
	ScaleDown Reason = "ScaleDown"
	// Evacuate: a Move out of an unschedulable or unlisted domain.
	Evacuate Reason = "Evacuate"
	// Rebalance: a Move out of a domain that, when the step runs, holds more
	// members than its capacity.
	Rebalance Reason = "Rebalance"
	// Spread: a Move toward a placement that survives more zone or cluster
	// failures (a plan may need several such moves before tolerance rises).
	Spread Reason = "Spread"
)

// Step is one membership change. The hub executes one step at a time and
// plans again.
type Step struct {
	Action Action
	Reason Reason
	// Member is the member's name; for an Add, the new name.
	Member string
	// From is where the member is now; zero for an Add.
	From Domain
	// To is where the member goes; zero for a Remove.
	To Domain
}

// String returns a one-line description, e.g.
// "Move main-2 from c1/a to c2/b (Evacuate)".
func (s Step) String() string {
	switch s.Action {
	case Add:
		return fmt.Sprintf("Add %s to %s (%s)", s.Member, s.To, s.Reason)
	case Remove:
		return fmt.Sprintf("Remove %s from %s (%s)", s.Member, s.From, s.Reason)
	default:
		return fmt.Sprintf("%s %s from %s to %s (%s)", s.Action, s.Member, s.From, s.To, s.Reason)
	}
}

// Count is the number of members in one zone or one cluster.
type Count struct {
	Name    string
	Members int
	Healthy int
}

// Tolerance reports how many simultaneous failures a placement survives
// with quorum.
type Tolerance struct {
	// Members is the number of voting members; Quorum is Members/2+1.
	Members int
	Healthy int
	Quorum  int
	// Zones and Clusters count members per failure zone and per member
	// cluster, sorted by name; only zones and clusters holding members.
	Zones    []Count
	Clusters []Count
	// ZoneFailures is the largest k such that losing any k zones at once
	// leaves at least Quorum healthy members; ClusterFailures likewise for
	// member clusters. Both are 0 when quorum is already lost.
	ZoneFailures    int
	ClusterFailures int
	// ZoneReason explains, when ZoneFailures is 0, why the loss of one zone
	// loses quorum, e.g. "two zones and three members: losing zone a
	// (2 members) loses quorum". ClusterReason does the same for clusters.
	ZoneReason    string
	ClusterReason string
}

// Result is the output of Plan.
type Result struct {
	// Target is the placement the plan reaches, sorted by member name. Moved
	// and added members are Healthy (a fresh incarnation); members that stay
	// keep their observed health.
	Target []Member
	// Steps lead from Input.Members to Target, in the order to execute them.
	// Empty when the current placement is already the target.
	Steps []Step
	// Tolerance is the target placement's, assuming every member runs.
	Tolerance Tolerance
	// Current is the current placement's, counting only healthy members as
	// alive.
	Current Tolerance
	// Unplaced is how many of Input.Replicas fit in no schedulable domain
	// (capacities are exhausted). Target has Replicas-Unplaced members.
	Unplaced int
}
