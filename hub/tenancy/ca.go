package tenancy

import (
	"fmt"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// CAConflict is the EtcdCluster of another namespace whose CA has the same
// key as ec's.
type CAConflict struct {
	Owner *etcdfedv1.EtcdCluster
}

// Error says it for ec's conditions and events.
func (c CAConflict) Error() string {
	return fmt.Sprintf("spec.tls.caSecretName holds the CA (the same key) that EtcdCluster %s/%s of another namespace uses: the hub issues certificates from a ring's CA (its own root client, spec.clients), so a CA shared across namespaces would make this namespace's certificates trusted by the other's ring and the other's by this one; this EtcdCluster writes nothing (use a CA of this namespace's own, or the hub's operator allows shared CAs with --allow-shared-ca)",
		c.Owner.Namespace, c.Owner.Name)
}

// CAOwner returns the conflict that keeps ec from using the CA whose key
// fingerprint is fp: the first, in claim order (begun, then older, then
// smaller UID), of rings in another namespace that recorded the same
// fingerprint (status.caFingerprint) and come before ec. A ring that has
// not begun and that the hub refuses holds no CA. ok is false when ec may
// use it: always when the policy allows shared CAs.
func CAOwner(ec *etcdfedv1.EtcdCluster, fp string, rings []etcdfedv1.EtcdCluster, p Policy) (CAConflict, bool) {
	if p.SharedCA || fp == "" {
		return CAConflict{}, false
	}
	var best *etcdfedv1.EtcdCluster
	for i := range rings {
		o := &rings[i]
		if o.UID == ec.UID || o.Namespace == ec.Namespace || o.Status.CAFingerprint != fp || !before(o, ec) {
			continue
		}
		if !claimed(o) && refused(o) {
			continue
		}
		if best == nil || before(o, best) {
			best = o
		}
	}
	if best == nil {
		return CAConflict{}, false
	}
	return CAConflict{Owner: best}, true
}
