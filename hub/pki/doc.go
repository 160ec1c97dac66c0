// Package pki is the hub's certificate authority: it creates (or loads) the
// CA of an EtcdCluster, issues each member's serving/peer certificate with
// the member's DNS name as SAN, and issues client certificates for the hub
// and for users. It is pure crypto over PEM bytes; where the bytes are kept
// (Secrets) is the reconciler's business. The CA key never leaves the hub
// cluster.
package pki
