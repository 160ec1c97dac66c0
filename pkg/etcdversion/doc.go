// Package etcdversion is etcdfed's policy on etcd versions, in one place:
// which etcd releases it runs, which changes of an EtcdCluster's
// spec.version it makes in one step (one minor version at a time, from a
// recent enough patch), which patch releases it refuses and why (with the
// release that fixes them), the version a new ring gets by default, and
// how each version spells the flags the spoke passes to etcd.
//
// Everything else derives from it: the CRD's validation rules on
// spec.version (CELRules, written into api/v1alpha1 by `make generate`),
// the hub's upgrade planner (Step, Path), the spoke's flag rendering
// (FlagName), the local environment's pinned builds (hack/tools.sh, checked
// against Newest by this package's tests) and the version matrix in
// docs/upgrades.md (Matrix). It imports nothing but the standard library.
package etcdversion
