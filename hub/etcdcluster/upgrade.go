package etcdcluster

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// Version changes (see hub/planner/upgrade.go): what the planner needs
// of spec.backup and of the member objects, the versions recorded in
// status, and the two steps only a version change takes.

// backupInput is spec.backup and its status as the planner's Backup.
func backupInput(ec *etcdfedv1.EtcdCluster) planner.Backup {
	var b planner.Backup
	if ec.Spec.Backup == nil || ec.Spec.Backup.Suspend {
		return b
	}
	b.Configured = true
	b.Requested = ec.Annotations[etcdfedv1.AnnotationBackupRequested]
	if st := ec.Status.Backup; st != nil {
		if st.LastSuccess != nil {
			b.Succeeded = st.LastSuccess.Request
		}
		if st.LastFailure != nil {
			b.Failed, b.FailedMessage = st.LastFailure.Request, st.LastFailure.Message
		}
	}
	return b
}

// podFailing is why the pod of the object's latest generation cannot run,
// as its spoke reports it (PodReady=False, reason ContainerFailing), "" when
// it can or the spoke has not acted on that generation yet.
func podFailing(obj *etcdfedv1.EtcdMember) string {
	return podNotReadyFor(obj, etcdfedv1.ReasonContainerFailing)
}

// podNotReadyFor is the message of the object's PodReady=False condition
// with reason, for its latest generation; "" otherwise.
func podNotReadyFor(obj *etcdfedv1.EtcdMember, reason string) string {
	c := meta.FindStatusCondition(obj.Status.Conditions, etcdfedv1.ConditionPodReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || obj.Status.ObservedGeneration != obj.Generation {
		return ""
	}
	return c.Message
}

// podPending says why the pod of the object's latest generation has not
// started (PodReady False, reason PodPending, for the latest generation),
// "" when it has or the spoke has not said.
func podPending(obj *etcdfedv1.EtcdMember) string {
	return podNotReadyFor(obj, etcdfedv1.ReasonPodPending)
}

// recordVersions records each member's running version and the cluster
// version, as etcd reported them in this pass; a member that did not
// answer keeps its last.
func recordVersions(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	if !s.etcd.Reachable {
		return
	}
	for i := range st.Members {
		if em, ok := listed(s.etcd, &st.Members[i]); ok && em.Version != "" {
			st.Members[i].Version = em.Version
		}
	}
	if s.etcd.ClusterVersion != "" {
		st.ClusterVersion = s.etcd.ClusterVersion
	}
}

// rollReason is the Progressing reason of a Roll: Upgrading or Downgrading
// while members' running versions differ from spec.version, else Roll.
// The message's suffix counts the members that run spec.version.
func rollReason(s *snapshot) (reason, suffix string) {
	c, changing := planner.Versions(planner.Input{Version: s.ec.Spec.Version, Etcd: s.etcd})
	if !changing {
		return string(planner.OpRoll), ""
	}
	reason = etcdfedv1.ReasonUpgrading
	if c.Down {
		reason = etcdfedv1.ReasonDowngrading
	}
	return reason, fmt.Sprintf(" (%d of %d members run %s; cluster version %s)", c.Done, c.Total, s.ec.Spec.Version, orText(s.etcd.ClusterVersion, "unknown"))
}

// requestBackup sets the etcdfed.dev/backup-requested annotation (the hub's
// backup controller takes the snapshot). The pass's status patch then
// meets a newer resourceVersion and is dropped; the annotation's event
// brings the next pass.
func (r *Reconciler) requestBackup(ctx context.Context, ec *etcdfedv1.EtcdCluster, request string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{etcdfedv1.AnnotationBackupRequested: request}}})
	if err != nil {
		return err
	}
	obj := &etcdfedv1.EtcdCluster{}
	obj.Namespace, obj.Name = ec.Namespace, ec.Name
	if err := r.hub().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("ask for snapshot %s: %w", request, err)
	}
	return nil
}

// rollProgress is Progressing for a version change (ok), refining message
// (the operation's): a Roll while versions differ is Upgrading or
// Downgrading; a halted rollout is Progressing=False RolloutHalted; a
// downgrade etcd refused is Progressing=False DowngradeRefused.
func rollProgress(s *snapshot, st *etcdfedv1.EtcdClusterStatus, plan planner.Decision, res applyResult, message string) (conditionValue, bool) {
	op := st.Operation
	if op == nil || op.Type != etcdfedv1.OperationRoll {
		return conditionValue{}, false
	}
	switch {
	case plan.Halted:
		return conditionValue{false, etcdfedv1.ReasonRolloutHalted, plan.Reason}, true
	case plan.Action == planner.ActEnableDowngrade && res.stepErr != nil:
		return conditionValue{false, etcdfedv1.ReasonDowngradeRefused,
			fmt.Sprintf("no member is restarted: %v; set spec.version back to the cluster's version", res.stepErr)}, true
	default:
		reason, suffix := rollReason(s)
		if reason == string(planner.OpRoll) {
			return conditionValue{}, false
		}
		return conditionValue{true, reason, message + suffix}, true
	}
}

// upgrade is the feature of spec.version: the running versions recorded,
// the version and the backup taken before a version change in the
// planner's input, and Progressing's Upgrading or Downgrading
// (rollProgress).
type upgrade struct{ s *snapshot }

func (f *upgrade) observe(st *etcdfedv1.EtcdClusterStatus, _ *decision) {
	recordVersions(f.s, st)
}

func (f *upgrade) input(in *planner.Input, _ *etcdfedv1.EtcdClusterStatus) {
	in.Version = f.s.ec.Spec.Version
	in.Backup = backupInput(f.s.ec)
}

// record: nothing; a Roll is membership's operation.
func (f *upgrade) record(*etcdfedv1.EtcdClusterStatus, *decision) {}

func (f *upgrade) status(*etcdfedv1.EtcdClusterStatus, *decision, applyResult) {}
