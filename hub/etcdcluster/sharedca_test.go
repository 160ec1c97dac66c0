package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/tenancy"
)

// TestCASharedAcrossNamespacesRefused: two rings in two namespaces whose
// spec.tls.caSecretName hold the same CA. Before, the hub served both: it
// issued the second tenant's certificates (its own root client in
// <name>-hub-client, spec.clients) from a CA the first tenant's ring
// trusts, so the second tenant became root on the first ring. The ring of
// the namespace that came second is refused (PolicyViolation naming the
// first) and gets nothing from the hub, not even the hub's client
// certificate; a ring of the first namespace with the same CA, and the
// second with --allow-shared-ca, are served.
func TestCASharedAcrossNamespacesRefused(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	mgr := startHubManager(t, api)
	ca, err := pki.NewCA("company-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"victim", "tenant"} {
		if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "company-ca"}, Data: map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM}}
		if err := api.Client.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	r := &Reconciler{Manager: mgr, Registry: noMemberClusters{}, PassTimeout: 30 * time.Second, ClusterReadTimeout: 3 * time.Second}
	create := func(ns, name string) *etcdfedv1.EtcdCluster {
		t.Helper()
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: *ring().ec.Spec.DeepCopy()}
		ec.Spec.DNS.Domain = name + "." + ns + ".etcd.test"
		ec.Spec.TLS = etcdfedv1.TLSSpec{Mode: etcdfedv1.TLSEnabled, CASecretName: "company-ca"}
		if err := api.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
		return ec
	}
	// pass runs one pass once the hub's cache has seen what came before.
	pass := func(ec *etcdfedv1.EtcdCluster) *etcdfedv1.EtcdCluster {
		t.Helper()
		if _, err := r.Reconcile(ctx, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ec)}}); err != nil {
			t.Fatal(err)
		}
		got := &etcdfedv1.EtcdCluster{}
		if err := api.Client.Get(ctx, client.ObjectKeyFromObject(ec), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	refusal := func(ec *etcdfedv1.EtcdCluster) string {
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue && c.Reason == etcdfedv1.ReasonPolicyViolation {
			return c.Message
		}
		return ""
	}

	first := pass(create("victim", "main"))
	if first.Status.CAFingerprint != pki.KeyFingerprint(ca.Cert) {
		t.Fatalf("status.caFingerprint %q, want the CA key's %q (conditions %+v)", first.Status.CAFingerprint, pki.KeyFingerprint(ca.Cert), first.Status.Conditions)
	}
	if msg := refusal(first); msg != "" {
		t.Fatalf("the first ring was refused: %s", msg)
	}
	// The first ring has formed (as the hub records once etcd has), so it
	// comes first whatever the creation times (one-second resolution).
	before := first.DeepCopy()
	first.Status.ClusterID = "c0ffee"
	if err := api.Client.Status().Patch(ctx, first, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	waitCached(t, mgr, first)

	second := pass(create("tenant", "main"))
	if msg := refusal(second); !strings.Contains(msg, "EtcdCluster victim/main of another namespace") || !strings.Contains(msg, "--allow-shared-ca") {
		t.Fatalf("the second namespace's ring was not refused for the shared CA: %q (conditions %+v)", msg, second.Status.Conditions)
	}
	err = api.Client.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: pki.HubClientSecretName(second)}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the refused ring got the hub's client certificate from the shared CA: %v", err)
	}

	if msg := refusal(pass(create("victim", "other"))); msg != "" {
		t.Fatalf("a ring of the first namespace with the same CA was refused: %s", msg)
	}
	r.Policy = tenancy.Policy{SharedCA: true}
	if msg := refusal(pass(second)); msg != "" {
		t.Fatalf("with --allow-shared-ca the second ring is still refused: %s", msg)
	}
}

// waitCached waits until the hub's cache holds ec's status.caFingerprint
// and clusterID.
func waitCached(t *testing.T, mgr mcmanager.Manager, ec *etcdfedv1.EtcdCluster) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list etcdfedv1.EtcdClusterList
		if err := mgr.GetLocalManager().GetClient().List(context.Background(), &list, client.MatchingFields{indexCAFingerprint: ec.Status.CAFingerprint}); err == nil {
			for _, o := range list.Items {
				if o.UID == ec.UID && o.Status.ClusterID == ec.Status.ClusterID {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hub's cache never showed %s/%s's CA fingerprint", ec.Namespace, ec.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
