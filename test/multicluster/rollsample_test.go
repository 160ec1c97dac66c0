package multicluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestSampleRollNamesMembers: the roll sampler of every rollout scenario
// (RollSpecSpec) counts a member on the new image whether its EtcdMember
// has the scheme's name (<namespace>-<member>-<hash>) or, written before
// the scheme, the member's own, and names it by the member's name, as the
// EtcdCluster's status does. One real apiserver serves as hub and member
// cluster.
func TestSampleRollNamesMembers(t *testing.T) {
	cl := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	c := &Cluster{Name: "member-1", REST: cl.Config, Client: cl.Client}
	for _, ns := range []string{"upgrade", etcdfedv1.DefaultRingNamespace} {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "upgrade", Name: "upgrade"},
		Spec:       etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "upgrade.etcd.test"}},
	}
	if err := c.Client.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	ec.Status.Members = []etcdfedv1.MemberStatus{{Name: "upgrade-0", Cluster: c.Name}, {Name: "upgrade-1", Cluster: c.Name}, {Name: "upgrade-2", Cluster: c.Name}}
	if err := c.Client.Status().Update(ctx, ec); err != nil {
		t.Fatal(err)
	}
	const newImage, oldImage = "gcr.io/etcd-development/etcd:v3.6.16", "gcr.io/etcd-development/etcd:v3.5.35"
	m := &ManagedEtcd{Namespace: ec.Namespace, Name: ec.Name}
	for _, o := range []struct{ object, member, image string }{
		{m.ObjectName("upgrade-0"), "upgrade-0", newImage},
		{"upgrade-1", "upgrade-1", newImage}, // written before the scheme
		{m.ObjectName("upgrade-2"), "upgrade-2", oldImage},
	} {
		obj := &etcdfedv1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Namespace: etcdfedv1.DefaultRingNamespace, Name: o.object,
				Labels: map[string]string{etcdfedv1.LabelClusterUID: string(ec.UID)}},
			Spec: etcdfedv1.EtcdMemberSpec{
				Cluster:    etcdfedv1.ClusterReference{Name: ec.Name, Namespace: ec.Namespace, UID: string(ec.UID)},
				MemberName: o.member, Incarnation: 1, Image: o.image, DNSName: o.member + ".upgrade.etcd.test",
				TLS: etcdfedv1.MemberTLS{SecretName: o.object + "-tls"},
			},
		}
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	s, err := sampleRoll(ctx, RollSpecInput{T: t, Topology: &Topology{Hub: c, Members: []*Cluster{c}}, Etcd: m, Image: newImage}, ec.UID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"upgrade-0", "upgrade-1"}; !slices.Equal(s.onNew, want) {
		t.Errorf("on the new image: %v; want %v", s.onNew, want)
	}
	// No member has a pod here: each is unsettled, under its member name.
	slices.Sort(s.unsettled)
	if want := []string{"upgrade-0", "upgrade-1", "upgrade-2"}; !slices.Equal(s.unsettled, want) {
		t.Errorf("unsettled: %v; want %v", s.unsettled, want)
	}
}
