// Package registration keeps the hub's registrations of member clusters
// working, and says how each stands, where the people who registered them
// look.
//
// `etcdfed cluster join` registers a member cluster with a short-lived
// token of the hub's ServiceAccount there (TokenRequest, 24 hours by
// default), in the registration Secret's "token" key. The Runner renews
// that token, through the member cluster's TokenRequest API and with the
// token itself (config/rbac/hub-member allows the ServiceAccount exactly
// that), once a third of its life has passed, so the hub survives an
// outage of two thirds of the lifetime without a new join. hub/registry
// uses the new token from the next request on, without reconnecting.
//
// The Runner also writes on each registration Secret whether the hub holds
// a synced connection to the cluster and sees its spoke's Lease renewed
// (annotations etcdfed.dev/hub-engaged, etcdfed.dev/hub-spoke,
// etcdfed.dev/hub-problem), only when that changes: `etcdfed cluster join`
// waits on them and `etcdfed cluster list` shows them. And it exports the
// credential's expiry and when the hub last saw each spoke, the metrics the
// shipped alerts use (config/monitoring).
package registration
