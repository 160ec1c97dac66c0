package etcdcluster

import (
	"bytes"
	"math/big"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestForeignListNotHandedOn: a member cluster that holds a revocation
// list signed by another CA (a compromised one: here numbered 9, naming a
// live certificate and none of the ring's revoked serials) neither gets
// that list handed to the other members when the hub cannot sign one (a
// ring taken over without its CA's key: the members keep the newest list
// of the ring's CA), nor moves the numbering of the hub's next list.
// Before, the hub took the highest-numbered list any member Secret held,
// unchecked, and wrote it into every member's Secret: the ring's revoked
// serials were admitted again and a live certificate refused.
func TestForeignListNotHandedOn(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	genuine, err := ca.RevocationList([]*big.Int{big.NewInt(0xabc)}, 4, now.Add(-time.Hour), pki.RevocationListValidity)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("test CA", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	live, _ := pki.Serial(s.pki.hubClient.Data[pki.KeyCert])
	forged, err := other.RevocationList([]*big.Int{live}, 9, now, pki.RevocationListValidity)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range s.clusters {
		for _, sec := range cs.secrets {
			sec.Data[etcdfedv1.RevocationListKey] = genuine
			if cs.name == "member-3" {
				sec.Data[etcdfedv1.RevocationListKey] = forged
			}
		}
	}
	s.ec.Spec.TLS.RevokedCertificates = []string{"abc", "def"}
	if w := decideCRL(s); !w.sign || w.number != 5 {
		t.Errorf("the hub signs list #%d (sign %v); want #5, after the ring's own #4", w.number, w.sign)
	}

	// Nothing can sign: the CA the members run on is kept without its key.
	keyless, err := pki.LoadCACert(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	s.pki.ca, s.pki.auth, s.pki.hubClient = keyless, &pki.Authority{Signer: keyless}, nil
	s.ec.UID = "uid-2"
	s.ec.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverComplete, RingUID: "uid-1"}
	w := decideCRL(s)
	if w.sign || !bytes.Equal(w.list, genuine) {
		t.Errorf("with nothing to sign, the members are handed list %v (sign %v); want the ring's own #4", listNumber(w.list), w.sign)
	}
}

func listNumber(der []byte) any {
	l, err := pki.ParseRevocationList(der)
	if err != nil || l.Number == nil {
		return "none"
	}
	return l.Number
}
