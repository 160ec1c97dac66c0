package install_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/installtest"
)

// TestHubShardsInstall: `etcdfed hub install` of an unsharded hub, then of
// shard a and shard b on the same hub cluster. Shard a's install replaces
// the unsharded hub's Deployment (two hubs must not own the same rings)
// with etcdfed-hub-a running --shard=a; shard b's adds etcdfed-hub-b and
// leaves etcdfed-hub-a alone (its prune never reaches another shard's
// objects); installing shard a again leaves b alone; an unsharded install
// beside shards is refused.
func TestHubShardsInstall(t *testing.T) {
	hub := installtest.Clusters(t, "hub")[0]
	ctx := context.Background()
	inst := func(s install.HubShard) error {
		return install.InstallHub(ctx, install.HubInstallOptions{Hub: hub.Config, HubOptions: install.HubOptions{Shard: s}, Progress: func(l string) { t.Log(l) }})
	}
	deployments := func() map[string][]string {
		t.Helper()
		var list appsv1.DeploymentList
		if err := hub.Client.List(ctx, &list, client.InNamespace(install.Namespace)); err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, d := range list.Items {
			out[d.Name] = d.Spec.Template.Spec.Containers[0].Args
		}
		return out
	}
	if err := inst(install.HubShard{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := deployments()[install.HubDeployment]; !ok {
		t.Fatalf("no unsharded hub Deployment: %v", deployments())
	}
	if err := inst(install.HubShard{Name: "a", FleetDuties: true}); err != nil {
		t.Fatal(err)
	}
	if err := inst(install.HubShard{Name: "b", Selector: "team in (x,y)"}); err != nil {
		t.Fatal(err)
	}
	if err := inst(install.HubShard{Name: "a", FleetDuties: true}); err != nil {
		t.Fatal(err)
	}
	got := deployments()
	if _, ok := got[install.HubDeployment]; ok || len(got) != 2 {
		t.Fatalf("Deployments %v, want etcdfed-hub-a and etcdfed-hub-b only", got)
	}
	for name, want := range map[string][]string{
		"etcdfed-hub-a": {"--shard=a", "--fleet-duties=true"},
		"etcdfed-hub-b": {"--shard=b", "--shard-selector=team in (x,y)", "--fleet-duties=false"},
	} {
		for _, w := range want {
			if !slices.Contains(got[name], w) {
				t.Errorf("%s runs %v, want %s among them", name, got[name], w)
			}
		}
	}
	var d appsv1.Deployment
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "etcdfed-hub-b"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Selector.MatchLabels[install.LabelHubShard] != "b" || d.Spec.Template.Labels[install.LabelHubShard] != "b" {
		t.Errorf("shard b's Deployment selects %v, pods labelled %v: want the shard's label in both", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if err := inst(install.HubShard{}); err == nil || !strings.Contains(err.Error(), "hub shards are installed") {
		t.Fatalf("an unsharded install beside shards: %v, want refused", err)
	}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: install.HubDeployment}, &d); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused unsharded install wrote its Deployment: %v", err)
	}
	if err := inst(install.HubShard{Name: "Bad_Name"}); err == nil {
		t.Fatal("a shard name that is no DNS label was accepted")
	}
}
