// Package etcdlog explains a member that cannot join or form its ring from
// etcd's own log: Classify (pure, table-tested against real etcd output)
// finds the peer-connection failures etcd logs (this member removed from
// the cluster, a peer of another cluster, certificates from another CA or
// expired, a peer's certificate that does not name its source address or
// the host dialled, a peer name that does not resolve) and Diagnosis
// turns them into the EtcdMember's PeerConnections condition, naming the
// cause and the fix. PlanRead (pure) says when a pod's log is worth reading
// (not while it is ready; after a warmup; the last run of a container
// waiting to restart), and Reader fetches a bounded tail of the etcd
// container's log through the apiserver (pods/log), with a timeout, at
// most once per interval per member.
package etcdlog
