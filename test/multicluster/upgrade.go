package multicluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// rollTimes is, per member, the time from the first sample that saw its
// object on the new spec to the first later one that saw its pod ready on
// it, in rollout order.
func rollTimes(samples []rollSample) string {
	began, done := map[string]time.Time{}, map[string]time.Time{}
	var order []string
	for _, s := range samples {
		for _, m := range s.onNew {
			if _, ok := began[m]; !ok {
				began[m] = s.at
				order = append(order, m)
			}
			if _, ok := done[m]; !ok && !slices.Contains(s.unsettled, m) {
				done[m] = s.at
			}
		}
	}
	var parts []string
	for _, m := range order {
		if d, ok := done[m]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1fs", m, d.Sub(began[m]).Seconds()))
		} else {
			parts = append(parts, m+" (not seen ready)")
		}
	}
	return strings.Join(parts, ", ")
}

// VersionImage is the default image of an etcd release, as the hub
// renders it (the local node runs bin/etcd-<release> for it).
func VersionImage(version string) string { return etcdfedv1.DefaultImageRepository + ":v" + version }

// UpgradeSpecInput changes spec.version from the ring's running version,
// up or down.
type UpgradeSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// To is the new spec.version.
	To      string
	Timeout time.Duration
	// Backup, when set, turns spec.backup on before the change and
	// requires the hub's snapshot before the first member restarts.
	Backup *UpgradeBackup
}

// UpgradeBackup is the store of the snapshot a version change takes
// first, and a way to hold it.
type UpgradeBackup struct {
	Store etcdfedv1.BackupStore
	// Credentials are the data of the store's credentials Secret (nil:
	// none).
	Credentials map[string][]byte
	// Pause and Resume stop and continue the store's server; while it is
	// stopped (for Hold) the snapshot cannot complete, and no member may
	// restart.
	Pause, Resume func() error
	Hold          time.Duration
}

// UpgradeSpec changes spec.version under a recorded workload and requires
// what RollSpecSpec requires of any rollout (one member at a time, the
// leader last after a leader move, same IDs and volumes, Progressing
// naming each member, here with reason Upgrading or Downgrading, a
// linearizable history with no acknowledged write lost), and then every
// member reporting the new version in status.members[].version and the
// cluster version of its minor in status.clusterVersion.
//
// With Backup, before the first member restarts: the hub asks for a
// snapshot (etcdfed.dev/backup-requested: before-version-<To>-...), no
// member restarts while the store is held, and the snapshot is stored,
// verified (fetched back from the store, sha256 and database checked) and
// has a revision.
//
// A downgrade (To's minor below the cluster version) must follow etcd's
// procedure before the first member restarts: etcd reports the downgrade
// enabled to To's minor and every member's storage version at that minor
// (read from etcd, not from the hub), and the hub records a
// DowngradeEnabled event.
func UpgradeSpec(ctx context.Context, in UpgradeSpecInput) RollResult {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	minor := minorOf(in.To)
	// A downgrade: To's minor below the one the members run (the cluster
	// version etcd reports is 3.0.0 for a few seconds after it forms).
	down := false
	for _, m := range ec.Status.Members {
		down = down || minorNumber(minor) < minorNumber(minorOf(m.Version))
	}
	t.Logf("spec.version %s -> %s (cluster version %s): %s", ec.Spec.Version, in.To, ec.Status.ClusterVersion, map[bool]string{true: "a downgrade", false: "an upgrade"}[down])
	if in.Backup != nil {
		enableUpgradeBackup(ctx, t, in)
		if err := in.Backup.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Logf("store paused: the snapshot before the first member cannot complete")
		defer func() { _ = in.Backup.Resume() }()
	}
	var snap *etcdfedv1.BackupSnapshot
	beforeFirst := func(ctx context.Context, changed time.Time, look func(context.Context) (rollSample, error)) {
		if in.Backup != nil {
			snap = snapshotBeforeFirst(ctx, t, in, changed, look)
		}
		if down {
			onNew := WaitForBeforeFirstMember(ctx, t, look, "etcd's downgrade enabled to "+minor+" and every member's storage version "+minor+".0", func(ctx context.Context, onNew []string) (string, error) {
				return downgradeEnabled(ctx, in.Etcd, minor, onNew)
			})
			t.Logf("etcd's downgrade enabled to %s and every member's storage version %s.0 (members already on the new spec, not asked: %v) %.1fs after the change",
				minor, minor, onNew, time.Since(changed).Seconds())
		}
	}
	res := RollSpecSpec(ctx, RollSpecInput{T: t, Topology: in.Topology, Etcd: in.Etcd, Image: VersionImage(in.To), Timeout: in.Timeout,
		Change: func(s *etcdfedv1.EtcdClusterSpec) { s.Version = in.To }, BeforeFirst: beforeFirst})
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "every member reports " + in.To + " and the cluster version " + minor, Timeout: time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		var off []string
		for _, m := range ec.Status.Members {
			if m.Version != in.To {
				off = append(off, m.Name+"="+m.Version)
			}
		}
		if len(off) > 0 || !strings.HasPrefix(ec.Status.ClusterVersion, minor+".") {
			return fmt.Sprintf("members on another version: %v; cluster version %q", off, ec.Status.ClusterVersion)
		}
		t.Logf("every member runs %s; cluster version %s", in.To, ec.Status.ClusterVersion)
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	if down {
		if err := waitForEventReason(ctx, hub, in.Etcd, "DowngradeEnabled", res.Changed); err != nil {
			t.Error(err)
		}
		logHubEvents(ctx, t, hub, in.Etcd, res.Changed, EventQuery{Reasons: []string{"DowngradeEnabled"}, RecordedSince: res.Changed})
	}
	if in.Backup != nil {
		logHubEvents(ctx, t, hub, in.Etcd, res.Changed, EventQuery{Reasons: []string{"BackupRequested", "BackupSucceeded"}, RecordedSince: res.Changed})
	}
	if snap != nil {
		verifyUpgradeSnapshot(ctx, t, in, *snap, res)
	}
	return res
}

// enableUpgradeBackup turns spec.backup on (a yearly schedule: the first
// snapshot is taken at once, the next in a year) and waits for that first
// snapshot, so that the next one is the version change's.
func enableUpgradeBackup(ctx context.Context, t testing.TB, in UpgradeSpecInput) {
	t.Helper()
	hub := in.Topology.Hub
	store := in.Backup.Store
	if in.Backup.Credentials != nil {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: in.Etcd.Namespace, Name: "upgrade-backup-credentials"}, Data: in.Backup.Credentials}
		if err := hub.Client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		store.CredentialsSecretName = sec.Name
	}
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	before := ec.DeepCopy()
	ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: "@yearly", Store: store}
	if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "the first scheduled snapshot", Timeout: 2 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		if st := ec.Status.Backup; st == nil || st.LastSuccess == nil || st.InProgress != nil {
			return fmt.Sprintf("backup status %+v", st)
		}
		t.Logf("backups on (%s): first snapshot %s, revision %d", store.URL, ec.Status.Backup.LastSuccess.Location, ec.Status.Backup.LastSuccess.Revision)
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshotBeforeFirst waits, with the store paused, for the hub to ask
// for the version change's snapshot, holds the store for Hold while
// requiring that no member restarts and that the hub says what it waits
// for, then resumes the store and waits for the snapshot to be stored,
// still with no member restarted. It returns the snapshot.
func snapshotBeforeFirst(ctx context.Context, t testing.TB, in UpgradeSpecInput, changed time.Time, look func(context.Context) (rollSample, error)) *etcdfedv1.BackupSnapshot {
	t.Helper()
	hub := in.Topology.Hub
	prefix := "before-version-" + in.To + "-"
	var request string
	WaitForBeforeFirstMember(ctx, t, look, "the hub asking for a snapshot "+prefix+"...", func(ctx context.Context, _ []string) (string, error) {
		ec, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		request = ec.Annotations[etcdfedv1.AnnotationBackupRequested]
		if !strings.HasPrefix(request, prefix) {
			return fmt.Sprintf("backup request %q", request), nil
		}
		return "", nil
	})
	t.Logf("the hub asked for snapshot %s %.1fs after the change", request, time.Since(changed).Seconds())
	holdEnd := time.Now().Add(in.Backup.Hold)
	var waiting string
	for time.Now().Before(holdEnd) && !t.Failed() {
		s, err := look(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.onNew) > 0 {
			t.Errorf("%v on version %s while the snapshot %s could not complete (store paused)", s.onNew, in.To, request)
		}
		ec, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			t.Fatal(err)
		}
		if st := ec.Status.Backup; st != nil && st.LastSuccess != nil && st.LastSuccess.Request == request {
			t.Fatalf("snapshot %s stored while its store was paused", request)
		}
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing); c != nil {
			waiting = fmt.Sprintf("Progressing=%s %s: %s", c.Status, c.Reason, c.Message)
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	t.Logf("store held %s, no member restarted; %s", in.Backup.Hold, waiting)
	if !strings.Contains(waiting, "snapshot") {
		t.Errorf("while the snapshot was held the hub said %q; want it to name the snapshot it waits for", waiting)
	}
	if err := in.Backup.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	var snap etcdfedv1.BackupSnapshot
	WaitForBeforeFirstMember(ctx, t, look, "snapshot "+request+" stored", func(ctx context.Context, _ []string) (string, error) {
		ec, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		st := ec.Status.Backup
		if st != nil && st.LastFailure != nil && st.LastFailure.Request == request {
			return "", fmt.Errorf("snapshot %s failed: %s: %s", request, st.LastFailure.Reason, st.LastFailure.Message)
		}
		if st == nil || st.LastSuccess == nil || st.LastSuccess.Request != request {
			return fmt.Sprintf("backup status %+v", st), nil
		}
		snap = *st.LastSuccess
		return "", nil
	})
	t.Logf("snapshot %s stored %.1fs after the store resumed: %s, revision %d, %d bytes, from %s, took %s",
		request, time.Since(resumed).Seconds(), snap.Location, snap.Revision, snap.SizeBytes, snap.Member, snap.Duration.Duration)
	return &snap
}

// WaitForBeforeFirstMember polls cond until it holds, and fails the test
// if a member is seen on the new spec before it does. Each round looks at the
// members before it asks cond (which is told the members already on the
// new spec, restarting or restarted, whose own state it may leave out),
// so a member seen on the new spec while cond still did not hold did
// restart first.
func WaitForBeforeFirstMember(ctx context.Context, t testing.TB, look func(context.Context) (rollSample, error), what string, cond func(ctx context.Context, onNew []string) (string, error)) (onNew []string) {
	t.Helper()
	err := poll(ctx, 3*time.Minute, what+" before any member restarts", func(ctx context.Context) (string, error) {
		s, err := look(ctx)
		if err != nil {
			return err.Error(), nil
		}
		onNew = s.onNew
		why, err := cond(ctx, s.onNew)
		if err != nil || why == "" {
			return why, err
		}
		if len(s.onNew) > 0 {
			return "", fmt.Errorf("%v restarted on the new spec before %s (%s)", s.onNew, what, why)
		}
		return why, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return onNew
}

// downgradeEnabled reads the status of every member but those in skip
// from etcd: "" when each reports the downgrade enabled to minor and its
// storage version at it.
func downgradeEnabled(ctx context.Context, m *ManagedEtcd, minor string, skip []string) (string, error) {
	var off []string
	err := eachMemberStatus(ctx, m, skip, func(name string, st *clientv3.StatusResponse, err error) {
		switch {
		case err != nil:
			off = append(off, fmt.Sprintf("%s: %v", name, err))
		case st.DowngradeInfo == nil || !st.DowngradeInfo.Enabled || minorOf(st.DowngradeInfo.TargetVersion) != minor || minorOf(st.StorageVersion) != minor:
			off = append(off, fmt.Sprintf("%s: downgrade %+v, storage version %s", name, st.DowngradeInfo, st.StorageVersion))
		}
	})
	return strings.Join(off, "; "), err
}

// WaitForDowngradeCancelled waits until every member runs ready on back,
// with no operation in flight and the cluster version at back's minor,
// and etcd reports the downgrade cancelled (downgradeCancelled; timeout:
// 10 minutes when zero).
func WaitForDowngradeCancelled(ctx context.Context, hub *Cluster, m *ManagedEtcd, back string, timeout time.Duration) error {
	minor := minorOf(back)
	return poll(ctx, orDefault(timeout, 10*time.Minute), "the downgrade cancelled and every member on "+back, func(ctx context.Context) (string, error) {
		got, err := m.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		var off []string
		for _, mem := range got.Status.Members {
			if mem.Version != back || !mem.Ready {
				off = append(off, fmt.Sprintf("%s (%s, ready %v)", mem.Name, mem.Version, mem.Ready))
			}
		}
		if len(off) > 0 || got.Status.Operation != nil || !strings.HasPrefix(got.Status.ClusterVersion, minor+".") {
			return fmt.Sprintf("members %v, operation %+v, cluster version %s", off, got.Status.Operation, got.Status.ClusterVersion), nil
		}
		return downgradeCancelled(ctx, m, minor)
	})
}

// eachMemberStatus asks every member in etcd's member list but those in
// skip for its status, at its first client URL.
func eachMemberStatus(ctx context.Context, m *ManagedEtcd, skip []string, f func(name string, st *clientv3.StatusResponse, err error)) error {
	c, err := EtcdClient(m.Client)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	list, err := c.MemberList(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("member list: %w", err)
	}
	for _, mem := range list.Members {
		if slices.Contains(skip, mem.Name) || len(mem.ClientURLs) == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.Status(sctx, mem.ClientURLs[0])
		cancel()
		f(mem.Name, st, err)
	}
	return nil
}

// verifyUpgradeSnapshot fetches the snapshot taken before the version
// change back from the store, verifies it and compares it with status.
func verifyUpgradeSnapshot(ctx context.Context, t testing.TB, in UpgradeSpecInput, snap etcdfedv1.BackupSnapshot, res RollResult) {
	t.Helper()
	store, err := backupstore.Open(ctx, in.Backup.Store, in.Backup.Credentials)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	key, ok := strings.CutPrefix(snap.Location, store.Location(""))
	if !ok {
		t.Fatalf("snapshot %s is not in the store %s", snap.Location, store.Location(""))
	}
	info, _, err := store.FetchVerified(ctx, key, filepath.Join(t.TempDir(), "before-version.db"))
	if err != nil {
		t.Fatalf("the snapshot before the version change: %v", err)
	}
	if info.Revision != snap.Revision || snap.Revision <= 0 {
		t.Errorf("the snapshot before the version change holds revision %d; status says %d", info.Revision, snap.Revision)
	}
	// When it was stored: the hub's BackupSucceeded event (status.backup
	// has whole seconds, and its duration counts from the backup's start,
	// before the stream).
	var stored time.Time
	evs, err := ListHubEvents(ctx, in.Topology.Hub, in.Etcd, EventQuery{Reasons: []string{"BackupSucceeded"}, NoteHas: []string{snap.Location}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		stored = e.First
	}
	t.Logf("snapshot %s verified from the store (sha256 and database checked, revision %d, %d keys, storage version %q); stored %.1fs after the change; first member seen on %s %.1fs after the change",
		key, info.Revision, info.TotalKeys, info.StorageVersion, stored.Sub(res.Changed).Seconds(), in.To, res.FirstOnNew.Sub(res.Changed).Seconds())
	if stored.IsZero() || !stored.Before(res.FirstOnNew) {
		t.Errorf("snapshot stored at %s (BackupSucceeded event), not before the first member was seen on the new version at %s", stored, res.FirstOnNew)
	}
}

// minorOf is "3.5" of "3.5.21".
func minorOf(v string) string { return etcdversion.MinorOf(v) }

// minorNumber is 5 of "3.5", -1 when it is not one.
func minorNumber(minor string) int {
	v, ok := etcdversion.ParseLoose(minor)
	if !ok {
		return -1
	}
	return v.Minor
}

// RefusedVersionSpecInput sets a spec.version the API refuses.
type RefusedVersionSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// To is the refused spec.version; Want a part of the message.
	To, Want string
	// Watch is how long nothing may move after the refusal.
	Watch time.Duration
}

// RefusedVersionSpec sets spec.version to To and requires the API server
// to refuse it with a message containing Want, and then, through Watch,
// the ring to be left as it was: spec and generation unchanged, no
// operation, no member's object changed, no member restarted.
func RefusedVersionSpec(ctx context.Context, in RefusedVersionSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	objects := func() map[string]string {
		out := map[string]string{}
		for _, c := range in.Topology.Members {
			var list etcdfedv1.EtcdMemberList
			if err := c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
				t.Fatal(err)
			}
			for _, m := range list.Items {
				out[c.Name+"/"+m.Name] = fmt.Sprintf("generation %d image %s", m.Generation, m.Spec.Image)
				// The member's pod (the ring namespace holds other
				// rings' pods too).
				p, err := c.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, m.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				out[c.Name+"/pod/"+p.Name] = string(p.UID)
			}
		}
		return out
	}
	before := objects()
	patched := ec.DeepCopy()
	patched.Spec.Version = in.To
	err = hub.Client.Patch(ctx, patched, client.MergeFrom(ec))
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), in.Want) {
		t.Fatalf("spec.version %s -> %s: got %v; want it refused as invalid with %q", ec.Spec.Version, in.To, err, in.Want)
	}
	t.Logf("spec.version %s -> %s refused: %v", ec.Spec.Version, in.To, err)
	if err := HoldFor(ctx, in.Watch, time.Second, func(ctx context.Context) error {
		got, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return err
		}
		if got.Spec.Version != ec.Spec.Version || got.Generation != ec.Generation || got.Status.Operation != nil {
			return fmt.Errorf("after the refusal: version %s, generation %d -> %d, operation %+v", got.Spec.Version, ec.Generation, got.Generation, got.Status.Operation)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if after := objects(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("member objects or pods changed after the refusal:\nbefore %v\nafter  %v", before, after)
	}
}

// HaltedUpgradeSpecInput sets a version no member can start on.
type HaltedUpgradeSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Broken is a spec.version the CRD accepts but no node can run (no
	// bin/etcd-<Broken>); Good is the version the ring runs.
	Broken, Good string
	// Hold is how long the halt is watched before the spec is set back.
	Hold time.Duration
}

// HaltedUpgradeSpec sets spec.version to a release whose image cannot run,
// under a recorded workload. The first member rolled must fail to start,
// and the hub must stop there: Progressing=False with reason RolloutHalted
// naming the member and its container's error, Degraded=True saying the
// same, no other member's object changed through Hold, the member neither
// replaced nor removed. Setting spec.version back brings the member back on
// its volume and every member ready; the history stays linearizable with
// no acknowledged write lost.
func HaltedUpgradeSpec(ctx context.Context, in HaltedUpgradeSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	idsBefore, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "halt/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)

	setVersion := func(v string) { setSpecVersion(ctx, t, hub, in.Etcd, v) }
	start := time.Now()
	setVersion(in.Broken)
	var halted string
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "Progressing=False RolloutHalted", Timeout: 5 * time.Minute, Until: func(got *etcdfedv1.EtcdCluster) string {
		c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionProgressing)
		if c == nil || c.Reason != etcdfedv1.ReasonRolloutHalted || got.Status.Operation == nil {
			return fmt.Sprintf("Progressing %+v", c)
		}
		halted = got.Status.Operation.Member
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, halted) || !strings.Contains(c.Message, "CreateContainerError") || !strings.Contains(c.Message, in.Broken) {
			return fmt.Sprintf("condition Progressing=%s %s: %q; want False, naming %s, its CreateContainerError and version %s", c.Status, c.Reason, c.Message, halted, in.Broken)
		}
		d := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, "rollout halted: "+halted) {
			return fmt.Sprintf("Degraded %+v", d)
		}
		t.Logf("halted %.1fs after the change: Progressing=False %s: %s", time.Since(start).Seconds(), c.Reason, c.Message)
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Through Hold, only the halted member is on the broken version, and
	// the others stay ready voters.
	image := VersionImage(in.Broken)
	if err := HoldFor(ctx, in.Hold, time.Second, func(ctx context.Context) error {
		s, err := sampleRoll(ctx, RollSpecInput{Topology: in.Topology, Etcd: in.Etcd, Image: image}, ec.UID, nil)
		switch {
		case err != nil:
			return err
		case !slices.Equal(s.onNew, []string{halted}):
			return fmt.Errorf("members on %s: %v; want only the halted %s", in.Broken, s.onNew, halted)
		case !slices.Equal(s.unsettled, []string{halted}):
			return fmt.Errorf("members not ready on their spec: %v; want only the halted %s", s.unsettled, halted)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.LastIncarnation != ec.Status.LastIncarnation {
		t.Errorf("the halted member was replaced (last incarnation %d -> %d)", ec.Status.LastIncarnation, got.Status.LastIncarnation)
	}
	if err := waitForEventReason(ctx, hub, in.Etcd, "MemberRoll", start); err != nil {
		t.Error(err)
	}

	setVersion(in.Good)
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(ec.Status.Members), Timeout: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitForRolled(ctx, WaitForRolledInput{Roll: RollSpecInput{Topology: in.Topology, Etcd: in.Etcd, Image: VersionImage(in.Good)}, UID: ec.UID,
		NoOperation: true, Timeout: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	idsAfter, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(idsAfter) != fmt.Sprint(idsBefore) {
		t.Errorf("member list changed: before %v, after %v", idsBefore, idsAfter)
	}
	t.Logf("longest gap between acknowledged writes %s", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}

// setSpecVersion sets spec.version.
func setSpecVersion(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, v string) {
	t.Helper()
	ec, err := m.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	before := ec.DeepCopy()
	ec.Spec.Version = v
	if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// AbandonedDowngradeSpecInput starts a downgrade and sets it back.
type AbandonedDowngradeSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// To is the lower version the downgrade starts to; Back the version
	// the ring runs and is set back to.
	To, Back string
}

// AbandonedDowngradeSpec sets spec.version to a lower minor under a
// recorded workload, waits until the first member runs it, and sets
// spec.version back. The hub must cancel etcd's downgrade (a
// DowngradeCancelled event) and roll that member back: then etcd reports
// no downgrade, every member's storage version and the cluster version at
// Back's minor again (read from etcd), every member runs Back, the member
// list and incarnations are unchanged, and the history is linearizable
// with no acknowledged write lost.
func AbandonedDowngradeSpec(ctx context.Context, in AbandonedDowngradeSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	idsBefore, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "abandon/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	start := time.Now()
	setSpecVersion(ctx, t, hub, in.Etcd, in.To)
	var first string
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "a member ready on " + in.To, Timeout: 10 * time.Minute, Until: func(got *etcdfedv1.EtcdCluster) string {
		for _, m := range got.Status.Members {
			if m.Version == in.To && m.Ready {
				first = m.Name
				return ""
			}
		}
		return fmt.Sprintf("cluster version %s, operation %+v", got.Status.ClusterVersion, got.Status.Operation)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s ready on %s %.1fs after the downgrade began; setting spec.version back to %s", first, in.To, time.Since(start).Seconds(), in.Back)
	back := time.Now()
	setSpecVersion(ctx, t, hub, in.Etcd, in.Back)
	minor := minorOf(in.Back)
	if err := WaitForDowngradeCancelled(ctx, hub, in.Etcd, in.Back, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("downgrade given up: etcd reports no downgrade, cluster and storage versions %s.0, every member on %s, %.1fs after spec.version was set back", minor, in.Back, time.Since(back).Seconds())
	if err := waitForEventReason(ctx, hub, in.Etcd, "DowngradeCancelled", back); err != nil {
		t.Error(err)
	}
	logHubEvents(ctx, t, hub, in.Etcd, start, EventQuery{Reasons: []string{"DowngradeEnabled", "DowngradeCancelled", "MemberRoll", "MemberRollDone"}, RecordedSince: start})
	got, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.LastIncarnation != ec.Status.LastIncarnation {
		t.Errorf("new incarnations (%d -> %d)", ec.Status.LastIncarnation, got.Status.LastIncarnation)
	}
	idsAfter, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(idsAfter) != fmt.Sprint(idsBefore) {
		t.Errorf("member list changed: before %v, after %v", idsBefore, idsAfter)
	}
	t.Logf("longest gap between acknowledged writes %s", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}

// downgradeCancelled reads every member's status from etcd: "" when none
// reports a downgrade enabled and each reports its storage version at
// minor.
func downgradeCancelled(ctx context.Context, m *ManagedEtcd, minor string) (string, error) {
	var off []string
	err := eachMemberStatus(ctx, m, nil, func(name string, st *clientv3.StatusResponse, err error) {
		switch {
		case err != nil:
			off = append(off, fmt.Sprintf("%s: %v", name, err))
		case (st.DowngradeInfo != nil && st.DowngradeInfo.Enabled) || minorOf(st.StorageVersion) != minor:
			off = append(off, fmt.Sprintf("%s: downgrade %+v, storage version %s", name, st.DowngradeInfo, st.StorageVersion))
		}
	})
	return strings.Join(off, "; "), err
}

// waitForEventReason waits for an event with reason on the EtcdCluster
// since start.
func waitForEventReason(ctx context.Context, hub *Cluster, m *ManagedEtcd, reason string, start time.Time) error {
	_, err := WaitForHubEvent(ctx, WaitForHubEventInput{Hub: hub, Etcd: m, Timeout: 30 * time.Second,
		Query: EventQuery{Reasons: []string{reason}, RecordedSince: start}})
	return err
}
