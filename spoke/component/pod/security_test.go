package pod_test

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// probe summarises a probe as "http:/path" or "tcp:port".
func probe(p *corev1.Probe) string {
	switch {
	case p == nil:
		return ""
	case p.HTTPGet != nil:
		return "http:" + p.HTTPGet.Path + "@" + p.HTTPGet.Port.String()
	case p.TCPSocket != nil:
		return "tcp:" + p.TCPSocket.Port.String()
	}
	return "other"
}

// Probes follow etcd's health endpoints by version: /livez and /readyz
// from 3.5.11 (and every 3.6), a TCP connect plus /health before.
func TestProbesByVersion(t *testing.T) {
	metrics := strconv.Itoa(int(spec.MetricsPort))
	livez := [3]string{"http:/livez@" + metrics, "http:/livez@" + metrics, "http:/readyz@" + metrics}
	old := [3]string{"tcp:" + metrics, "tcp:" + metrics, "http:/health@" + metrics}
	for _, tc := range []struct {
		version string
		want    [3]string // startup, liveness, readiness
	}{
		{"3.6.16", livez},
		{"3.6.0", livez},
		{"3.7.0", livez},
		{"3.5.35", livez},
		{"3.5.11", livez},
		{"3.5.10", old},
		{"3.5.0", old},
		{"3.4.30", old},
		{"", livez},
		{"main", livez},
	} {
		t.Run(tc.version, func(t *testing.T) {
			c := pod.Build(member(func(m *etcdfedv1.EtcdMember) { m.Spec.Version = tc.version }), pod.Params{ClaimName: "d", Advertised: spec.PodPorts}).Spec.Containers[0]
			got := [3]string{probe(c.StartupProbe), probe(c.LivenessProbe), probe(c.ReadinessProbe)}
			if got != tc.want {
				t.Errorf("probes %v; want %v", got, tc.want)
			}
			// Liveness must not restart a member for a lost quorum: only
			// the local checks, never /readyz or /health.
			if p := c.LivenessProbe; p.HTTPGet != nil && p.HTTPGet.Path != pod.PathLivez {
				t.Errorf("liveness on %s", p.HTTPGet.Path)
			}
		})
	}
}

// Every container of a member pod runs as the one non-root user, with no
// capability, no privilege escalation and a read-only root; the volume
// belongs to its group; the pod is never BestEffort.
func TestPodSecurityAndResources(t *testing.T) {
	restoring := member(func(m *etcdfedv1.EtcdMember) {
		m.Spec.Bootstrap.ClusterID = "c1"
		m.Spec.Bootstrap.Restore = &etcdfedv1.MemberRestore{
			Store:  etcdfedv1.BackupStore{URL: "s3://b/x", CredentialsSecretName: "creds"},
			Object: "o.db", SHA256: "ab",
		}
	})
	p := pod.Build(restoring, pod.Params{HelperImage: "ghcr.io/etcdfed/etcdfed-init:v1", ClaimName: "d", Advertised: spec.PodPorts})
	wantPod := &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), RunAsNonRoot: ptr.To(true),
		FSGroup: ptr.To[int64](65532), FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if d := cmp.Diff(wantPod, p.Spec.SecurityContext); d != "" {
		t.Errorf("pod security context (-want +got):\n%s", d)
	}
	wantCtr := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), Privileged: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	all := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	if len(all) != 4 {
		t.Fatalf("containers %d, want wait-dns, install-helper, prepare-data, etcd", len(all))
	}
	for _, c := range all {
		if d := cmp.Diff(wantCtr, c.SecurityContext); d != "" {
			t.Errorf("%s security context (-want +got):\n%s", c.Name, d)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s requests %v: a container without requests", c.Name, c.Resources.Requests)
		}
		if len(c.Resources.Limits) != 0 {
			t.Errorf("%s has limits %v by default", c.Name, c.Resources.Limits)
		}
	}
	etcd := p.Spec.Containers[0]
	if etcd.Resources.Requests.Cpu().String() != etcdfedv1.DefaultEtcdCPURequest || etcd.Resources.Requests.Memory().String() != etcdfedv1.DefaultEtcdMemoryRequest {
		t.Errorf("etcd requests %v", etcd.Resources.Requests)
	}
}

func TestEtcdResources(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name string
		in   *corev1.ResourceRequirements
		want corev1.ResourceRequirements
	}{
		{"none: the defaults", nil, corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("256Mi")}}},
		{"empty: the defaults", &corev1.ResourceRequirements{}, corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("256Mi")}}},
		{"cpu given: memory defaulted", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("2")}},
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("2"), "memory": q("256Mi")}}},
		// A limit alone: the kubelet requests the limit, a default
		// request above it would be refused.
		{"memory limit only", &corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("128Mi")}},
			corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("128Mi")}, Requests: corev1.ResourceList{"cpu": q("100m")}}},
		{"both given", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1"), "memory": q("4Gi")}, Limits: corev1.ResourceList{"memory": q("8Gi")}},
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1"), "memory": q("4Gi")}, Limits: corev1.ResourceList{"memory": q("8Gi")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := member(func(m *etcdfedv1.EtcdMember) { m.Spec.PodTemplate.Resources = tc.in })
			got := pod.Build(m, pod.Params{ClaimName: "d", Advertised: spec.PodPorts}).Spec.Containers[0].Resources
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); d != "" {
				t.Errorf("resources (-want +got):\n%s", d)
			}
		})
	}
	in := &corev1.ResourceRequirements{}
	_ = pod.Build(member(func(m *etcdfedv1.EtcdMember) { m.Spec.PodTemplate.Resources = in }), pod.Params{ClaimName: "d"})
	if len(in.Requests) != 0 {
		t.Errorf("Build changed the member's pod template: %v", in.Requests)
	}
}

// The grace lets a leader hand over leadership (etcd waits up to 5 s plus
// two election timeouts) and close its database.
func TestTerminationGrace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		election *int32
		grace    *int64
		want     int64
	}{
		{"defaults", nil, nil, 30},
		{"election 5 s", ptr.To[int32](5000), nil, 30},
		{"election 10 s", ptr.To[int32](10000), nil, 35},
		{"election 12.5 s", ptr.To[int32](12500), nil, 40},
		{"given", ptr.To[int32](10000), ptr.To[int64](20), 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := member(func(m *etcdfedv1.EtcdMember) {
				m.Spec.Etcd.ElectionTimeoutMillis = tc.election
				m.Spec.PodTemplate.TerminationGracePeriodSeconds = tc.grace
			})
			if got := *pod.Build(m, pod.Params{ClaimName: "d"}).Spec.TerminationGracePeriodSeconds; got != tc.want {
				t.Errorf("grace %d; want %d", got, tc.want)
			}
		})
	}
}
