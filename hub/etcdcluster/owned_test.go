package etcdcluster

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// The one owned-object writer against a real apiserver: create, leave
// alone when equal, patch when not, never touch what another EtcdCluster
// owns or what observe did not see; one list of owned kinds for listing
// and deleting.
func TestOwnedObjects(t *testing.T) {
	c := testenv.StartT(t, "member")[0].Client
	ctx := context.Background()
	ns := "etcdfed-system"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	ours := ring()
	ours.ringNamespace = ns
	theirs := ring()
	theirs.ringNamespace, theirs.ec.UID, theirs.ec.Namespace = ns, "uid-2", "other"
	member := func(s *snapshot, name string) *etcdfedv1.EtcdMember {
		m := statusMember(&s.ec.Status, "main-0")
		obj := desiredMember(s, &s.ec.Status, m, nil)
		obj.Name, obj.Spec.MemberName, obj.Labels[etcdfedv1.LabelMember] = name, name, name
		return obj
	}
	get := func(name string) *etcdfedv1.EtcdMember {
		t.Helper()
		o := &etcdfedv1.EtcdMember{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			t.Fatal(err)
		}
		return o
	}

	t.Run("created, then left alone while equal", func(t *testing.T) {
		if err := writeOwned(ctx, c, ours.ec.UID, "member", nil, member(ours, "a-0")); err != nil {
			t.Fatal(err)
		}
		seen := get("a-0")
		if err := writeOwned(ctx, c, ours.ec.UID, "member", seen, member(ours, "a-0")); err != nil {
			t.Fatal(err)
		}
		if now := get("a-0"); now.ResourceVersion != seen.ResourceVersion {
			t.Errorf("an equal object was written again (resourceVersion %s -> %s)", seen.ResourceVersion, now.ResourceVersion)
		}
	})
	t.Run("patched to the wanted spec and labels", func(t *testing.T) {
		seen := get("a-0")
		want := member(ours, "a-0")
		want.Spec.Image = "registry.k8s.io/etcd:3.6.16-0"
		want.Labels[etcdfedv1.LabelIncarnation] = "9"
		if err := writeOwned(ctx, c, ours.ec.UID, "member", seen, want); err != nil {
			t.Fatal(err)
		}
		now := get("a-0")
		if now.Spec.Image != want.Spec.Image || now.Labels[etcdfedv1.LabelIncarnation] != "9" || now.Generation == seen.Generation {
			t.Errorf("image %s, incarnation label %s, generation %d -> %d", now.Spec.Image, now.Labels[etcdfedv1.LabelIncarnation], seen.Generation, now.Generation)
		}
	})
	t.Run("another EtcdCluster's object is never written", func(t *testing.T) {
		if err := writeOwned(ctx, c, theirs.ec.UID, "member", nil, member(theirs, "b-0")); err != nil {
			t.Fatal(err)
		}
		seen := get("b-0")
		want := member(ours, "b-0")
		err := writeOwned(ctx, c, ours.ec.UID, "member", seen, want)
		if err == nil || !strings.Contains(err.Error(), `belongs to another EtcdCluster (uid "uid-2")`) {
			t.Errorf("writing over another EtcdCluster's object: %v", err)
		}
		// Observe did not see it (it lists by owner): the create says whose.
		err = writeOwned(ctx, c, ours.ec.UID, "member", nil, want)
		if err == nil || !strings.Contains(err.Error(), `belongs to another EtcdCluster (uid "uid-2")`) {
			t.Errorf("creating over another EtcdCluster's object: %v", err)
		}
		if now := get("b-0"); now.ResourceVersion != seen.ResourceVersion {
			t.Errorf("another EtcdCluster's object was changed")
		}
	})
	t.Run("an object of ours observe did not see is not overwritten", func(t *testing.T) {
		seen := get("a-0")
		if err := writeOwned(ctx, c, ours.ec.UID, "member", nil, member(ours, "a-0")); !apierrors.IsAlreadyExists(err) {
			t.Errorf("create over an unseen object: %v, want AlreadyExists", err)
		}
		if now := get("a-0"); now.ResourceVersion != seen.ResourceVersion {
			t.Errorf("an object observe did not see was changed")
		}
	})
	t.Run("a Secret's data is patched, its type kept", func(t *testing.T) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-0-tls", Labels: memberCertLabels(ours.ec, "a-0")},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"tls.crt": []byte("one")}}
		if err := writeOwned(ctx, c, ours.ec.UID, "member", nil, sec.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		seen := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sec), seen); err != nil {
			t.Fatal(err)
		}
		sec.Data["tls.crt"] = []byte("two")
		if err := writeOwned(ctx, c, ours.ec.UID, "member", seen, sec.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		now := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sec), now); err != nil {
			t.Fatal(err)
		}
		if string(now.Data["tls.crt"]) != "two" || now.Type != corev1.SecretTypeOpaque {
			t.Errorf("Secret %s: data %q, type %s", now.Name, now.Data["tls.crt"], now.Type)
		}
	})
	t.Run("listed and deleted by owner, kind by kind", func(t *testing.T) {
		zone := desiredZone(ours, nil, nil)
		if err := writeOwned(ctx, c, ours.ec.UID, "member", nil, zone); err != nil {
			t.Fatal(err)
		}
		cs := &clusterSnapshot{name: "member", members: map[string]*etcdfedv1.EtcdMember{}, zones: map[string]*etcdfedv1.EtcdDNSZone{}, secrets: map[string]*corev1.Secret{}}
		if err := listOwned(ctx, c, ns, ours.ec.UID, cs); err != nil {
			t.Fatal(err)
		}
		if len(cs.members) != 1 || cs.members["a-0"] == nil || len(cs.secrets) != 1 || len(cs.zones) != 1 {
			t.Fatalf("listed members %v, secrets %v, zones %v; want a-0, its Secret and the zone", keys(cs.members), keys(cs.secrets), keys(cs.zones))
		}
		if objs := memberObjects(cs, memberRef{cluster: "member", member: "a-0"}); len(objs) != 2 {
			t.Errorf("a-0 owns %d objects, want its EtcdMember and its Secret", len(objs))
		}
		if err := deleteAllOwned(ctx, c, ns, ours.ec.UID, "member"); err != nil {
			t.Fatal(err)
		}
		left := &clusterSnapshot{name: "member", members: map[string]*etcdfedv1.EtcdMember{}, zones: map[string]*etcdfedv1.EtcdDNSZone{}, secrets: map[string]*corev1.Secret{}}
		if err := listOwned(ctx, c, ns, ours.ec.UID, left); err != nil {
			t.Fatal(err)
		}
		if len(left.members)+len(left.secrets)+len(left.zones) != 0 {
			t.Errorf("left after deletion: %v %v %v", keys(left.members), keys(left.secrets), keys(left.zones))
		}
		get("b-0") // another EtcdCluster's object stays
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A Move between two zones of one member cluster against a real
// apiserver: the hub's step writes the new incarnation's EtcdMember and
// certificate Secret beside the old ones (never over them), observe files
// both under the member (the new one current), and the Move's last step
// deletes the old object and its Secret alone.
func TestMoveInsideOneClusterWritesBesideTheOldObject(t *testing.T) {
	api := testenv.StartT(t, "member")[0]
	c := api.Client
	ctx := context.Background()
	ns := "etcdfed-system"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	s := ring()
	ca := withTLS(t, s)
	withSecondZone(s)
	s.ringNamespace = ns
	s.ec.Spec.Topology.CordonedZones = []string{"member-3/zone-3"}
	cs := s.cluster("member-3")
	cs.client = c
	// The apiserver is the hub's too: the old incarnation's certificate is
	// recorded in the hub client Secret before its Secret is deleted.
	if err := c.Create(ctx, s.pki.hubClient); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Manager: startHubManager(t, api)}
	observe := func() {
		t.Helper()
		cs.members, cs.others, cs.secrets, cs.zones = map[string]*etcdfedv1.EtcdMember{}, nil, map[string]*corev1.Secret{}, map[string]*etcdfedv1.EtcdDNSZone{}
		if err := listOwned(ctx, c, ns, s.ec.UID, cs); err != nil {
			t.Fatal(err)
		}
		cs.settle(&s.ec.Status)
	}
	// main-2's incarnation 3 as the hub wrote it.
	cs.members, cs.secrets = map[string]*etcdfedv1.EtcdMember{}, map[string]*corev1.Secret{}
	m := statusMember(&s.ec.Status, "main-2")
	if err := r.writeMembers(ctx, s, ca, emptyList(t, ca), []memberWrite{{cluster: "member-3", want: desiredMember(s, &s.ec.Status, m, nil), cert: true}}); err != nil {
		t.Fatal(err)
	}
	observe()
	old := cs.members["main-2"]
	oldSecret := cs.secrets[pki.MemberSecretName(old.Name)]
	if old == nil || oldSecret == nil {
		t.Fatalf("incarnation 3 not written: %v %v", keys(cs.members), keys(cs.secrets))
	}

	if d, _ := pass(s); d.plan.Action != planner.ActBegin || s.ec.Status.Operation == nil || s.ec.Status.Operation.Type != etcdfedv1.OperationMove {
		t.Fatalf("plan %s (%s), want a Move inside member-3", d.plan.Action, d.plan.Reason)
	}
	d, _ := pass(s)
	if d.plan.Action != planner.ActCreateObjects {
		t.Fatalf("plan %s (%s), want CreateObjects", d.plan.Action, d.plan.Reason)
	}
	if err := r.writeMembers(ctx, s, ca, emptyList(t, ca), d.step.writes); err != nil {
		t.Fatal(err)
	}
	newName := etcdfedv1.IncarnationObjectName(s.ec.Namespace, s.ec.Name, "main-2", 4)
	now := &etcdfedv1.EtcdMember{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), now); err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != old.ResourceVersion || now.Spec.Incarnation != 3 || now.Spec.Zone != "zone-3" {
		t.Errorf("the old incarnation's object %s was written over: incarnation %d in %s (resourceVersion %s -> %s)", old.Name, now.Spec.Incarnation, now.Spec.Zone, old.ResourceVersion, now.ResourceVersion)
	}
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(oldSecret), sec); err != nil || sec.ResourceVersion != oldSecret.ResourceVersion {
		t.Errorf("the old incarnation's certificate Secret was written over (%v)", err)
	}
	observe()
	cur := cs.members["main-2"]
	if cur == nil || cur.Name != newName || cur.Spec.Incarnation != 4 || cur.Spec.Zone != "zone-3b" || len(cs.others["main-2"]) != 1 || cs.others["main-2"][0].Name != old.Name {
		t.Fatalf("observed main-2 in member-3: %s, current %s; want %s (incarnation 4) beside %s", objectNames(cs.objectsOf("main-2")), cur.Name, newName, old.Name)
	}
	if cs.secrets[pki.MemberSecretName(newName)] == nil {
		t.Fatalf("the new incarnation's certificate Secret %s is missing: %v", pki.MemberSecretName(newName), keys(cs.secrets))
	}

	// The Move's last step: the old object and its Secret go, the new stay.
	// The old object carries the spoke's finalizer: it stays, being
	// deleted, until the spoke is done, and a pass meanwhile asks for no
	// deletion again.
	held := old.DeepCopy()
	held.Finalizers = append(held.Finalizers, "etcdfed.dev/spoke") // spoke/internal/spec.Finalizer
	if err := c.Patch(ctx, held, client.MergeFrom(old)); err != nil {
		t.Fatal(err)
	}
	refs := retiredObjects(s, &s.ec.Status, planner.Decision{Action: planner.ActDeleteObject, Member: "main-2",
		From: topology.Domain{Cluster: "member-3", Zone: "zone-3"}, Operation: &planner.Operation{Type: planner.OpMove}})
	if err := r.deleteMembers(ctx, s, refs); err != nil {
		t.Fatal(err)
	}
	observe()
	if pending := cs.others["main-2"]; len(pending) != 1 || pending[0].DeletionTimestamp.IsZero() {
		t.Fatalf("the old object with a finalizer: %s, want it being deleted", objectNames(pending))
	}
	counting := &countingDeletes{Client: c}
	cs.client = counting
	if err := r.deleteMembers(ctx, s, retiredObjects(s, &s.ec.Status, planner.Decision{Action: planner.ActDeleteObject, Member: "main-2",
		From: topology.Domain{Cluster: "member-3", Zone: "zone-3"}, Operation: &planner.Operation{Type: planner.OpMove}})); err != nil {
		t.Fatal(err)
	}
	if counting.deletes != 0 {
		t.Errorf("a pass after the deletion was asked sent %d delete requests for objects already being deleted", counting.deletes)
	}
	cs.client = c
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), held); err != nil {
		t.Fatal(err)
	}
	released := held.DeepCopy()
	released.Finalizers = nil
	if err := c.Patch(ctx, released, client.MergeFrom(held)); err != nil {
		t.Fatal(err)
	}
	observe()
	if cur := cs.members["main-2"]; cur == nil || cur.Name != newName || len(cs.others["main-2"]) != 0 {
		t.Errorf("after the old object's deletion: main-2's objects %s; want %s alone", objectNames(cs.objectsOf("main-2")), newName)
	}
	if got := keys(cs.secrets); len(got) != 1 || got[0] != pki.MemberSecretName(newName) {
		t.Errorf("Secrets left %v, want %s alone", got, pki.MemberSecretName(newName))
	}
	hc := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(s.pki.hubClient), hc); err != nil {
		t.Fatal(err)
	}
	oldSerial, _ := pki.Serial(oldSecret.Data[pki.KeyCert])
	if rec := supersededPeers(hc, s.now); len(rec) != 1 || rec[0].Cert.SerialNumber.Cmp(oldSerial) != 0 || rec[0].Cluster != "member-3" {
		t.Errorf("the hub client Secret records %d superseded member certificates; want the old incarnation's, of member-3", len(rec))
	}
}

// countingDeletes counts the delete requests sent through it.
type countingDeletes struct {
	client.Client
	deletes int
}

func (c *countingDeletes) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	c.deletes++
	return c.Client.Delete(ctx, o, opts...)
}

func objectNames(objs []*etcdfedv1.EtcdMember) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name+" (incarnation "+strconv.FormatInt(o.Spec.Incarnation, 10)+")")
	}
	return out
}
