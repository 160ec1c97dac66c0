package etcdcluster

import (
	"context"
	"crypto/x509"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

func issueClient(t *testing.T, ca *pki.CA, cn string, at time.Time) *pki.Leaf {
	t.Helper()
	l, err := ca.IssueClient(cn, at)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func serialsOf(t *testing.T, record []byte) []string {
	t.Helper()
	var out []string
	for _, c := range pki.Certificates(record) {
		out = append(out, pki.FormatSerial(c.SerialNumber))
	}
	return out
}

// TestHubCertsRecord is what a member Secret's record of the hub's client
// certificates keeps: the ring's hub certificates (the hub's etcd user,
// signed by one of the ring's CAs, not expired) of what it held and the
// one added, the last to expire first, at most maxRecordedHubCerts; what
// a member cluster put there that is not one (another CA's, under the
// same name; a member's certificate; garbage) is dropped on the hub's
// next write.
func TestHubCertsRecord(t *testing.T) {
	day := 24 * time.Hour
	ca, next, impostor := newCA(t, "ring"), newCA(t, "ring next"), newCA(t, "ring")
	older := issueClient(t, ca, etcdfedv1.EtcdHubUser, now.Add(-5*day))
	current := issueClient(t, ca, etcdfedv1.EtcdHubUser, now)
	ofNext := issueClient(t, next, etcdfedv1.EtcdHubUser, now.Add(-time.Hour))
	expired := issueClient(t, ca, etcdfedv1.EtcdHubUser, now.Add(-8*day))
	foreign := issueClient(t, impostor, etcdfedv1.EtcdHubUser, now)
	consumer := issueClient(t, ca, "root", now)
	member, err := ca.IssueMember(pki.MemberRequest{Member: "main-0", DNSNames: []string{"main-0.main.etcd.test"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	cat := func(ls ...*pki.Leaf) []byte {
		var b []byte
		for _, l := range ls {
			b = append(b, l.CertPEM...)
		}
		return b
	}
	var many []*pki.Leaf
	for i := range maxRecordedHubCerts + 3 {
		many = append(many, issueClient(t, ca, etcdfedv1.EtcdHubUser, now.Add(-time.Duration(i)*time.Hour)))
	}
	ring := []*x509.Certificate{ca.Cert}
	for _, tc := range []struct {
		name      string
		held, add []byte
		cas       []*x509.Certificate
		want      []*pki.Leaf
	}{
		{"the first one", nil, current.CertPEM, ring, []*pki.Leaf{current}},
		{"added beside the one held, the last to expire first", older.CertPEM, current.CertPEM, ring, []*pki.Leaf{current, older}},
		{"added again: the same record", cat(current, older), current.CertPEM, ring, []*pki.Leaf{current, older}},
		{"what is not the ring's hub's is dropped", cat(older, expired, foreign, consumer, member, &pki.Leaf{CertPEM: []byte("-----BEGIN CERTIFICATE-----\nbm90\n-----END CERTIFICATE-----\n")}), current.CertPEM, ring, []*pki.Leaf{current, older}},
		{"the other CA of a rotation counts", cat(older), ofNext.CertPEM, []*x509.Certificate{ca.Cert, next.Cert}, []*pki.Leaf{ofNext, older}},
		{"a CA dropped: its certificates go", cat(older, current), ofNext.CertPEM, []*x509.Certificate{next.Cert}, []*pki.Leaf{ofNext}},
		{"nothing to keep", cat(expired, foreign), nil, ring, nil},
		{"at most maxRecordedHubCerts, the last to expire first", cat(many...), nil, ring, many[:maxRecordedHubCerts]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hubCertsRecord(tc.held, tc.add, tc.cas, now)
			var want []string
			for _, l := range tc.want {
				want = append(want, serialOf(t, l))
			}
			if g := serialsOf(t, got); !slices.Equal(g, want) {
				t.Errorf("record holds %v; want %v", g, want)
			}
			if again := hubCertsRecord(got, tc.add, tc.cas, now); string(again) != string(got) {
				t.Error("writing the record again changes it: every pass would patch every member Secret")
			}
		})
	}
}

// TestOldHubCertsCarried: a hub that took a ring over carries, with the
// members' list, every hub client certificate the records of the
// members' Secrets hold (the union: a member cluster that dropped its
// copy changes nothing), less its own current one and the serials the
// spec names; not a certificate that is not the ring's hub's (a member
// cluster putting another CA's, or a member's certificate, into its
// record revokes nothing); each until it expires, whether or not a list
// of the ring was found, and the stored record keeps them when the list's
// CA has left the ring. A ring the hub founded carries nothing.
func TestOldHubCertsCarried(t *testing.T) {
	day := 24 * time.Hour
	s := ring()
	ca := withTLS(t, s)
	oldCurrent := issueClient(t, ca, etcdfedv1.EtcdHubUser, now.Add(-2*day))
	oldPrevious := issueClient(t, ca, etcdfedv1.EtcdHubUser, now.Add(-6*day))
	spec := issueClient(t, ca, etcdfedv1.EtcdHubUser, now.Add(-3*day))
	foreign := issueClient(t, newCA(t, "ring"), etcdfedv1.EtcdHubUser, now)
	secs := memberCertSecrets(s)
	if len(secs) != 3 {
		t.Fatalf("%d member Secrets; want 3", len(secs))
	}
	own := s.pki.hubClient.Data[pki.KeyCert]
	secs[0].Data[pki.KeyHubCerts] = append(slices.Clone(oldCurrent.CertPEM), oldPrevious.CertPEM...)
	// The compromised member cluster dropped its copy of the old hub's
	// current certificate, and put in its own choice.
	secs[1].Data[pki.KeyHubCerts] = append(append(slices.Clone(oldPrevious.CertPEM), foreign.CertPEM...), secs[1].Data[pki.KeyCert]...)
	secs[2].Data[pki.KeyHubCerts] = append(append(slices.Clone(oldCurrent.CertPEM), spec.CertPEM...), own...)
	if c := decideCarry(s); c.record != nil {
		t.Fatal("a ring the hub founded carries the members' records")
	}

	s.ec.UID = "uid-2"
	s.ec.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverComplete, RingUID: "uid-1"}
	s.ec.Spec.TLS.RevokedCertificates = []string{serialOf(t, spec)}
	w := decideCRL(s)
	want := []string{serialOf(t, oldCurrent), serialOf(t, oldPrevious)}
	if got := w.carry.serials(); !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("carried %v; want %v (the old hub's two, not the spec's, the hub's own, a foreign one or a member's)", got, want)
	}
	for _, serial := range want {
		if !slices.Contains(w.want, serial) {
			t.Errorf("the list does not name the old hub's certificate %s: %v", serial, w.want)
		}
	}
	for _, e := range w.carry.entries {
		c := slices.IndexFunc([]*pki.Leaf{oldCurrent, oldPrevious}, func(l *pki.Leaf) bool { return serialOf(t, l) == e.Serial })
		notAfter, _ := pki.NotAfter([]*pki.Leaf{oldCurrent, oldPrevious}[c].CertPEM)
		if e.Until == nil || !e.Until.Equal(notAfter) {
			t.Errorf("entry %s listed until %v; want its expiry %v", e.Serial, e.Until, notAfter)
		}
	}
	if got := carriedText(w.carry); !strings.Contains(got, "2 the old hub's client certificates") {
		t.Errorf("the event says %q; want the old hub's certificates counted", got)
	}

	// Stored: the record alone counts, and the old hub's certificates
	// stay until they expire, also once the CA of the list carried beside
	// them has left the ring (a rotation: they are refused anyway then).
	s.pki.hubClient.Data[pki.KeyCarried] = carriedRecord(w.carry)
	for _, sec := range secs {
		delete(sec.Data, pki.KeyHubCerts)
	}
	if got := decideCarry(s).serials(); !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("from the stored record, with the members' records gone: %v; want %v", got, want)
	}
	rec, err := pki.ParseCarried(s.pki.hubClient.Data[pki.KeyCarried])
	if err != nil {
		t.Fatal(err)
	}
	if got := liveCarried(rec, []*x509.Certificate{newCA(t, "ring next").Cert}, now, nil); len(got) != 2 {
		t.Errorf("the list's CA gone: %d entries live; want the old hub's 2", len(got))
	}
	previousExpiry, _ := pki.NotAfter(oldPrevious.CertPEM)
	s.now = previousExpiry.Add(time.Minute)
	if got := decideCarry(s).serials(); !slices.Equal(got, []string{serialOf(t, oldCurrent)}) {
		t.Errorf("once the old hub's previous certificate expired: %v; want only %s", got, serialOf(t, oldCurrent))
	}
}

func sorted(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
}

// TestNewHubCertRecordedBeforeUse: a hub client certificate is written
// into the record of every member Secret in sight before the hub client
// Secret holds it, through a real hub apiserver; when no member Secret
// in sight can record it, it is not issued (the hub keeps the one it has
// and retries), and with no member Secret in sight (a new ring) it is.
func TestNewHubCertRecordedBeforeUse(t *testing.T) {
	testenv.SkipIfShort(t, "a kube-apiserver")
	ctx := context.Background()
	start := time.Now()
	ca, err := pki.NewCA("ring", start.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	api, r, s := tlsRing(t, start)
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ringNamespace}}); err != nil {
		t.Fatal(err)
	}
	if err := api.Client.Create(ctx, caSecretOf(s, ca)); err != nil {
		t.Fatal(err)
	}
	for _, m := range s.ec.Status.Members {
		cs := s.cluster(m.Cluster)
		issueMemberCert(t, s, ca, m.Cluster, m.Name, start)
		if err := api.Client.Create(ctx, cs.secrets[pki.MemberSecretName(cs.members[m.Name].Name)]); err != nil {
			t.Fatal(err)
		}
	}
	if s.pki, err = r.observePKI(ctx, s.ec); err != nil {
		t.Fatal(err)
	}
	hubSecret := client.ObjectKey{Namespace: s.ec.Namespace, Name: pki.HubClientSecretName(s.ec)}

	// Every member cluster refuses the write.
	refusing := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return apierrors.NewForbidden(corev1.Resource("secrets"), "x", errors.New("no"))
		}}).Build()
	for _, cs := range s.clusters {
		cs.client = refusing
	}
	if _, err := r.applyPKI(ctx, s, pkiDue(s)); err == nil || !strings.Contains(err.Error(), "not issued") {
		t.Errorf("no member Secret could record it: %v; want the certificate not issued", err)
	}
	if err := api.Client.Get(ctx, hubSecret, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the hub client Secret after a certificate no member recorded: %v; want none written", err)
	}

	// They take it: every one records it before the hub's Secret holds it.
	for _, cs := range s.clusters {
		cs.client = api.Client
	}
	if _, err := r.applyPKI(ctx, s, pkiDue(s)); err != nil {
		t.Fatal(err)
	}
	hc := &corev1.Secret{}
	if err := api.Client.Get(ctx, hubSecret, hc); err != nil {
		t.Fatal(err)
	}
	for _, cs := range s.clusters {
		for name := range cs.secrets {
			sec := &corev1.Secret{}
			if err := api.Client.Get(ctx, client.ObjectKey{Namespace: s.ringNamespace, Name: name}, sec); err != nil {
				t.Fatal(err)
			}
			if !recordedHubCert(sec.Data[pki.KeyHubCerts], hc.Data[pki.KeyCert]) {
				t.Errorf("%s in %s does not record the hub's client certificate", name, cs.name)
			}
			if !pki.Equal(sec.Data[pki.KeyCert], cs.secrets[name].Data[pki.KeyCert]) {
				t.Errorf("%s in %s: the member's certificate changed", name, cs.name)
			}
		}
	}

	// A new ring: no member Secret yet, the certificate is issued.
	for _, cs := range s.clusters {
		cs.secrets = map[string]*corev1.Secret{}
	}
	if err := api.Client.Delete(ctx, hc); err != nil {
		t.Fatal(err)
	}
	if s.pki, err = r.observePKI(ctx, s.ec); err != nil {
		t.Fatal(err)
	}
	if _, err := r.applyPKI(ctx, s, pkiDue(s)); err != nil {
		t.Errorf("no member Secret yet: %v; want the certificate issued", err)
	}
}
