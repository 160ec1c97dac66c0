// Package planner is the hub's planner: a pure function (Next) from
// what the hub observes (etcd's member list and health, the EtcdMember
// objects in the member clusters, the hub's own record in status, the
// placement pkg/topology wants) to the ONE next step of the ONE operation in
// flight. Every change the hub makes to a running ring is an operation of
// this planner, recorded in status.operation before it is taken: the
// membership changes (Bootstrap, Add, Remove, Replace, and Move: make
// before break, a new incarnation promoted before the old one leaves), the
// retirement of an adopted cluster's original members (Retire, adopt.go),
// the rolling
// restart of a member on a changed spec (Roll, rollout.go; a version
// change's backup and downgrade steps, upgrade.go), defragmentation
// (Defrag, defrag.go), a node drain's disruption grant (Disrupt,
// disruption.go), quorum-loss recovery (Recover, recovery.go and
// recovery_backup.go), the steps of a CA rotation (RotateCA,
// carotation.go) and the move of leadership where spec.leader wants it
// (MoveLeader, leader.go: pkg/topology's DecideLeader with its
// hysteresis, begun only when nothing else is to do and every member is
// a ready voter; the planned moves of leadership of the other operations
// hand it to a voter in the preferred place).
//
// It implements the membership rules of the design:
//
//  1. etcd's member list is the truth; objects follow it.
//  2. Bootstrap is static (all founding members at once, "new"), and after
//     it "new" is never used again.
//  3. One operation at a time, recorded (Decision.Operation) before it is
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
// and the rollout of a spec change that restarts pods: one Roll per member,
// each begun only when every member is a ready voter, followers first and
// the leader last with leadership moved away before its pod restarts.
// Membership changes go before rollouts.
//
// Members' databases are looked after by the same planner (defrag.go): a
// Defrag operation defragments one member whose file is fragmented beyond
// spec.defragmentation's thresholds (or, on a schedule, has free pages),
// only while every member is a ready voter and nothing else is due,
// followers first and the leader last after leadership moves away; a
// NOSPACE alarm is recovered (compaction no further than the configured
// retention unless the user consented to more, every member
// defragmented, the alarm disarmed) before a rollout.
//
// The reconciler (hub/etcdcluster) observes, calls Next, carries out the
// decision and records the result; nothing here talks to etcd or
// Kubernetes.
package planner
