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
// One reconcile reads the EtcdCluster (uncached), sets the finalizer,
// then runs the hub's skeleton. observe (observe.go) reads everything
// into a snapshot, each read bounded: the Secrets of entries removed from
// spec.clients (only in member clusters), etcd's users and roles, the CA
// and the endpoints, each consumer's Secret where it lives (none where
// Refusal forbids the place). decide (decide.go) turns the snapshot alone
// into the pass's writes: a removed Secret deleted only when it is the
// hub's, etcd's changes (PlanAccess), what each consumer's Secret needs
// (Plan: issue, update the CA bundle or the endpoints, nothing, or refuse
// a Secret the hub did not write). apply (apply.go) makes those writes and
// decides nothing. computeStatus (status.go) builds status.clients, the
// one ClientsReady condition and the next pass (the earliest renewal,
// sooner after a failure or a wait) once; the status is patched once.
package clients
