package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

var everything = labels.Everything()

// Taints the node lifecycle controller puts on a node it cannot reach.
var unreachableTaints = []corev1.Taint{
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
}

func (a *Agent) nodeObject(n nodeState) *corev1.Node {
	lbl := map[string]string{
		corev1.LabelHostname:   n.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
		ZoneLabel:              n.Zone,
		LocalNodeLabel:         "true",
	}
	for k, v := range n.Labels {
		lbl[k] = v
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: lbl}}
	if n.failed {
		for _, t := range unreachableTaints {
			t.TimeAdded = &metav1.Time{Time: time.Now()}
			node.Spec.Taints = append(node.Spec.Taints, t)
		}
	}
	return node
}

func memTotal() int64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 8 << 30
}

func (a *Agent) nodeStatus(n nodeState, now metav1.Time) corev1.NodeStatus {
	res := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(110, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "etcdfed local node agent is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
	if n.failed {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
			Message: "Kubelet stopped posting node status (zone failed by the local environment).", LastHeartbeatTime: now, LastTransitionTime: now}
	}
	conds := []corev1.NodeCondition{ready}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		c := corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: "KubeletHas" + "No" + string(t),
			LastHeartbeatTime: now, LastTransitionTime: now}
		if n.failed {
			c.Status, c.Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
		}
		conds = append(conds, c)
	}
	return corev1.NodeStatus{
		Capacity:    res,
		Allocatable: res,
		Phase:       corev1.NodeRunning,
		Conditions:  conds,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: n.IP.String()},
			{Type: corev1.NodeHostName, Address: n.Name},
		},
		DaemonEndpoints: a.daemonEndpoints(),
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          KubeletVersion,
			OperatingSystem:         "linux",
			Architecture:            runtime.GOARCH,
			OSImage:                 "etcdfed local node (processes on loopback)",
			ContainerRuntimeVersion: "local://" + KubeletVersion,
			KernelVersion:           kernelVersion(),
		},
	}
}

// daemonEndpoints publishes the kubelet port the apiserver connects to for
// pods/log (zero without KubeletServing).
func (a *Agent) daemonEndpoints() corev1.NodeDaemonEndpoints {
	var d corev1.NodeDaemonEndpoints
	if k := a.cfg.Kubelet; k != nil {
		d.KubeletEndpoint.Port = int32(k.Port)
	}
	return d
}

func kernelVersion() string {
	data, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(data))
}

// registerNodes creates the nodes or brings their labels, taints and
// status up to date.
func (a *Agent) registerNodes(ctx context.Context) error {
	var errs []error
	for _, n := range a.nodeStates() {
		if err := a.upsertNode(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (a *Agent) nodeStates() []nodeState {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]nodeState, 0, len(a.nodes))
	for _, n := range a.nodes {
		out = append(out, *n)
	}
	return out
}

func (a *Agent) upsertNode(ctx context.Context, n nodeState) error {
	want := a.nodeObject(n)
	cur, err := a.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur, err = a.cs.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", n.Name, err)
	}
	// Keep foreign labels and taints (a user may cordon or label); own
	// ours and the lifecycle taints (the apiserver's TaintNodesByCondition
	// admission puts not-ready on every new node; the node lifecycle
	// controller, which we play, takes it off once the node is Ready).
	changed := false
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		if cur.Labels[k] != v {
			cur.Labels[k], changed = v, true
		}
	}
	var taints []corev1.Taint
	for _, t := range cur.Spec.Taints {
		if t.Key != corev1.TaintNodeUnreachable && t.Key != corev1.TaintNodeNotReady {
			taints = append(taints, t)
		}
	}
	taints = append(taints, want.Spec.Taints...)
	if !taintsEqual(taints, cur.Spec.Taints) {
		cur.Spec.Taints, changed = taints, true
	}
	if changed {
		if cur, err = a.cs.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update node %s: %w", n.Name, err)
		}
	}
	return a.patchNodeStatus(ctx, n, cur)
}

func taintsEqual(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value || a[i].Effect != b[i].Effect {
			return false
		}
	}
	return true
}

func (a *Agent) patchNodeStatus(ctx context.Context, n nodeState, cur *corev1.Node) error {
	now := metav1.Now()
	st := a.nodeStatus(n, now)
	// Keep transition times when the status did not change.
	if cur != nil {
		for i := range st.Conditions {
			for _, old := range cur.Status.Conditions {
				if old.Type == st.Conditions[i].Type && old.Status == st.Conditions[i].Status {
					st.Conditions[i].LastTransitionTime = old.LastTransitionTime
				}
			}
		}
	}
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	if _, err := a.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patch node status %s: %w", n.Name, err)
	}
	return nil
}

// updateNodes re-registers the nodes of one zone (after it failed or came
// back).
func (a *Agent) updateNodes(ctx context.Context, zone string) error {
	var errs []error
	for _, n := range a.nodeStates() {
		if n.Zone == zone {
			if err := a.upsertNode(ctx, n); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// heartbeat renews the status of the nodes that are not failed.
func (a *Agent) heartbeat(ctx context.Context) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range a.nodeStates() {
			if n.failed {
				continue
			}
			if err := a.patchNodeStatus(ctx, n, nil); err != nil && ctx.Err() == nil {
				a.log.V(1).Info("Node heartbeat failed", "node", n.Name, "err", err.Error())
				// A node deleted by a user comes back, as kubelet would
				// re-register it.
				if apierrors.IsNotFound(err) {
					_ = a.upsertNode(ctx, n)
				}
			}
		}
	}
}

// ensureStorageClass creates the default StorageClass for the agent's
// volumes when absent. WaitForFirstConsumer: a volume is created in the
// zone of the first pod that uses it, as zonal cloud disks are.
func (a *Agent) ensureStorageClass(ctx context.Context) error {
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.StorageClassName, Annotations: map[string]string{
			"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       a.cfg.Provisioner,
		VolumeBindingMode: &mode,
		ReclaimPolicy:     &reclaim,
	}
	_, err := a.cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create storage class: %w", err)
	}
	return nil
}
