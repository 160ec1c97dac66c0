package multicluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

// RestoreFromSnapshotSpecInput is the input of RestoreFromSnapshotSpec.
type RestoreFromSnapshotSpecInput struct {
	T        testing.TB
	Topology *Topology
	// Source is the running ring to back up; it is deleted once its
	// snapshot is stored (the disaster the restore answers).
	Source *ManagedEtcd
	// S3 is the store's server; Bucket a bucket on it.
	S3     *s3test.Server
	Bucket string
	// Namespace, Name and Domain of the restored EtcdCluster.
	Namespace, Name, Domain string
}

// RestoreFromSnapshotSpec backs up a ring under a recorded workload and a
// marker writer (every acknowledged marker with its revision), deletes
// the ring, and founds a NEW EtcdCluster from the latest snapshot
// (spec.bootstrap.fromSnapshot, an S3 store with credentials). It checks
// that the hub recorded the snapshot it restored (status.restore) with the
// backup's revision and sha256; that the new ring is a new etcd cluster
// holding every marker acknowledged at or below the snapshot's revision
// and none after; that its revision is above the snapshot's by the bump,
// and a watch from an old revision is told it was compacted; and that it
// takes writes under a recorded workload. First, a corrupted copy of the
// snapshot is refused: SnapshotVerified=False SnapshotInvalid and no
// member object anywhere.
func RestoreFromSnapshotSpec(ctx context.Context, in RestoreFromSnapshotSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	must := fatalOnError(t)
	store := storeWithCredentials(ctx, t, hub, in.S3, in.Bucket, in.Source.Namespace, in.Namespace)

	// Writes, then one backup (the first is taken as soon as backups are
	// on; the yearly schedule takes no other).
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Source.Client, Prefix: "restore/", WatchEachEndpoint: true})
	markers := startMarkers(ctx, t, in.Source.Client)
	defer markers.stop()
	waitForWorkloadProgress(ctx, t, w)
	ec, err := in.Source.Get(ctx, hub)
	must(err)
	sourceID := ec.Status.ClusterID
	snap := backupOnce(ctx, t, hub, in.Source, store, nil)
	t.Logf("backup at revision %d (%d bytes, hash %s) stored at %s", snap.Revision, snap.SizeBytes, snap.Hash, snap.Location)
	// Writes go on after the snapshot: none of them may be restored.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	must(w.WaitForProgress(pctx, 50))
	cancel()
	markers.stop()
	acked := markers.snapshot()
	checkWorkload(ctx, t, w)
	DeleteEtcdClusterSpec(ctx, t, in.Topology, in.Source)
	t.Logf("source ring %s deleted with %d markers acknowledged", in.Source.Name, len(acked))

	key := strings.TrimPrefix(snap.Location, "s3://"+in.Bucket+"/hub/")

	// Bad input: a copy of the snapshot with one byte flipped, beside the
	// good one, is refused and founds nothing: its sidecar's MAC names the
	// original object, so it is refused before it is downloaded
	// (SnapshotUnauthenticated; a flipped byte under the original name is
	// SnapshotInvalid, hub/restore's TestRefusedSnapshots).
	badKey := strings.TrimSuffix(key, ".db") + "-corrupt.db"
	corruptCopy(ctx, t, in.S3, in.Bucket, "hub/"+key, "hub/"+badKey)
	bad := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name + "-bad"},
		Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "bad." + in.Domain},
			Bootstrap: &etcdfedv1.ClusterBootstrap{FromSnapshot: &etcdfedv1.SnapshotSource{Store: store, Object: badKey}}},
	}
	must(hub.Client.Create(ctx, bad))
	refused, err := WaitForSnapshotRefused(ctx, hub, &ManagedEtcd{Namespace: bad.Namespace, Name: bad.Name}, etcdfedv1.SnapshotReasonUnauthenticated, 2*time.Minute)
	must(err)
	t.Logf("renamed, corrupted snapshot refused: %s", refused.Message)
	must(hub.Client.Get(ctx, client.ObjectKeyFromObject(bad), bad))
	for _, c := range in.Topology.Members {
		var list etcdfedv1.EtcdMemberList
		must(c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(bad.UID)}))
		if len(list.Items) > 0 {
			t.Errorf("a refused snapshot created %d members in %s", len(list.Items), c.Name)
		}
	}
	must(hub.Client.Delete(ctx, bad))

	// The restore, into a new EtcdCluster.
	start := time.Now()
	restored := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: in.Topology, Namespace: in.Namespace, Name: in.Name, Domain: in.Domain, Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.Bootstrap = &etcdfedv1.ClusterBootstrap{FromSnapshot: &etcdfedv1.SnapshotSource{Store: store, Object: etcdfedv1.SnapshotLatest,
				SourceCluster: in.Source.Namespace + "/" + in.Source.Name}}
		}})
	t.Logf("restored ring %s ready %.1fs after creation", in.Name, time.Since(start).Seconds())
	got, err := restored.Get(ctx, hub)
	must(err)
	r := got.Status.Restore
	if r == nil || r.Object != key || r.Revision != snap.Revision || r.Hash != snap.Hash || r.SourceClusterID != sourceID {
		t.Fatalf("status.restore %+v, want the backup %s at revision %d from cluster %s", r, key, snap.Revision, sourceID)
	}
	if got.Status.ClusterID == sourceID {
		t.Errorf("the restored ring has the source's cluster ID %s: it must be a new cluster", sourceID)
	}
	// Once each member ran on its restored data, its object no longer
	// restores and the copy of the store's credentials next to it is gone
	// (before, it stayed for the ring's life).
	must(WaitForRestoreCleared(ctx, in.Topology, got.UID, key, r.SHA256, 2*time.Minute))

	// Every marker acknowledged at or below the snapshot's revision, with
	// its value; none after.
	cl, err := EtcdClient(restored.Client)
	must(err)
	defer cl.Close()
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	inSnap, after, at := checkPointInTime(rctx, t, cl, acked, snap.Revision)
	if inSnap == 0 || after == 0 {
		t.Errorf("%d markers at or below the snapshot's revision, %d after: the scenario must have both", inSnap, after)
	}
	if min := snap.Revision + r.RevisionBump; at < min {
		t.Errorf("restored ring at revision %d, want at least %d (snapshot %d + bump %d)", at, min, snap.Revision, r.RevisionBump)
	}
	t.Logf("restored ring at revision %d: %d markers at or below revision %d present, %d later ones absent", at, inSnap, snap.Revision, after)
	// A watcher of the old cluster resuming at its last revision is told
	// to resync.
	expectCompacted(rctx, t, cl, acked[len(acked)-1].rev)

	// The restored ring takes writes.
	w2 := StartWorkload(ctx, t, StartWorkloadInput{Client: restored.Client, Prefix: "restored/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w2)
	checkWorkload(ctx, t, w2)
	DeleteEtcdClusterSpec(ctx, t, in.Topology, restored)
}

// corruptCopy copies the object src (and its sidecar) to dst with one
// byte of the object flipped, through the S3 API.
func corruptCopy(ctx context.Context, t testing.TB, srv *s3test.Server, bucket, src, dst string) {
	t.Helper()
	c := srv.Client()
	for _, k := range []struct{ from, to string }{{src, dst}, {backupstore.MetadataKey(src), backupstore.MetadataKey(dst)}} {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k.from)})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(out.Body)
		_ = out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		if k.from == src {
			data[len(data)/2] ^= 0xff
		}
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k.to), Body: bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
	}
}

// QuorumLossFromBackupSpecInput is the input of QuorumLossFromBackupSpec.
type QuorumLossFromBackupSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// S3 is the store's server; Bucket a bucket on it.
	S3     *s3test.Server
	Bucket string
	// Etcdfed is the etcdfed CLI binary.
	Etcdfed string
}

// QuorumLossFromBackupSpec backs a 3-member ring (one member per cluster)
// up under a recorded workload and a marker writer, kills the clusters of
// two members for good, and recovers the ring from the latest backup with
// `etcdfed recover --from-backup latest --wait`. It checks that the
// recovery is refused while the ring has quorum; that the ring comes back
// as a new etcd cluster under the same names and endpoints, the first
// member (by name) restored from the snapshot as a new incarnation, holding
// every marker acknowledged at or below the snapshot's revision and none
// after (the loss is up to the schedule); that a watch from an old revision
// is told it was compacted; and that once the killed clusters come back
// the ring is three ready members, all new incarnations, one cluster ID
// from every endpoint and none of the old IDs. The workload before the loss
// and a new one after the recovery are each linearizable.
func QuorumLossFromBackupSpec(ctx context.Context, in QuorumLossFromBackupSpecInput) {
	t := in.T
	t.Helper()
	topo, hub := in.Topology, in.Topology.Hub
	must := fatalOnError(t)
	if topo.FailZone == nil {
		t.Skip("QuorumLossFromBackupSpec: the topology cannot kill clusters")
	}
	recoverCmd := func(ctx context.Context, args ...string) (string, error) {
		return etcdfedRecover(ctx, in.Etcdfed, hub, in.Etcd, append([]string{"--from-backup", "latest"}, args...)...)
	}
	store := storeWithCredentials(ctx, t, hub, in.S3, in.Bucket, in.Etcd.Namespace)

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "frombackup/", WatchEachEndpoint: true})
	markers := startMarkers(ctx, t, in.Etcd.Client)
	defer markers.stop()
	waitForWorkloadProgress(ctx, t, w)
	// Bad input: a ring with quorum is never recovered.
	out, err := recoverCmd(ctx)
	if err == nil || !strings.Contains(out, "has quorum") {
		t.Fatalf("etcdfed recover --from-backup on a quorate ring: err %v, output %q; want a refusal naming the quorum", err, out)
	}
	t.Logf("refused on a quorate ring: %s", strings.TrimSpace(out))
	// A short grace, so that the loss is declared within the test.
	snap := backupOnce(ctx, t, hub, in.Etcd, store, func(s *etcdfedv1.EtcdClusterSpec) {
		s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
	})
	t.Logf("backup at revision %d stored at %s", snap.Revision, snap.Location)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	must(w.WaitForProgress(pctx, 50))
	cancel()
	markers.stop()
	acked := markers.snapshot()
	// The writes after the snapshot will be lost by design: the workload
	// is checked up to here.
	checkWorkload(ctx, t, w)

	ec, err := in.Etcd.Get(ctx, hub)
	must(err)
	oldClusterID := ec.Status.ClusterID
	goneIDs, oldInc := map[string]bool{}, map[string]int64{}
	for _, m := range ec.Status.Members {
		goneIDs[m.ID], oldInc[m.Name] = true, m.Incarnation
	}
	seed := ec.Status.Members[0] // the first by name, in a cluster that stays
	var victims []etcdfedv1.MemberStatus
	restored := false
	t.Cleanup(func() {
		if !restored {
			for _, v := range victims {
				_ = topo.RestoreZone(context.Background(), v.Cluster)
			}
		}
	})
	for _, m := range ec.Status.Members[1:] {
		victims = append(victims, m)
		must(topo.FailZone(ctx, m.Cluster, "kill"))
		t.Logf("killed member cluster %s (member %s)", m.Cluster, m.Name)
	}
	declared, err := waitForQuorumLost(ctx, hub, in.Etcd)
	must(err)
	t.Logf("declared: %s", declared.Message)

	// Killed clusters are out of sight, not known dead: the hub forces
	// nothing before they are confirmed fenced (rule 11 restated). The
	// test killed them; it confirms that.
	fence := confirmFenced(ctx, t, hub, in.Etcd, victims, func(ctx context.Context, args ...string) (string, error) { return recoverCmd(ctx, args...) })
	start := time.Now()
	out, err = recoverCmd(ctx, "--confirm-fenced", fence, "--wait", "--timeout", "10m")
	t.Logf("etcdfed recover --from-backup latest --confirm-fenced %s --wait (%.1fs):\n%s", fence, time.Since(start).Seconds(), out)
	must(err)
	t.Logf("writable one-member ring %.1fs after etcdfed recover --from-backup", time.Since(start).Seconds())
	ec, err = in.Etcd.Get(ctx, hub)
	must(err)
	if r := ec.Status.Restore; r == nil || r.Revision != snap.Revision || !strings.HasSuffix(snap.Location, r.Object) {
		t.Errorf("status.restore %+v, want the backup at revision %d (%s)", r, snap.Revision, snap.Location)
	}
	if ec.Status.ClusterID == oldClusterID || ec.Status.ClusterID == "" {
		t.Errorf("cluster ID %q after a restore from backup, was %s: want a new one", ec.Status.ClusterID, oldClusterID)
	}

	// Point in time: up to the snapshot, nothing after.
	cl, err := EtcdClient(in.Etcd.Client)
	must(err)
	defer cl.Close()
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	inSnap, lost, at := checkPointInTime(rctx, t, cl, acked, snap.Revision)
	t.Logf("restored at revision %d: %d markers at or below revision %d present, %d acknowledged after it lost (RPO up to the schedule)", at, inSnap, snap.Revision, lost)
	expectCompacted(rctx, t, cl, acked[len(acked)-1].rev)

	// The killed clusters come back: every member a new incarnation in
	// the new cluster, the old ones fenced. They are two of the old etcd
	// cluster's three members, a quorum of it: until their objects are
	// deleted they serve the old cluster again. They come back while the
	// ring is regrowing (an Add in flight), when the hub's sweep of what
	// they left behind must not wait for the operation: that operation
	// cannot finish while they hold the new members' names.
	must(WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "an Add in flight", Timeout: 2 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		op := ec.Status.Operation
		switch {
		case op != nil && op.Type == etcdfedv1.OperationAdd:
			t.Logf("the clusters return during %s %s (step %s)", op.Type, op.Member, op.Step)
			return ""
		case op == nil && len(ec.Status.Members) == 3 && ec.Status.ReadyMembers == 3:
			t.Logf("the ring regrew to 3 before the clusters returned: no operation in flight when they do")
			return ""
		}
		return fmt.Sprintf("operation %+v, members %s", op, ec.Status.MemberSummary)
	}}))
	restored = true
	for _, v := range victims {
		must(topo.RestoreZone(ctx, v.Cluster))
		t.Logf("restored member cluster %s", v.Cluster)
	}
	returned := time.Now()
	must(WaitForFenced(ctx, WaitForFencedInput{T: t, Topology: topo, Victims: victims, OldIncarnations: oldInc, Timeout: 5 * time.Minute}))
	t.Logf("old incarnations' objects and pods gone %.1fs after the clusters returned", time.Since(returned).Seconds())
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: 3, Timeout: 10 * time.Minute})
	must(err)
	t.Logf("3 ready members %.1fs after etcdfed recover: %s", time.Since(start).Seconds(), got.Status.ZoneSummary)
	for _, m := range got.Status.Members {
		if m.Incarnation <= oldInc[m.Name] {
			t.Errorf("%s has incarnation %d, not newer than %d", m.Name, m.Incarnation, oldInc[m.Name])
		}
	}
	if got.Status.Members[0].Name != seed.Name {
		t.Errorf("members %v", got.Status.Members)
	}
	must(oneRing(ctx, in.Etcd, got.Status.ClusterID, goneIDs))
	w2 := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "afterbackup/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w2)
	checkWorkload(ctx, t, w2)

	// The seed's volume of before the recovery may hold writes newer than
	// the backup: kept and labelled, whatever the reclaim policy (the
	// scenario's ring has Delete), now that its new pod runs.
	oldClaim := in.Etcd.ObjectName(seed.Name) + "-data-" + strconv.FormatInt(oldInc[seed.Name], 10)
	pvc, err := memberCluster(t, topo, seed.Cluster).Clientset.CoreV1().PersistentVolumeClaims(etcdfedv1.DefaultRingNamespace).Get(ctx, oldClaim, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("the seed's volume of before the recovery, %s in %s: %v", oldClaim, seed.Cluster, err)
	case pvc.DeletionTimestamp != nil || pvc.Labels[etcdfedv1.LabelKept] != "true":
		t.Errorf("the seed's volume of before the recovery, %s: deletion %v, labels %v; want it kept", oldClaim, pvc.DeletionTimestamp, pvc.Labels)
	default:
		t.Logf("the seed's volume of before the recovery is kept: %s in %s, labels %v", oldClaim, seed.Cluster, pvc.Labels)
	}
}

// checkPointInTime reads the markers from c and checks that it holds a
// point-in-time copy at revision rev: every marker acknowledged at or
// below rev with its value, none acknowledged after. It returns how many
// of each, and the revision c answered at.
func checkPointInTime(ctx context.Context, t testing.TB, c *clientv3.Client, acked []marker, rev int64) (in, after int, at int64) {
	t.Helper()
	resp, err := c.Get(ctx, markerPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]string{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = string(kv.Value)
	}
	for _, m := range acked {
		v, ok := have[m.key]
		switch {
		case m.rev <= rev && (!ok || v != m.value):
			t.Errorf("marker %s (revision %d) acknowledged before the snapshot's revision %d is missing", m.key, m.rev, rev)
		case m.rev > rev && ok:
			t.Errorf("marker %s (revision %d) written after the snapshot's revision %d is in it", m.key, m.rev, rev)
		case m.rev <= rev:
			in++
		default:
			after++
		}
	}
	return in, after, resp.Header.Revision
}

// expectCompacted checks that a watch on c from rev, a revision of the
// cluster the snapshot was taken from, is told it was compacted.
func expectCompacted(ctx context.Context, t testing.TB, c *clientv3.Client, rev int64) {
	t.Helper()
	select {
	case wr := <-c.Watch(ctx, markerPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev)):
		if !errors.Is(wr.Err(), rpctypes.ErrCompacted) {
			t.Errorf("watch from the old revision %d: %v (compact revision %d), want compacted", rev, wr.Err(), wr.CompactRevision)
			return
		}
		t.Logf("a watch from the old revision %d is told it was compacted (compact revision %d)", rev, wr.CompactRevision)
	case <-ctx.Done():
		t.Fatalf("a watch from the old revision %d got no answer", rev)
	}
}

// storeWithCredentials is a store on srv's bucket whose credentials Secret
// exists in each of the hub namespaces.
func storeWithCredentials(ctx context.Context, t testing.TB, hub *Cluster, srv *s3test.Server, bucket string, namespaces ...string) etcdfedv1.BackupStore {
	t.Helper()
	store := srv.Store(bucket, "hub", "backup-credentials")
	for _, ns := range namespaces {
		if err := ensureNamespace(ctx, hub, ns); err != nil {
			t.Fatal(err)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: store.CredentialsSecretName}, Data: srv.Credentials()}
		if err := hub.Client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return store
}

// backupOnce turns backups of m on into store with a yearly schedule (the
// first backup is taken at once, no other during a test), with edit
// applied to the spec in the same write, and returns the first backup.
func backupOnce(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, store etcdfedv1.BackupStore, edit func(*etcdfedv1.EtcdClusterSpec)) etcdfedv1.BackupSnapshot {
	t.Helper()
	ec, err := m.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	before := ec.DeepCopy()
	ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: "0 0 1 1 *", Store: store}
	if edit != nil {
		edit(&ec.Spec)
	}
	if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	var snap etcdfedv1.BackupSnapshot
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: m, What: "the first backup", Timeout: 3 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy); c != nil && c.Status == metav1.ConditionFalse {
			return fmt.Sprintf("BackupHealthy=False %s: %s", c.Reason, c.Message)
		}
		if ec.Status.Backup == nil || ec.Status.Backup.LastSuccess == nil {
			return "no backup yet"
		}
		snap = *ec.Status.Backup.LastSuccess
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// WaitForSnapshotRefused waits until the EtcdCluster m, bootstrapped from
// a snapshot, says SnapshotVerified=False with the reason and has no
// status.restore, and returns the condition (timeout: 2 minutes when
// zero).
func WaitForSnapshotRefused(ctx context.Context, hub *Cluster, m *ManagedEtcd, reason string, timeout time.Duration) (*metav1.Condition, error) {
	var refused *metav1.Condition
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: m, What: "the snapshot refused (SnapshotVerified=False " + reason + ")", Timeout: orDefault(timeout, 2*time.Minute), Until: func(ec *etcdfedv1.EtcdCluster) string {
		c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionSnapshotVerified)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Sprintf("SnapshotVerified %v", c)
		}
		if c.Reason != reason || ec.Status.Restore != nil {
			return fmt.Sprintf("SnapshotVerified %s (%s), status.restore %+v", c.Reason, c.Message, ec.Status.Restore)
		}
		refused = c
		return ""
	}})
	return refused, err
}

// WaitForRestoreCleared waits until no EtcdMember of the ring (its UID)
// still restores (each restored the object key with the sha256) and the
// copies of the store's credentials beside them are gone (timeout: 2
// minutes when zero).
func WaitForRestoreCleared(ctx context.Context, topo *Topology, uid types.UID, key, sha256 string, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, 2*time.Minute), "the restore's copies of the store credentials deleted", func(ctx context.Context) (string, error) {
		var left []string
		for _, c := range topo.Members {
			var list etcdfedv1.EtcdMemberList
			if err := c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(uid)}); err != nil {
				return "", err
			}
			for _, m := range list.Items {
				if b := m.Spec.Bootstrap; b != nil && b.Restore != nil {
					if b.Restore.SHA256 != sha256 || b.Restore.Object != key {
						return "", fmt.Errorf("%s in %s restores %s (sha256 %s), want %s (sha256 %s)", m.Name, c.Name, b.Restore.Object, b.Restore.SHA256, key, sha256)
					}
					left = append(left, c.Name+"/"+m.Name+" still restores")
				}
			}
			var secs corev1.SecretList
			if err := c.Client.List(ctx, &secs, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(uid), etcdfedv1.LabelComponent: "store-credentials"}); err != nil {
				return "", err
			}
			for _, s := range secs.Items {
				left = append(left, c.Name+"/"+s.Name)
			}
		}
		return strings.Join(left, ", "), nil
	})
}
