package multicluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// forgedPending: the member cluster hosting the victim's first member
// (and one of the attacker's), compromised, says Pending where the hub
// would move a member on its word: on the victim's member it hosts, a
// ready voter, and on an EtcdMember it creates for a victim member it
// does not host, both held past the victim's member grace (30 s for the
// test). The hub moves a member only when its own cluster reports it
// Pending while the hub's record says it is down, and another ready voter
// runs the same spec (hub/planner/pending.go): the victim's ring records
// no cluster that does not start members (status.notStarting) and keeps
// its members where they are.
func forgedPending(ctx context.Context, t *testing.T, topo *Topology, victim *ManagedEtcd) {
	t.Helper()
	must := fatalOnError(t)
	hub := topo.Hub
	ec, err := victim.Get(ctx, hub)
	must(err)
	a := ec.Status.Members[0]
	var b etcdfedv1.MemberStatus
	for _, m := range ec.Status.Members {
		if m.Cluster != a.Cluster {
			b = m
			break
		}
	}
	if b.Name == "" {
		t.Fatalf("%s/%s has every member in %s: no member the cluster does not host", victim.Namespace, victim.Name, a.Cluster)
	}
	c, d := memberCluster(t, topo, a.Cluster), memberCluster(t, topo, b.Cluster)
	objA, objB := &etcdfedv1.EtcdMember{}, &etcdfedv1.EtcdMember{}
	must(c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: victim.ObjectName(a.Name)}, objA))
	must(d.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: victim.ObjectName(b.Name)}, objB))
	before := memberNames(ec)

	grace := ec.Spec.FailurePolicy.MemberGracePeriod
	setGrace := func(g *metav1.Duration) {
		t.Helper()
		cur, err := victim.Get(ctx, hub)
		must(err)
		patched := cur.DeepCopy()
		patched.Spec.FailurePolicy.MemberGracePeriod = g
		must(hub.Client.Patch(ctx, patched, client.MergeFrom(cur)))
	}
	short := metav1.Duration{Duration: 30 * time.Second}
	setGrace(&short)
	defer setGrace(grace)

	// The EtcdMember for b, in a's cluster: the victim's labels and b's
	// spec, under a name of its own.
	forged := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Namespace: objB.Namespace, Name: objB.Name + "-forged", Labels: maps.Clone(objB.Labels)},
		Spec:       *objB.Spec.DeepCopy(),
	}
	must(c.Client.Create(ctx, forged))
	defer func() {
		if err := c.Client.Delete(ctx, forged); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete the forged EtcdMember: %v", err)
		}
		if err := WaitForGone(ctx, c, forged, 2*time.Minute); err != nil {
			t.Errorf("the forged EtcdMember in %s: %v", c.Name, err)
		}
	}()
	pending := func(key client.ObjectKey) error {
		cur := &etcdfedv1.EtcdMember{}
		if err := c.Client.Get(ctx, key, cur); err != nil {
			return err
		}
		patched := cur.DeepCopy()
		patched.Status.ObservedGeneration = cur.Generation
		meta.SetStatusCondition(&patched.Status.Conditions, metav1.Condition{Type: etcdfedv1.ConditionPodReady, Status: metav1.ConditionFalse,
			Reason: etcdfedv1.ReasonPodPending, Message: "0/3 nodes are available (said by a compromised member cluster)", ObservedGeneration: cur.Generation})
		return c.Client.Status().Patch(ctx, patched, client.MergeFrom(cur))
	}
	// The spoke of a's cluster writes its own view back: the forgery is
	// written again every second, past the grace, and the forged object
	// made again whenever it is gone (the hub deletes an object of the
	// ring in a cluster its member does not live in).
	end := time.Now().Add(short.Duration + 45*time.Second)
	written := map[string]int{}
	recreated := 0
	var ops []string
	for time.Now().Before(end) {
		for _, key := range []client.ObjectKey{client.ObjectKeyFromObject(objA), client.ObjectKeyFromObject(forged)} {
			switch err := pending(key); {
			case err == nil:
				written[key.Name]++
			case apierrors.IsNotFound(err) && key.Name == forged.Name:
				again := &etcdfedv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Namespace: forged.Namespace, Name: forged.Name, Labels: forged.Labels}, Spec: forged.Spec}
				if err := c.Client.Create(ctx, again); err == nil {
					recreated++
				} else if !apierrors.IsAlreadyExists(err) {
					t.Logf("make the forged EtcdMember again in %s: %v", c.Name, err)
				}
			case apierrors.IsConflict(err):
			default:
				t.Logf("forge Pending on %s in %s: %v", key.Name, c.Name, err)
			}
		}
		got, err := victim.Get(ctx, hub)
		must(err)
		if len(got.Status.NotStarting) > 0 {
			t.Fatalf("%s/%s records member clusters that do not start members on a member cluster's forged word: %+v", victim.Namespace, victim.Name, got.Status.NotStarting)
		}
		if now := memberNames(got); !slices.Equal(now, before) {
			t.Fatalf("%s/%s's members moved on a member cluster's forged Pending: %v, were %v", victim.Namespace, victim.Name, now, before)
		}
		if op := got.Status.Operation; op != nil && !slices.Contains(ops, string(op.Type)+" "+op.Member) {
			ops = append(ops, string(op.Type)+" "+op.Member)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	if written[objA.Name] == 0 {
		t.Errorf("Pending was never written on %s in %s", objA.Name, c.Name)
	}
	t.Logf("%s said Pending for %s (a ready voter it hosts, %d times) and for %s (hosted by %s, %d times on an EtcdMember it made %d times more after it was deleted) for %s past a grace of %s: no member moved, no cluster recorded as not starting members; operations seen: %v",
		c.Name, a.Name, written[objA.Name], b.Name, b.Cluster, written[forged.Name], recreated, 45*time.Second, short.Duration, ops)
}

// tenantTriesHubCredentials: a namespace-scoped identity of the attacker
// (a ServiceAccount with every right on EtcdClusters and Secrets of its
// namespace, and none elsewhere) reaches for the hub's credentials: the
// Secrets holding the hub's tokens for the member clusters, a token of
// the hub's own ServiceAccount, the hub's client certificate on the
// victim's ring; then has the hub write over them (spec.clients entries
// naming the hub's namespace, a member cluster's etcdfed-hub-credential,
// a Secret named as the hub's own) and issue a certificate of the hub's
// etcd user. The apiserver refuses the first (Forbidden), the hub the
// second (status.clients says "refused"), the CRD the third; nothing is
// written over any of them.
func tenantTriesHubCredentials(ctx context.Context, t *testing.T, topo *Topology, ns, victimNS, victimName, ring string) {
	t.Helper()
	must := fatalOnError(t)
	hub := topo.Hub
	hubNS := topo.HubNamespace
	if hubNS == "" {
		t.Skip("the topology does not say where the hub keeps its credentials")
	}
	tc, tcs := tenantIdentity(ctx, t, hub, ns)
	registration := topo.Members[0].Name
	regBefore := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: registration}, regBefore))

	// Its own namespace, to show the identity works.
	if err := tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-credentials"}, &corev1.Secret{}); err != nil {
		t.Fatalf("the tenant reads a Secret of its own namespace: %v", err)
	}
	for _, c := range []struct {
		what string
		try  func() error
	}{
		{"the hub's token for " + registration + " (Secret " + hubNS + "/" + registration + ")", func() error {
			return tc.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: registration}, &corev1.Secret{})
		}},
		{"every Secret of the hub's namespace", func() error { return tc.List(ctx, &corev1.SecretList{}, client.InNamespace(hubNS)) }},
		{"a token of the hub's ServiceAccount", func() error {
			_, err := tcs.CoreV1().ServiceAccounts(hubNS).CreateToken(ctx, "etcdfed-hub", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}},
		{"the hub's client certificate on " + victimNS + "/" + victimName, func() error {
			return tc.Get(ctx, client.ObjectKey{Namespace: victimNS, Name: pki.HubClientSecretName(&etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: victimName}})}, &corev1.Secret{})
		}},
	} {
		switch err := c.try(); {
		case apierrors.IsForbidden(err):
			t.Logf("%s: forbidden", c.what)
		default:
			t.Errorf("%s: %v, want Forbidden", c.what, err)
		}
	}

	// Through the hub: consumers' Secrets written over the hub's.
	key := client.ObjectKey{Namespace: ns, Name: ring}
	ownHubClient := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ring + "-hub-client"}, ownHubClient))
	entries := []struct {
		spec etcdfedv1.ClientSpec
		says string
	}{
		{etcdfedv1.ClientSpec{Name: "hub-token", Namespace: hubNS, SecretName: registration}, "is not the EtcdCluster's own"},
		{etcdfedv1.ClientSpec{Name: "hub-anchor", Cluster: topo.Members[0].Name, Namespace: etcdfedv1.DefaultRingNamespace, SecretName: etcdfedv1.HubCredentialAnchor}, "is not the EtcdCluster's own"},
		{etcdfedv1.ClientSpec{Name: "hub-client", SecretName: ring + "-hub-client"}, "ends in -hub-client"},
	}
	setClients := func(clients []etcdfedv1.ClientSpec) error {
		cur := &etcdfedv1.EtcdCluster{}
		if err := tc.Get(ctx, key, cur); err != nil {
			return err
		}
		patched := cur.DeepCopy()
		patched.Spec.Clients = clients
		return tc.Patch(ctx, patched, client.MergeFrom(cur))
	}
	var specs []etcdfedv1.ClientSpec
	for _, e := range entries {
		specs = append(specs, e.spec)
	}
	must(setClients(specs))
	defer func() { must(setClients(nil)) }()
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: &ManagedEtcd{Namespace: ns, Name: ring}, What: "spec.clients aimed at the hub's credentials refused", Timeout: 2 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		for _, e := range entries {
			i := slices.IndexFunc(ec.Status.Clients, func(s etcdfedv1.ClientStatus) bool { return s.Name == e.spec.Name })
			if i < 0 || ec.Status.Clients[i].Ready || !strings.Contains(ec.Status.Clients[i].Message, "refused") || !strings.Contains(ec.Status.Clients[i].Message, e.says) {
				return fmt.Sprintf("status.clients %+v", ec.Status.Clients)
			}
		}
		return ""
	}})
	if err != nil {
		t.Error(err)
	} else {
		ec := &etcdfedv1.EtcdCluster{}
		must(hub.Client.Get(ctx, key, ec))
		for _, s := range ec.Status.Clients {
			t.Logf("spec.clients %s: %s", s.Name, s.Message)
		}
	}
	// A certificate of the hub's etcd user (etcd's root role): the CRD.
	if err := setClients([]etcdfedv1.ClientSpec{{Name: "hub-twin", CommonName: etcdfedv1.EtcdHubUser}}); err == nil || !strings.Contains(err.Error(), "etcdfed-hub") {
		t.Errorf("a consumer with the hub's etcd user as its common name: %v, want the CRD's refusal", err)
	} else {
		t.Logf("a consumer named as the hub's etcd user: refused at admission: %v", err)
	}

	// Nothing written over the hub's credentials.
	regAfter := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: registration}, regAfter))
	if _, ok := regAfter.Data[pki.KeyCert]; ok || !maps.EqualFunc(regBefore.Labels, regAfter.Labels, func(a, b string) bool { return a == b }) {
		t.Errorf("the hub's registration Secret %s/%s was written as a consumer's: labels %v, keys %v", hubNS, registration, regAfter.Labels, slices.Sorted(maps.Keys(regAfter.Data)))
	}
	anchor := &corev1.Secret{}
	switch err := topo.Members[0].Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.HubCredentialAnchor}, anchor); {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case len(anchor.Data[pki.KeyCert]) > 0:
		t.Errorf("%s in %s holds a consumer's certificate", etcdfedv1.HubCredentialAnchor, topo.Members[0].Name)
	}
	after := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ring + "-hub-client"}, after))
	if cn := pki.CommonName(after.Data[pki.KeyCert]); cn != etcdfedv1.EtcdHubUser || after.Labels[etcdfedv1.LabelClusterUID] != ownHubClient.Labels[etcdfedv1.LabelClusterUID] {
		t.Errorf("%s/%s-hub-client holds a certificate of %q (labels %v): written as a consumer's", ns, ring, cn, after.Labels)
	}
}

// tenantIdentity is a client of the hub cluster acting as the
// ServiceAccount tenant of ns, with every right on EtcdClusters and
// Secrets of ns and none elsewhere (the admin impersonates it: RBAC
// decides for it as for the tenant's own token).
func tenantIdentity(ctx context.Context, t *testing.T, hub *Cluster, ns string) (client.Client, kubernetes.Interface) {
	t.Helper()
	must := fatalOnError(t)
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{etcdfedv1.GroupVersion.Group}, Resources: []string{"etcdclusters"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}},
	} {
		if err := hub.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	rc := rest.CopyConfig(hub.REST)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":tenant",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	tc, err := client.New(rc, client.Options{Scheme: testenv.Scheme()})
	must(err)
	tcs, err := kubernetes.NewForConfig(rc)
	must(err)
	return tc, tcs
}
