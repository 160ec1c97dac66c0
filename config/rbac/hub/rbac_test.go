package hubrbac_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	hubrbac "github.com/etcdfed/etcdfed/config/rbac/hub"
	hubmemberrbac "github.com/etcdfed/etcdfed/config/rbac/hub-member"
	"github.com/etcdfed/etcdfed/config/rbac/manifest"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// saUser is a ServiceAccount's user as the apiserver authenticates it, so
// the manifests' bindings apply unchanged.
func saUser(ns, name string) envtest.User {
	return envtest.User{
		Name:   "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
}

// install creates config/rbac/hub for a hub in hubNS, and the sample's
// RoleBinding (config/samples/hub_access.yaml) in each of ecNamespaces.
func install(t *testing.T, c *testenv.Cluster, hubNS string, ecNamespaces ...string) {
	t.Helper()
	ctx := context.Background()
	objs, err := hubrbac.Objects(hubNS)
	if err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "hub_access.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range ecNamespaces {
		access, err := manifest.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		rb := access[0].(*rbacv1.RoleBinding)
		rb.Namespace = ns
		rb.RoleRef.Name = hubrbac.EtcdClusterNamespaceRole + "-" + hubNS
		rb.Subjects[0].Namespace = hubNS
		objs = append(objs, rb)
	}
	for _, o := range objs {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), o) })
	}
}

// TestHubPermissions: in the hub cluster the hub reads EtcdClusters and
// Secrets in its own namespace, writes EtcdCluster status and finalizers, keeps
// Secrets and events only in namespaces bound to it, and its Lease in its
// own namespace, reviews tokens; nothing else (no SubjectAccessReview).
func TestHubPermissions(t *testing.T) {
	cl := testenv.Shared(t, "hub-rbac")
	ctx := context.Background()
	hubNS := testenv.NamespaceT(t, cl, "hub")
	ecNS := testenv.NamespaceT(t, cl, "ec")
	other := testenv.NamespaceT(t, cl, "other")
	install(t, cl, hubNS, ecNS)
	user, err := cl.Env.AddUser(saUser(hubNS, hubrbac.ServiceAccountName), nil)
	if err != nil {
		t.Fatal(err)
	}
	as, err := client.NewWithWatch(user.Config(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want success", what, err)
		}
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", what, err)
		}
	}
	watch := func(what string, list client.ObjectList, opts ...client.ListOption) {
		t.Helper()
		w, err := as.Watch(ctx, list, opts...)
		if err != nil {
			t.Errorf("%s: %v, want success", what, err)
			return
		}
		w.Stop()
	}

	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ecNS},
		Spec: etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.test"}}}
	forbidden("create an EtcdCluster", as.Create(ctx, ec))
	if err := cl.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	ok("list EtcdClusters in all namespaces", as.List(ctx, &etcdfedv1.EtcdClusterList{}))
	watch("watch EtcdClusters in all namespaces", &etcdfedv1.EtcdClusterList{})
	ok("get the EtcdCluster", as.Get(ctx, client.ObjectKeyFromObject(ec), ec))
	ec.Finalizers = append(ec.Finalizers, "etcdfed.dev/members")
	ok("add a finalizer", as.Update(ctx, ec))
	before := ec.DeepCopy()
	ec.Status.Leader = "main-0"
	ok("patch status", as.Status().Patch(ctx, ec, client.MergeFrom(before)))
	forbidden("delete the EtcdCluster", as.Delete(ctx, ec))

	forbidden("list Secrets in all namespaces", as.List(ctx, &corev1.SecretList{}))
	ok("list Secrets in the hub's namespace (kubeconfigs)", as.List(ctx, &corev1.SecretList{}, client.InNamespace(hubNS)))
	forbidden("list Secrets in the EtcdCluster's namespace", as.List(ctx, &corev1.SecretList{}, client.InNamespace(ecNS)))
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main-ca", Namespace: ecNS}, Data: map[string][]byte{"tls.crt": []byte("x")}}
	ok("create a Secret in the EtcdCluster's namespace", as.Create(ctx, ca))
	ok("get a Secret in the EtcdCluster's namespace", as.Get(ctx, client.ObjectKeyFromObject(ca), &corev1.Secret{}))
	ca.Data["tls.key"] = []byte("y")
	ok("update a Secret in the EtcdCluster's namespace", as.Update(ctx, ca))
	forbidden("delete a Secret in the EtcdCluster's namespace", as.Delete(ctx, ca))
	forbidden("create a Secret in an unbound namespace", as.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: other}}))
	// The gossip key: created once, then updated. The registration
	// Secrets (kubeconfigs) are updated too: the hub renews the token
	// `etcdfed cluster join` stored there (hub/registration). The hub
	// deletes no Secret of its namespace.
	gossip := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcdfed-gossip", Namespace: hubNS}, Data: map[string][]byte{"key": []byte("k")}}
	ok("create the gossip key Secret in the hub's namespace", as.Create(ctx, gossip))
	gossip.Data["accept"] = []byte("a")
	ok("update the gossip key Secret", as.Update(ctx, gossip))
	kubeconfig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "member-x", Namespace: hubNS, Labels: map[string]string{registrationLabel: "true"}}, Data: map[string][]byte{"kubeconfig": []byte("x")}}
	if err := cl.Client.Create(ctx, kubeconfig); err != nil {
		t.Fatal(err)
	}
	kubeconfig.Data["kubeconfig"] = []byte("y")
	ok("update a registration Secret in the hub's namespace (its renewed token)", as.Update(ctx, kubeconfig))
	forbidden("delete a Secret in the hub's namespace", as.Delete(ctx, kubeconfig))
	ok("create an event in the EtcdCluster's namespace", as.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "main.1", Namespace: ecNS},
		InvolvedObject: corev1.ObjectReference{Kind: "EtcdCluster", Namespace: ecNS, Name: "main"}, Reason: "Test", Type: corev1.EventTypeNormal}))
	forbidden("create an event in an unbound namespace", as.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "x.1", Namespace: other},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: other, Name: "x"}, Reason: "Test", Type: corev1.EventTypeNormal}))

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "etcdfed-hub", Namespace: hubNS},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("hub-0")}}
	ok("create the leader-election Lease", as.Create(ctx, lease))
	lease.Spec.HolderIdentity = ptr.To("hub-1")
	ok("update the leader-election Lease", as.Update(ctx, lease))
	forbidden("create a Lease in another namespace", as.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ecNS}}))

	// /metrics: the hub checks a caller's token (TokenReview) and looks
	// it up in --metrics-readers. Issue 37: it asked the apiserver whether
	// the caller may GET /metrics (a SubjectAccessReview), and the
	// cluster-wide create that needs let whoever holds its credential ask
	// what anyone may do anywhere.
	ok("create a TokenReview", as.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "x"}}))
	forbidden("create a SubjectAccessReview (what may someone do?)", as.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "someone", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: ecNS}}}))
	forbidden("create a LocalSubjectAccessReview in an EtcdCluster namespace", as.Create(ctx, &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: ecNS},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "someone", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: ecNS}}}))

	forbidden("list pods", as.List(ctx, &corev1.PodList{}))
	forbidden("create a pod in the EtcdCluster's namespace", as.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ecNS},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}))
	forbidden("list EtcdMembers", as.List(ctx, &etcdfedv1.EtcdMemberList{}))
	forbidden("list ConfigMaps", as.List(ctx, &corev1.ConfigMapList{}))
	forbidden("list nodes", as.List(ctx, &corev1.NodeList{}))
}

// registrationLabel marks a registration Secret (hub/registry).
const registrationLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"

// TestHubAdmissionPolicies (issue 37, low: RBAC leftovers): what RBAC
// cannot narrow, admission_policy.yaml does. In its own namespace the hub
// updates registration Secrets (and cannot take the label off one), the
// gossip key and the Secrets it made for a ring, and no other Secret.
// Before, the Role let it rewrite every Secret of its namespace.
func TestHubAdmissionPolicies(t *testing.T) {
	cl := testenv.Shared(t, "hub-rbac")
	ctx := context.Background()
	hubNS := testenv.NamespaceT(t, cl, "hub")
	ecNS := testenv.NamespaceT(t, cl, "ec")
	install(t, cl, hubNS, ecNS)
	user, err := cl.Env.AddUser(saUser(hubNS, hubrbac.ServiceAccountName), nil)
	if err != nil {
		t.Fatal(err)
	}
	as, err := client.New(user.Config(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	secret := func(name string, labels map[string]string) *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNS, Labels: labels}, Data: map[string][]byte{"k": []byte("v")}}
		if err := cl.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	update := func(s *corev1.Secret, change func(*corev1.Secret)) error {
		cur := &corev1.Secret{}
		if err := as.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		cur.Data["k"] = []byte(time.Now().String())
		if change != nil {
			change(cur)
		}
		return as.Update(ctx, cur)
	}
	other := secret("webhook-cert", nil)
	// The policy takes effect once the apiserver has loaded it.
	g := NewWithT(t)
	g.Eventually(func() error { return update(other, nil) }, 30*time.Second, 200*time.Millisecond).Should(
		WithTransform(apierrors.IsForbidden, BeTrue()), "update of a Secret of the hub's namespace that is not the hub's")
	if err := update(other, func(s *corev1.Secret) { s.Labels = map[string]string{registrationLabel: "true"} }); !apierrors.IsForbidden(err) {
		t.Errorf("labelling another Secret a registration: %v, want Forbidden", err)
	}
	reg := secret("member-x", map[string]string{registrationLabel: "true"})
	if err := update(reg, nil); err != nil {
		t.Errorf("update of a registration Secret (its renewed token): %v", err)
	}
	if err := update(reg, func(s *corev1.Secret) { delete(s.Labels, registrationLabel) }); !apierrors.IsForbidden(err) {
		t.Errorf("taking the registration label off: %v, want Forbidden", err)
	}
	if err := update(secret("etcdfed-gossip", nil), nil); err != nil {
		t.Errorf("update of the gossip key: %v", err)
	}
	ring := secret("main-ca", map[string]string{"etcdfed.dev/cluster-uid": "uid-1"})
	if err := update(ring, nil); err != nil {
		t.Errorf("update of a ring's CA Secret in the hub's namespace: %v", err)
	}
	if err := update(ring, func(s *corev1.Secret) { s.Labels["etcdfed.dev/cluster-uid"] = "uid-2" }); !apierrors.IsForbidden(err) {
		t.Errorf("moving a ring's Secret to another ring: %v, want Forbidden", err)
	}
	// In an EtcdCluster's namespace the Role of that namespace decides.
	ecSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main-ca", Namespace: ecNS}, Data: map[string][]byte{"k": []byte("v")}}
	if err := as.Create(ctx, ecSecret); err != nil {
		t.Fatal(err)
	}
	ecSecret.Data["k"] = []byte("w")
	if err := as.Update(ctx, ecSecret); err != nil {
		t.Errorf("update of a Secret in an EtcdCluster's namespace: %v", err)
	}
}

// TestHubRunsWithItsRBAC runs the real hub binary with nothing but the
// permissions of config/rbac/hub in a hub apiserver and of
// config/rbac/hub-member in a member apiserver (registered the way
// hack/kind/up.sh registers it: a kubeconfig Secret), with a stand-in
// spoke that reports a zone (with the time it observed it, as a spoke
// does once its cluster has nodes) and renews its Lease. The hub must take an
// EtcdCluster through its first steps (finalizer, CA and client Secrets,
// the spoke's gossip spec, the member's object, certificate and DNS zone,
// status, leader election) and through deletion (every object of the
// cluster deleted in the member cluster, finalizer removed) without one
// "forbidden" in its log.
func TestHubRunsWithItsRBAC(t *testing.T) {
	testenv.SkipIfShort(t, "kube-apiserver and a hub build")
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(90 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	cs := testenv.StartT(t, "hub", "member-1")
	hubCl, member := cs[0], cs[1]
	hubNS := testenv.NamespaceT(t, hubCl, "hub")
	ecNS := testenv.NamespaceT(t, hubCl, "ec")
	ring := testenv.NamespaceT(t, member, "ring")
	install(t, hubCl, hubNS, ecNS)

	// The member cluster: the hub's role, a kubeconfig with only it.
	objs, err := hubmemberrbac.Objects(ring)
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		g.Expect(member.Client.Create(ctx, o)).To(Succeed())
	}
	memberUser, err := member.Env.AddUser(saUser(ring, hubmemberrbac.ServiceAccountName), nil)
	g.Expect(err).NotTo(HaveOccurred())
	memberKubeconfig, err := memberUser.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubCl.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "member-1", Namespace: hubNS, Labels: map[string]string{"sigs.k8s.io/multicluster-runtime-kubeconfig": "true"}},
		Data:       map[string][]byte{"kubeconfig": memberKubeconfig},
	})).To(Succeed())

	// A stand-in spoke: its EtcdSpoke with a zone and a DNS address, its
	// Lease renewed every second, and the address of every EtcdMember it
	// is given reported in the member's status.
	sp := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.SpokeObjectName, Namespace: ring}}
	g.Expect(member.Client.Create(ctx, sp)).To(Succeed())
	// Two zones: the hub reads the cluster's Nodes and node Leases for the
	// zone witness in every pass, which its RBAC must allow.
	sp.Status = etcdfedv1.EtcdSpokeStatus{Zones: []string{"zone-1", "zone-2"}, DNSAddresses: []string{"192.0.2.53:5353"}, GossipAddress: "192.0.2.54:7946",
		ObservedAt: &metav1.Time{Time: time.Now()}}
	g.Expect(member.Client.Status().Update(ctx, sp)).To(Succeed())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.SpokeObjectName, Namespace: ring},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("spoke-0"), LeaseDurationSeconds: ptr.To[int32](10), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	g.Expect(member.Client.Create(ctx, lease)).To(Succeed())
	renewCtx, stopRenew := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for renewCtx.Err() == nil {
			l := &coordinationv1.Lease{}
			if member.Client.Get(renewCtx, client.ObjectKeyFromObject(lease), l) == nil {
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				_ = member.Client.Update(renewCtx, l)
			}
			var ms etcdfedv1.EtcdMemberList
			if member.Client.List(renewCtx, &ms, client.InNamespace(ring)) == nil {
				for i := range ms.Items {
					m := &ms.Items[i]
					if m.Status.Address != "" {
						continue
					}
					m.Status.Incarnation = m.Spec.Incarnation
					m.Status.Address = "192.0.2.10"
					m.Status.PeerURL = "https://" + m.Spec.DNSName + ":30380"
					m.Status.ClientURL = "https://" + m.Spec.DNSName + ":30379"
					_ = member.Client.Status().Update(renewCtx, m)
				}
			}
			select {
			case <-renewCtx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() { stopRenew(); wg.Wait() })

	// The hub, as its ServiceAccount.
	hubUser, err := hubCl.Env.AddUser(saUser(hubNS, hubrbac.ServiceAccountName), nil)
	g.Expect(err).NotTo(HaveOccurred())
	hubKubeconfig, err := hubUser.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "kubeconfig"), hubKubeconfig, 0o600)).To(Succeed())
	if err := testenv.BuildOurs(dir, "hub"); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	hub := exec.Command(filepath.Join(dir, "hub"),
		"--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--namespace", hubNS, "--ring-namespace", ring,
		"--leader-elect=true", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--zap-log-level=debug")
	hub.Stdout, hub.Stderr = &log, &log
	g.Expect(testenv.StartProcess(hub)).To(Succeed())
	t.Cleanup(func() {
		_ = hub.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = hub.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = hub.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("hub log:\n%s", log.String())
		}
	})

	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ecNS},
		Spec: etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.test"},
			Expose: etcdfedv1.ExposeSpec{Type: etcdfedv1.ExposeNodePort}}}
	g.Expect(hubCl.Client.Create(ctx, ec)).To(Succeed())
	memberObj := etcdfedv1.MemberObjectName(ecNS, "main", "main-0")

	g.Eventually(func(g Gomega) {
		l := &coordinationv1.Lease{}
		g.Expect(hubCl.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: "etcdfed-hub"}, l)).To(Succeed(), "leader election")
		got := &etcdfedv1.EtcdCluster{}
		g.Expect(hubCl.Client.Get(ctx, client.ObjectKeyFromObject(ec), got)).To(Succeed())
		g.Expect(got.Finalizers).To(ContainElement("etcdfed.dev/members"))
		g.Expect(got.Status.Members).NotTo(BeEmpty(), "status written")
		g.Expect(hubCl.Client.Get(ctx, client.ObjectKey{Namespace: ecNS, Name: "main-ca"}, &corev1.Secret{})).To(Succeed())
		g.Expect(hubCl.Client.Get(ctx, client.ObjectKey{Namespace: ecNS, Name: "main-hub-client"}, &corev1.Secret{})).To(Succeed())
		s := &etcdfedv1.EtcdSpoke{}
		g.Expect(member.Client.Get(ctx, client.ObjectKeyFromObject(sp), s)).To(Succeed())
		g.Expect(s.Spec.ClusterName).To(Equal("member-1"), "the spoke's spec patched")
		g.Expect(member.Client.Get(ctx, client.ObjectKey{Namespace: ring, Name: memberObj}, &etcdfedv1.EtcdMember{})).To(Succeed())
		g.Expect(member.Client.Get(ctx, client.ObjectKey{Namespace: ring, Name: memberObj + "-tls"}, &corev1.Secret{})).To(Succeed())
		g.Expect(member.Client.Get(ctx, client.ObjectKey{Namespace: ring, Name: etcdfedv1.RingObjectName(ecNS, "main")}, &etcdfedv1.EtcdDNSZone{})).To(Succeed())
	}).Should(Succeed(), func() string { return statusOf(hubCl, ec) + log.String() })

	g.Expect(hubCl.Client.Delete(ctx, ec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCl.Client.Get(ctx, client.ObjectKeyFromObject(ec), &etcdfedv1.EtcdCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "EtcdCluster still there: %v", err)
		var members etcdfedv1.EtcdMemberList
		g.Expect(member.Client.List(ctx, &members, client.InNamespace(ring))).To(Succeed())
		g.Expect(members.Items).To(BeEmpty())
		var zones etcdfedv1.EtcdDNSZoneList
		g.Expect(member.Client.List(ctx, &zones, client.InNamespace(ring))).To(Succeed())
		g.Expect(zones.Items).To(BeEmpty())
		g.Expect(apierrors.IsNotFound(member.Client.Get(ctx, client.ObjectKey{Namespace: ring, Name: memberObj + "-tls"}, &corev1.Secret{}))).To(BeTrue())
	}).Should(Succeed(), func() string { return log.String() })

	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("the hub was refused something: %s", line)
		}
	}
}

func statusOf(c *testenv.Cluster, ec *etcdfedv1.EtcdCluster) string {
	got := &etcdfedv1.EtcdCluster{}
	if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(ec), got); err != nil {
		return err.Error() + "\n"
	}
	var b strings.Builder
	for _, c := range got.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// syncBuffer is a bytes.Buffer safe for a process's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
