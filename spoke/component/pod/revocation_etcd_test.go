package pod_test

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestRevokedRootCertificateRefused runs a real etcd (3.6) with the flags
// the spoke renders for a member whose object asks for the revocation
// list (spec.tls.revocationList) and the files its Secret holds: a root
// client certificate of the ring's CA is served; once the list in the
// Secret's volume names its serial (rewritten in place, as the kubelet
// does), its next connection is refused while another root certificate
// of the same CA, the hub's and the member's own keep working. Before,
// the spoke rendered no --client-crl-file: a root certificate could not
// be revoked short of rotating the CA.
func TestRevokedRootCertificateRefused(t *testing.T) {
	testenv.SkipIfShort(t, "an etcd process")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := pki.NewCA("ring", now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	peer, client := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	m := member(func(m *etcdfedv1.EtcdMember) {
		m.Spec.DNSName = "localhost"
		m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=https://localhost:" + port(peer), InitialClusterState: etcdfedv1.InitialClusterNew, Token: "t"}
		m.Spec.TLS = etcdfedv1.MemberTLS{SecretName: "main-0-tls", PeerSkipClientSANVerification: true, RevocationList: true}
	})
	leaf, err := ca.IssueMember(pki.MemberRequest{Member: "main-0", DNSNames: []string{"localhost"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	// What the member's Secret volume holds: the hub writes an empty list
	// with the first certificate.
	writeList := memberVolume(t, ca, leaf, dir)
	args := renderArgs(t, m, peer, client, dir)
	if !strings.Contains(strings.Join(args, " "), "--client-crl-file="+filepath.Join(dir, etcdfedv1.RevocationListKey)) {
		t.Errorf("the spoke renders no --client-crl-file for a member with spec.tls.revocationList: %v", args)
	}
	startEtcd(t, filepath.Join(bin, "etcd"), dir, args)

	stolen, err := ca.IssueClientFor(etcdfedv1.EtcdRootUser, pki.DefaultAdminClientValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := ca.IssueClientFor(etcdfedv1.EtcdRootUser, pki.DefaultAdminClientValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	hubLeaf, err := ca.IssueClient(etcdfedv1.EtcdHubUser, now)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := etcdtest.GetAs(ca, stolen, client, "/health")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a root certificate is not served before it is revoked: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	serial, _ := pki.Serial(stolen.CertPEM)
	writeList(serial)
	if err := etcdtest.GetAs(ca, stolen, client, "/health"); err == nil {
		t.Error("a revoked root certificate's new connection was served")
	} else {
		t.Logf("the revoked certificate: %v", err)
	}
	for _, c := range []struct {
		name string
		leaf *pki.Leaf
	}{{"another root certificate", kept}, {"the hub's certificate", hubLeaf}, {"the member's certificate", leaf}} {
		if err := etcdtest.GetAs(ca, c.leaf, client, "/health"); err != nil {
			t.Errorf("%s after the revocation: %v", c.name, err)
		}
	}
	writeList()
	if err := etcdtest.GetAs(ca, stolen, client, "/health"); err != nil {
		t.Errorf("the certificate once its serial left the list: %v", err)
	}
}

// TestRevokedPeerCertificateRefused runs a real etcd with the flags the
// spoke renders for a member whose object asks for the peer revocation
// list too (spec.tls.peerRevocationList), with the peer port for peers
// only: another member's certificate of the ring (carrying the peer name)
// is served on the peer port; once the list in the Secret's volume names
// its serial, as the hub lists a member certificate it replaced, its next
// connection to the peer port is refused while the current certificate
// of that member is served. Before, the spoke rendered no --peer-crl-file:
// a replaced member certificate stayed a peer of the ring until it
// expired.
func TestRevokedPeerCertificateRefused(t *testing.T) {
	testenv.SkipIfShort(t, "an etcd process")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := pki.NewCA("ring", now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	peerName := pki.PeerName("main.etcd.test")
	peer, client := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	m := member(func(m *etcdfedv1.EtcdMember) {
		m.Spec.DNSName = "localhost"
		m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=https://localhost:" + port(peer), InitialClusterState: etcdfedv1.InitialClusterNew, Token: "t"}
		m.Spec.TLS = etcdfedv1.MemberTLS{SecretName: "main-0-tls", PeerSkipClientSANVerification: true, PeerName: peerName, RequirePeerName: true,
			RevocationList: true, PeerRevocationList: true}
	})
	issue := func(member string) *pki.Leaf {
		t.Helper()
		l, err := ca.IssueMember(pki.MemberRequest{Member: member, DNSNames: []string{"localhost", peerName}}, now)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	leaf := issue("main-0")
	writeList := memberVolume(t, ca, leaf, dir)
	args := renderArgs(t, m, peer, client, dir)
	if !strings.Contains(strings.Join(args, " "), "--peer-crl-file="+filepath.Join(dir, etcdfedv1.RevocationListKey)) {
		t.Errorf("the spoke renders no --peer-crl-file for a member with spec.tls.peerRevocationList: %v", args)
	}
	startEtcd(t, filepath.Join(bin, "etcd"), dir, args)

	// main-1's certificate before and after the hub renewed it.
	replaced, current := issue("main-1"), issue("main-1")
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := etcdtest.GetAs(ca, replaced, peer, "/version")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a member certificate is not served on the peer port before it is revoked: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	serial, _ := pki.Serial(replaced.CertPEM)
	writeList(serial)
	if err := etcdtest.GetAs(ca, replaced, peer, "/version"); err == nil {
		t.Error("a revoked member certificate's new connection to the peer port was served")
	} else {
		t.Logf("the revoked member certificate on the peer port: %v", err)
	}
	if err := etcdtest.GetAs(ca, current, peer, "/version"); err != nil {
		t.Errorf("the member's current certificate on the peer port after the revocation: %v", err)
	}
}

// memberVolume writes what a member's Secret volume holds into dir (the
// CA, the member's certificate and key, an empty revocation list) and
// returns what rewrites the list naming serials, as the hub's update of
// the Secret does (a whole new file).
func memberVolume(t *testing.T, ca *pki.CA, leaf *pki.Leaf, dir string) func(serials ...*big.Int) {
	t.Helper()
	writeList := func(serials ...*big.Int) {
		t.Helper()
		der, err := ca.RevocationList(serials, int64(len(serials)+1), time.Now(), pki.RevocationListValidity)
		if err != nil {
			t.Fatal(err)
		}
		etcdtest.ReplaceFile(t, filepath.Join(dir, etcdfedv1.RevocationListKey), der)
	}
	for name, data := range map[string][]byte{pki.KeyCA: ca.CertPEM, pki.KeyCert: leaf.CertPEM, pki.KeyKey: leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeList()
	return writeList
}
