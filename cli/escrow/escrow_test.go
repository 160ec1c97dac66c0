package escrow_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/cli/escrow"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.RunMain(m))
}

// oldHub fills a hub cluster the way a hub leaves it: a ring with its CA
// and snapshot key, a ring whose CA the hub has not created yet, the
// snapshot key of a ring deleted since, and the gossip key.
func oldHub(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"team-a", "etcdfed-system"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"main", "fresh"} {
		ec := &etcdfedv1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.7.3", DNS: etcdfedv1.DNSSpec{Domain: name + ".etcd.test"},
				Storage: etcdfedv1.StorageSpec{Size: ptrTo(resource.MustParse("1Gi"))}},
		}
		if err := c.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := pki.NewCA("etcdfed team-a/main CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main-ca", Labels: map[string]string{
			etcdfedv1.LabelClusterName: "main", etcdfedv1.LabelClusterNamespace: "team-a", etcdfedv1.LabelClusterUID: "uid-of-the-old-hub", etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue}},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM}},
		snapshotKey("main"), snapshotKey("deleted"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"key": bytes.Repeat([]byte{7}, 32)}},
		// Not escrowed: a Secret of the ring the hub reissues.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main-hub-client"}, Data: map[string][]byte{"tls.key": []byte("x")}},
	}
	for _, s := range secrets {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

func snapshotKey(ring string) *corev1.Secret {
	k, _ := backupstore.NewMACKey()
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: backupstore.KeySecretName(ring), Labels: map[string]string{
		etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue, etcdfedv1.LabelClusterName: ring,
		etcdfedv1.LabelClusterNamespace: "team-a", etcdfedv1.LabelComponent: "snapshot-key"}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{backupstore.KeySecretField: k}}
}

// TestExportImportBetweenHubs exports the escrow from one hub cluster,
// opens it with the operator's identity (a wrong one is refused with a
// message saying so) and imports it into a new hub cluster: every Secret
// byte-identical; a second import writes nothing; a Secret the new
// cluster holds with other content stops the import before anything is
// written, unless forced.
func TestExportImportBetweenHubs(t *testing.T) {
	testenv.SkipIfShort(t, "two kube-apiservers")
	ctx := context.Background()
	cs, err := testenv.Start(ctx, testenv.Options{}, "old-hub", "new-hub")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Stop()
		}
	})
	from, to := cs[0].Client, cs[1].Client
	oldHub(t, from)

	b, err := escrow.Collect(ctx, from, "etcdfed-system", cs[0].Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manifest:\n%s", b.Manifest)
	want := []string{"team-a/deleted-snapshot-key", "team-a/main-ca", "team-a/main-snapshot-key", "etcdfed-system/" + etcdfedv1.GossipSecretName}
	var got []string
	for _, it := range b.Manifest.Items {
		got = append(got, it.Namespace+"/"+it.Name)
	}
	if strings.Join(sorted(got), " ") != strings.Join(sorted(want), " ") {
		t.Fatalf("bundle holds %v, want %v", got, want)
	}
	if m := strings.Join(b.Manifest.Missing, "; "); !strings.Contains(m, "team-a/fresh-ca") {
		t.Errorf("manifest's missing %q: want the CA of the ring the hub has not created yet", m)
	}

	operator, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	var sealed bytes.Buffer
	if err := escrow.Seal(&sealed, b, operator.Recipient()); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed.Bytes(), []byte("main-ca")) || !strings.HasPrefix(sealed.String(), "-----BEGIN AGE ENCRYPTED FILE-----") {
		t.Fatalf("bundle not encrypted and armored: %.80q", sealed.String())
	}

	other, _ := age.GenerateX25519Identity()
	if _, err := escrow.Open(bytes.NewReader(sealed.Bytes()), other); !errors.Is(err, escrow.ErrWrongIdentity) {
		t.Fatalf("opened with another identity: %v", err)
	} else if !strings.Contains(err.Error(), "encrypted to other recipients") {
		t.Errorf("message for a wrong identity: %v", err)
	}
	opened, err := escrow.Open(bytes.NewReader(sealed.Bytes()), operator)
	if err != nil {
		t.Fatal(err)
	}

	res, err := escrow.Import(ctx, to, opened, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 4 || len(res.Namespaces) != 2 {
		t.Errorf("first import: %+v", res)
	}
	for _, name := range want {
		ns, n, _ := strings.Cut(name, "/")
		a, b := &corev1.Secret{}, &corev1.Secret{}
		if err := from.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, a); err != nil {
			t.Fatal(err)
		}
		if err := to.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, b); err != nil {
			t.Fatalf("%s not imported: %v", name, err)
		}
		if a.Type != b.Type || len(a.Data) != len(b.Data) {
			t.Errorf("%s: type %s/%s, %d/%d keys", name, a.Type, b.Type, len(a.Data), len(b.Data))
		}
		for k, v := range a.Data {
			if !bytes.Equal(v, b.Data[k]) {
				t.Errorf("%s: key %s differs after import", name, k)
			}
		}
		if _, ok := b.Labels[etcdfedv1.LabelClusterUID]; ok {
			t.Errorf("%s keeps the old EtcdCluster's UID label", name)
		}
	}
	if err := to.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "main-hub-client"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("main-hub-client imported (%v): it is reissued, not escrowed", err)
	}

	if res, err := escrow.Import(ctx, to, opened, false, false); err != nil || len(res.Unchanged) != 4 || len(res.Created)+len(res.Overwritten) != 0 {
		t.Errorf("second import: %+v, %v", res, err)
	}

	// The documented order: import, then `etcdfed hub install`, which
	// keeps the escrowed gossip key (and so every member cluster's).
	if err := install.InstallHub(ctx, install.HubInstallOptions{Hub: cs[1].Config, HubOptions: install.HubOptions{External: true}}); err != nil {
		t.Fatal(err)
	}
	if res, err := escrow.Import(ctx, to, opened, false, false); err != nil || len(res.Unchanged) != 4 {
		t.Errorf("import after hub install: %+v, %v: hub install changed an escrowed Secret", res, err)
	}

	// The new hub made a gossip key of its own, and a CA is gone: the
	// import refuses, and writes nothing (the CA stays absent).
	g := &corev1.Secret{}
	if err := to.Get(ctx, client.ObjectKey{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName}, g); err != nil {
		t.Fatal(err)
	}
	g.Data["key"] = bytes.Repeat([]byte{9}, 32)
	if err := to.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := to.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main-ca"}}); err != nil {
		t.Fatal(err)
	}
	_, err = escrow.Import(ctx, to, opened, false, false)
	var conflict *escrow.ConflictError
	if !errors.As(err, &conflict) || len(conflict.Secrets) != 1 || !strings.Contains(err.Error(), "etcdfed-system/"+etcdfedv1.GossipSecretName) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("import over a different gossip key: %v", err)
	}
	if err := to.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "main-ca"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused import wrote main-ca: %v", err)
	}
	if res, err := escrow.Import(ctx, to, opened, true, false); err != nil || len(res.Overwritten) != 1 || len(res.Created) != 1 {
		t.Fatalf("forced import: %+v, %v", res, err)
	}
	if err := to.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil || !bytes.Equal(g.Data["key"], bytes.Repeat([]byte{7}, 32)) {
		t.Errorf("forced import left the gossip key %x (%v)", g.Data["key"], err)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
