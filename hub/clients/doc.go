// Package clients is the hub's controller for consumer credentials
// (EtcdCluster spec.clients): each declared consumer gets a Secret with a
// client certificate of the ring's CA, its key, the CA and the members'
// endpoints, in the cluster (the hub or a member cluster) and namespace
// where it runs, and the hub renews the certificate before it expires. It
// also keeps etcd's users, roles and authentication in line with
// spec.clients and spec.tls.auth (access.go): each consumer's certificate
// is an etcd user with a role of its own.
//
// Like hub/backup it is its own controller over EtcdCluster beside the
// EtcdCluster reconciler: writing a consumer's Secret changes no member,
// so it takes no part in the one-operation-at-a-time gate and nothing
// waits for it. It owns status.clients, the ClientsReady condition and its
// finalizer (FinalizerClients, while a consumer's Secret is in a member
// cluster), and writes nothing else of the EtcdCluster.
//
// One reconcile: read the EtcdCluster (uncached), delete the Secrets of
// entries removed from spec.clients (only the hub's, only in member
// clusters), bring etcd's users and roles in line (PlanAccess), read the
// CA and each consumer's Secret where it lives (uncached, bounded), refuse
// a place the policy forbids (Refusal), ask the pure Plan (plan.go) what
// each needs (issue, update the CA bundle or the endpoints, nothing, or
// refuse a Secret the hub did not write), write, patch the status once,
// and requeue for the earliest renewal.
package clients
