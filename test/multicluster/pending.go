package multicluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// PendingRollSpecInput changes a ring's pod template to one no node
// accepts.
type PendingRollSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// MemberGrace is the ring's failurePolicy.memberGracePeriod; Hold
	// how long the pending roll is watched (beyond it).
	MemberGrace, Hold time.Duration
}

// PendingRollSpec (issue 24, related path "Pending is not failing") sets
// a nodeSelector no node matches, under a recorded workload. The first
// member rolled gets a pod that cannot be scheduled. Beyond the member
// grace the rollout must halt (Progressing says why), nothing may be
// replaced (etcd's member list and every incarnation unchanged), and the
// members not rolled must keep the old spec. With the nodeSelector taken
// back the rollout ends with every member ready on the same IDs.
func PendingRollSpec(ctx context.Context, in PendingRollSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, want, ids := ringBefore(ctx, t, hub, in.Etcd)
	w := startScenarioWorkload(ctx, t, in.Etcd, "pending-roll")
	setSelector := func(sel map[string]string) {
		t.Helper()
		if err := patchSpec(ctx, hub, in.Etcd, func(s *etcdfedv1.EtcdClusterSpec) { s.PodTemplate.NodeSelector = sel }); err != nil {
			t.Fatal(err)
		}
	}
	setSelector(map[string]string{"etcdfed.dev/no-such-node": "true"})
	changed := time.Now()
	t.Logf("spec.podTemplate.nodeSelector set to a label no node has")

	// Beyond the grace: halted, nothing replaced, the others on the old spec.
	var halted string
	hctx, cancel := context.WithTimeout(ctx, in.MemberGrace+in.Hold)
	err := HoldFor(hctx, in.MemberGrace+in.Hold, time.Second, func(hctx context.Context) error {
		var moved string
		got, err := in.Etcd.Get(hctx, hub)
		if err == nil {
			if op := got.Status.Operation; op != nil && op.Type != etcdfedv1.OperationRoll {
				moved = fmt.Sprintf("operation %s %s (%s) %.1fs after the change", op.Type, op.Member, op.Reason, time.Since(changed).Seconds())
			}
			if fmt.Sprint(incarnations(got)) != fmt.Sprint(want) {
				moved = fmt.Sprintf("members %v, were %v", incarnations(got), want)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionProgressing); halted == "" && c != nil && strings.Contains(c.Message, "rollout halted") {
				halted = fmt.Sprintf("%.1fs after the change: %s", time.Since(changed).Seconds(), c.Message)
			}
		}
		if got, err := memberIDs(hctx, in.Etcd.Client); err == nil && fmt.Sprint(got) != fmt.Sprint(ids) {
			moved = fmt.Sprintf("etcd members %v, were %v", got, ids)
		}
		if moved != "" {
			return errors.New(moved)
		}
		return nil
	})
	cancel()
	if err != nil {
		t.Errorf("a member whose pod could not be scheduled was replaced: %v", err)
	}
	if halted == "" {
		got, _ := in.Etcd.Get(ctx, hub)
		t.Errorf("Progressing never said the rollout halted: %s", conditionText(got, etcdfedv1.ConditionProgressing))
	} else {
		t.Logf("Progressing %s", halted)
	}
	onNew := 0
	for _, c := range in.Topology.Members {
		var list etcdfedv1.EtcdMemberList
		if err := c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			if len(o.Spec.PodTemplate.NodeSelector) > 0 {
				onNew++
			}
		}
	}
	if onNew != 1 {
		t.Errorf("%d members' objects carry the new nodeSelector; want the one rolled, the others on the old spec", onNew)
	}

	setSelector(nil)
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(want), Tolerant: true, Timeout: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got, err := memberIDs(ctx, in.Etcd.Client); err != nil || fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("etcd members after the spec was set back: %v (%v), were %v", got, err, ids)
	}
	t.Logf("the nodeSelector taken back: ready, same members, %.1fs after the first change", time.Since(changed).Seconds())
	w.Stop()
	checkWorkload(ctx, t, w)
}

// pendingGrace is the member grace of TestScenarioPendingRollHalts.
var pendingGrace = metav1.Duration{Duration: 30 * time.Second}
