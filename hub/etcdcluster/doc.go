// Package etcdcluster is the hub's EtcdCluster reconciler. One reconcile:
// observe (member clusters and their liveness, EtcdMember objects, etcd's
// member list and health), decide (pkg/topology for placement, then the
// membership planner for the one next step), act (that one step), publish
// DNS and certificates, and patch status once.
package etcdcluster
