// Package dnsprovider holds the DNS record model of an etcdfed ring and the
// Provider interface that publishes it.
//
// The hub is the one writer of a ring's records. It builds a RecordSet from a
// Spec (domain, TTL, owner, members, name servers) with Build, turns it into
// the flat []Record wire form with RecordSet.Records, and writes that into
// every member cluster. A spoke turns the flat form back into a RecordSet
// with ParseRecords (which validates everything) and feeds it to the embedded
// server (package dnsprovider/embedded). External authoritative servers
// receive the same set through a Provider such as dnsprovider/rfc2136.
//
// Ownership: every RecordSet carries one TXT record at
// "_etcdfed-owner.<domain>" naming its owner (for example the UID of the
// EtcdCluster) and listing the RRsets the owner holds. A Provider reads that
// record back and only ever changes, adds or deletes RRsets its owner holds;
// the zone's SOA and apex NS belong to the zone's operator and are never
// changed by an external provider.
package dnsprovider
