package multicluster

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScenarioCARotation: the CA of a 3-member ring over three clusters is
// rotated under the recorded workload (CARotationSpec): every member and
// consumer ends on the new CA alone, with no moment where two members
// distrust each other and no failed client request beyond one election.
// A kube-apiserver started from a member-cluster consumer's Secret
// (caReload: AtStart) serves throughout: the rotation holds after Trusting
// until it has been restarted and the hold answered. Then the EtcdCluster
// is deleted and the consumer Secret the hub wrote in a member cluster
// goes with it.
func TestScenarioCARotation(t *testing.T) {
	var remote ConsumerSecret
	ringScenario(t, ringScenarioInput{What: "the ring's CA rotated in three phases, every member restarted three times, under a recorded workload",
		Ring: EtcdClusterSpecInput{Namespace: "carot", Name: "carot", Domain: "carot.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		remote = CARotationSpec(ctx, CARotationSpecInput{T: t, Topology: topo, Etcd: etcd, KubeAPIServer: filepath.Join(hubFx.bin, "kube-apiserver"),
			Etcdfed: filepath.Join(hubFx.bin, "etcdfed")})
	})
	err := WaitForGone(context.Background(), remote.Cluster, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: remote.Key.Namespace, Name: remote.Key.Name}}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
}
