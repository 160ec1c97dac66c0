// Package membership is the hub's membership planner: a pure function from
// what the hub observes (etcd's member list and health, the EtcdMember
// objects in the member clusters, the hub's own record in status, the
// placement pkg/topology wants) to the ONE next step of the ONE membership
// change in flight.
//
// It implements the membership rules of the design:
//
//  1. etcd's member list is the truth; objects follow it.
//  2. Bootstrap is static (all founding members at once, "new"), and after
//     it "new" is never used again.
//  3. One change at a time, recorded (Decision.Operation) before it is
//     made; every step is found again by inspection, so a restarted hub
//     resumes where it stopped.
//  4. Add = learner, start with "existing", promote (retried while etcd says
//     the learner is not ready); one learner at a time.
//  5. Remove only when the remaining healthy voters keep quorum; leadership
//     moves away first.
//  6. Replace = remove the old ID, add a new incarnation under the same name.
//  7. Scale down never picks the leader when another choice is as good
//     (pkg/topology orders that).
//  8. Nothing is decided on a partial view: a member whose cluster the hub
//     cannot see is unknown, not dead.
//
// The reconciler observes, calls Next, carries out the decision and records
// the result; nothing here talks to etcd or Kubernetes.
package membership
