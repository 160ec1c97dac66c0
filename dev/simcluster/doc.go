// Package simcluster simulates member clusters for the hub's scale
// benchmarks, the way kwok simulates kubelets: a member cluster is a real
// kube-apiserver (the local environment's, dev/localenv, with its node
// agent keeping the Nodes and their Leases as for any member cluster), and
// in it the real spoke (spoke/app: the EtcdSpoke status, the liveness
// Lease, gossip with the other spokes, the embedded DNS server serving the
// ring's EtcdDNSZones) with one part replaced: the EtcdMember reconciler.
// Instead of a volume, a Service and a pod running etcd, a member is a
// simulated etcd member (dev/etcdsim) on its own loopback address at the
// client port, with the serving certificate from the member's TLS Secret,
// started when its EtcdMember has spec.bootstrap, stopped when the
// EtcdMember goes or its incarnation changes.
//
// Toward the hub such a cluster behaves as a real one: the EtcdMember's
// status is the real spoke's contract (finalizer, StorageReady, Exposed,
// PodReady, MemberHealthy and PeerConnections with the real reasons;
// pod name, IP, node and zone; peer and client URLs; the etcd view read by
// the spoke's own reader, spoke/etcdstatus, from the simulated member's
// Status and /metrics, written only when it is news as the real spoke
// does), and the hub talks to the simulated members over TLS through the
// DNS names the spokes serve.
//
// A Fleet holds the simulated etcd of every simulated cluster of a
// process: one etcdsim ring per EtcdCluster (by UID), created when its
// first founding member starts, with the others listed and not yet
// running, as a new etcd cluster waits for its peers. A joining member is
// the one the hub added with its peer URL.
//
// Failures on command: Cluster.Lose stops the spoke at once (no gossip
// leave, no more Lease renewals, the DNS server gone) and every member it
// hosts, as a member cluster that loses power; the caller stops the
// apiserver (localenv FailZone). Real and simulated clusters mix in one
// environment: the clusters without a simulated spoke run the real spoke
// process and real etcd. Real and simulated rings also share clusters:
// the EtcdMembers Config.Real selects are run by the real spoke's
// EtcdMember reconciler in the same spoke (volume, Service, pod, which
// the environment's node agent runs with real etcd), the others are
// simulated; a ring is all real or all simulated.
//
// Not simulated: pods, volumes, Services and disruption budgets (no
// object but the EtcdMember is written), etcd's log (PeerConnections is
// True when ready and left as it was otherwise), a restore from a
// snapshot and force-new-cluster (a member with either reports
// PodReady=False ContainerFailing), drains (no disruption is requested).
//
// Test and bench code only: production binaries never import dev/
// (hack/proddeps).
package simcluster
