package etcdcluster

import (
	"crypto/x509"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestCarryFrom is the carry rule on the lists member clusters hold
// (untrusted): only the newest list that verifies against one of the
// ring's CAs is carried, less the excluded serials and the expired
// entries, at most maxCarriedRevocations, the last revoked first; a
// record whose list's CA left the ring carries nothing.
func TestCarryFrom(t *testing.T) {
	ca := newCA(t, "ring")
	next := newCA(t, "ring next")
	// Another CA with the ring CA's very subject: its lists name the
	// ring's CA as issuer, and their signature does not verify.
	impostor := newCA(t, "ring")
	list := func(signer *pki.CA, number int64, at time.Time, entries ...pki.Revoked) []byte {
		t.Helper()
		der, err := signer.RevocationListOf(entries, number, at, pki.RevocationListValidity)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	at := func(d time.Duration) time.Time { return now.Add(-d).UTC().Truncate(time.Second) }
	rev := func(serial int64, d time.Duration) pki.Revoked {
		return pki.Revoked{Serial: big.NewInt(serial), At: at(d)}
	}
	day := 24 * time.Hour
	var many []pki.Revoked
	for i := range maxCarriedRevocations + 10 {
		many = append(many, rev(int64(1000+i), time.Duration(i)*time.Minute))
	}
	ring := []*x509.Certificate{ca.Cert}
	for _, tc := range []struct {
		name    string
		lists   [][]byte
		cas     []*x509.Certificate
		exclude []string
		// want are the serials carried (hex), in order; list the number
		// carried from (0: none).
		want []string
		list int64
	}{
		{"the newest list of the ring's CA", [][]byte{list(ca, 3, at(day), rev(0xa, day), rev(0xb, day)), list(ca, 5, at(time.Hour), rev(0xa, 2*day), rev(0xc, time.Hour))}, ring, nil,
			[]string{"c", "a"}, 5},
		{"an older list replayed beside the newest loses", [][]byte{list(ca, 5, at(time.Hour), rev(0xc, time.Hour)), list(ca, 4, at(day), rev(0xc, day), rev(0xd, day))}, ring, nil,
			[]string{"c"}, 5},
		{"a list of another CA, numbered higher, is ignored", [][]byte{list(ca, 5, at(time.Hour), rev(0xc, time.Hour)), list(newCA(t, "other"), 9, now, rev(0xe, 0))}, ring, nil,
			[]string{"c"}, 5},
		{"a list under the ring CA's name signed by another key is ignored", [][]byte{list(ca, 5, at(time.Hour), rev(0xc, time.Hour)), list(impostor, 9, now, rev(0xe, 0))}, ring, nil,
			[]string{"c"}, 5},
		{"bytes that are no list are ignored", [][]byte{[]byte("not a list"), list(ca, 2, at(time.Hour), rev(0xc, time.Hour)), nil}, ring, nil,
			[]string{"c"}, 2},
		{"only lists of foreign CAs: nothing carried", [][]byte{list(newCA(t, "other"), 9, now, rev(0xe, 0))}, ring, nil,
			nil, 0},
		{"the other CA of a rotation verifies too", [][]byte{list(ca, 5, at(time.Hour), rev(0xc, time.Hour)), list(next, 6, at(time.Minute), rev(0xc, time.Hour), rev(0xf, time.Minute))}, []*x509.Certificate{ca.Cert, next.Cert}, nil,
			[]string{"f", "c"}, 6},
		{"entries revoked longer ago than the longest life are dropped", [][]byte{list(ca, 5, at(time.Hour), rev(0xa, carriedLife+time.Hour), rev(0xc, time.Hour), rev(0xb, carriedLife-time.Hour))}, ring, nil,
			[]string{"c", "b"}, 5},
		{"the excluded serials (the spec's, the hub's own) are not carried", [][]byte{list(ca, 5, at(time.Hour), rev(0xa, day), rev(0xc, time.Hour))}, ring, []string{"a"},
			[]string{"c"}, 5},
		{"at most maxCarriedRevocations, the last revoked first", [][]byte{list(ca, 5, now, many...)}, ring, nil,
			nil, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := carryFrom(tc.lists, tc.cas, now, tc.exclude)
			if rec.List != tc.list {
				t.Errorf("carried from list #%d; want #%d", rec.List, tc.list)
			}
			got := liveCarried(rec, tc.cas, now, tc.exclude)
			if tc.name == "at most maxCarriedRevocations, the last revoked first" {
				if len(got) != maxCarriedRevocations || got[0].Serial != "3e8" || got[len(got)-1].Serial != pki.FormatSerial(big.NewInt(int64(1000+maxCarriedRevocations-1))) {
					t.Errorf("%d carried, first %s; want %d, the last revoked (3e8) first", len(got), got[0].Serial, maxCarriedRevocations)
				}
				return
			}
			var serials []string
			for _, e := range got {
				serials = append(serials, e.Serial)
			}
			if !slices.Equal(serials, tc.want) {
				t.Errorf("carried %v; want %v", serials, tc.want)
			}
		})
	}

	// The record survives its encoding, and carries nothing once the CA
	// that signed its list left the ring (a rotation dropped it).
	rec := carryFrom([][]byte{list(ca, 5, at(time.Hour), rev(0xc, time.Hour))}, ring, now, nil)
	back, err := pki.ParseCarried(rec.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got := liveCarried(back, ring, now, nil); len(got) != 1 || got[0].Serial != "c" || !got[0].RevokedAt.Equal(at(time.Hour)) {
		t.Errorf("the record read back carries %+v; want c revoked at %v", got, at(time.Hour))
	}
	if got := liveCarried(back, []*x509.Certificate{next.Cert}, now, nil); len(got) != 0 {
		t.Errorf("after the CA that signed the list was dropped, %d entries carried; want none", len(got))
	}
	if _, err := pki.ParseCarried([]byte(`{"list":1,"entries":[{"serial":"0A","revokedAt":"2026-01-01T00:00:00Z"}]}`)); err == nil {
		t.Error("a record with a serial not in the hub's spelling is read")
	}
}

// TestCarryOnlyForATakenOverRing: a ring the hub founded carries nothing,
// whatever its members' lists hold (its own records are whole); a ring
// taken over carries from them until its record is stored, then from the
// record alone; the list is signed with the carried entries' own
// revocation times; status.revocation.carried counts them and the event
// says so.
func TestCarryOnlyForATakenOverRing(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	old := big.NewInt(0xabc)
	revokedAt := now.Add(-48 * time.Hour).UTC().Truncate(time.Second)
	held, err := ca.RevocationListOf([]pki.Revoked{{Serial: old, At: revokedAt}}, 4, now.Add(-time.Hour), pki.RevocationListValidity)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range memberCertSecrets(s) {
		sec.Data[etcdfedv1.RevocationListKey] = held
	}
	if c := decideCarry(s); c.record != nil || slices.Contains(decideCRL(s).want, "abc") {
		t.Fatal("a ring the hub founded carries from its members' lists")
	}

	s.ec.UID = "uid-2"
	s.ec.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverComplete, RingUID: "uid-1"}
	// A serial of the spec besides: the list the members hold no longer
	// fits, a new one is signed.
	s.ec.Spec.TLS.RevokedCertificates = []string{"def"}
	// With a member's cluster out of sight (the hub on the minority side
	// of a partition), nothing is carried from the part it sees, and no
	// list is signed that would leave the carried entries out.
	out := s.cluster(s.ec.Status.Members[0].Cluster)
	out.engaged = false
	if w := decideCRL(s); w.carry.record != nil || w.signer != nil || !strings.Contains(w.problem, "in sight") {
		t.Fatalf("a member's cluster out of sight: record %v, signer %v, problem %q; want nothing carried, no list signed, the wait said", w.carry.record, w.signer, w.problem)
	}
	out.engaged = true
	w := decideCRL(s)
	if !w.carry.pending() || !slices.Contains(w.want, "abc") || !w.sign {
		t.Fatalf("a ring taken over: pending %v, want %v, sign %v; want the record pending, abc listed, a list signed", w.carry.pending(), w.want, w.sign)
	}
	if got := carriedText(w.carry); !strings.Contains(got, "1 of them carried from list #4") {
		t.Errorf("the event says %q; want the count and the list", got)
	}
	r := &Reconciler{Now: func() time.Time { return now }}
	der, err := r.applyCRL(s, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pki.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.RevokedCertificateEntries {
		if e.SerialNumber.Cmp(old) == 0 && !e.RevocationTime.Equal(revokedAt) {
			t.Errorf("the carried entry is signed as revoked at %v; want %v, the list's", e.RevocationTime, revokedAt)
		}
	}
	st := &etcdfedv1.EtcdClusterStatus{Members: s.ec.Status.Members}
	setRevocation(s, st, &decision{crl: w}, applyResult{crl: der, crlSigned: true})
	if st.Revocation == nil || st.Revocation.Carried != 1 {
		t.Errorf("status.revocation %+v; want carried 1", st.Revocation)
	}
	// A pass that signs nothing, on a status that lost when the list was
	// signed, reads it from the list (seen empty after a take-over).
	st = &etcdfedv1.EtcdClusterStatus{Members: s.ec.Status.Members}
	setRevocation(s, st, &decision{crl: w}, applyResult{crl: der})
	if st.Revocation == nil || st.Revocation.UpdatedAt == nil || !st.Revocation.UpdatedAt.Time.Equal(pki.SignedAt(l)) {
		t.Errorf("status.revocation %+v without the signing pass's status; want updatedAt %v, when the list was signed", st.Revocation, pki.SignedAt(l))
	}

	// Stored: the record alone counts, whatever the members hold.
	s.pki.hubClient.Data[pki.KeyCarried] = carriedRecord(w.carry)
	for _, sec := range memberCertSecrets(s) {
		sec.Data[etcdfedv1.RevocationListKey] = emptyList(t, ca)
	}
	if w := decideCRL(s); w.carry.pending() || !slices.Contains(w.want, "abc") {
		t.Errorf("with the record stored and the members' lists emptied: pending %v, want %v; want abc listed from the record", w.carry.pending(), w.want)
	}
	// A record that does not read is carried again from the members'
	// lists, not taken as empty.
	s.pki.hubClient.Data[pki.KeyCarried] = []byte("{not json")
	for _, sec := range memberCertSecrets(s) {
		sec.Data[etcdfedv1.RevocationListKey] = held
	}
	if w := decideCRL(s); !w.carry.pending() || !slices.Contains(w.want, "abc") {
		t.Errorf("with a broken record: pending %v, want %v; want it carried again (abc listed) and written over", w.carry.pending(), w.want)
	}
	// Nowhere to store it (no hub client Secret, none issued this pass: a
	// ring taken over without its CA's key, before Reissuing): no list is
	// signed, the members keep theirs.
	s.pki.hubClient = nil
	for _, sec := range memberCertSecrets(s) {
		sec.Data[etcdfedv1.RevocationListKey] = held
	}
	s.pki.auth = &pki.Authority{Signer: keylessOf(t, ca), Next: newCA(t, "ring next")}
	s.pki.ca = s.pki.auth.Signer
	if w := decideCRL(s); w.sign || !strings.Contains(w.problem, "carried once the hub client Secret") {
		t.Errorf("nowhere to record the carried entries: sign %v, problem %q; want no list signed, and why", w.sign, w.problem)
	}
}

func newCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name, now.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func keylessOf(t *testing.T, ca *pki.CA) *pki.CA {
	t.Helper()
	k, err := pki.LoadCACert(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
