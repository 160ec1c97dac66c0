// Package pki is the hub's certificate authority: it creates (or loads) the
// CA of an EtcdCluster, issues each member's serving/peer certificate with
// the member's DNS name and the ring's peer name (PeerName) as SANs, and
// issues client certificates for the hub and for consumers. rotation.go
// holds the CA Secret as an Authority: the CA that issues and, during a CA
// rotation, the new or the old CA trusted beside it (the bundle members
// and consumers trust). The crypto works on PEM bytes; secrets.go names the
// Secrets the hub keeps them in and reads the CA back for tools (ReadCA,
// ReadAuthority), so that the CLI needs nothing of the reconciler. The CA
// key never leaves the hub cluster.
package pki
