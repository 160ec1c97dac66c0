package tenancy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/allowlist"
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

// CheckDomain says whether the policy lets ec serve its domain: never a
// single-label domain (com, local: every name under it would be the
// ring's; the CRD refuses one, this covers objects stored before it did),
// and with Domains set, only a domain equal to or inside one of the
// suffixes its namespace is given.
func (p Policy) CheckDomain(ec *etcdfedv1.EtcdCluster) error {
	d := Domain(ec.Spec.DNS.Domain)
	if !strings.Contains(d, ".") {
		return fmt.Errorf("%w: spec.dns.domain %q is a single label: a ring's domain needs at least two (such as etcd.example.com), or one ring would hold every name under it", ErrForbidden, d)
	}
	if len(p.Domains) == 0 {
		return nil
	}
	suffixes, ok := p.Domains[ec.Namespace]
	if !ok {
		suffixes = p.Domains[Any]
	}
	for _, s := range suffixes {
		if s = Domain(s); s == Any || d == s || strings.HasSuffix(d, "."+s) {
			return nil
		}
	}
	return fmt.Errorf("%w: spec.dns.domain %s is not inside a domain namespace %s may use (%s); the hub's operator gives namespaces domains with --allowed-domains", ErrForbidden, d, ec.Namespace, allowlist.String(suffixes))
}

// ParseDomains reads --allowed-domains: NAMESPACE=DOMAIN pairs.
func ParseDomains(pairs []string) (map[string][]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	for _, p := range pairs {
		ns, d, ok := strings.Cut(p, "=")
		d = Domain(strings.TrimSpace(d))
		if ns = strings.TrimSpace(ns); !ok || ns == "" || d == "" {
			return nil, fmt.Errorf("%q: want NAMESPACE=DOMAIN", p)
		}
		if d != Any && !strings.Contains(d, ".") {
			return nil, fmt.Errorf("%q: %s is a single label; give namespaces domains of at least two labels", p, d)
		}
		out[ns] = append(out[ns], d)
	}
	return out, nil
}

// Claimed says whether the hub began ec's ring: it recorded members or an
// etcd cluster ID. Such a ring keeps its domain.
func Claimed(ec *etcdfedv1.EtcdCluster) bool { return claimed(ec) }

// Refused says whether the hub refused ec for its current generation.
func Refused(ec *etcdfedv1.EtcdCluster) bool { return refused(ec) }

// refused: the hub refused o for its current generation (a domain another
// ring holds, or the policy): it writes nothing, so it holds no domain
// against anyone. Only the hub writes status.
func refused(o *etcdfedv1.EtcdCluster) bool {
	c := meta.FindStatusCondition(o.Status.Conditions, etcdfedv1.ConditionDegraded)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == o.Generation &&
		(c.Reason == etcdfedv1.ReasonDomainInUse || c.Reason == etcdfedv1.ReasonPolicyViolation)
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
// domain until they are gone. A ring that has not begun holds no domain
// it may not use (p.CheckDomain), nor one while the hub refuses it (its
// Degraded condition says DomainInUse or PolicyViolation): a squatter
// that never forms, or that another ring's domain keeps from forming,
// blocks nobody. A ring that has begun keeps its domain whatever the
// policy says now: it is serving, and only its deletion frees the names.
func DomainOwner(ec *etcdfedv1.EtcdCluster, rings []etcdfedv1.EtcdCluster, p Policy) (DomainConflict, bool) {
	mine := Domain(ec.Spec.DNS.Domain)
	var best *etcdfedv1.EtcdCluster
	for i := range rings {
		o := &rings[i]
		if o.UID == ec.UID || !overlap(mine, Domain(o.Spec.DNS.Domain)) || !before(o, ec) {
			continue
		}
		if !claimed(o) && (refused(o) || p.CheckDomain(o) != nil) {
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
