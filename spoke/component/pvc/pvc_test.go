package pvc_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/pvc"
)

func member(inc int64, mut ...func(*etcdfedv1.EtcdMember)) *etcdfedv1.EtcdMember {
	m := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: "ring"},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:     etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "uid-1"},
			MemberName:  "main-0",
			Incarnation: inc,
		},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func claim(name, inc string, mut ...func(*corev1.PersistentVolumeClaim)) corev1.PersistentVolumeClaim {
	c := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{
		etcdfedv1.LabelClusterUID: "uid-1", etcdfedv1.LabelMember: "main-0", etcdfedv1.LabelIncarnation: inc,
	}}}
	for _, f := range mut {
		f(&c)
	}
	return c
}

func TestBuild(t *testing.T) {
	c := pvc.Build(member(3, func(m *etcdfedv1.EtcdMember) {
		m.Spec.Storage = etcdfedv1.MemberStorage{Size: ptr.To(resource.MustParse("20Gi")), StorageClassName: ptr.To("fast")}
	}))
	if c.Name != "main-0-data-3" || c.Labels[etcdfedv1.LabelIncarnation] != "3" || c.Labels[etcdfedv1.LabelComponent] != "data" {
		t.Errorf("PVC %s %v", c.Name, c.Labels)
	}
	if c.Spec.Resources.Requests.Storage().String() != "20Gi" || *c.Spec.StorageClassName != "fast" || c.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("PVC spec %+v", c.Spec)
	}
	if len(c.OwnerReferences) != 0 {
		t.Error("a PVC must not be owned: it outlives the member")
	}
	if d := pvc.Build(member(0)); d.Spec.Resources.Requests.Storage().String() != "8Gi" || d.Spec.StorageClassName != nil {
		t.Errorf("default PVC %+v", d.Spec)
	}
}

func TestDecide(t *testing.T) {
	known := func(uid string) func(*etcdfedv1.EtcdMember) {
		return func(m *etcdfedv1.EtcdMember) {
			m.Status.Incarnation = m.Spec.Incarnation
			m.Status.Volume = etcdfedv1.VolumeReference{ClaimName: "main-0-data-1", UID: uid}
		}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		m    *etcdfedv1.EtcdMember
		cur  *corev1.PersistentVolumeClaim
		want pvc.Action
	}{
		{"fresh", member(1), nil, pvc.Create},
		{"exists", member(1), ptr.To(claim("main-0-data-1", "1")), pvc.Keep},
		{"known and present", member(1, known("uid-main-0-data-1")), ptr.To(claim("main-0-data-1", "1")), pvc.Keep},
		{"known and gone", member(1, known("uid-main-0-data-1")), nil, pvc.Lost},
		{"known and replaced", member(1, known("uid-old")), ptr.To(claim("main-0-data-1", "1")), pvc.Lost},
		{"status of an older incarnation", member(2, func(m *etcdfedv1.EtcdMember) {
			m.Status.Incarnation = 1
			m.Status.Volume = etcdfedv1.VolumeReference{ClaimName: "main-0-data-1", UID: "x"}
		}), nil, pvc.Create},
		{"someone else's", member(1), ptr.To(claim("main-0-data-1", "1", func(c *corev1.PersistentVolumeClaim) { c.Labels[etcdfedv1.LabelClusterUID] = "uid-2" })), pvc.Conflict},
		{"terminating", member(1), ptr.To(claim("main-0-data-1", "1", func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &now })), pvc.Terminating},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pvc.Decide(tc.m, tc.cur); got.Action != tc.want {
				t.Errorf("Decide = %s (%s); want %s", got.Action, got.Message, tc.want)
			}
		})
	}
}

func TestPlanRetired(t *testing.T) {
	retired := func(c *corev1.PersistentVolumeClaim) { c.Labels[etcdfedv1.LabelRetired] = "true" }
	all := []corev1.PersistentVolumeClaim{
		claim("main-0-data-0", "0", retired),
		claim("main-0-data-1", "1"),
		claim("main-0-data-2", "2"),
		claim("other", "0", func(c *corev1.PersistentVolumeClaim) { c.Labels[etcdfedv1.LabelClusterUID] = "uid-2" }),
	}
	del := func(m *etcdfedv1.EtcdMember) { m.Spec.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeDelete }
	for _, tc := range []struct {
		name           string
		m              *etcdfedv1.EtcdMember
		running        bool
		retire, delete []string
	}{
		{"retain, running", member(2), true, []string{"main-0-data-1"}, nil},
		{"delete, not running yet", member(2, del), false, []string{"main-0-data-1"}, nil},
		{"delete, running", member(2, del), true, []string{"main-0-data-1"}, []string{"main-0-data-0", "main-0-data-1"}},
		{"nothing older", member(0, del), true, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pvc.PlanRetired(tc.m, all, tc.running)
			if !slices.Equal(p.Retire, tc.retire) || !slices.Equal(p.Delete, tc.delete) {
				t.Errorf("plan %+v; want retire %v delete %v", p, tc.retire, tc.delete)
			}
		})
	}
	if p := pvc.PlanDeleted(member(2), all); !slices.Equal(p.Retire, []string{"main-0-data-1", "main-0-data-2"}) || p.Delete != nil {
		t.Errorf("deleted member, retain: %+v", p)
	}
	if p := pvc.PlanDeleted(member(2, del), all); !slices.Equal(p.Delete, []string{"main-0-data-0", "main-0-data-1", "main-0-data-2"}) {
		t.Errorf("deleted member, delete: %+v", p)
	}
	// Issue 24: a volume the hub asked to keep (its member swept after a
	// recovery) is never deleted: not when its object is deleted, not when
	// a later incarnation retires it, whatever the policy.
	keep := func(m *etcdfedv1.EtcdMember) { m.Labels = map[string]string{etcdfedv1.LabelKeepVolumes: "true"} }
	if p := pvc.PlanDeleted(member(2, del, keep), all); p.Delete != nil || !slices.Equal(p.Retire, []string{"main-0-data-0", "main-0-data-1", "main-0-data-2"}) {
		t.Errorf("deleted member, delete, keep: %+v; want nothing deleted, every volume labelled", p)
	}
	kept := append(slices.Clone(all), claim("main-0-data-3", "3", func(c *corev1.PersistentVolumeClaim) { c.Labels[etcdfedv1.LabelKept] = "true" }))
	if p := pvc.PlanRetired(member(4, del), kept, true); slices.Contains(p.Delete, "main-0-data-3") {
		t.Errorf("a kept volume retired by a new incarnation: %+v", p)
	}
	if p := pvc.PlanDeleted(member(4, del), kept); slices.Contains(p.Delete, "main-0-data-3") {
		t.Errorf("a kept volume deleted with its member: %+v", p)
	}
}
