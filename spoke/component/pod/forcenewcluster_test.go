package pod_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Quorum-loss recovery: spec.forceNewCluster adds --force-new-cluster, and
// setting or clearing it replaces a running pod on the same volume (each
// is a hub decision; etcd reads the flag only at start).
func TestForceNewCluster(t *testing.T) {
	params := pod.Params{ClaimName: "main-0-data-2", Advertised: spec.PodPorts}
	plain := member()
	forced := member(func(m *etcdfedv1.EtcdMember) { m.Spec.ForceNewCluster = "recover-20261123T120000Z" })
	if slices.Contains(pod.EtcdArgs(plain, spec.PodPorts), "--force-new-cluster") {
		t.Fatal("--force-new-cluster without spec.forceNewCluster")
	}
	if !slices.Contains(pod.EtcdArgs(forced, spec.PodPorts), "--force-new-cluster") {
		t.Fatal("no --force-new-cluster with spec.forceNewCluster")
	}
	for _, tc := range []struct {
		name     string
		from, to *etcdfedv1.EtcdMember
	}{{"set", plain, forced}, {"cleared", forced, plain}} {
		running := pod.Build(tc.from, params)
		running.Status.Phase = corev1.PodRunning
		if d := pod.Decide(tc.to, running, pod.Build(tc.to, params), nil); d.Action != pod.Replace {
			t.Errorf("flag %s: %s (%s), want Replace", tc.name, d.Action, d.Message)
		}
	}
}
