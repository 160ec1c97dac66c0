package etcdcluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestSupersededPeerCertificateRefused: the hub renews a member's
// certificate and deletes another member's Secret (an earlier incarnation
// swept after a replace), through a real apiserver, and the revocation
// list of a pass after the grace, written where a real etcd running with
// --peer-crl-file reads it, names both certificates: each is refused on
// the peer port on its next connection while the renewed member's new
// certificate is served there. Before, the hub kept no record of a member
// certificate it replaced, and etcd ran without --peer-crl-file: an old
// certificate whose key leaked (from a volume, a backup of the Secret, a
// member cluster that was removed) was a peer of the ring until it
// expired, up to a year. Within the grace (the kubelet copying the
// renewed Secret into the member's pod) the old certificate is not listed
// yet, and the spoke renders --peer-crl-file from the object's spec.
func TestSupersededPeerCertificateRefused(t *testing.T) {
	testenv.SkipIfShort(t, "a kube-apiserver and an etcd process")
	ctx := context.Background()
	start := time.Now()
	ca, crl, writeCRL := ringCAWithList(t, start)
	// The flags the spoke renders for a member whose object says so.
	etcd := etcdtest.Start(t, etcdtest.Options{Members: 1, CA: ca, ExtraArgs: []string{"--client-crl-file=" + crl, "--peer-crl-file=" + crl, "--peer-skip-client-san-verification=true"}})
	peer := strings.TrimPrefix(etcd.Members[0].PeerURL, "https://")

	api, r, s := tlsRing(t, start)
	// The apiserver is the hub cluster and every member cluster: the
	// member Secrets live in the ring namespace, the hub's in default.
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ringNamespace}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range s.ec.Status.Members {
		cs := s.cluster(m.Cluster)
		cs.client = api.Client
		issueMemberCert(t, s, ca, m.Cluster, m.Name, start.Add(-300*24*time.Hour))
		sec := cs.secrets[pki.MemberSecretName(cs.members[m.Name].Name)]
		if err := api.Client.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	hubLeaf, err := ca.IssueClient(etcdfedv1.EtcdHubUser, start)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []*corev1.Secret{caSecretOf(s, ca), certSecret(s.ec.Namespace, pki.HubClientSecretName(s.ec), ownerLabels(s.ec), ca.CertPEM, hubLeaf)} {
		if err := api.Client.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	observe := func() {
		t.Helper()
		var err error
		if s.pki, err = r.observePKI(ctx, s.ec); err != nil {
			t.Fatal(err)
		}
		for _, cs := range s.clusters {
			for name := range cs.secrets {
				sec := &corev1.Secret{}
				switch err := api.Client.Get(ctx, client.ObjectKey{Namespace: s.ringNamespace, Name: name}, sec); {
				case err == nil:
					cs.secrets[name] = sec
				case client.IgnoreNotFound(err) == nil:
					delete(cs.secrets, name)
				default:
					t.Fatal(err)
				}
			}
		}
	}
	observe()
	leafOf := func(cluster, member string) *pki.Leaf {
		sec := s.cluster(cluster).secrets[pki.MemberSecretName(s.cluster(cluster).members[member].Name)]
		return &pki.Leaf{CertPEM: sec.Data[pki.KeyCert], KeyPEM: sec.Data[pki.KeyKey]}
	}
	renewed, gone := leafOf("member-1", "main-0"), leafOf("member-2", "main-1")
	for _, l := range []*pki.Leaf{renewed, gone} {
		if err := etcdtest.GetAs(ca, l, peer, "/version"); err != nil {
			t.Fatalf("a member certificate on the peer port before: %v", err)
		}
	}

	// main-0's certificate renewed; main-1's earlier incarnation swept.
	cs := s.cluster("member-1")
	if err := r.writeMemberCert(ctx, s, cs, ca, nil, "main-0", cs.members["main-0"].Name, ""); err != nil {
		t.Fatal(err)
	}
	if err := r.deleteMembers(ctx, s, []memberRef{{cluster: "member-2", member: "main-1", object: s.cluster("member-2").members["main-1"].Name}}); err != nil {
		t.Fatal(err)
	}
	observe()
	fresh := leafOf("member-1", "main-0")
	if pki.Equal(fresh.CertPEM, renewed.CertPEM) {
		t.Fatal("main-0's certificate was not renewed")
	}
	oldSerials := []string{serialOf(t, renewed), serialOf(t, gone)}

	// Within the grace: not listed yet (main-0's pod may present the old
	// certificate until the kubelet copies its Secret).
	s.now = start.Add(peerRevocationGrace / 2)
	for _, serial := range oldSerials {
		if slices.Contains(decideCRL(s).want, serial) {
			t.Errorf("serial %s is listed within the grace", serial)
		}
	}
	// After it: the next pass's list, written where etcd reads it.
	s.now = start.Add(peerRevocationGrace + time.Second)
	r.Now = func() time.Time { return s.now }
	w := decideCRL(s)
	list, err := r.applyCRL(s, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pki.ParseRevocationList(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, serial := range oldSerials {
		if !slices.Contains(pki.ListedSerials(l), serial) {
			t.Errorf("the revocation list after the grace (%v) does not name superseded member certificate %s", pki.ListedSerials(l), serial)
		}
	}
	if len(w.peers) != 2 {
		t.Errorf("the list counts %d superseded member certificates; want 2", len(w.peers))
	}
	writeCRL(list)
	for _, c := range []struct {
		name string
		leaf *pki.Leaf
	}{{"main-0's replaced certificate", renewed}, {"main-1's deleted incarnation's certificate", gone}} {
		if err := etcdtest.GetAs(ca, c.leaf, peer, "/version"); err == nil {
			t.Errorf("%s is still served on the peer port after the list reached the member", c.name)
		} else {
			t.Logf("%s on the peer port: %v", c.name, err)
		}
	}
	if err := etcdtest.GetAs(ca, fresh, peer, "/version"); err != nil {
		t.Errorf("main-0's renewed certificate on the peer port after the list: %v", err)
	}

	// The spoke renders the flag from the object the hub writes.
	if obj := desiredMember(s, &s.ec.Status, &s.ec.Status.Members[0], cs.members["main-0"]); !obj.Spec.TLS.PeerRevocationList {
		t.Error("the member object does not ask for --peer-crl-file")
	}
	// Once a certificate has expired, the record drops it.
	expiry, _ := pki.NotAfter(renewed.CertPEM)
	s.now = expiry.Add(time.Minute)
	if slices.Contains(decideCRL(s).want, oldSerials[0]) {
		t.Error("the list still names main-0's replaced certificate after it expired")
	}
}
