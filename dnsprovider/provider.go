package dnsprovider

import "context"

// Provider publishes record sets. A provider only ever changes RRsets held
// by the set's owner (see Ownership); the zone's SOA and apex NS are the
// operator's and are left alone by providers that write into a zone they
// do not run.
type Provider interface {
	// Apply makes the provider hold exactly set's managed records for
	// set.Owner() below set.Origin(): it adds what is missing, replaces
	// what differs and deletes RRsets the owner held before but set lacks.
	// Applying the same set twice changes nothing the second time. It fails
	// with ErrNotOwner when another owner holds the domain and with
	// ErrConflict when a record to publish exists without an owner.
	Apply(ctx context.Context, set *RecordSet) error
	// Current returns the RRsets the provider holds for owner below domain
	// (the ownership record included) in canonical order; none if the
	// owner holds nothing there.
	Current(ctx context.Context, domain, owner string) ([]Record, error)
	// Remove deletes every RRset owner holds below domain, the ownership
	// record last. Removing what is not there is not an error.
	Remove(ctx context.Context, domain, owner string) error
}
