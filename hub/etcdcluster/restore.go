package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// Founding from a snapshot, the EtcdCluster reconciler's side: hub/restore
// resolves and checks the snapshot into status.restore; the planner waits
// for it (planner.Restore); StartBootstrap hands every founding member
// that one object with its sha256 (spec.bootstrap.restore) and copies the
// store's credentials next to it, the way member certificates are copied.

// restoreSnapshot is what observe read for a restore: the store's
// credentials from the hub, when the founding step may need them.
type restoreSnapshot struct {
	creds map[string][]byte
	err   error
}

// fromSnapshot is the spec's snapshot source, nil when the cluster is not
// founded from one.
func fromSnapshot(ec *etcdfedv1.EtcdCluster) *etcdfedv1.SnapshotSource {
	if b := ec.Spec.Bootstrap; b != nil {
		return b.FromSnapshot
	}
	return nil
}

// backupRecovery is q's request to recover from a backup, nil when none
// (or the annotation cannot be read: quorumInput reports that).
func backupRecovery(q *requests) *etcdfedv1.RecoveryRequest {
	if q.recover == nil || q.recover.FromBackup == "" {
		return nil
	}
	return q.recover
}

// restoreStore is the store a restore reads from: spec.bootstrap's while
// the cluster is founded from a snapshot, spec.backup's for a recovery
// from a backup (q's request); nil when neither applies.
func restoreStore(ec *etcdfedv1.EtcdCluster, q *requests) *etcdfedv1.BackupStore {
	if src := fromSnapshot(ec); src != nil && ec.Status.ClusterID == "" {
		return &src.Store
	}
	if backupRecovery(q) != nil && ec.Spec.Backup != nil {
		return &ec.Spec.Backup.Store
	}
	return nil
}

// restoreInput is the planner's view of the snapshot to restore: the
// founding one, or the one a recovery from a backup asked for (checked
// after the request).
func restoreInput(ec *etcdfedv1.EtcdCluster, q *requests, st *etcdfedv1.EtcdClusterStatus) planner.Restore {
	var r planner.Restore
	switch req := backupRecovery(q); {
	case fromSnapshot(ec) != nil && st.ClusterID == "":
		r = planner.Restore{Wanted: true, Verified: st.Restore != nil}
	case req != nil:
		r = planner.Restore{Wanted: true, Verified: st.Restore != nil && !st.Restore.VerifiedAt.Time.Before(req.RequestedAt)}
	default:
		return r
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionSnapshotVerified); c != nil && c.Status != metav1.ConditionTrue {
		r.Message = c.Reason + ": " + c.Message
	}
	return r
}

// observeRestore reads the store's credentials Secret from the hub while
// the cluster is being founded from a snapshot; nothing otherwise.
func (r *Reconciler) observeRestore(ctx context.Context, ec *etcdfedv1.EtcdCluster) restoreSnapshot {
	store := restoreStore(ec, readRequests(ec))
	if store == nil || store.CredentialsSecretName == "" {
		return restoreSnapshot{}
	}
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ec.Namespace, Name: store.CredentialsSecretName}
	if err := r.hubReader().Get(ctx, key, sec); err != nil {
		return restoreSnapshot{err: fmt.Errorf("store credentials Secret %s: %w", key, err)}
	}
	return restoreSnapshot{creds: sec.Data}
}

// storeCredentialsComponent labels the copies of a store's credentials.
const storeCredentialsComponent = "store-credentials"

// StoreCredentialsSecretName is the Secret next to a member, in its member
// cluster, holding a copy of the restore store's credentials; named after
// the member's EtcdMember (memberObjectName).
func StoreCredentialsSecretName(objectName string) string { return objectName + "-store-credentials" }

// memberRestore is a founding member's spec.bootstrap.restore: the one
// snapshot status.restore recorded; nil when the cluster is neither
// founded from a snapshot nor recovered from a backup.
func memberRestore(s *snapshot, st *etcdfedv1.EtcdClusterStatus, member string) (*etcdfedv1.MemberRestore, error) {
	src := restoreStore(s.ec, s.requests())
	if src == nil {
		return nil, nil
	}
	if st.Restore == nil {
		return nil, fmt.Errorf("the snapshot to restore %s from is not checked yet", member)
	}
	store := *src.DeepCopy()
	if store.CredentialsSecretName != "" {
		if s.restore.err != nil {
			return nil, s.restore.err
		}
		var cs *clusterSnapshot
		if m := statusMember(st, member); m != nil {
			cs = s.cluster(m.Cluster)
		}
		store.CredentialsSecretName = StoreCredentialsSecretName(memberObjectName(s.ec, cs, member))
	}
	return &etcdfedv1.MemberRestore{Store: store, Object: st.Restore.Object, SHA256: st.Restore.SHA256, RevisionBump: st.Restore.RevisionBump}, nil
}

// storeCredentialsSecret renders the copy of the store's credentials next
// to a member.
func storeCredentialsSecret(s *snapshot, cs *clusterSnapshot, member string) *corev1.Secret {
	labels := ownerLabels(s.ec)
	labels[etcdfedv1.LabelMember] = member
	labels[etcdfedv1.LabelComponent] = storeCredentialsComponent
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ringNamespace, Name: StoreCredentialsSecretName(memberObjectName(s.ec, cs, member)), Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       maps.Clone(s.restore.creds),
	}
}

// writeStoreCredentials writes the member's copy of the store's
// credentials, through the one writer of owned objects.
func (r *Reconciler) writeStoreCredentials(ctx context.Context, s *snapshot, cs *clusterSnapshot, member string) error {
	want := storeCredentialsSecret(s, cs, member)
	return writeOwned(ctx, cs.client, s.ec.RingUID(), cs.name, present(cs.secrets[want.Name]), want)
}

// bootstrapToken is the --initial-cluster-token of the members a step
// founds: the EtcdCluster's UID, and for a recovery from a backup (a new
// cluster under the same EtcdCluster) the UID with the recovery's start,
// so the new cluster never takes the old one's messages for its own.
func bootstrapToken(s *snapshot, st *etcdfedv1.EtcdClusterStatus) string {
	if op := st.Operation; op != nil && op.Type == etcdfedv1.OperationRecover {
		return string(s.ec.RingUID()) + "-" + forceNewClusterToken(st)
	}
	return string(s.ec.RingUID())
}

// restoringFromBackup: member is the seed of a recovery from a backup in
// flight.
func restoringFromBackup(st *etcdfedv1.EtcdClusterStatus, member string) bool {
	op := st.Operation
	return op != nil && op.Type == etcdfedv1.OperationRecover && op.Reason == planner.ReasonFromBackup && op.Member == member
}

// restoreEnded: member's restore is over. The cluster formed (its ID is
// recorded), no recovery from a backup is restoring this member, and the
// member ran on its restored data (its spoke reports an etcd ID for this
// incarnation): a pod started again finds data and restores nothing.
// Its object then drops spec.bootstrap.restore, and with it the copy of
// the store's credentials in its member cluster.
func restoreEnded(st *etcdfedv1.EtcdClusterStatus, member string, obj *etcdfedv1.EtcdMember) bool {
	if st.ClusterID == "" || restoringFromBackup(st, member) || obj == nil {
		return false
	}
	return obj.Status.Etcd != nil && obj.Status.Etcd.ID != "" && obj.Status.Incarnation == obj.Spec.Incarnation
}

// spentStoreCredentials are the members whose copy of the store's
// credentials (StoreCredentialsSecretName) is left in a visible cluster
// while their object there no longer restores from it: the restore
// ended and the object dropped spec.bootstrap.restore in an earlier
// pass. Never before the object exists: a founding member's Secret is
// written just before its object.
func spentStoreCredentials(s *snapshot) []memberRef {
	var out []memberRef
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		for name, sec := range cs.secrets {
			member := sec.Labels[etcdfedv1.LabelMember]
			if sec.Labels[etcdfedv1.LabelComponent] != storeCredentialsComponent {
				continue
			}
			obj := cs.members[member]
			if obj == nil {
				continue // the sweep deletes a member's objects with it
			}
			if name != StoreCredentialsSecretName(obj.Name) {
				continue // the object's own copy is named after it (old or new names alike)
			}
			if b := obj.Spec.Bootstrap; b != nil && b.Restore != nil && b.Restore.Store.CredentialsSecretName == name {
				continue
			}
			out = append(out, memberRef{cluster: cs.name, member: member})
		}
	}
	slices.SortFunc(out, func(a, b memberRef) int { return strings.Compare(a.cluster+"/"+a.member, b.cluster+"/"+b.member) })
	return out
}

// deleteStoreCredentials deletes the spent copies of the store's
// credentials.
func (r *Reconciler) deleteStoreCredentials(ctx context.Context, s *snapshot, refs []memberRef) error {
	var errs []error
	for _, ref := range refs {
		cs := s.cluster(ref.cluster)
		obj := cs.members[ref.member]
		if obj == nil {
			continue
		}
		sec := cs.secrets[StoreCredentialsSecretName(obj.Name)]
		if sec == nil {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleting the copy of the restore store's credentials: the restore ended", "member", ref.member, "cluster", ref.cluster)
		errs = append(errs, deleteOwned(ctx, cs.client, cs.name, sec))
	}
	return errors.Join(errs...)
}

// restore is the feature of founding from a snapshot or recovering from
// a backup: the planner's Restore input. status.restore is hub/restore's;
// a restore's end is recorded with the operation's (recordStep).
type restore struct{ s *snapshot }

func (f *restore) observe(*etcdfedv1.EtcdClusterStatus, *decision) {}

func (f *restore) input(in *planner.Input, st *etcdfedv1.EtcdClusterStatus) {
	in.Restore = restoreInput(f.s.ec, f.s.requests(), st)
}

func (f *restore) record(*etcdfedv1.EtcdClusterStatus, *decision)              {}
func (f *restore) status(*etcdfedv1.EtcdClusterStatus, *decision, applyResult) {}
