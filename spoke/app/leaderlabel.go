package app

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LabelLeader marks the spoke pod that holds the leader-election Lease.
// The gossip Service (config/spoke, etcdfed-spoke-gossip) selects it, so
// that other clusters' gossip reaches the one replica that gossips, while
// the DNS Service sends queries to every ready replica.
const LabelLeader = "etcdfed.dev/spoke-leader"

// leaderLabel keeps LabelLeader on the leader's pod only. Every replica
// removes it from its own pod when it starts (a container restarted after
// it lost the Lease keeps its pod, and its labels); the leader, once
// elected and every leaderRecheck while it leads, sets it on its own pod
// and removes it from any other.
type leaderLabel struct {
	c         client.Client
	reader    client.Reader
	namespace string
	pod       string
	leader    bool
	log       logr.Logger
}

// NeedLeaderElection: the leader's instance runs once elected, the
// clearing one at once.
func (l *leaderLabel) NeedLeaderElection() bool { return l.leader }

// leaderRecheck is how often the leader checks that the label is on its
// pod alone: the replica's own clearing at start may land after the
// leader set it (both start with the process), and anyone may edit a
// pod's labels.
const leaderRecheck = 10 * time.Second

func (l *leaderLabel) Start(ctx context.Context) error {
	delay := 200 * time.Millisecond
	for {
		err := l.apply(ctx)
		next := delay
		switch {
		case err != nil:
			l.log.Error(err, "Labelling the spoke's pod, retrying", "leader", l.leader, "after", delay)
			delay = min(2*delay, 10*time.Second)
		case !l.leader:
			return nil
		default:
			delay, next = 200*time.Millisecond, leaderRecheck
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

func (l *leaderLabel) apply(ctx context.Context) error {
	if !l.leader {
		return l.set(ctx, l.pod, false)
	}
	if err := l.set(ctx, l.pod, true); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := l.reader.List(ctx, pods, client.InNamespace(l.namespace), client.HasLabels{LabelLeader}); err != nil {
		return fmt.Errorf("list labelled spoke pods: %w", err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Name != l.pod {
			if err := l.set(ctx, p.Name, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *leaderLabel) set(ctx context.Context, pod string, on bool) error {
	var v any
	if on {
		v = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelLeader: v}}})
	if err != nil {
		return err
	}
	p := &corev1.Pod{}
	p.Namespace, p.Name = l.namespace, pod
	if err := l.c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("label pod %s: %w", pod, err)
	}
	return nil
}
