// Package embedded is etcdfed's authoritative DNS server: every spoke runs
// one and serves the ring's zone from the record set the hub writes into
// its member cluster, so names resolve while the hub or any zone is down.
//
// A Server serves any number of zones over UDP and TCP on one address.
// Each zone is a dnsprovider.RecordSet, swapped atomically with SetZone.
// The server answers authoritatively (AA), distinguishes NXDOMAIN from
// NODATA with the SOA in the authority section, refuses names outside its
// zones, speaks EDNS0, truncates large UDP answers so that clients retry
// over TCP, serves AXFR to allowed networks or TSIG-signed requests and,
// when enabled, takes RFC 2136 updates signed with TSIG.
//
// Plain queries are answered from answers precomputed at SetZone time
// without parsing or allocating; everything else takes the full path on
// github.com/miekg/dns. Tests check that both paths give the same answers.
//
// Standalone: see cmd/etcdfed-dns.
package embedded
