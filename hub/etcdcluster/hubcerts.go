package etcdcluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// The hub's client certificates, recorded where a rebuilt hub finds them.
//
// The hub client Secret (pki.HubClientSecretName) lives in the hub
// cluster. When that cluster is lost and a hub rebuilt in a new one takes
// the ring over (takeover.go), the old hub's current client certificate
// is in no revocation list (the old hub listed only the ones it
// replaced), so whoever kept a copy of the lost cluster's Secrets could
// act as root on the ring with it until it expired (7 days). So:
//
//   - every hub client certificate is recorded, certificate only, in
//     every member's certificate Secret (pki.KeyHubCerts) before the hub
//     uses it: applyPKI writes it into the Secrets in sight before it
//     writes the hub client Secret, and holds the new certificate back
//     unless at least one member Secret holds it (a ring with no member
//     Secret in sight yet records it once one is: writeCRLs and
//     writeMemberCert add the current certificate to every record they
//     write). A record keeps the ring's hub certificates until they
//     expire (hubCertsRecord), so the new hub's own writes do not drop
//     the old hub's before the carry reads them.
//   - the hub that takes the ring over reads the records of every
//     member's Secret at the carry (carry.go: once, with every member's
//     cluster in sight) and lists each certificate they hold that is the
//     ring's hub's (isHubCert: the hub's etcd user, signed by one of the
//     ring's CAs, not expired), less its own current one, until it
//     expires (oldHubCerts). The union over every member, not the newest
//     record: a member cluster can drop its own copy but not the others',
//     and a certificate it adds must verify as the ring's hub's, which
//     revokes no one but a hub.
//
// A take-over without the escrow rotates the CA: the old hub's
// certificates are listed from Reissuing (when the carry is recorded) and
// refused by every member once Dropping leaves the old CA untrusted.

// maxRecordedHubCerts bounds a record: the hub replaces its certificate
// every 4 to 5 days and each lives 7, so two are recorded at a time, a
// few more across a CA rotation or a take-over.
const maxRecordedHubCerts = 8

// isHubCert: c is a client certificate of the ring's hub: the hub's etcd
// user, signed by one of cas, not expired at now.
func isHubCert(c *x509.Certificate, cas []*x509.Certificate, now time.Time) bool {
	if c == nil || c.Subject.CommonName != etcdfedv1.EtcdHubUser || !now.Before(c.NotAfter) {
		return false
	}
	return slices.ContainsFunc(cas, func(ca *x509.Certificate) bool {
		return ca != nil && bytes.Equal(c.RawIssuer, ca.RawSubject) && c.CheckSignatureFrom(ca) == nil
	})
}

// hubCertsRecord is the record (pki.KeyHubCerts) of a member Secret that
// holds held, with add recorded: the ring's hub certificates of both
// (isHubCert), unique by serial, the last to expire first, at most
// maxRecordedHubCerts; nil when none is left.
func hubCertsRecord(held, add []byte, cas []*x509.Certificate, now time.Time) []byte {
	certs := slices.DeleteFunc(append(pki.Certificates(add), pki.Certificates(held)...), func(c *x509.Certificate) bool {
		return !isHubCert(c, cas, now)
	})
	slices.SortStableFunc(certs, func(a, b *x509.Certificate) int {
		if c := b.NotAfter.Compare(a.NotAfter); c != 0 {
			return c
		}
		return a.SerialNumber.Cmp(b.SerialNumber)
	})
	certs = slices.CompactFunc(certs, func(a, b *x509.Certificate) bool { return a.SerialNumber.Cmp(b.SerialNumber) == 0 })
	if len(certs) > maxRecordedHubCerts {
		certs = certs[:maxRecordedHubCerts]
	}
	if len(certs) == 0 {
		return nil
	}
	return pki.EncodeCertificates(certs)
}

// recordedHubCert: the record held names certPEM's certificate.
func recordedHubCert(held, certPEM []byte) bool {
	n, ok := pki.Serial(certPEM)
	return ok && slices.ContainsFunc(pki.Certificates(held), func(c *x509.Certificate) bool { return c.SerialNumber.Cmp(n) == 0 })
}

// memberHubCerts is the record a member Secret holding held is to hold
// in this pass: held with the hub's current client certificate added.
// ok is false when the hub has none or no CA to check records against:
// the Secret keeps what it holds.
func memberHubCerts(s *snapshot, held []byte) (rec []byte, ok bool) {
	hc, cas := s.pki.hubClient, s.pki.authority().Certs()
	if hc == nil || len(hc.Data[pki.KeyCert]) == 0 || len(cas) == 0 {
		return nil, false
	}
	return hubCertsRecord(held, hc.Data[pki.KeyCert], cas, s.now), true
}

// ringMemberSecrets are the ring's member certificate Secrets in cs (by
// the ring's UID), when the hub can write there.
func ringMemberSecrets(s *snapshot, cs *clusterSnapshot) []*corev1.Secret {
	if !cs.visible() || cs.client == nil {
		return nil
	}
	var out []*corev1.Secret
	for _, name := range slices.Sorted(maps.Keys(cs.secrets)) {
		sec := cs.secrets[name]
		if sec.Labels[etcdfedv1.LabelComponent] == memberCertComponent && sec.Labels[etcdfedv1.LabelClusterUID] == string(s.ec.RingUID()) {
			out = append(out, sec)
		}
	}
	return out
}

// recordHubCert writes certPEM, a hub client certificate about to be
// written into the hub client Secret, into the record of every member
// Secret of the ring in sight first. An error when member Secrets are in
// sight and none holds it: the certificate must not be used (the pass
// keeps the one the hub has). Failures beside one that holds it are
// logged; the upkeep of a later pass adds it (writeCRLs).
func (r *Reconciler) recordHubCert(ctx context.Context, s *snapshot, certPEM []byte) error {
	cas := s.pki.authority().Certs()
	var errs []error
	total, holding := 0, 0
	for _, cs := range s.clusters {
		for _, sec := range ringMemberSecrets(s, cs) {
			total++
			held := sec.Data[pki.KeyHubCerts]
			if recordedHubCert(held, certPEM) {
				holding++
				continue
			}
			patched := sec.DeepCopy()
			if patched.Data == nil {
				patched.Data = map[string][]byte{}
			}
			patched.Data[pki.KeyHubCerts] = hubCertsRecord(held, certPEM, cas, s.now)
			if err := cs.client.Patch(ctx, patched, client.MergeFrom(sec)); err != nil {
				errs = append(errs, fmt.Errorf("record the hub's new client certificate in Secret %s in %s: %w", sec.Name, cs.name, err))
				continue
			}
			// Later writes of the pass start from it (writeMemberCert
			// writes the Secret whole).
			cs.secrets[sec.Name] = patched
			holding++
		}
	}
	if total > 0 && holding == 0 {
		return fmt.Errorf("the hub's new client certificate is not issued: no member Secret of the ring records it (a rebuilt hub could not revoke it): %w", errors.Join(errs...))
	}
	if len(errs) > 0 {
		ctrl.LoggerFrom(ctx).Info("Recorded the hub's new client certificate in some member Secrets only", "holding", holding, "of", total, "errors", errors.Join(errs...).Error())
	}
	return nil
}

// oldHubCerts are the hub client certificates the records of a taken-over
// ring's member Secrets hold (untrusted input), each listed until it
// expires: every one that is the ring's hub's (isHubCert), from any
// member's record, revoked at now.
func oldHubCerts(records [][]byte, cas []*x509.Certificate, now time.Time) []pki.CarriedEntry {
	var out []pki.CarriedEntry
	for _, rec := range records {
		for _, c := range pki.Certificates(rec) {
			if !isHubCert(c, cas, now) {
				continue
			}
			until := c.NotAfter.UTC()
			out = append(out, pki.CarriedEntry{Serial: pki.FormatSerial(c.SerialNumber), RevokedAt: now.UTC(), Until: &until})
		}
	}
	return out
}
