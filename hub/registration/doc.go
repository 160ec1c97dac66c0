// Package registration keeps the hub's registrations of member clusters
// working, and says how each stands, where the people who registered them
// look.
//
// `etcdfed cluster join` registers a member cluster with a short-lived
// token of the hub's ServiceAccount there (TokenRequest, 24 hours by
// default), in the registration Secret's "token" key. The hub never mints
// the next one (issue 37): the member cluster's spoke does, once a third
// of the current token's life has passed, and seals it to the hub's
// public key (internal/tokenseal) in the Secret etcdfed-hub-sealed-token
// there. The Runner reads that Secret with the current token once a third
// of its life has passed, opens it with the hub's private key (the Secret
// etcdfed-hub-sealing-key of the hub namespace), checks it is a later
// token of the same ServiceAccount bound to the same anchor, and stores it
// in the registration Secret; hub/registry uses it from the next request
// on, without reconnecting. A thief holding one of the hub's tokens can
// read the sealed Secret but not open it, nor mint a token: what it holds
// lasts that token's lifetime. So the hub survives an outage of two
// thirds of the lifetime without a new join, as before.
//
// A registration of a `cluster join` before sealing (annotation
// etcdfed.dev/credential ServiceAccountToken) is renewed as it was: by the
// hub, through the member cluster's TokenRequest API with the token
// itself, until `cluster join` runs again (`etcdfed cluster list` says
// so).
//
// The Runner also writes on each registration Secret whether the hub holds
// a synced connection to the cluster and sees its spoke's Lease renewed
// (annotations etcdfed.dev/hub-engaged, etcdfed.dev/hub-spoke,
// etcdfed.dev/hub-problem), only when that changes: `etcdfed cluster join`
// waits on them and `etcdfed cluster list` shows them. And it exports the
// credential's expiry and when the hub last saw each spoke, the metrics the
// shipped alerts use (config/monitoring).
package registration
