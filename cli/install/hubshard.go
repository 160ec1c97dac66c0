package install

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/hub/shard"
)

// LabelHubShard marks the Deployment of one hub shard (its value the
// shard's name): `etcdfed hub install --shard NAME` prunes only its own
// shard's objects and those of no shard, so installing one shard never
// removes another.
const LabelHubShard = "etcdfed.dev/hub-shard"

// HubShard is the shard of the rings one hub Deployment owns (hub/shard).
type HubShard struct {
	// Name of the shard; empty: the unsharded hub, owner of every ring.
	Name string
	// Selector over EtcdClusters' labels; empty: etcdfed.dev/shard=Name.
	Selector string
	// FleetDuties: this shard's hub also keeps the EtcdSpokes' gossip
	// peers and the registration Secrets (the hub's --fleet-duties).
	FleetDuties bool
}

// deployment is the name of the shard's hub Deployment.
func (s HubShard) deployment() string {
	if s.Name == "" {
		return HubDeployment
	}
	return HubDeployment + "-" + s.Name
}

// shardHub turns the rendered hub Deployment into the shard's: named
// etcdfed-hub-NAME, its pods and selector labelled with the shard, its hub
// run with --shard, --shard-selector and --fleet-duties.
func shardHub(objs []*unstructured.Unstructured, s HubShard) error {
	if _, err := shard.Parse(s.Name, s.Selector); err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != HubDeployment {
			continue
		}
		o.SetName(s.deployment())
		o.SetLabels(withLabel(o.GetLabels(), LabelHubShard, s.Name))
		for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
			l, _, err := unstructured.NestedStringMap(o.Object, path...)
			if err != nil {
				return fmt.Errorf("hub Deployment %v: %w", path, err)
			}
			if err := unstructured.SetNestedStringMap(o.Object, withLabel(l, LabelHubShard, s.Name), path...); err != nil {
				return err
			}
		}
		containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return fmt.Errorf("read hub Deployment's containers: %w", err)
		}
		if len(containers) == 0 {
			return fmt.Errorf("hub Deployment %s has no container", HubDeployment)
		}
		c := containers[0].(map[string]any)
		args, _ := c["args"].([]any)
		args = append(args, "--shard="+s.Name)
		if s.Selector != "" {
			args = append(args, "--shard-selector="+s.Selector)
		}
		args = append(args, fmt.Sprintf("--fleet-duties=%t", s.FleetDuties))
		c["args"] = args
		return unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
	}
	return fmt.Errorf("hub Deployment %s not rendered", HubDeployment)
}

func withLabel(l map[string]string, k, v string) map[string]string {
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	return l
}

// noShard selects what `etcdfed hub install` wrote for no shard (the
// CRDs, RBAC, the unsharded Deployment); ofShard what it wrote for shard
// name alone.
func noShard() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelHubInstall: "true"}).Add(mustRequirement(LabelHubShard, "!"))
}

func ofShard(name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelHubInstall: "true", LabelHubShard: name})
}

func mustRequirement(key, op string) labels.Requirement {
	sel, err := labels.Parse(op + key)
	if err != nil {
		panic(err)
	}
	reqs, _ := sel.Requirements()
	return reqs[0]
}

// shardDeployments are the names of the hub shards' Deployments in the
// hub cluster.
func shardDeployments(ctx context.Context, c client.Client) ([]string, error) {
	var list appsv1.DeploymentList
	sel, err := labels.Parse(LabelHubShard)
	if err != nil {
		return nil, err
	}
	if err := c.List(ctx, &list, client.InNamespace(Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list hub shards' Deployments: %w", err)
	}
	var out []string
	for _, d := range list.Items {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out, nil
}
