package etcdcluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// Carrying a taken-over ring's revocation list forward.
//
// A hub that takes a running ring over (takeover.go) starts without the
// old hub's records of the certificates it superseded (pki.KeySuperseded,
// pki.KeySupersededPeers: they lived in the lost hub cluster), so the
// first list it signed named spec.tls.revokedCertificates alone, and every
// old hub or member certificate the old hub had listed was valid again.
// The list the members hold names them all. So, for a ring taken over
// (status.takeOver.ringUID set), the hub carries that list's entries
// forward, once:
//
//   - from the newest list (highest CRL number) a member Secret holds that
//     verifies against one of the ring's CAs (the one that issues, and
//     during a rotation the one beside it; pki.ListSigner). A list a member
//     cluster holds is untrusted input: unsigned, foreign-signed or
//     unparsable lists are ignored, and an older list of the ring
//     (replayed by a compromised member cluster) loses to the newest one
//     any other member holds: it can neither add a serial the old hub had
//     taken off the list nor drop one it kept. Only the CA's key makes a
//     list, and whoever holds it can issue certificates anyway.
//   - less the serials spec.tls.revokedCertificates names at that moment
//     (the spec keeps governing them: removing one later admits its
//     certificate again) and the hub's own current client certificate
//     (never listed: a list naming it would lock the hub out).
//   - recorded in the hub client Secret (pki.KeyCarried), with each
//     entry's revocation time, before or with the first list the hub
//     signs: that pass's hub client certificate write, or a patch of the
//     Secret (storeCarried). From then on the record alone counts: the
//     members' lists are never read for it again, so the hub's own later
//     lists (which name the carried entries) feed nothing back, and a
//     restart of the hub loses nothing. Until it is stored no list is
//     signed (the members keep the one they hold): a ring taken over
//     without its CA's key has no hub client Secret until the rotation's
//     Reissuing.
//   - an entry is listed until its revocation time plus carriedLife (the
//     certificate it names was issued before it was revoked, and nothing
//     the hub issues lives longer), and the whole record until the CA that
//     signed the list it came from leaves the ring (a rotation's Drop: no
//     member trusts a certificate of that CA any more, nor one of the CA
//     it was rotating from); at most maxCarriedRevocations, the last
//     revoked first. The hub signs carried entries with their own
//     revocation time, so a later take-over ages them from when they were
//     revoked, not from when they were signed again.
//
// "Always carry what the members' current list holds" is not the rule:
// the hub's own lists would feed themselves, and a serial removed from
// spec.tls.revokedCertificates, or a superseded certificate the hub no
// longer lists, would never leave.

// maxCarriedRevocations bounds the entries carried: the hub's own list
// holds at most 512 serials of the spec, 16 superseded hub certificates
// and 128 superseded member certificates, so a list from a hub that was
// not itself taken over fits whole; past the bound, the entries revoked
// first (which expire first) are dropped.
const maxCarriedRevocations = 1024

// carriedLife is how long after its revocation time a carried entry is
// listed: the longest life of a certificate the hub issues.
const carriedLife = pki.LeafValidity

// carryWork is the carried part of the pass's revocation list.
type carryWork struct {
	// record is what the hub client Secret holds (stored) or is to hold;
	// nil for a ring not taken over.
	record *pki.Carried
	stored bool
	// entries are the carried entries listed in this pass.
	entries []pki.CarriedEntry
	// waitView names a member cluster out of sight while nothing is
	// carried yet: the carry waits for the whole ring.
	waitView string
}

// serials are the carried serials listed in this pass.
func (c carryWork) serials() []string {
	out := make([]string, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e.Serial)
	}
	return out
}

// revokedAt is when the carried entry of serial was revoked; zero when
// serial is not carried (the list gives it the signing time).
func (c carryWork) revokedAt(serial string) time.Time {
	for _, e := range c.entries {
		if e.Serial == serial {
			return e.RevokedAt
		}
	}
	return time.Time{}
}

// pending: the record is to be stored before a list is signed.
func (c carryWork) pending() bool { return c.record != nil && !c.stored }

// decideCarry is the pass's carried entries (see above).
func decideCarry(s *snapshot) carryWork {
	if !s.ec.Spec.TLS.Mode.Enabled() || s.ec.RingUID() == s.ec.UID {
		return carryWork{}
	}
	cas := s.pki.authority().Certs()
	var exclude []string
	if hc := s.pki.hubClient; hc != nil {
		if n, ok := pki.Serial(hc.Data[pki.KeyCert]); ok {
			exclude = append(exclude, pki.FormatSerial(n))
		}
		// A record that does not read (edited by hand) is carried again
		// from the members' lists and written over: dropping what it
		// held would admit the certificates it named.
		if rec, err := pki.ParseCarried(hc.Data[pki.KeyCarried]); err == nil {
			return carryWork{record: rec, stored: true, entries: liveCarried(rec, cas, s.now, exclude)}
		}
	}
	// Carried once, so from the whole ring only: a hub that sees some of
	// its member clusters (the minority side of a partition) may see an
	// older list than the newest any member holds, and would record it
	// for good. Until every member's cluster is in sight, nothing is
	// carried and no list is signed (carryHold): the members keep theirs.
	for _, m := range s.ec.Status.Members {
		if cs := s.cluster(m.Cluster); cs == nil || !cs.visible() {
			return carryWork{waitView: m.Cluster}
		}
	}
	var lists [][]byte
	for _, sec := range memberCertSecrets(s) {
		lists = append(lists, sec.Data[etcdfedv1.RevocationListKey])
	}
	rec := carryFrom(lists, cas, s.now, append(wantedSerials(s.ec), exclude...))
	return carryWork{record: rec, entries: liveCarried(rec, cas, s.now, exclude)}
}

// carryFrom is the record a hub that took a ring over carries from the
// lists its members hold (DER, untrusted): the entries of the newest list
// (highest CRL number, then latest thisUpdate) that verifies against one
// of cas, less the serials of exclude and those that expired at now, at
// most maxCarriedRevocations, the last revoked first. A record with no
// list (List 0) when none verifies: the carry is done, with nothing.
func carryFrom(lists [][]byte, cas []*x509.Certificate, now time.Time, exclude []string) *pki.Carried {
	var newest *x509.RevocationList
	var signer *x509.Certificate
	for _, der := range lists {
		if len(der) == 0 {
			continue
		}
		l, err := pki.ParseRevocationList(der)
		if err != nil || l.Number == nil || !l.Number.IsInt64() || l.Number.Sign() <= 0 {
			continue
		}
		c := pki.ListSigner(l, cas)
		if c == nil {
			continue
		}
		if newest == nil || l.Number.Cmp(newest.Number) > 0 || l.Number.Cmp(newest.Number) == 0 && l.ThisUpdate.After(newest.ThisUpdate) {
			newest, signer = l, c
		}
	}
	rec := &pki.Carried{At: now}
	if newest == nil {
		return rec
	}
	rec.List, rec.Signer, rec.SignerKey = newest.Number.Int64(), pki.Describe(signer), pki.KeyFingerprint(signer)
	for _, e := range newest.RevokedCertificateEntries {
		if e.SerialNumber == nil || e.SerialNumber.Sign() <= 0 {
			continue
		}
		at := e.RevocationTime
		if at.IsZero() || at.After(now) {
			at = now
		}
		rec.Entries = append(rec.Entries, pki.CarriedEntry{Serial: pki.FormatSerial(e.SerialNumber), RevokedAt: at.UTC()})
	}
	rec.Entries = liveEntries(rec.Entries, now, exclude)
	return rec
}

// liveCarried are the entries of rec listed at now: none once the CA that
// signed the list they came from is not among cas; else those not
// expired and not in exclude, at most maxCarriedRevocations.
func liveCarried(rec *pki.Carried, cas []*x509.Certificate, now time.Time, exclude []string) []pki.CarriedEntry {
	if rec == nil || len(rec.Entries) == 0 {
		return nil
	}
	if !slices.ContainsFunc(cas, func(c *x509.Certificate) bool { return c != nil && pki.KeyFingerprint(c) == rec.SignerKey }) {
		return nil
	}
	return liveEntries(rec.Entries, now, exclude)
}

// liveEntries: unique by serial, not expired at now (revocation time plus
// carriedLife), none of exclude, the last revoked first, at most
// maxCarriedRevocations.
func liveEntries(entries []pki.CarriedEntry, now time.Time, exclude []string) []pki.CarriedEntry {
	out := slices.DeleteFunc(slices.Clone(entries), func(e pki.CarriedEntry) bool {
		return !now.Before(e.RevokedAt.Add(carriedLife)) || slices.Contains(exclude, e.Serial)
	})
	slices.SortStableFunc(out, func(a, b pki.CarriedEntry) int {
		if c := b.RevokedAt.Compare(a.RevokedAt); c != 0 {
			return c
		}
		if len(a.Serial) != len(b.Serial) {
			return len(a.Serial) - len(b.Serial)
		}
		return bytes.Compare([]byte(a.Serial), []byte(b.Serial))
	})
	out = slices.CompactFunc(out, func(a, b pki.CarriedEntry) bool { return a.Serial == b.Serial })
	if len(out) > maxCarriedRevocations {
		out = out[:maxCarriedRevocations]
	}
	return out
}

// carriedRecord is the pass's record as the hub client Secret is to
// hold it (its live entries), nil when the ring carries nothing.
func carriedRecord(c carryWork) []byte {
	if c.record == nil {
		return nil
	}
	rec := *c.record
	rec.Entries = c.entries
	return rec.Encode()
}

// storeCarried records the carried entries in the hub client Secret when
// they are not stored yet and the pass does not write the Secret whole
// (hubClientSecret): before the list that names them is signed, so an
// error means it must not be.
func (r *Reconciler) storeCarried(ctx context.Context, s *snapshot, c carryWork, issued bool) error {
	hc := s.pki.hubClient
	if !c.pending() || issued || hc == nil {
		return nil
	}
	patched := hc.DeepCopy()
	if patched.Data == nil {
		patched.Data = map[string][]byte{}
	}
	patched.Data[pki.KeyCarried] = carriedRecord(c)
	if err := r.hub().Patch(ctx, patched, client.MergeFrom(hc)); err != nil {
		return fmt.Errorf("record the revocation entries carried from the taken-over ring's list in Secret %s: %w", hc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Recorded the revocation entries carried from the taken-over ring's list", "list", c.record.List, "entries", len(c.entries))
	s.pki.hubClient = patched
	return nil
}

// carryHold says why no list is signed in this pass for a ring whose
// carried entries cannot be stored yet ("" when they can, or are).
func carryHold(s *snapshot, c carryWork) string {
	if c.waitView != "" {
		return fmt.Sprintf("the ring was taken over: the revocation list its members hold is carried once every member's cluster is in sight (%s is not)", c.waitView)
	}
	if !c.pending() || s.pki.hubClient != nil || pkiDue(s).issueHubClient {
		return ""
	}
	return fmt.Sprintf("the entries of revocation list #%d the members hold (the ring was taken over) are carried once the hub client Secret %s exists to record them (a ring taken over without its CA's key: at the rotation's Reissuing)", c.record.List, pki.HubClientSecretName(s.ec))
}

func carriedText(c carryWork) string {
	if len(c.entries) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of them carried from list #%d the members held when the ring was taken over, each until a year after it was revoked)", len(c.entries), c.record.List)
}
