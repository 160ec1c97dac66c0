// Package spoke is the agent that runs in every member cluster of an etcdfed
// ring. It is split into one package per reconciler and one per managed
// object:
//
//   - member: the EtcdMember reconciler. It turns an EtcdMember written by
//     the hub into a data volume, an exposure, a pod and its disruption
//     budget, and reports back.
//   - component/pvc, component/service, component/pod, component/budget:
//     one component per object the spoke manages, each built and decided
//     by pure functions; member applies them through its one writer of
//     owned objects.
//   - etcdstatus: reads a member's own view of itself from its etcd.
//   - etcdlog: explains a member that cannot reach its peers from etcd's
//     own log (the PeerConnections condition).
//   - dnszone: serves every EtcdDNSZone of the ring namespace from the
//     embedded authoritative DNS server.
//   - spokestatus: keeps the EtcdSpoke object (zones, addresses, gossip view).
//   - lease: renews the spoke's liveness Lease.
//   - gossip: the memberlist ring among spokes, a liveness witness for the
//     hub; the spoke never acts on it.
//   - waitdns: the check member pods run before etcd starts (etcdfed-init wait-dns).
//   - restore: what a member's pod runs on its data directory before etcd
//     starts (etcdfed-init prepare-data): a founding member's snapshot
//     restored, a data directory of another etcd cluster refused.
//   - app: wires everything into one controller-runtime manager (cmd/spoke).
//   - internal/spec: the defaults, names, labels and spec checks every
//     component agrees on; internal/spoketest, testcerts and testetcd are
//     test helpers.
//
// The spoke never deletes a pod or a volume because the hub is unreachable or
// because something looks odd: a spec it cannot run gets a condition with a
// clear reason and nothing is deleted.
package spoke
