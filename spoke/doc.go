// Package spoke is the agent that runs in every member cluster of an etcdfed
// ring. It is split into one package per reconciler and one per managed
// object:
//
//   - member: the EtcdMember reconciler. It turns an EtcdMember written by
//     the hub into a data volume, an exposure and a pod, and reports back.
//   - component/pvc, component/service, component/pod: one component per
//     object the spoke manages, each built and decided by pure functions;
//     member applies them through its one writer of owned objects.
//   - etcdstatus: reads a member's own view of itself from its etcd.
//   - dnszone: serves every EtcdDNSZone of the ring namespace from the
//     embedded authoritative DNS server.
//   - spokestatus: keeps the EtcdSpoke object (zones, addresses, gossip view).
//   - lease: renews the spoke's liveness Lease.
//   - gossip: the memberlist ring among spokes, a liveness witness for the
//     hub; the spoke never acts on it.
//   - waitdns: the check member pods run before etcd starts (etcdfed-init wait-dns).
//   - app: wires everything into one controller-runtime manager (cmd/spoke).
//
// The spoke never deletes a pod or a volume because the hub is unreachable or
// because something looks odd: a spec it cannot run gets a condition with a
// clear reason and nothing is deleted.
package spoke
