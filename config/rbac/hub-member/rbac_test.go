package hubmemberrbac_test

import (
	"context"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	hubmemberrbac "github.com/etcdfed/etcdfed/config/rbac/hub-member"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// asHub installs config/rbac/hub-member into a fresh ring namespace of a
// real apiserver and returns a client authenticated as the hub's
// ServiceAccount there (its name and groups, so the manifests' RoleBinding
// applies unchanged), the admin client, the ring namespace and another
// namespace.
func asHub(t *testing.T) (as client.WithWatch, admin client.Client, ring, other string) {
	t.Helper()
	cl := testenv.Shared(t, "hub-member-rbac")
	ring = testenv.NamespaceT(t, cl, "ring")
	other = testenv.NamespaceT(t, cl, "other")
	objs, err := hubmemberrbac.Objects(ring)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := cl.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	user, err := cl.Env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + ring + ":" + hubmemberrbac.ServiceAccountName,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ring, "system:authenticated"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	as, err = client.NewWithWatch(user.Config(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return as, cl.Client, ring, other
}

func member(ns, name string) *etcdfedv1.EtcdMember {
	return &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{etcdfedv1.LabelClusterUID: "uid-1"}},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "hub", UID: "uid-1"},
			MemberName: name, Incarnation: 1, Image: "etcd:v3.6.16", DNSName: name + ".etcd.test",
			Expose: etcdfedv1.ExposeSpec{Type: etcdfedv1.ExposeNodePort},
			TLS:    etcdfedv1.MemberTLS{Mode: etcdfedv1.TLSDisabled},
		},
	}
}

func zone(ns string) *etcdfedv1.EtcdDNSZone {
	return &etcdfedv1.EtcdDNSZone{
		ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ns, Labels: map[string]string{etcdfedv1.LabelClusterUID: "uid-1"}},
		Spec: etcdfedv1.EtcdDNSZoneSpec{
			Cluster: etcdfedv1.ClusterReference{Name: "main", Namespace: "hub", UID: "uid-1"},
			Domain:  "etcd.test",
			Records: []etcdfedv1.DNSRecord{{Name: "main-0.etcd.test.", Type: "A", TTL: 30, Data: []string{"10.0.0.1"}}},
		},
	}
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{etcdfedv1.LabelClusterUID: "uid-1"}},
		Data:       map[string][]byte{"tls.crt": []byte("x")},
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want success", what, err)
	}
}

func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: got %v, want Forbidden", what, err)
	}
}

// TestHubCanWriteEtcdfedObjectsAndSecrets: everything the hub does in a
// member cluster works with the role: EtcdMember, EtcdDNSZone and TLS
// Secret create/update/patch/delete/deletecollection, EtcdSpoke spec
// patch and status read, Lease read, and list/watch of each for its cache.
func TestHubCanWriteEtcdfedObjectsAndSecrets(t *testing.T) {
	as, admin, ring, _ := asHub(t)
	ctx := context.Background()

	// EtcdMember: create, update the spec, patch, read status, list,
	// watch, delete, delete by label.
	m := member(ring, "main-0")
	must(t, "create EtcdMember", as.Create(ctx, m))
	m.Spec.Image = "etcd:v3.6.17"
	must(t, "update EtcdMember", as.Update(ctx, m))
	before := m.DeepCopy()
	m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=https://main-0.etcd.test:2380", InitialClusterState: etcdfedv1.InitialClusterNew, Token: "t"}
	must(t, "patch EtcdMember", as.Patch(ctx, m, client.MergeFrom(before)))
	must(t, "get EtcdMember status", as.SubResource("status").Get(ctx, m, &etcdfedv1.EtcdMember{}))
	must(t, "list EtcdMembers", as.List(ctx, &etcdfedv1.EtcdMemberList{}, client.InNamespace(ring)))
	watchOK(t, as, &etcdfedv1.EtcdMemberList{}, ring)
	must(t, "delete EtcdMember", as.Delete(ctx, m))
	must(t, "create EtcdMember", as.Create(ctx, member(ring, "main-1")))
	must(t, "delete EtcdMembers by label", as.DeleteAllOf(ctx, &etcdfedv1.EtcdMember{}, client.InNamespace(ring), client.MatchingLabels{etcdfedv1.LabelClusterUID: "uid-1"}))

	// EtcdDNSZone: the same.
	z := zone(ring)
	must(t, "create EtcdDNSZone", as.Create(ctx, z))
	z.Spec.Records[0].Data = []string{"10.0.0.2"}
	must(t, "update EtcdDNSZone", as.Update(ctx, z))
	must(t, "get EtcdDNSZone status", as.SubResource("status").Get(ctx, z, &etcdfedv1.EtcdDNSZone{}))
	watchOK(t, as, &etcdfedv1.EtcdDNSZoneList{}, ring)
	must(t, "delete EtcdDNSZones by label", as.DeleteAllOf(ctx, &etcdfedv1.EtcdDNSZone{}, client.InNamespace(ring), client.MatchingLabels{etcdfedv1.LabelClusterUID: "uid-1"}))
	must(t, "create EtcdDNSZone", as.Create(ctx, zone(ring)))
	must(t, "delete EtcdDNSZone", as.Delete(ctx, zone(ring)))

	// Secrets: the members' TLS Secrets.
	s := secret(ring, "main-0-tls")
	must(t, "create Secret", as.Create(ctx, s))
	s.Data["tls.key"] = []byte("y")
	must(t, "update Secret", as.Update(ctx, s))
	must(t, "get Secret", as.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{}))
	watchOK(t, as, &corev1.SecretList{}, ring)
	must(t, "delete Secret", as.Delete(ctx, s))
	must(t, "create Secret", as.Create(ctx, secret(ring, "main-1-tls")))
	must(t, "delete Secrets by label", as.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ring), client.MatchingLabels{etcdfedv1.LabelClusterUID: "uid-1"}))

	// EtcdSpoke: created by the spoke; the hub patches its spec and reads
	// its status.
	sp := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.SpokeObjectName, Namespace: ring}}
	if err := admin.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	got := &etcdfedv1.EtcdSpoke{}
	must(t, "get EtcdSpoke", as.Get(ctx, client.ObjectKeyFromObject(sp), got))
	must(t, "get EtcdSpoke status", as.SubResource("status").Get(ctx, got, &etcdfedv1.EtcdSpoke{}))
	watchOK(t, as, &etcdfedv1.EtcdSpokeList{}, ring)
	patched := got.DeepCopy()
	patched.Spec = etcdfedv1.EtcdSpokeSpec{ClusterName: "c1", GossipPeers: []etcdfedv1.GossipPeer{{Cluster: "c2", Address: "192.0.2.1:30946"}}}
	must(t, "patch EtcdSpoke spec", as.Patch(ctx, patched, client.MergeFrom(got)))

	// Leases: read only.
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.SpokeObjectName, Namespace: ring},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("spoke-0"), LeaseDurationSeconds: ptr.To[int32](10), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if err := admin.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	must(t, "get Lease", as.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{}))
	must(t, "list Leases", as.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(ring)))
	watchOK(t, as, &coordinationv1.LeaseList{}, ring)
}

// TestHubIsForbiddenOutsideItsObjects: pods, PVCs and Services are the
// spoke's; status is the spoke's; Leases are read only; nothing in another
// namespace and nothing cluster-scoped.
// TestHubReadsNodesAndNodeLeases: the zone witness's reads (Nodes, and
// Leases in kube-node-lease), list and watch included, as the hub's cache
// does them.
func TestHubReadsNodesAndNodeLeases(t *testing.T) {
	as, admin, ring, _ := asHub(t)
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "read-" + ring, Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	if err := admin.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), node) })
	nl := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node.Name), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if err := admin.Create(ctx, nl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), nl) })
	got := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
	if err := as.Get(ctx, client.ObjectKeyFromObject(node), got); err != nil || got.Labels[corev1.LabelTopologyZone] != "zone-a" {
		t.Errorf("get the node's metadata: %v (labels %v)", err, got.Labels)
	}
	if err := as.List(ctx, &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}); err != nil {
		t.Errorf("list nodes' metadata: %v", err)
	}
	if w, err := as.Watch(ctx, &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}); err != nil {
		t.Errorf("watch nodes' metadata: %v", err)
	} else {
		w.Stop()
	}
	var leases coordinationv1.LeaseList
	if err := as.List(ctx, &leases, client.InNamespace(corev1.NamespaceNodeLease)); err != nil || len(leases.Items) == 0 {
		t.Errorf("list node Leases: %v (%d)", err, len(leases.Items))
	}
	if w, err := as.Watch(ctx, &coordinationv1.LeaseList{}, client.InNamespace(corev1.NamespaceNodeLease)); err != nil {
		t.Errorf("watch node Leases: %v", err)
	} else {
		w.Stop()
	}
}

func TestHubIsForbiddenOutsideItsObjects(t *testing.T) {
	as, admin, ring, other := asHub(t)
	ctx := context.Background()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: ring},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}
	forbidden(t, "create a pod in the ring namespace", as.Create(ctx, pod))
	forbidden(t, "list pods in the ring namespace", as.List(ctx, &corev1.PodList{}, client.InNamespace(ring)))
	if err := admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	forbidden(t, "get a pod in the ring namespace", as.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
	forbidden(t, "delete a pod in the ring namespace", as.Delete(ctx, pod))
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "main-0-data-1", Namespace: ring},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
	forbidden(t, "create a PVC in the ring namespace", as.Create(ctx, pvc))
	forbidden(t, "list PVCs in the ring namespace", as.List(ctx, &corev1.PersistentVolumeClaimList{}, client.InNamespace(ring)))
	if err := admin.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	forbidden(t, "delete a PVC in the ring namespace", as.Delete(ctx, pvc))
	forbidden(t, "delete PVCs in the ring namespace", as.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ring)))
	forbidden(t, "create a Service in the ring namespace", as.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: ring},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 2379}}}}))
	forbidden(t, "create a ConfigMap in the ring namespace", as.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ring}}))

	// The spoke's side of the shared objects.
	m := member(ring, "main-0")
	if err := admin.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	before := m.DeepCopy()
	m.Status.PodName = "main-0"
	forbidden(t, "patch EtcdMember status", as.Status().Patch(ctx, m, client.MergeFrom(before)))
	sp := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.SpokeObjectName, Namespace: ring}}
	forbidden(t, "create the EtcdSpoke", as.Create(ctx, sp))
	if err := admin.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	before2 := sp.DeepCopy()
	sp.Status.Version = "x"
	forbidden(t, "patch EtcdSpoke status", as.Status().Patch(ctx, sp, client.MergeFrom(before2)))
	forbidden(t, "delete the EtcdSpoke", as.Delete(ctx, sp))
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.SpokeObjectName, Namespace: ring}}
	forbidden(t, "create a Lease", as.Create(ctx, l))
	if err := admin.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To("hub")
	forbidden(t, "update a Lease", as.Update(ctx, l))
	forbidden(t, "delete a Lease", as.Delete(ctx, l))

	// Another namespace.
	forbidden(t, "create an EtcdMember in another namespace", as.Create(ctx, member(other, "main-0")))
	forbidden(t, "list EtcdMembers in another namespace", as.List(ctx, &etcdfedv1.EtcdMemberList{}, client.InNamespace(other)))
	forbidden(t, "create an EtcdDNSZone in another namespace", as.Create(ctx, zone(other)))
	forbidden(t, "create a Secret in another namespace", as.Create(ctx, secret(other, "x")))
	forbidden(t, "list Secrets in another namespace", as.List(ctx, &corev1.SecretList{}, client.InNamespace(other)))
	forbidden(t, "list Leases in another namespace", as.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(other)))
	forbidden(t, "list pods in another namespace", as.List(ctx, &corev1.PodList{}, client.InNamespace(other)))

	// Cluster-wide.
	forbidden(t, "list EtcdMembers in all namespaces", as.List(ctx, &etcdfedv1.EtcdMemberList{}))
	forbidden(t, "list Secrets in all namespaces", as.List(ctx, &corev1.SecretList{}))
	forbidden(t, "list pods in all namespaces", as.List(ctx, &corev1.PodList{}))
	forbidden(t, "list Leases in all namespaces", as.List(ctx, &coordinationv1.LeaseList{}))
	// The zone witness reads Nodes and node Leases, and writes neither.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + ring, Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	forbidden(t, "create a node", as.Create(ctx, node))
	if err := admin.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), node) })
	node.Labels[corev1.LabelTopologyZone] = "zone-b"
	forbidden(t, "update a node", as.Update(ctx, node))
	forbidden(t, "delete a node", as.Delete(ctx, node))
	nl := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: corev1.NamespaceNodeLease}}
	forbidden(t, "create a node Lease", as.Create(ctx, nl))
	if err := admin.Create(ctx, nl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), nl) })
	nl.Spec.HolderIdentity = ptr.To("hub")
	forbidden(t, "renew a node Lease", as.Update(ctx, nl))
	forbidden(t, "delete a node Lease", as.Delete(ctx, nl))
	forbidden(t, "list namespaces", as.List(ctx, &corev1.NamespaceList{}))
	forbidden(t, "create a namespace", as.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x-" + ring}}))
	forbidden(t, "create an EtcdCluster", as.Create(ctx, &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ring}}))
}

// TestManifestsNameTheHubsServiceAccount: the binding and the
// ServiceAccount agree on the name `etcdfed cluster join` mints tokens
// for, and no long-lived token Secret is among the manifests (the hub's
// credential is a short-lived token it renews).
func TestManifestsNameTheHubsServiceAccount(t *testing.T) {
	objs, err := hubmemberrbac.Objects(hubmemberrbac.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	var sa bool
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			sa = o.Name == hubmemberrbac.ServiceAccountName
		case *corev1.Secret:
			t.Errorf("Secret %s in the manifests: the hub's credential is a short-lived token (TokenRequest), never a Secret", o.Name)
		}
		// Everything in the ring namespace but the zone witness's read of
		// the node Leases, which lives where they do.
		want := hubmemberrbac.DefaultNamespace
		switch o.(type) {
		case *rbacv1.Role, *rbacv1.RoleBinding:
			if o.GetNamespace() == corev1.NamespaceNodeLease {
				want = corev1.NamespaceNodeLease
			}
		}
		if o.GetNamespace() != "" && o.GetNamespace() != want {
			t.Errorf("%T %s in namespace %s, want %s", o, o.GetName(), o.GetNamespace(), want)
		}
	}
	if !sa {
		t.Errorf("ServiceAccount %s not found", hubmemberrbac.ServiceAccountName)
	}
}

// watchOK starts and stops a watch, as the hub's informers do.
func watchOK(t *testing.T, c client.WithWatch, list client.ObjectList, ns string) {
	t.Helper()
	w, err := c.Watch(context.Background(), list, client.InNamespace(ns))
	if err != nil {
		t.Errorf("watch %T in %s: %v, want success", list, ns, err)
		return
	}
	w.Stop()
}
