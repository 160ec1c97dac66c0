package etcdcluster

import (
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestListedPeerSerials: which recorded superseded member certificates
// the ring's list names: after the grace, never one a member Secret the
// hub sees still holds, one of a cluster out of sight only if the list
// already names it, none expired.
func TestListedPeerSerials(t *testing.T) {
	type rec struct {
		cluster string
		ago     time.Duration // superseded this long before now
		issued  time.Duration // issued this long before now
	}
	for _, c := range []struct {
		name string
		rec  rec
		// held: main-0's Secret still holds it; hidden: its cluster is out
		// of sight; listed: the list the members hold names it.
		held, hidden, listed bool
		want                 bool
	}{
		{name: "after the grace", rec: rec{"member-1", 3 * time.Minute, 0}, want: true},
		{name: "within the grace", rec: rec{"member-1", time.Minute, 0}},
		{name: "within the grace, listed already", rec: rec{"member-1", time.Minute, 0}, listed: true, want: true},
		{name: "still held by a member Secret (the write failed)", rec: rec{"member-1", time.Hour, 0}, held: true},
		{name: "held and listed: taken off", rec: rec{"member-1", time.Hour, 0}, held: true, listed: true},
		{name: "its cluster out of sight", rec: rec{"member-1", time.Hour, 0}, hidden: true},
		{name: "its cluster out of sight, listed already", rec: rec{"member-1", time.Hour, 0}, hidden: true, listed: true, want: true},
		{name: "its cluster no longer registered", rec: rec{"member-9", time.Hour, 0}, want: true},
		{name: "expired", rec: rec{"member-1", time.Hour, 366 * 24 * time.Hour}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := ring()
			ca := withTLS(t, s)
			old, err := ca.IssueMember(pki.MemberRequest{Member: "main-0", DNSNames: []string{"main-0.main.etcd.test"}}, now.Add(-c.rec.issued))
			if err != nil {
				t.Fatal(err)
			}
			cert := pki.Certificates(old.CertPEM)[0]
			s.pki.hubClient.Data[pki.KeySupersededPeers] = pki.EncodeSuperseded([]pki.Superseded{{Cert: cert, At: now.Add(-c.rec.ago), Cluster: c.rec.cluster}})
			cs := s.cluster("member-1")
			sec := cs.secrets[pki.MemberSecretName(cs.members["main-0"].Name)]
			if c.held {
				sec.Data[pki.KeyCert], sec.Data[pki.KeyKey] = old.CertPEM, old.KeyPEM
			}
			if c.listed {
				der, err := ca.RevocationList([]*big.Int{cert.SerialNumber}, 2, now, pki.RevocationListValidity)
				if err != nil {
					t.Fatal(err)
				}
				sec.Data[etcdfedv1.RevocationListKey] = der
			}
			if c.hidden {
				// Another cluster's Secret holds the list, as the hub wrote it.
				if c.listed {
					other := s.cluster("member-2")
					other.secrets[pki.MemberSecretName(other.members["main-1"].Name)].Data[etcdfedv1.RevocationListKey] = sec.Data[etcdfedv1.RevocationListKey]
				}
				cs.engaged = false
			}
			got := slices.Contains(listedPeerSerials(s), pki.FormatSerial(cert.SerialNumber))
			if got != c.want {
				t.Errorf("listed = %v; want %v", got, c.want)
			}
			if slices.Contains(decideCRL(s).want, pki.FormatSerial(cert.SerialNumber)) != c.want {
				t.Errorf("decideCRL's serials %v: listed should be %v", decideCRL(s).want, c.want)
			}
		})
	}
}

// TestRevokedMemberCertificateRenewed: a member's current certificate
// named in spec.tls.revokedCertificates (its key leaked) is renewed in the
// same pass: the list refuses it on the peer port too, so the member must
// not keep presenting it. The others are left alone.
func TestRevokedMemberCertificateRenewed(t *testing.T) {
	s := ring()
	withTLS(t, s)
	cs := s.cluster("member-1")
	n, ok := pki.Serial(cs.secrets[pki.MemberSecretName(cs.members["main-0"].Name)].Data[pki.KeyCert])
	if !ok {
		t.Fatal("no certificate")
	}
	if certs, _ := memberUpkeep(s, &s.ec.Status, step{}); len(certs) != 0 {
		t.Fatalf("certificates due before the revocation: %v", certs)
	}
	s.ec.Spec.TLS.RevokedCertificates = []string{pki.FormatSerial(n)}
	certs, _ := memberUpkeep(s, &s.ec.Status, step{})
	if want := []memberRef{{cluster: "member-1", member: "main-0"}}; !slices.Equal(certs, want) {
		t.Errorf("certificates due after revoking main-0's: %v; want %v", certs, want)
	}
}

// TestSupersededPeersBounded: the record keeps at most
// maxSupersededPeerCerts, the last to expire first, none expired, each
// serial once (its earliest record).
func TestSupersededPeersBounded(t *testing.T) {
	ca, err := pki.NewCA("ring", now.Add(-400*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var list []pki.Superseded
	for i := range maxSupersededPeerCerts + 10 {
		l, err := ca.IssueMember(pki.MemberRequest{Member: "main-0", DNSNames: []string{"main-0.main.etcd.test"}}, now.Add(-time.Duration(i)*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, pki.Superseded{Cert: pki.Certificates(l.CertPEM)[0], At: now.Add(-time.Duration(i) * time.Hour), Cluster: "member-1"})
	}
	dup := list[0]
	dup.At = now
	sec := certSecret("default", "main-hub-client", nil, ca.CertPEM, &pki.Leaf{})
	sec.Data[pki.KeySupersededPeers] = pki.EncodeSuperseded(append(list[1:], list[0]))
	got := supersededPeers(sec, now, dup)
	if len(got) != maxSupersededPeerCerts {
		t.Fatalf("%d kept; want %d", len(got), maxSupersededPeerCerts)
	}
	if got[0].Cert.SerialNumber.Cmp(list[0].Cert.SerialNumber) != 0 || !got[0].At.Equal(list[0].At.Truncate(time.Second)) {
		t.Errorf("first kept: %s at %v; want the last to expire, %s, at its earliest record %v", got[0].Cert.SerialNumber, got[0].At, list[0].Cert.SerialNumber, list[0].At)
	}
	if len(supersededPeers(sec, now.Add(400*24*time.Hour))) != 0 {
		t.Error("expired certificates kept")
	}
}

// TestNextPeerListing: the pass after a member certificate was superseded
// asks to come back when its grace ends (else it is listed at the next
// pass, at worst the resync five minutes on); none waits, none asked.
func TestNextPeerListing(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	if got := nextPeerListing(s, now); got != 0 {
		t.Errorf("nothing recorded: %s, want 0", got)
	}
	var recs []pki.Superseded
	for i, ago := range []time.Duration{30 * time.Second, 90 * time.Second, time.Hour} {
		old, err := ca.IssueMember(pki.MemberRequest{Member: fmt.Sprintf("main-%d", i), DNSNames: []string{"main.etcd.test"}}, now)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, pki.Superseded{Cert: pki.Certificates(old.CertPEM)[0], At: now.Add(-ago), Cluster: "member-1"})
	}
	s.pki.hubClient.Data[pki.KeySupersededPeers] = pki.EncodeSuperseded(recs)
	if got, want := nextPeerListing(s, now), peerRevocationGrace-90*time.Second; got != want {
		t.Errorf("next listing in %s, want %s (the one superseded 90 s ago)", got, want)
	}
	if got := nextPeerListing(s, now.Add(peerRevocationGrace)); got != 0 {
		t.Errorf("every grace over: %s, want 0", got)
	}
}
