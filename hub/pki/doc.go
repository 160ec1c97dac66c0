// Package pki is the hub's certificate authority: it creates (or loads) the
// CA of an EtcdCluster, issues each member's serving/peer certificate with
// the member's DNS name as SAN, and issues client certificates for the hub
// and for users. The crypto works on PEM bytes; secrets.go names the
// Secrets the hub keeps them in and reads the CA back for tools (ReadCA),
// so that the CLI needs nothing of the reconciler. The CA key never leaves
// the hub cluster.
package pki
