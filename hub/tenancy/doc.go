// Package tenancy holds the hub's tenancy rules (rule 14): one hub serves
// EtcdClusters of many teams, and a spec reaches only what its author's
// namespace may reach unless the hub's operator allows more.
//
//   - Policy is what the hub's operator allows (hub flags): stores without
//     credentials (the hub's own cloud identity or filesystem), restore
//     sources in other namespaces, and what EtcdCluster authors may choose
//     for pods in every member cluster (images, priority classes,
//     tolerations). The zero Policy allows none of it beyond the defaults
//     (the etcd images etcdfed knows); each check returns an error that
//     names the field, the value and the flag that would allow it.
//   - DomainOwner says which EtcdCluster a DNS domain belongs to: the
//     hub refuses a second ring whose domain another already serves (or
//     overlaps), deterministically, never disturbing the first.
//
// Everything here is pure: the controllers read, call, and report.
package tenancy
