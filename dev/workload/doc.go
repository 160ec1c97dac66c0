// Package workload is the recorded client workload that every disruptive
// scenario and `etcdfed drill` run against an etcd cluster, and the three
// checks of its run:
//
//   - linearizable: the history of puts and linearizable gets on a few
//     contended keys is checked with porcupine (KVModel);
//   - no acknowledged write lost: every put of a unique key that etcd
//     acknowledged is still there after the run;
//   - watch complete and in order: watchers on the workload's prefix (one
//     over all endpoints, optionally one per endpoint) saw every
//     acknowledged put exactly once, at the revision its response carried,
//     with its value, in revision order (CheckWatch).
//
// Run starts it; Workload.Check runs all three checks in one call, so no
// caller can forget one. The checks are pure functions over the recorded
// history and are tested with tables.
package workload
