// Package member is the spoke's EtcdMember reconciler. It turns an
// EtcdMember the hub wrote into the member's data volume, exposure and pod
// (components in spoke/component) and reports back in one status patch per
// reconcile: conditions StorageReady, Exposed, PodReady and MemberHealthy
// with the reasons below, the pod, node, zone, address, advertised URLs,
// data volume and the member's own etcd view.
//
// The flow, in Reconcile: get the EtcdMember (gone: done); the delete path
// when it is being deleted; else the finalizer, a deferred status patch and
// the phases validate, tlsSecret, storage, exposure, pod, report, retire,
// etcdView. The lowest RequeueAfter wins.
package member
