package clients

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// clusterClients hands out real member clusters by name (the
// multicluster manager's role).
type clusterClients map[string]*testenv.Cluster

func (m clusterClients) GetCluster(_ context.Context, name multicluster.ClusterName) (ClusterClient, error) {
	c, ok := m[string(name)]
	if !ok {
		return nil, fmt.Errorf("no cluster %s", name)
	}
	return readerClient{c.Client}, nil
}

type readerClient struct{ c client.Client }

// reconcilePass runs one pass of r over req and returns the EtcdCluster
// as it is after (empty when gone and gone is allowed).
func reconcilePass(t *testing.T, r *Reconciler, hub client.Client, req reconcile.Request, gone bool) *etcdfedv1.EtcdCluster {
	t.Helper()
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &etcdfedv1.EtcdCluster{}
	if err := hub.Get(ctx, req.NamespacedName, got); err != nil && (!gone || !apierrors.IsNotFound(err)) {
		t.Fatal(err)
	}
	return got
}

func (r readerClient) GetClient() client.Client    { return r.c }
func (r readerClient) GetAPIReader() client.Reader { return r.c }

// Against a real hub apiserver and a real member apiserver: a consumer's
// Secret follows a CA rotation (the bundle, then a certificate of the new
// CA, then the new CA alone, each reported in status.clients[].caHash),
// and when the EtcdCluster is deleted the Secret in the member cluster
// goes with it before the EtcdCluster does (finalizer), while the
// hub-cluster one has the EtcdCluster as owner.
func TestConsumerSecretsThroughRotationAndDeletion(t *testing.T) {
	cls := testenv.StartT(t, "hub", "member")
	hub, member := cls[0].Client, cls[1].Client
	ctx := context.Background()
	for _, c := range []client.Client{hub, member} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
			t.Fatal(err)
		}
	}
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"}}
	ec.Spec = etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "main.etcd.test"},
		Clients: []etcdfedv1.ClientSpec{{Name: "app"}, {Name: "kas", Cluster: "member", Namespace: "team-a"}}}
	if err := hub.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	ec.Status.Endpoints = []string{"https://main-0.main.etcd.test:2379"}
	if err := hub.Status().Update(ctx, ec); err != nil {
		t.Fatal(err)
	}
	old, err := pki.NewCA("old", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: pki.CASecretName(ec)}, Type: corev1.SecretTypeTLS,
		Data: (&pki.Authority{Signer: old}).Data()}
	if err := hub.Create(ctx, caSecret); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: hub, Reader: hub, Clusters: clusterClients{"member": cls[1]}}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "main"}}
	pass := func() *etcdfedv1.EtcdCluster { t.Helper(); return reconcilePass(t, r, hub, req, true) }
	secrets := map[string]struct {
		c   client.Client
		key client.ObjectKey
	}{
		"app": {hub, client.ObjectKey{Namespace: "team-a", Name: "main-app-etcd-client"}},
		"kas": {member, client.ObjectKey{Namespace: "team-a", Name: "main-kas-etcd-client"}},
	}
	check := func(step string, a *pki.Authority, got *etcdfedv1.EtcdCluster) {
		t.Helper()
		for name, s := range secrets {
			sec := &corev1.Secret{}
			if err := s.c.Get(ctx, s.key, sec); err != nil {
				t.Fatalf("%s: %s: %v", step, name, err)
			}
			if !pki.Equal(sec.Data[pki.KeyCA], a.Bundle()) || !a.Issuer(sec.Data[pki.KeyCert]).Equal(a.Signer.Cert) {
				t.Errorf("%s: %s's Secret does not hold the bundle and a certificate of the issuing CA", step, name)
			}
		}
		for _, st := range got.Status.Clients {
			if st.CAHash != a.Trust() || !st.Ready {
				t.Errorf("%s: status of %s: ready %v caHash %s, want %s (%s)", step, st.Name, st.Ready, st.CAHash, a.Trust(), st.Message)
			}
		}
	}
	a := &pki.Authority{Signer: old}
	got := pass()
	check("before the rotation", a, got)
	if !controllerutil.ContainsFinalizer(got, FinalizerClients) {
		t.Fatal("no finalizer while a consumer's Secret is in a member cluster")
	}
	app := &corev1.Secret{}
	if err := hub.Get(ctx, secrets["app"].key, app); err != nil {
		t.Fatal(err)
	}
	if refs := app.OwnerReferences; len(refs) != 1 || refs[0].UID != got.UID {
		t.Errorf("the hub-cluster Secret's owners %+v, want the EtcdCluster", refs)
	}

	next, err := pki.NewCA("new", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		to   func(*pki.Authority) *pki.Authority
	}{
		{"AddCA", func(a *pki.Authority) *pki.Authority { return a.BeginRotation(next) }},
		{"SwitchCA", func(a *pki.Authority) *pki.Authority { b, _ := a.SwitchSigner(); return b }},
		{"DropCA", func(a *pki.Authority) *pki.Authority { return a.DropPrevious() }},
	} {
		a = step.to(a)
		if err := hub.Get(ctx, client.ObjectKeyFromObject(caSecret), caSecret); err != nil {
			t.Fatal(err)
		}
		caSecret.Data = a.Data()
		if err := hub.Update(ctx, caSecret); err != nil {
			t.Fatal(err)
		}
		check(step.name, a, pass())
	}

	if err := hub.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if after := pass(); after.Name != "" {
		t.Fatalf("the EtcdCluster is still there after the pass (finalizers %v)", after.Finalizers)
	}
	err = member.Get(ctx, secrets["kas"].key, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the member cluster's consumer Secret outlived its EtcdCluster: %v", err)
	}
}

// TestClientSecretsStayInTheirNamespace, against a real hub apiserver and
// a real member apiserver: a spec writes consumers' Secrets only in its
// own namespace. An entry naming another namespace of the hub cluster, or
// another namespace of a member cluster, or a Secret name the hub keeps
// for its own (another ring's CA Secret, before that ring exists) is
// refused: nothing is written there, the entry's status and ClientsReady
// say why, and the entries that are allowed get their Secrets. With the
// hub's policy allowing other namespaces, the first two are written.
func TestClientSecretsStayInTheirNamespace(t *testing.T) {
	cls := testenv.StartT(t, "hub", "member")
	hub, member := cls[0].Client, cls[1].Client
	ctx := context.Background()
	for _, c := range []client.Client{hub, member} {
		for _, ns := range []string{"team-a", "team-b"} {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"}}
	ec.Spec = etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "main.etcd.test"}, Clients: []etcdfedv1.ClientSpec{
		{Name: "app"},
		{Name: "elsewhere", Namespace: "team-b"},
		{Name: "kas", Cluster: "member", Namespace: "team-b"},
		{Name: "squat", SecretName: "other-ca"},
	}}
	if err := hub.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	ec.Status.Endpoints = []string{"https://main-0.main.etcd.test:2379"}
	if err := hub.Status().Update(ctx, ec); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA("ring", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: pki.CASecretName(ec)}, Data: (&pki.Authority{Signer: ca}).Data()}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: hub, Reader: hub, Clusters: clusterClients{"member": cls[1]}, Policy: Policy{RingNamespace: "etcdfed-system"}}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "main"}}
	pass := func() *etcdfedv1.EtcdCluster { t.Helper(); return reconcilePass(t, r, hub, req, false) }
	exists := func(c client.Client, ns, name string) bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	got := pass()
	if !exists(hub, "team-a", "main-app-etcd-client") {
		t.Error("the entry in the EtcdCluster's own namespace has no Secret")
	}
	for _, w := range []struct {
		c        client.Client
		ns, name string
	}{{hub, "team-b", "main-elsewhere-etcd-client"}, {member, "team-b", "main-kas-etcd-client"}, {hub, "team-a", "other-ca"}} {
		if exists(w.c, w.ns, w.name) {
			t.Errorf("Secret %s/%s written: a spec reached beyond its namespace", w.ns, w.name)
		}
	}
	for _, st := range got.Status.Clients {
		refused := st.Name != "app"
		if refused && (st.Ready || !strings.Contains(st.Message, "refused")) {
			t.Errorf("status of %s: ready %v, message %q; want refused", st.Name, st.Ready, st.Message)
		}
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionClientsReady); c == nil || c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "is not the EtcdCluster's own (team-a)") || !strings.Contains(c.Message, "ends in -ca") {
		t.Errorf("ClientsReady %+v, want False naming the refusals", c)
	}

	r.Policy.OtherNamespaces = true
	pass()
	if !exists(hub, "team-b", "main-elsewhere-etcd-client") || !exists(member, "team-b", "main-kas-etcd-client") {
		t.Error("with --allow-client-secrets-in-other-namespaces the Secrets in team-b are still not written")
	}
	if exists(hub, "team-a", "other-ca") {
		t.Error("the policy let a consumer take another ring's CA Secret name")
	}
}
