package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/diskspace"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// Bounds of the calls around the snapshot itself (which spec.backup.timeout
// bounds).
const (
	storeCheckTimeout = 30 * time.Second
	pruneTimeout      = 2 * time.Minute
)

// DefaultMaxTimeout is the hub's bound on one backup when
// Reconciler.MaxTimeout is zero (spec.backup.timeout allows up to 24 h).
const DefaultMaxTimeout = time.Hour

// timeout is how long one backup of spec may take: spec.backup.timeout
// (default etcdfedv1.DefaultBackupTimeout) within MaxTimeout; bounded when
// MaxTimeout cut it.
func (r *Reconciler) timeout(spec *etcdfedv1.BackupSpec) (d time.Duration, bounded bool) {
	d, _ = time.ParseDuration(etcdfedv1.DefaultBackupTimeout)
	if spec.Timeout != nil && spec.Timeout.Duration > 0 {
		d = spec.Timeout.Duration
	}
	limit := r.MaxTimeout
	if limit <= 0 {
		limit = DefaultMaxTimeout
	}
	if d > limit {
		return limit, true
	}
	return d, false
}

// outcome is the result of one backup.
type outcome struct {
	started  time.Time
	duration time.Duration
	// success
	snapshot *etcdfedv1.BackupSnapshot
	retained int
	pruned   []backupstore.Snapshot
	pruneErr error
	// failure
	reason string
	err    error
}

func failed(started time.Time, reason string, err error) outcome {
	return outcome{started: started, reason: reason, err: err}
}

// run takes one backup of ec: store reachable, source chosen, snapshot
// streamed and checked, its sidecar signed with the ring's snapshot key,
// uploaded, then pruned. Every step is bounded; the first that fails ends
// the backup with its reason.
//
// spec.backup.timeout bounds it, within the hub's own bound (MaxTimeout):
// the tenant's store holds one of the hub's shared workers for as long as
// the backup runs.
func (r *Reconciler) run(ctx context.Context, ec *etcdfedv1.EtcdCluster, trigger etcdfedv1.BackupTrigger) (o outcome) {
	spec := ec.Spec.Backup
	started := r.now()
	d, bounded := r.timeout(spec)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	defer func() {
		if o.err != nil && bounded && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			o.err = fmt.Errorf("%w (the hub bounds a backup to %s, --max-backup-timeout, below spec.backup.timeout %s)", o.err, d, spec.Timeout.Duration)
		}
	}()

	// The store first: no snapshot is taken for a store that cannot take it.
	store, reason, err := r.openStore(ctx, ec)
	if err != nil {
		return failed(started, reason, err)
	}
	defer func() { _ = store.Close() }()
	etcd, src, err := r.source(ctx, ec)
	if err != nil {
		return failed(started, etcdfedv1.BackupReasonNoHealthyMember, err)
	}
	defer func() { _ = etcd.Close() }()
	if reason, err := r.checkScratch(src.member); err != nil {
		return failed(started, reason, err)
	}
	path := filepath.Join(r.ScratchDir, fmt.Sprintf("etcdfed-%s-%s-%d.db", ec.Namespace, ec.Name, started.UnixNano()))
	defer func() { _ = os.Remove(path) }()
	snap, reason, err := r.stream(ctx, etcd, src, path)
	if err != nil {
		return failed(started, reason, err)
	}
	key, size, err := r.upload(ctx, ec, store, snap, trigger)
	if err != nil {
		return failed(started, etcdfedv1.BackupReasonUploadFailed, err)
	}
	out := outcome{started: started, duration: r.now().Sub(started), snapshot: &etcdfedv1.BackupSnapshot{
		Time: metav1Time(snap.taken), Revision: snap.info.Revision, SizeBytes: size, Location: store.Location(key),
		Member: src.member.Name, Hash: snap.info.HashHex(), Trigger: trigger,
	}}
	out.snapshot.Duration.Duration = out.duration.Round(time.Millisecond)

	// Prune: its own bound, so a slow listing never fails the backup itself.
	pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), pruneTimeout)
	defer pcancel()
	dir := backupstore.ClusterDir(ec.Namespace, ec.Name, snap.clusterID)
	out.pruned, out.retained, out.pruneErr = store.Prune(pctx, dir, retention(spec.Retention), r.now())
	return out
}

// openStore opens spec.backup.store with its credentials and checks that
// it answers; on failure, the reason says why.
func (r *Reconciler) openStore(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*backupstore.Store, string, error) {
	spec := ec.Spec.Backup
	var creds map[string][]byte
	if name := spec.Store.CredentialsSecretName; name != "" {
		sec, err := r.readSecret(ctx, ec, name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				err = fmt.Errorf("credentials Secret %s/%s not found", ec.Namespace, name)
			}
			return nil, etcdfedv1.BackupReasonCredentials, err
		}
		creds = sec.Data
	}
	store, err := backupstore.Open(ctx, spec.Store, creds)
	if err != nil {
		return nil, storeReason(err), err
	}
	cctx, ccancel := context.WithTimeout(ctx, storeCheckTimeout)
	err = store.Check(cctx)
	ccancel()
	if err != nil {
		_ = store.Close()
		return nil, etcdfedv1.BackupReasonStoreUnreachable, err
	}
	return store, "", nil
}

// sourceMember is the member a snapshot is streamed from, and the ring as
// seen when it was chosen.
type sourceMember struct {
	member planner.ListEntry
	view   planner.Etcd
}

// source connects to the ring and picks the member to stream from: a
// healthy follower (PickSource), never the member an operation is
// changing.
func (r *Reconciler) source(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*etcdops.Client, sourceMember, error) {
	etcd, err := etcdops.ForRing(ctx, r.Reader, ec)
	if err != nil {
		return nil, sourceMember{}, err
	}
	view := etcd.Observe(ctx)
	var avoid []string
	if op := ec.Status.Operation; op != nil && op.Member != "" {
		avoid = append(avoid, op.Member)
	}
	src, err := PickSource(view, avoid...)
	if err != nil {
		_ = etcd.Close()
		return nil, sourceMember{}, err
	}
	return etcd, sourceMember{member: src, view: view}, nil
}

// checkScratch makes sure the scratch directory has room for a snapshot
// of the source's database file (a snapshot is about its size), before
// anything is streamed.
func (r *Reconciler) checkScratch(src planner.ListEntry) (string, error) {
	err := diskspace.Check(r.FreeSpace, r.ScratchDir, src.DBSize+diskspace.Margin,
		fmt.Sprintf("a snapshot of %s (database file %d bytes) in the hub's scratch directory (--backup-scratch-dir, with a %d-byte margin)", src.Name, src.DBSize, diskspace.Margin))
	switch {
	case err == nil:
		return "", nil
	case errors.Is(err, diskspace.ErrInsufficient):
		return etcdfedv1.BackupReasonInsufficientSpace, err
	}
	return etcdfedv1.BackupReasonSnapshotFailed, err
}

// streamed is a snapshot saved in the scratch directory and checked.
type streamed struct {
	path  string
	taken time.Time
	info  etcdsnapshot.Info
	// memberID is the ID of the member that served it.
	memberID  uint64
	clusterID string
	src       planner.ListEntry
}

// stream saves the source's snapshot to path while checking etcd's
// appended sha256, and reads it as `etcdutl snapshot status` does.
func (r *Reconciler) stream(ctx context.Context, etcd *etcdops.Client, src sourceMember, path string) (streamed, string, error) {
	ctrl.LoggerFrom(ctx).Info("Taking snapshot", "member", src.member.Name, "leader", src.member.ID == src.view.LeaderID)
	out := streamed{path: path, taken: r.now(), clusterID: strconv.FormatUint(src.view.ClusterID, 16), src: src.member}
	sinfo, err := etcd.Snapshot(ctx, src.member.ClientURLs, func(stream io.Reader, revisionBefore int64) error {
		var err error
		out.info, err = etcdsnapshot.Save(stream, path, revisionBefore)
		return err
	})
	if err != nil {
		reason := etcdfedv1.BackupReasonSnapshotFailed
		if errors.Is(err, etcdsnapshot.ErrInvalid) {
			reason = etcdfedv1.BackupReasonVerificationFailed
		}
		return streamed{}, reason, fmt.Errorf("snapshot from %s: %w", src.member.Name, err)
	}
	out.memberID = sinfo.MemberID
	return out, "", nil
}

// upload signs the snapshot's metadata sidecar with the ring's snapshot
// key and uploads both; it returns the snapshot's key and stored size.
func (r *Reconciler) upload(ctx context.Context, ec *etcdfedv1.EtcdCluster, store *backupstore.Store, snap streamed, trigger etcdfedv1.BackupTrigger) (string, int64, error) {
	dir := backupstore.ClusterDir(ec.Namespace, ec.Name, snap.clusterID)
	key := backupstore.SnapshotKey(dir, snap.taken, snap.info.Revision)
	info := snap.info
	md := backupstore.Metadata{
		Namespace: ec.Namespace, Name: ec.Name, UID: string(ec.UID), ClusterID: snap.clusterID,
		Member: snap.src.Name, MemberID: strconv.FormatUint(snap.memberID, 16),
		Revision: info.Revision, Hash: info.HashHex(), TotalKeys: info.TotalKeys, StorageVersion: info.StorageVersion,
		SHA256: info.SHA256, SizeBytes: info.Size, TakenAt: snap.taken.UTC(), Trigger: string(trigger),
	}
	mk, err := r.snapshotKey(ctx, ec)
	if err != nil {
		return "", 0, err
	}
	md.Sign(key, mk)
	size, err := store.Upload(ctx, key, snap.path, md)
	if err != nil {
		return "", 0, err
	}
	return key, size, nil
}

// retention resolves the spec's retention with its default.
func retention(s etcdfedv1.BackupRetention) backupstore.Retention {
	var out backupstore.Retention
	if s.MaxCount != nil {
		out.MaxCount = int(*s.MaxCount)
	}
	if s.MaxAge != nil {
		out.MaxAge = s.MaxAge.Duration
	}
	if out.MaxCount == 0 && out.MaxAge == 0 {
		out.MaxCount = int(etcdfedv1.DefaultBackupMaxCount)
	}
	return out
}

func storeReason(err error) string {
	switch {
	case errors.Is(err, backupstore.ErrCredentials):
		return etcdfedv1.BackupReasonCredentials
	case errors.Is(err, backupstore.ErrInvalidStore):
		return etcdfedv1.BackupReasonInvalidSpec
	}
	return etcdfedv1.BackupReasonStoreUnreachable
}

// snapshotKey is the ring's snapshot key (backupstore.KeySecretName),
// created with the first backup. It is never replaced: every snapshot the
// ring wrote is checked against it. The Secret has no owner, so a new
// EtcdCluster founded from the ring's snapshots after it was deleted can
// still check them.
func (r *Reconciler) snapshotKey(ctx context.Context, ec *etcdfedv1.EtcdCluster) ([]byte, error) {
	name := backupstore.KeySecretName(ec.Name)
	sec, err := r.readSecret(ctx, ec, name)
	if apierrors.IsNotFound(err) {
		k, kerr := backupstore.NewMACKey()
		if kerr != nil {
			return nil, kerr
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: name, Labels: map[string]string{
				etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue, etcdfedv1.LabelClusterName: ec.Name,
				etcdfedv1.LabelClusterNamespace: ec.Namespace, etcdfedv1.LabelComponent: "snapshot-key",
			}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{backupstore.KeySecretField: k},
		}
		ctrl.LoggerFrom(ctx).Info("Creating the ring's snapshot key", "secret", name)
		err = r.Client.Create(ctx, sec)
		if apierrors.IsAlreadyExists(err) {
			sec, err = r.readSecret(ctx, ec, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot key Secret %s/%s: %w", ec.Namespace, name, err)
	}
	k := sec.Data[backupstore.KeySecretField]
	if len(k) < 16 {
		return nil, fmt.Errorf("snapshot key Secret %s/%s: key %q holds %d bytes, want at least 16", ec.Namespace, name, backupstore.KeySecretField, len(k))
	}
	return k, nil
}
