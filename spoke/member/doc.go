// Package member is the spoke's EtcdMember reconciler. It turns an
// EtcdMember the hub wrote into the member's data volume, exposure, pod and
// pod disruption budget (components in spoke/component) and reports back
// in one status patch per reconcile: conditions StorageReady, Exposed,
// PodReady, MemberHealthy and PeerConnections with the reasons in
// reasons.go (those the hub acts on are defined in the API, and
// PeerConnections' come from spoke/etcdlog), the pod, node, zone, address, advertised URLs, data volume,
// the member's own etcd view, and its disruption (the budget as it
// stands, a drain of its node asking for the ring's one disruption).
//
// Reconcile (controller.go) gets the EtcdMember (gone: done); when it is
// being deleted, reconcileDelete runs every owned kind's delete hook;
// otherwise the finalizer, a deferred status patch, the spec's validation
// and one pass that reads as snapshot -> decide -> apply -> status:
//
//   - observe (observe.go) builds a read-only snapshot (snapshot.go): the
//     TLS Secret, the objects of every owned kind, the current pod's node
//     (its zone, and whether it is cordoned: a drain asking for the
//     member's disruption), etcd's own view of the member and what its log
//     says about its peers. It writes no object.
//   - decide (decide.go) is pure: each component's decision (pvc.Decide,
//     service.Decide, pod.Decide, budget.Decide, pvc.PlanRetired), the
//     writes that carry them out in order, and the objects as they will
//     stand.
//   - apply (apply.go) makes the writes through the one writer of owned
//     objects (owned.go). owned.go lists the owned kinds once (pod,
//     Service, PodDisruptionBudget, PVC); the watches, observe, the writer
//     and the delete path all use that list, and each kind has a delete
//     hook. The writer deletes only the member's own objects, and a volume
//     only with the Delete reclaim policy (mayDeleteVolume).
//   - computeStatus (status.go) writes the whole status from the three,
//     one setter per condition. A pass whose writes failed leaves the
//     status as it was.
//
// The lowest RequeueAfter of the pass wins: a LoadBalancer without an
// address, the etcd status interval, the next log read.
package member
