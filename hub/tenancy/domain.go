package tenancy

import (
	"fmt"
	"strings"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Domain is spec.dns.domain as compared: lower case, no trailing dot.
func Domain(d string) string { return strings.ToLower(strings.TrimSuffix(d, ".")) }

// Parents are the domains d lies inside: "b.c" and "c" for "a.b.c".
func Parents(d string) []string {
	var out []string
	for i := strings.IndexByte(d, '.'); i >= 0; i = strings.IndexByte(d, '.') {
		d = d[i+1:]
		out = append(out, d)
	}
	return out
}

// overlap: a and b are the same domain, or one lies inside the other (a
// zone inside another would shadow its names: a ring whose domain is
// ns0.<domain> would answer for the other ring's name server).
func overlap(a, b string) bool {
	return a == b || strings.HasSuffix(a, "."+b) || strings.HasSuffix(b, "."+a)
}

// claimed: the ring has begun (the hub recorded members for it), so its
// domain is in use.
func claimed(ec *etcdfedv1.EtcdCluster) bool {
	return len(ec.Status.Members) > 0 || ec.Status.ClusterID != ""
}

// before reports whether a has the better claim on a domain than b: a ring
// that has begun before one that has not (so that a ring already serving
// is never displaced by one created in the same second), then the older
// creationTimestamp, then the smaller UID (two created at once).
func before(a, b *etcdfedv1.EtcdCluster) bool {
	if ca, cb := claimed(a), claimed(b); ca != cb {
		return ca
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.UID < b.UID
}

// DomainConflict is the EtcdCluster whose domain keeps ec from serving
// its own.
type DomainConflict struct {
	Owner *etcdfedv1.EtcdCluster
	// Same: the same domain; else one lies inside the other.
	Same bool
}

// Error says it for ec's conditions and events.
func (c DomainConflict) Error() string {
	if c.Same {
		return fmt.Sprintf("spec.dns.domain %s is served by EtcdCluster %s/%s: a domain belongs to one ring; this EtcdCluster writes nothing (delete it and create it with another domain, or delete %s/%s first)",
			Domain(c.Owner.Spec.DNS.Domain), c.Owner.Namespace, c.Owner.Name, c.Owner.Namespace, c.Owner.Name)
	}
	return fmt.Sprintf("spec.dns.domain overlaps %s, the domain of EtcdCluster %s/%s (one lies inside the other, and its zone would shadow the other's names): this EtcdCluster writes nothing (delete it and create it with another domain, or delete %s/%s first)",
		Domain(c.Owner.Spec.DNS.Domain), c.Owner.Namespace, c.Owner.Name, c.Owner.Namespace, c.Owner.Name)
}

// DomainOwner returns the conflict that keeps ec from its domain: the
// first, in claim order (claimed, then older, then smaller UID), of the
// other EtcdClusters in rings whose domain overlaps ec's and which come
// before ec. ok is false when ec may serve its domain. rings may include
// ec (by UID) and EtcdClusters being deleted: those still serve their
// domain until they are gone.
func DomainOwner(ec *etcdfedv1.EtcdCluster, rings []etcdfedv1.EtcdCluster) (DomainConflict, bool) {
	mine := Domain(ec.Spec.DNS.Domain)
	var best *etcdfedv1.EtcdCluster
	for i := range rings {
		o := &rings[i]
		if o.UID == ec.UID || !overlap(mine, Domain(o.Spec.DNS.Domain)) || !before(o, ec) {
			continue
		}
		if best == nil || before(o, best) {
			best = o
		}
	}
	if best == nil {
		return DomainConflict{}, false
	}
	return DomainConflict{Owner: best, Same: Domain(best.Spec.DNS.Domain) == mine}, true
}
