// Package install puts etcdfed into real clusters: `etcdfed hub install`
// (Hub), and `etcdfed cluster join`, `unjoin` and `list` (Join, Unjoin,
// List). It renders the kustomize packages of config/ with kustomize's Go
// API, so it applies exactly what `kubectl apply -k` of the same overlay
// would, with the knobs of the command line written into a generated
// overlay (render.go). Everything is applied server-side and only when it
// differs from what the cluster holds, so a second run writes nothing
// (apply.go); what a run no longer renders is deleted by label (prune).
//
// Join registers a member cluster in the hub with a short-lived token of
// the hub's ServiceAccount there (TokenRequest), which the hub renews
// (hub/registration), never a token that does not expire. Unjoin removes
// what Join created, and refuses while the cluster hosts members of a
// ring.
//
// The local environment (dev/localenv) runs Hub and Join on every
// start, with the hub and the spokes as local processes (External modes).
package install
