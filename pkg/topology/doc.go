// Package topology decides where the members of one etcd cluster live when
// they are spread over several member clusters and zones, how many zone or
// cluster failures a placement survives, and the single steps that lead from
// the current placement to the target. It is pure: no Kubernetes client, no
// clock, no randomness. The hub calls Plan on every reconcile, executes the
// first step, and plans again.
//
// # Failure model
//
// A failure domain (Domain) is a pair (member cluster, zone); a multi-zone
// cluster is several domains. For tolerance there are two separate axes:
//
//   - Zones are global failure zones identified by name alone: zone "a" of
//     cluster c1 and zone "a" of cluster c2 are the same physical zone (the
//     same cloud availability zone label), and losing zone "a" loses the
//     members of both domains. Give zones distinct names when they are
//     distinct (e.g. different regions or providers); give a cluster without
//     zone labels a zone name of its own, such as the cluster's name.
//   - Clusters are failure units of their own: losing a member cluster (its
//     API server, its network, its region) loses all of its zones' members.
//
// A placement survives k zone failures when losing any k zones at once
// leaves a quorum (members/2+1) of healthy members; likewise for clusters.
// Evaluate reports both, with a sentence when a single loss is fatal.
//
// # Objective
//
// Plan picks the target placement by these criteria, each one strictly more
// important than the next:
//
//  1. place as many of the desired replicas as capacities allow;
//  2. leave as few members as possible in unschedulable domains (failed,
//     cordoned or unlisted) or beyond a domain's capacity: they are
//     evacuated whenever a schedulable domain has room;
//  3. survive as many zone failures as possible;
//  4. then as many cluster failures as possible;
//  5. move as few members as possible (no churn for its own sake: a failed
//     zone that returns gets members back only when that raises 3 or 4);
//  6. on scale down, remove unhealthy members rather than healthy ones;
//  7. spread evenly over zones, then clusters, then domains (7 members over
//     three zones are 3/2/2, not 3/3/1);
//  8. keep the leader when an equally good alternative exists;
//  9. prefer the leader's preferred places (Input.Prefer), first ones
//     first (with 5 members over 3 zones, a preferred zone holds 2);
//  10. prefer domains that sort first (cluster, then zone), so that ties are
//     broken the same way every time.
//
// Criteria 1, 2 and 5 to 10 are the cost levels of a min-cost flow from
// zones through domains to clusters, where a member kept in place is free
// and one placed anew costs a move; 3 and 4 are constraints on that flow
// ("the k largest zones hold at most as many members as the cluster can
// lose"), searched from the most ambitious down. The result is exact, not a
// heuristic: the tests compare it with a brute-force search.
//
// # Steps
//
// A target reached from the current members gives at most one step per
// member: Remove (ScaleDown), Add (ScaleUp, lowest free ordinal after
// Input.NamePrefix) or Move (the member goes elsewhere under its stable
// name; Evacuate, Rebalance or Spread). A Move says where, not how: the hub
// runs it make before break when the old incarnation lives (a new
// incarnation added as a learner and promoted, then the old one removed:
// the planner's Move operation) and break before make otherwise (its
// Replace operation); docs/architecture.md ("Membership changes") says
// when each. Domains only lose or only gain members, so no step overfills
// a domain. Steps are ordered: unhealthy members removed, then unhealthy
// members moved, then additions, then healthy members moved, then healthy
// members removed; within a group, members of unschedulable domains first
// and the leader last. Because the target
// is optimal, planning again after any prefix of the steps yields the rest
// of them (or, when two targets tie on every criterion, an equally good plan
// of the same length) and, at the end, none.
//
// # For the hub
//
//   - FailureTolerant is Result.Current.ZoneFailures >= 1; its message is
//     Result.Current.ZoneReason.
//   - At bootstrap (no members) every step is an Add: create Result.Target
//     at once rather than step by step.
//   - Plan does not check quorum safety of a step (whether the remaining
//     healthy voters keep quorum) nor move leadership: that is the hub's,
//     when it executes the step. It orders steps so that this is easy:
//     unhealthy members go first and the leader last.
//   - A domain the hub cannot see right now but has not declared failed
//     should neither receive members nor be evacuated: pass it schedulable
//     with Capacity set to its current member count (or unschedulable when
//     it has none).
package topology
