package spokes

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/registry"
)

type listed []registry.MemberCluster

func (l listed) List(context.Context) ([]registry.MemberCluster, error) { return l, nil }

// TestPassOverClusterBeingEngagedComesBackSoon: the registry starts a
// cluster's sources before the manager hands the cluster out, so the
// first pass over a new cluster's EtcdSpoke finds it not engaged. That
// pass waited a whole resync (15 s): in the local environment member-2's
// first pass came late, and its gossip identity 42 s after the others'
// (TestScenarioHubPartitioned). It comes back within a second while the
// cluster is registered, and not at all once it is not.
func TestPassOverClusterBeingEngagedComesBackSoon(t *testing.T) {
	// No cluster is ever engaged: the manager has no provider. Nothing
	// here talks to an apiserver.
	mgr, err := mcmanager.New(&rest.Config{Host: "https://127.0.0.1:1"}, nil, manager.Options{Scheme: testenv.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Manager: mgr, Registry: listed{{Name: "member-new"}}, RingNamespace: etcdfedv1.DefaultRingNamespace}
	pass := func(cluster string) reconcile.Result {
		t.Helper()
		res, err := r.Reconcile(context.Background(), mcreconcile.Request{ClusterName: multicluster.ClusterName(cluster),
			Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.SpokeObjectName}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := pass("member-new"); res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Errorf("a pass over a registered cluster not engaged yet comes back after %v, want within 1s", res.RequeueAfter)
	}
	if res := pass("member-gone"); res.RequeueAfter != 0 {
		t.Errorf("a pass over a cluster no longer registered comes back after %v", res.RequeueAfter)
	}
}
