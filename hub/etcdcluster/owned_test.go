package etcdcluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
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
