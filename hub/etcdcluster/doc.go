// Package etcdcluster is the hub's EtcdCluster reconciler. A pass over one
// ring reads as snapshot -> decide -> apply -> status (controller.go,
// reconcileNormal):
//
//   - observe (observe.go) builds a read-only snapshot (snapshot.go): the
//     CA and the hub's client certificate, every registered member cluster
//     read side by side within its own deadline (spoke, Lease and liveness
//     verdict, the nodes' zones in a multi-zone cluster, the objects the
//     hub owns there), etcd's member list and health, and, while the ring
//     is founded from a snapshot, the store's credentials (restore.go). It
//     writes nothing; a cluster that does not answer is unknown.
//   - decide (decide.go) is pure: it brings the ledger (ledger.go:
//     status.members and status.operation) up to date, and the ring's
//     round-trip matrix and etcd timing (distance.go, pkg/timing), asks
//     pkg/topology for the placement and hub/planner for the one next step
//     of the one operation (every operation hub/planner's package doc
//     lists; placement.go and the feature files build their inputs),
//     records that step, renders it into objects and etcd calls (its entry
//     in the action table, actions.go), and lists the upkeep: certificates
//     due, DNS records wanted (dns.go), member object changes that restart
//     nothing, objects left behind.
//   - apply (apply.go) carries the decision out: certificates, DNS zones,
//     the step (taken by its entry in actions.go), the upkeep, every object
//     through the one owned-object writer (owned.go, with the one list of
//     owned kinds that the sweep and deletion use too).
//   - computeStatus (status.go) writes the whole status from the snapshot,
//     the decision and apply's result, one setter per condition; it is
//     patched once at the end of the pass.
package etcdcluster
