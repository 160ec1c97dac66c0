package multicluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/etcdtest"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

// BackupsUnderLoadSpecInput is the input of BackupsUnderLoadSpec.
type BackupsUnderLoadSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Store and the data of its credentials Secret (nil: none).
	Store       etcdfedv1.BackupStore
	Credentials map[string][]byte
	// Schedule; default "@every 1m".
	Schedule string
	// Backups is how many scheduled backups to watch (default 3); Keep is
	// retention.maxCount (default 2).
	Backups, Keep int
}

// marker is a write acknowledged with its revision.
type marker struct {
	key, value string
	rev        int64
}

// BackupsUnderLoadSpec turns on scheduled backups of a running ring while
// a recorded workload and a marker writer run, and checks that backups
// appear on schedule, each from a follower and healthy, that the store
// holds exactly the newest Keep of them, and that the newest one, restored
// into a fresh etcd, holds exactly the acknowledged marker writes up to
// its revision and none after (a point-in-time copy). The workload must
// stay linearizable with no acknowledged write lost.
func BackupsUnderLoadSpec(ctx context.Context, in BackupsUnderLoadSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	must := fatalOnError(t)
	if in.Schedule == "" {
		in.Schedule = "@every 1m"
	}
	if in.Backups == 0 {
		in.Backups = 3
	}
	if in.Keep == 0 {
		in.Keep = 2
	}
	if in.Credentials != nil {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: in.Etcd.Namespace, Name: "backup-credentials"}, Data: in.Credentials}
		if err := hub.Client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		in.Store.CredentialsSecretName = sec.Name
	}

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "backup/", WatchEachEndpoint: true})
	markers := startMarkers(ctx, t, in.Etcd.Client)
	defer markers.stop()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	must(w.WaitForProgress(pctx, 50))
	cancel()

	ec, err := in.Etcd.Get(ctx, hub)
	must(err)
	before := ec.DeepCopy()
	ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: in.Schedule, Retention: etcdfedv1.BackupRetention{MaxCount: ptrTo(int32(in.Keep))}, Store: in.Store}
	must(hub.Client.Patch(ctx, ec, client.MergeFrom(before)))
	enabled := time.Now()
	t.Logf("scheduled backups on (%s, keep %d) to %s", in.Schedule, in.Keep, in.Store.URL)

	// Watch the backups go by.
	var seen []etcdfedv1.BackupSnapshot
	err = poll(ctx, time.Duration(in.Backups)*time.Minute+3*time.Minute, fmt.Sprintf("%d scheduled backups", in.Backups), func(ctx context.Context) (string, error) {
		ec, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		st := ec.Status.Backup
		if st != nil && st.LastSuccess != nil && (len(seen) == 0 || seen[len(seen)-1].Location != st.LastSuccess.Location) {
			s := *st.LastSuccess
			if s.Member == ec.Status.Leader && ec.Status.ReadyMembers > 1 {
				return "", fmt.Errorf("backup %s taken from the leader %s while %d members were ready", s.Location, s.Member, ec.Status.ReadyMembers)
			}
			seen = append(seen, s)
			t.Logf("backup %d after %.0fs: revision %d, %d bytes, from %s in %s (leader %s)", len(seen), time.Since(enabled).Seconds(),
				s.Revision, s.SizeBytes, s.Member, s.Duration.Duration, ec.Status.Leader)
		}
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy); c != nil && c.Status == metav1.ConditionFalse {
			return "", fmt.Errorf("BackupHealthy=False %s: %s", c.Reason, c.Message)
		}
		if len(seen) < in.Backups {
			return fmt.Sprintf("%d of %d backups", len(seen), in.Backups), nil
		}
		if st.Retained != int32(in.Keep) {
			return fmt.Sprintf("retained %d, want %d", st.Retained, in.Keep), nil
		}
		return "", nil
	})
	must(err)
	for i := 1; i < len(seen); i++ {
		if seen[i].Revision <= seen[i-1].Revision {
			t.Errorf("backup %d at revision %d, not after backup %d at %d while writes went on", i+1, seen[i].Revision, i, seen[i-1].Revision)
		}
		if gap := seen[i].Time.Sub(seen[i-1].Time.Time); gap < 50*time.Second {
			t.Errorf("backups %d and %d only %s apart on schedule %s", i, i+1, gap, in.Schedule)
		}
	}

	// The store holds exactly the newest Keep.
	store, err := backupstore.Open(ctx, in.Store, in.Credentials)
	must(err)
	defer store.Close()
	ec, err = in.Etcd.Get(ctx, hub)
	must(err)
	dir := backupstore.ClusterDir(ec.Namespace, ec.Name, ec.Status.ClusterID)
	list, err := store.List(ctx, dir)
	must(err)
	if len(list) != in.Keep {
		t.Fatalf("store holds %d snapshots under %s, want %d: %+v", len(list), dir, in.Keep, list)
	}
	for i, snap := range list {
		want := seen[len(seen)-1-i]
		if store.Location(snap.Key) != want.Location || snap.Revision != want.Revision {
			t.Errorf("stored #%d is %s (revision %d), want %s (revision %d)", i, snap.Key, snap.Revision, want.Location, want.Revision)
		}
	}

	// The newest, restored, is a point-in-time copy.
	latest := list[0]
	path := filepath.Join(t.TempDir(), "latest.db")
	info, _, err := store.FetchVerified(ctx, latest.Key, path)
	must(err)
	peer, clientURL := etcdtest.FreeURL(t), etcdtest.FreeURL(t)
	dataDir := filepath.Join(t.TempDir(), "restored")
	_, err = etcdsnapshot.Restore(etcdsnapshot.RestoreInput{SnapshotPath: path, Name: "restored", PeerURLs: []string{peer},
		InitialCluster: "restored=" + peer, Token: "backup-check", DataDir: dataDir})
	must(err)
	restored := etcdtest.StartMember(t, "restored", dataDir, peer, clientURL)
	acked := markers.snapshot()
	rc := restored.NewClient()
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	inSnap, after, _ := checkPointInTime(rctx, t, rc, acked, info.Revision)
	if inSnap == 0 {
		t.Errorf("no marker in the snapshot at revision %d (%d markers)", info.Revision, len(acked))
	}
	t.Logf("newest snapshot (revision %d, %d keys) restored: %d acknowledged markers at or below its revision all present, %d later ones absent", info.Revision, info.TotalKeys, inSnap, after)

	markers.stop()
	checkWorkload(ctx, t, w)

	ec, err = in.Etcd.Get(ctx, hub)
	must(err)
	before = ec.DeepCopy()
	ec.Spec.Backup = nil
	must(hub.Client.Patch(ctx, ec, client.MergeFrom(before)))
}

const markerPrefix = "backup-marker/"

type markerWriter struct {
	mu     sync.Mutex
	acked  []marker
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startMarkers writes a new key every 50 ms and remembers each
// acknowledged one with its revision.
func startMarkers(ctx context.Context, t testing.TB, cfg EtcdClientConfig) *markerWriter {
	t.Helper()
	c, err := EtcdClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &markerWriter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		defer c.Close()
		for i := 0; ctx.Err() == nil; i++ {
			key, value := fmt.Sprintf("%s%06d", markerPrefix, i), strconv.Itoa(i)
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := c.Put(pctx, key, value)
			pcancel()
			if err == nil {
				m.mu.Lock()
				m.acked = append(m.acked, marker{key: key, value: value, rev: resp.Header.Revision})
				m.mu.Unlock()
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}()
	return m
}

func (m *markerWriter) snapshot() []marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]marker(nil), m.acked...)
}

func (m *markerWriter) stop() { m.once.Do(func() { m.cancel(); <-m.done }) }
