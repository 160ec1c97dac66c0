package spec_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

func member(mut ...func(*etcdfedv1.EtcdMember)) *etcdfedv1.EtcdMember {
	m := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0"},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "0b7e6c1e-7d1a-4f7e-9d5c-2f3f0b1c2d3e"},
			MemberName: "main-0",
			DNSName:    "main-0.etcd.example.com",
			TLS:        etcdfedv1.MemberTLS{SecretName: "main-0-tls"},
			Bootstrap: &etcdfedv1.BootstrapSpec{
				InitialCluster: "main-0=https://main-0.etcd.example.com:2380,main-1=https://main-1.etcd.example.com:2380",
			},
		},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *etcdfedv1.EtcdMember
		want string
	}{
		{"valid", member(), ""},
		{"name differs", member(func(m *etcdfedv1.EtcdMember) { m.Name = "main-9" }), `must be "default-main-0-`},
		{"named by the scheme", member(func(m *etcdfedv1.EtcdMember) { m.Name = etcdfedv1.MemberObjectName("default", "main", "main-0") }), ""},
		{"named by the scheme for another ring", member(func(m *etcdfedv1.EtcdMember) { m.Name = etcdfedv1.MemberObjectName("team-b", "main", "main-0") }), `must be "default-main-0-`},
		{"an incarnation's own name (a move inside the member cluster)", member(func(m *etcdfedv1.EtcdMember) {
			m.Name = etcdfedv1.IncarnationObjectName("default", "main", "main-0", 4)
		}), ""},
		{"an incarnation's name of another member", member(func(m *etcdfedv1.EtcdMember) {
			m.Name = etcdfedv1.IncarnationObjectName("default", "main", "main-1", 4)
		}), `must be "default-main-0-`},
		{"not a pod name", member(func(m *etcdfedv1.EtcdMember) { m.Name, m.Spec.MemberName = "Main_0", "Main_0" }), "cannot name a pod"},
		{"service name starts with digit", member(func(m *etcdfedv1.EtcdMember) {
			m.Name, m.Spec.MemberName, m.Spec.Expose.Type = "0main", "0main", etcdfedv1.ExposeNodePort
		}), "cannot name the NodePort Service"},
		{"digit ok without Service", member(func(m *etcdfedv1.EtcdMember) { m.Name, m.Spec.MemberName = "0main", "0main" }), ""},
		{"dns name with dot", member(func(m *etcdfedv1.EtcdMember) { m.Spec.DNSName = "main-0.etcd.example.com." }), "dnsName"},
		{"uid too long for a label", member(func(m *etcdfedv1.EtcdMember) { m.Spec.Cluster.UID = strings.Repeat("a", 64) }), "cluster.uid"},
		{"tls without secret", member(func(m *etcdfedv1.EtcdMember) { m.Spec.TLS.SecretName = "" }), "tls.secretName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := spec.Validate(tc.m)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckBootstrap(t *testing.T) {
	url := "https://main-0.etcd.example.com:2380"
	for _, tc := range []struct {
		name, ic, peer, want string
	}{
		{"match", "main-0=" + url + ",main-1=https://main-1.etcd.example.com:2380", url, ""},
		{"missing", "main-1=https://main-1.etcd.example.com:2380", url, "does not list member"},
		{"other port", "main-0=https://main-0.etcd.example.com:31380", url, "advertises"},
		{"twice", "main-0=" + url + ",main-0=https://x:2380", url, "advertises"},
		{"garbage", "main-0", url, "not name=url"},
		{"not a URL", "main-0=main-0:2380", url, "not an http or https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := spec.CheckBootstrap(member(func(m *etcdfedv1.EtcdMember) { m.Spec.Bootstrap.InitialCluster = tc.ic }), tc.peer)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckBootstrap: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckBootstrap = %v; want %q", err, tc.want)
			}
		})
	}
}

func TestLabelsSkipLongClusterName(t *testing.T) {
	m := member(func(m *etcdfedv1.EtcdMember) { m.Spec.Cluster.Name = strings.Repeat("a", 100) })
	if _, ok := spec.Labels(m, spec.ComponentPod, 0)[etcdfedv1.LabelClusterName]; ok {
		t.Error("a cluster name longer than a label value was used as a label")
	}
}

// TestObjectsOfTwoEtcdMembersOfOneMember: the objects of an EtcdMember
// named after the member alone (written before the naming scheme) keep
// the labels they were created with, those of a scheme-named one carry its
// name, and neither EtcdMember owns, or maps back to, the other's.
func TestObjectsOfTwoEtcdMembersOfOneMember(t *testing.T) {
	legacy := member()
	scoped := member(func(m *etcdfedv1.EtcdMember) { m.Name = etcdfedv1.MemberObjectName("default", "main", "main-0") })
	ll, sl := spec.Labels(legacy, spec.ComponentPod, 1), spec.Labels(scoped, spec.ComponentPod, 1)
	if _, ok := ll[etcdfedv1.LabelMemberObject]; ok || ll[etcdfedv1.LabelMember] != "main-0" {
		t.Errorf("legacy labels %v: want member main-0 and no %s", ll, etcdfedv1.LabelMemberObject)
	}
	if sl[etcdfedv1.LabelMember] != "main-0" || sl[etcdfedv1.LabelMemberObject] != scoped.Name {
		t.Errorf("scoped labels %v: want member main-0 and %s %s", sl, etcdfedv1.LabelMemberObject, scoped.Name)
	}
	for _, tc := range []struct {
		m      *etcdfedv1.EtcdMember
		labels map[string]string
		owns   bool
	}{
		{legacy, ll, true}, {scoped, sl, true}, {legacy, sl, false}, {scoped, ll, false},
	} {
		if got := spec.OwnedBy(tc.m, tc.labels); got != tc.owns {
			t.Errorf("OwnedBy(%s, %v) = %v, want %v", tc.m.Name, tc.labels, got, tc.owns)
		}
	}
	if got := spec.MemberOfLabels(ll); got != legacy.Name {
		t.Errorf("MemberOfLabels(legacy) = %q", got)
	}
	if got := spec.MemberOfLabels(sl); got != scoped.Name {
		t.Errorf("MemberOfLabels(scoped) = %q", got)
	}
}
