// Package escrow exports and imports what only the hub cluster holds and a
// rebuilt hub needs to carry on with the same rings: each ring's CA (its
// key signs every member and client certificate), each ring's snapshot
// signing key (<ring>-snapshot-key: without it a backup taken before the
// loss cannot be verified for a restore) and the gossip key of the spokes
// (etcdfed-gossip in the hub's namespace).
//
// A bundle is a JSON document encrypted with age (filippo.io/age) to one
// or more X25519 recipients the operator holds the identities of, ASCII
// armored. It carries a manifest (Manifest: each Secret, what it is for,
// its data keys and a SHA-256 of its content, and what was looked for and
// not found) beside the Secrets. Export prints the manifest; Import opens
// the bundle with the operator's identities and writes the Secrets into a
// new hub cluster, refusing, before it writes anything, to overwrite an
// existing Secret with other content unless forced.
//
// What a bundle does not hold: the rings' status and ledger (the hub
// rebuilds them from the member clusters; the take-over of running rings
// by a new hub is not built yet), consumers' client credentials (reissued
// from the CA), the member clusters' kubeconfig Secrets (`etcdfed cluster
// join` writes them again).
package escrow
