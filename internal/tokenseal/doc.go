// Package tokenseal seals the hub's tokens in a member cluster to the hub
// (issue 37).
//
// The hub holds an X25519 key pair (HPKE, RFC 9180: DHKEM(X25519,
// HKDF-SHA256), HKDF-SHA256, AES-256-GCM). Its private key lives only in
// the hub cluster, in the Secret KeySecret of the hub namespace, which
// `etcdfed hub install` or `etcdfed cluster join` creates when absent and
// never overwrites; the hub only reads it. `cluster join` copies the
// public key onto the member cluster's credential anchor
// (api/v1alpha1 HubCredentialAnchor, annotation AnnotationHubSealingKey),
// which the hub may not write. The member cluster's spoke mints the hub's
// tokens (TokenRequest, bound to the anchor), seals each to that public
// key with Info naming the anchor, and writes it to the Secret
// HubSealedToken; the hub reads and opens it. A thief holding one of the
// hub's tokens can read the sealed Secret but not open it, and cannot mint
// a token itself: a stolen token lives its lifetime and no longer.
package tokenseal
