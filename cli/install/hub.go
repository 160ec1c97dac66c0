package install

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/internal/tokenseal"
)

// HubInstallOptions configure InstallHub.
type HubInstallOptions struct {
	HubOptions
	// Hub is an admin REST config of the hub cluster.
	Hub *rest.Config
	// DryRun prints every object InstallHub would write, and writes
	// nothing.
	DryRun io.Writer
	// Wait for the hub's Deployment to roll out, within Timeout.
	Wait     bool
	Timeout  time.Duration
	Progress func(string)
}

// InstallHub installs or upgrades the hub in the hub cluster: the CRDs,
// its namespace, RBAC and Deployment (unless External), the ring's gossip
// key, and the RoleBindings in EtcdCluster namespaces. A second run with
// the same options writes nothing.
func InstallHub(ctx context.Context, o HubInstallOptions) error {
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	for _, ns := range o.EtcdClusterNamespaces {
		if !nameRE.MatchString(ns) {
			return fmt.Errorf("namespace %q: want a DNS label", ns)
		}
	}
	objs, err := RenderHub(o.HubOptions)
	if err != nil {
		return err
	}
	hub, err := newClient(o.Hub, "hub cluster")
	if err != nil {
		return err
	}
	if err := o.preflight(ctx, hub); err != nil {
		return err
	}
	a := &applier{c: hub, cluster: "hub", dryRun: o.DryRun}
	st, err := a.apply(ctx, objs)
	if err != nil {
		return err
	}
	if o.DryRun != nil {
		_, err := fmt.Fprintf(o.DryRun, "---\n# hub: Secret %s/%s with the ring's gossip key (32 random bytes), unless it exists\n# hub: Secret %s/%s with the hub's sealing key (X25519), unless it exists\n", Namespace, GossipSecret, Namespace, tokenseal.KeySecret)
		return err
	}
	if err := waitCRDs(ctx, hub, objs); err != nil {
		return err
	}
	label := map[string]string{LabelHubInstall: "true"}
	if _, err := gossipKey(ctx, hub, label, false); err != nil {
		return err
	}
	// The hub's sealing key (issue 37): made once, never replaced, never
	// pruned (every member cluster joined holds its public key).
	if _, err := tokenseal.EnsureKey(ctx, hub, Namespace, nil, false); err != nil {
		return err
	}
	pruned, err := o.prune(ctx, a, objs)
	if err != nil {
		return err
	}
	what := "CRDs, namespace, the hub's RBAC"
	if !o.External {
		what += " and Deployment"
	}
	msg := fmt.Sprintf("hub: %s (%s), the ring's gossip key", what, st)
	if len(pruned) > 0 {
		msg += "; removed " + strings.Join(pruned, ", ")
	}
	o.Progress(msg)
	if o.External || !o.Wait {
		return nil
	}
	return o.waitRollout(ctx, hub)
}

// preflight checks what must hold before anything is written: an
// unsharded hub is not installed beside shards' hubs (two hubs would act
// on the same rings), and the EtcdCluster namespaces exist.
func (o *HubInstallOptions) preflight(ctx context.Context, hub client.Client) error {
	if o.Shard.Name == "" && !o.External && o.DryRun == nil {
		shards, err := shardDeployments(ctx, hub)
		if err != nil {
			return err
		}
		if len(shards) > 0 {
			return fmt.Errorf("hub: hub shards are installed (Deployments %s): install with --shard NAME, or delete them first", strings.Join(shards, ", "))
		}
	}
	for _, ns := range o.EtcdClusterNamespaces {
		if err := hub.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
			return fmt.Errorf("--etcdcluster-namespace %s: %w (create it first)", ns, err)
		}
	}
	return nil
}

// prune deletes what an earlier install applied and this one no longer
// renders: what no shard wrote, and this shard's own, never another
// shard's. A shard's install prunes the unsharded hub's Deployment, which
// it replaces.
func (o *HubInstallOptions) prune(ctx context.Context, a *applier, objs []*unstructured.Unstructured) ([]string, error) {
	gossip := &unstructured.Unstructured{}
	gossip.SetAPIVersion("v1")
	gossip.SetKind("Secret")
	gossip.SetNamespace(Namespace)
	gossip.SetName(GossipSecret)
	sealing := &unstructured.Unstructured{}
	sealing.SetAPIVersion("v1")
	sealing.SetKind("Secret")
	sealing.SetNamespace(Namespace)
	sealing.SetName(tokenseal.KeySecret)
	pruned, err := a.prune(ctx, noShard(), append(objs, gossip, sealing))
	if err != nil {
		return nil, err
	}
	if o.Shard.Name != "" {
		more, err := a.prune(ctx, ofShard(o.Shard.Name), objs)
		if err != nil {
			return nil, err
		}
		pruned = append(pruned, more...)
	}
	return pruned, nil
}

// waitRollout waits, within o.Timeout, until the hub's Deployment has
// rolled out.
func (o *HubInstallOptions) waitRollout(ctx context.Context, hub client.Client) error {
	start := time.Now()
	var why string
	err := poll(ctx, o.Timeout, func(ctx context.Context) (bool, error) {
		var done bool
		done, why = deploymentReady(ctx, hub, o.Shard.deployment())
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("hub: the Deployment %s/%s did not roll out within %s (%s)", Namespace, o.Shard.deployment(), o.Timeout, why)
	}
	o.Progress(fmt.Sprintf("hub: rolled out (%.1fs)", time.Since(start).Seconds()))
	return nil
}
