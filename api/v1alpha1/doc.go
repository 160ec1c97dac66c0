// Package v1alpha1 holds the etcdfed API, group etcdfed.dev.
//
// EtcdCluster lives in the hub cluster and describes one global etcd
// cluster whose members are spread over several member clusters and zones.
// EtcdMember, EtcdSpoke and EtcdDNSZone live in the ring namespace of each
// member cluster: the hub writes their specs, the spoke agent their status.
//
// This package imports nothing from the controllers. Defaults are resolved
// in code (see the Default* constants), not in the OpenAPI schema, so that a
// changed default never rewrites stored objects.
//
// +kubebuilder:object:generate=true
// +groupName=etcdfed.dev
package v1alpha1
