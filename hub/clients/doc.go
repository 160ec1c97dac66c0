// Package clients is the hub's controller for consumer credentials
// (EtcdCluster spec.clients): each declared consumer gets a Secret with a
// client certificate of the ring's CA, its key, the CA and the members'
// endpoints, in the cluster (the hub or a member cluster) and namespace
// where it runs, and the hub renews the certificate before it expires.
//
// Like hub/backup it is its own controller over EtcdCluster beside the
// EtcdCluster reconciler: writing a consumer's Secret changes no member,
// so it takes no part in the one-operation-at-a-time gate and nothing
// waits for it. It owns status.clients and the ClientsReady condition and
// writes nothing else of the EtcdCluster.
//
// One reconcile: read the EtcdCluster and its CA (uncached), read each
// consumer's Secret where it lives (uncached, bounded), ask the pure Plan
// (plan.go) what each needs (issue, update the endpoints, nothing, or
// refuse a Secret the hub did not write), write, patch the status once,
// and requeue for the earliest renewal.
package clients
