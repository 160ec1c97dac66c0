// Package etcdsim simulates etcd clusters ("rings") in process, for the
// hub's scale tests, the way kwok simulates kubelets: one process holds a
// thousand rings of five members, each member answering on a loopback
// listener of its own through the etcd v3 gRPC API the hub calls
// (go.etcd.io/etcd/client/v3 cannot tell it from etcd for those calls;
// TestSimulatedEtcdAgreesWithEtcd checks it side by side with bin/etcd).
//
// A Server holds any number of rings. Each member has a listener and a
// gRPC server of its own (a member that applies its own removal stops
// gracefully: its clients get GOAWAY, as from etcd); one HTTP server
// serves every member's /version and /health. A member's listener does
// the TLS handshake with the ring's (or the member's) tls.Config and
// hands the connection over with the member it came to; every call is
// routed by it. A member at rest costs two goroutines and about 18 KB of
// RSS (BenchmarkFleetMemory: 1000 rings of 3 in 52 MiB, of 5 in 91 MiB;
// about 100 KB per member with a client connection open to each, both
// ends in the one process).
//
// Simulated, as etcd 3.6 does it:
//   - Cluster: MemberList (linearizable or not), MemberAdd (as a learner
//     or a voter), MemberRemove, MemberUpdate, MemberPromote, with etcd's
//     strict reconfiguration checks and its errors (too many learners,
//     learner not in sync, not enough started members, unhealthy cluster,
//     peer URL exists, member not found, not a learner);
//   - Maintenance: Status (leader, raft term and index, sizes, quota,
//     versions, errors "etcdserver: no leader" and alarms), Alarm (list,
//     activate, deactivate), MoveLeader (to the leader only, never to a
//     learner), Defragment, Downgrade (validate, enable, cancel);
//   - KV: Range, Put, DeleteRange, Txn, Compact on a latest-version-only
//     map, enough for health checks, probes and small workloads;
//   - Auth: users (a client certificate's common name), roles,
//     permissions, enable and disable, and the checks etcd makes with
//     authentication on;
//   - HTTP /version, /health and /metrics (only etcd_network_active_peers,
//     the peer view spoke/etcdstatus reads) on the client port;
//   - a raft-like membership model under one mutex per ring: initial
//     member and cluster IDs random (deterministic with RingOptions.Seed),
//     added members' IDs as etcd computes them (peer URLs and the second:
//     the same peer URL twice in a second is "member ID already exist"),
//     the 5 s a peer must have been connected before the strict checks
//     count it (RingOptions.HealthInterval: a ring just created or a
//     member just restarted refuses membership changes), learners that
//     catch up after a delay or on command (CatchUp), a leader kept while
//     it reaches a quorum of voters and otherwise the first voter that
//     does, a term and an index that advance, members added but not yet
//     started (no name, no client URLs in the member list), founding
//     members that start late (MemberSpec.Stopped: no leader until a
//     quorum of them runs), and failures
//     on command: StopMember (the listener refuses, connections close),
//     PauseMember (a frozen process: calls hang), Partition (members
//     reach only their group), RaiseAlarm, SetDBSize, ForceNewCluster. A
//     call that needs a leader and finds none waits for one and fails
//     after RequestTimeout (7 s) with codes.DeadlineExceeded, or at the
//     caller's deadline, as etcd does.
//
// Not simulated: data replication (a ring has one key space that every
// member serves, with no history), real raft (no elections with timeouts,
// no log, no snapshots: the leader changes at once when it must), peer
// traffic (peer URLs are names nothing listens on), watches, leases,
// Snapshot, Hash and HashKV (Unimplemented), passwords and tokens, a
// stopped peer noticed later than at once, and "etcdserver: request timed
// out" (a leader here commits at once or not at all). A member that
// removes itself
// answers "etcdserver: server stopped", one of the two answers etcd gives.
// A member reports the release it was started on (StartOptions.Version)
// as its server version; the cluster version is the ring's whatever its
// members run (etcd's rise of it, once every member runs a higher minor,
// is not simulated).
// A member that joined reports no storage version until it has run 4 s
// and applied an entry, then the cluster's (etcd 3.6 passes through
// "3.5.0" on the way, for a time of its own).
//
// Test and bench code only: production binaries never import dev/
// (hack/proddeps).
package etcdsim
