package nodeagent

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node Leases, as kubelet keeps them: one Lease per node in
// kube-node-lease, named after the node, owned by the Node, renewed every
// quarter of its duration (kubelet: 40s, renewed every 10s). A failed
// zone's nodes stop renewing, so a witness that watches these Leases on its
// own clock sees the zone go stale, as it would on a real cluster.
const (
	// NodeLeaseNamespace holds the node Leases.
	NodeLeaseNamespace = corev1.NamespaceNodeLease
	// DefaultNodeLeaseDuration is kubelet's default
	// (--node-lease-duration-seconds).
	DefaultNodeLeaseDuration = 40 * time.Second
)

// renewNodeLeases renews the Lease of every node that is not failed, every
// quarter of NodeLeaseDuration, until ctx ends.
func (a *Agent) renewNodeLeases(ctx context.Context) {
	every := a.cfg.NodeLeaseDuration / 4
	renew := func() {
		for _, n := range a.nodeStates() {
			if n.failed || n.leasesStopped {
				continue
			}
			if err := a.renewNodeLease(ctx, n); err != nil && ctx.Err() == nil {
				a.log.V(1).Info("Node Lease renewal failed", "node", n.Name, "err", err.Error())
			}
		}
	}
	renew()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		renew()
	}
}

func (a *Agent) renewNodeLease(ctx context.Context, n nodeState) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	leases := a.cs.CoordinationV1().Leases(NodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(a.cfg.NodeLeaseDuration / time.Second)
	cur, err := leases.Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: NodeLeaseNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &n.Name, LeaseDurationSeconds: &secs, RenewTime: &now},
		}
		if node, err := a.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node Lease %s: %w", n.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read node Lease %s: %w", n.Name, err)
	}
	cur.Spec.HolderIdentity, cur.Spec.LeaseDurationSeconds, cur.Spec.RenewTime = &n.Name, &secs, &now
	if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew node Lease %s: %w", n.Name, err)
	}
	return nil
}

// StopNodeLeases stops (stop true) or resumes renewing the Leases of a
// zone's nodes, nothing else: its pods run and its node status stays as it
// is, as when a zone's kubelets lose their apiserver but not their
// machines.
func (a *Agent) StopNodeLeases(zone string, stop bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	found := false
	for _, n := range a.nodes {
		if n.Zone == zone {
			n.leasesStopped, found = stop, true
		}
	}
	if !found {
		return fmt.Errorf("nodeagent: no node in zone %q", zone)
	}
	a.log.Info("Node Lease renewal", "zone", zone, "stopped", stop)
	return nil
}
