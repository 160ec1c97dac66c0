package multicluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/faultproxy"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/hub/pki"
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

// marker is a write acknowledged with its revision, and when the
// acknowledgement came.
type marker struct {
	key, value string
	rev        int64
	at         time.Time
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
	// Markers acknowledged well before the first backup, to check its
	// revision against.
	must(markers.WaitForAckedFor(ctx, 3*time.Second, 30*time.Second))

	ec, err := in.Etcd.Get(ctx, hub)
	must(err)
	before := ec.DeepCopy()
	ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: in.Schedule, Retention: etcdfedv1.BackupRetention{MaxCount: ptrTo(int32(in.Keep))}, Store: in.Store}
	must(hub.Client.Patch(ctx, ec, client.MergeFrom(before)))
	enabled := time.Now()
	t.Logf("scheduled backups on (%s, keep %d) to %s", in.Schedule, in.Keep, in.Store.URL)

	// Watch the backups go by.
	var seen []etcdfedv1.BackupSnapshot
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: fmt.Sprintf("%d scheduled backups", in.Backups), Timeout: time.Duration(in.Backups)*time.Minute + 3*time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		st := ec.Status.Backup
		if st != nil && st.LastSuccess != nil && (len(seen) == 0 || seen[len(seen)-1].Location != st.LastSuccess.Location) {
			s := *st.LastSuccess
			if s.Member == ec.Status.Leader && ec.Status.ReadyMembers > 1 {
				return fmt.Sprintf("backup %s taken from the leader %s while %d members were ready", s.Location, s.Member, ec.Status.ReadyMembers)
			}
			seen = append(seen, s)
			t.Logf("backup %d after %.0fs: revision %d, %d bytes, from %s in %s (leader %s)", len(seen), time.Since(enabled).Seconds(),
				s.Revision, s.SizeBytes, s.Member, s.Duration.Duration, ec.Status.Leader)
		}
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy); c != nil && c.Status == metav1.ConditionFalse {
			return fmt.Sprintf("BackupHealthy=False %s: %s", c.Reason, c.Message)
		}
		if len(seen) < in.Backups {
			return fmt.Sprintf("%d of %d backups", len(seen), in.Backups)
		}
		if st.Retained != int32(in.Keep) {
			return fmt.Sprintf("retained %d, want %d", st.Retained, in.Keep)
		}
		return ""
	}})
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
	// The ring runs with etcd authentication on, and so does its copy: a
	// throwaway CA, and a certificate of the root user.
	peer := fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t))
	clientURL := fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t))
	dataDir := filepath.Join(t.TempDir(), "restored")
	_, err = etcdsnapshot.Restore(etcdsnapshot.RestoreInput{SnapshotPath: path, Name: "restored", PeerURLs: []string{peer},
		InitialCluster: "restored=" + peer, Token: "backup-check", DataDir: dataDir})
	must(err)
	checkCA, err := pki.NewCA("backup check", time.Now())
	must(err)
	restored := etcdtest.StartMemberAs(t, "restored", dataDir, peer, clientURL, checkCA, etcdfedv1.EtcdRootUser)
	acked := markers.snapshot()
	rc := restored.NewClient()
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	inSnap, after, _ := checkPointInTime(rctx, t, rc, acked, info.Revision)
	if inSnap == 0 {
		t.Errorf("no marker in the snapshot at revision %d (%d markers)", info.Revision, len(acked))
	}
	t.Logf("newest snapshot (revision %d, %d keys) restored: %d acknowledged markers at or below its revision all present, %d later ones absent", info.Revision, info.TotalKeys, inSnap, after)

	// Every backup, pruned or kept, at the revision the markers say the
	// ring had when it was taken (checked once markers went on for a
	// while after the newest).
	last := seen[len(seen)-1]
	must(markers.WaitForAckedAfter(ctx, "the newest backup ended", last.Time.Add(time.Second+last.Duration.Duration+applySlack), 30*time.Second))
	markers.stop()
	for i, s := range seen {
		checkBackupRevision(t, i+1, s, markers.snapshot())
	}
	checkWorkload(ctx, t, w)

	ec, err = in.Etcd.Get(ctx, hub)
	must(err)
	before = ec.DeepCopy()
	ec.Spec.Backup = nil
	must(hub.Client.Patch(ctx, ec, client.MergeFrom(before)))
}

// applySlack is how long after a marker's acknowledgement the backup's
// follower is taken to have applied it, and how long after a snapshot
// began a marker can still have been applied before it.
const applySlack = time.Second

// checkBackupRevision checks that backup n's revision is the ring's
// revision when it was taken, as the acknowledged markers tell it: at or
// above every marker acknowledged before it was taken (less the apply
// slack), and below every marker acknowledged after it ended (plus the
// slack). status times have one-second precision: the backup was taken in
// [Time, Time+1s).
func checkBackupRevision(t testing.TB, n int, s etcdfedv1.BackupSnapshot, acked []marker) {
	t.Helper()
	taken := s.Time.Time
	var lower, upper marker
	for _, m := range acked {
		if m.at.Before(taken.Add(-applySlack)) && m.rev > lower.rev {
			lower = m
		}
		if m.at.After(taken.Add(time.Second+s.Duration.Duration+applySlack)) && (upper.rev == 0 || m.rev < upper.rev) {
			upper = m
		}
	}
	switch {
	case lower.rev == 0 || upper.rev == 0:
		t.Errorf("backup %d (revision %d, taken %s): no marker acknowledged before (%s) or after (%s) it to check its revision against", n, s.Revision, taken.Format(time.RFC3339), lower.key, upper.key)
	case s.Revision < lower.rev:
		t.Errorf("backup %d at revision %d, below marker %s acknowledged at revision %d before the backup was taken (%s, at %s)", n, s.Revision, lower.key, lower.rev, taken.Format(time.RFC3339), lower.at.Format(time.RFC3339Nano))
	case s.Revision >= upper.rev:
		t.Errorf("backup %d at revision %d, at or above marker %s acknowledged at revision %d after the backup ended", n, s.Revision, upper.key, upper.rev)
	default:
		t.Logf("backup %d at revision %d: between marker revisions %d (acknowledged before it was taken) and %d (after it ended)", n, s.Revision, lower.rev, upper.rev)
	}
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
				m.acked = append(m.acked, marker{key: key, value: value, rev: resp.Header.Revision, at: time.Now()})
				m.mu.Unlock()
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}()
	return m
}

// WaitForAckedFor waits until the first marker was acknowledged more
// than d ago (timeout: 30 s when zero).
func (m *markerWriter) WaitForAckedFor(ctx context.Context, d, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, 30*time.Second), fmt.Sprintf("markers acknowledged for %s", d), func(context.Context) (string, error) {
		acked := m.snapshot()
		if len(acked) == 0 {
			return "no marker acknowledged", nil
		}
		if since := time.Since(acked[0].at); since <= d {
			return fmt.Sprintf("the first acknowledged %s ago", since.Round(time.Millisecond)), nil
		}
		return "", nil
	})
}

// WaitForAckedAfter waits until a marker was acknowledged after at (what
// it is, for the message; timeout: 30 s when zero).
func (m *markerWriter) WaitForAckedAfter(ctx context.Context, what string, at time.Time, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, 30*time.Second), "a marker acknowledged after "+what+" ("+at.Format(time.TimeOnly)+")", func(context.Context) (string, error) {
		acked := m.snapshot()
		if len(acked) == 0 {
			return "no marker acknowledged", nil
		}
		if last := acked[len(acked)-1].at; !last.After(at) {
			return "the last acknowledged at " + last.Format(time.TimeOnly), nil
		}
		return "", nil
	})
}

func (m *markerWriter) snapshot() []marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]marker(nil), m.acked...)
}

func (m *markerWriter) stop() { m.once.Do(func() { m.cancel(); <-m.done }) }

// UnreachableStoreSpecInput is the input of UnreachableStoreSpec.
type UnreachableStoreSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// S3 is a real store and Bucket a bucket on it; the ring's backups go
	// to it through a proxy that first refuses, then black-holes, every
	// connection.
	S3     *s3test.Server
	Bucket string
	// To is the size the ring is scaled to while the store hangs
	// (ScaleUnderLoadSpec).
	To int
}

// UnreachableStoreSpec shows that a backup store that cannot be reached
// never blocks membership work. Backups of a running ring go to a real S3
// server behind a fault proxy. The proxy first refuses every connection:
// BackupHealthy=False, StoreUnreachable, naming the store. It then
// black-holes them (a store that hangs: each attempt waits out the hub's
// 30 s store check) and the ring is scaled (ScaleUnderLoadSpec: recorded
// workload, one learner at a time) while a sampler keeps an attempt
// hanging (an on-demand request whenever none is in progress). It checks
// that the membership operation took steps while a backup attempt was
// hanging, that no operation other than membership ran, that
// BackupHealthy stayed False naming the store throughout, and, once the
// proxy forwards again, that the next backup succeeds.
func UnreachableStoreSpec(ctx context.Context, in UnreachableStoreSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	must := fatalOnError(t)
	store := storeWithCredentials(ctx, t, hub, in.S3, in.Bucket, in.Etcd.Namespace)
	target, err := url.Parse(store.S3.Endpoint)
	must(err)
	proxy, err := faultproxy.Start("127.0.0.1:0", target.Host)
	must(err)
	defer func() { _ = proxy.Close() }()
	proxy.SetMode(faultproxy.Reset)
	store.S3.Endpoint = "http://" + proxy.Addr()

	// Refused: BackupHealthy=False names the store.
	ec, err := in.Etcd.Get(ctx, hub)
	must(err)
	before := ec.DeepCopy()
	ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: "0 0 1 1 *", Store: store}
	must(hub.Client.Patch(ctx, ec, client.MergeFrom(before)))
	enabled := time.Now()
	// At once, whatever an earlier success and the yearly schedule say.
	must(requestBackup(ctx, hub, in.Etcd, "refused-"+enabled.UTC().Format("150405.000")))
	var earlier string
	if ec.Status.Backup != nil && ec.Status.Backup.LastSuccess != nil {
		earlier = ec.Status.Backup.LastSuccess.Location
	}
	unhealthy := func(ec *etcdfedv1.EtcdCluster) error {
		c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
		switch {
		case c == nil:
			return errors.New("no BackupHealthy condition")
		case c.Status != metav1.ConditionFalse || c.Reason != etcdfedv1.BackupReasonStoreUnreachable:
			return fmt.Errorf("BackupHealthy=%s %s: %s", c.Status, c.Reason, c.Message)
		case !strings.Contains(c.Message, store.URL):
			return fmt.Errorf("BackupHealthy=False does not name the store %s: %s", store.URL, c.Message)
		}
		return nil
	}
	must(WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "BackupHealthy=False naming the store", Timeout: 2 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		if err := unhealthy(ec); err != nil {
			return err.Error()
		}
		t.Logf("store refusing: BackupHealthy=False %.1fs after backups were turned on: %s", time.Since(enabled).Seconds(),
			meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy).Message)
		return ""
	}}))

	// Hanging: the ring is scaled while backup attempts hang on the store.
	proxy.SetMode(faultproxy.BlackHole)
	s := startBackupSampler(ctx, t, hub, in.Etcd, earlier)
	must(s.WaitForHanging(ctx, time.Minute))
	start := time.Now()
	ScaleUnderLoadSpec(ctx, ScaleUnderLoadSpecInput{T: t, Topology: in.Topology, Etcd: in.Etcd, Sizes: []int{in.To}})
	scaled := time.Since(start)
	r := s.stop()
	t.Logf("scaled to %d in %.1fs while the store hung: %d samples, %d with an attempt in progress, %d of them with an operation in flight; steps taken while an attempt hung: %v; %d attempts started, %d failed",
		in.To, scaled.Seconds(), r.samples, r.hanging, r.overlap, r.steps, r.started, r.failures)
	for _, p := range r.problems {
		t.Error(p)
	}
	if len(r.steps) < 2 {
		t.Errorf("the membership operation took %d steps while a backup attempt hung on the store (%v): it waited for the backup", len(r.steps), r.steps)
	}
	ec, err = in.Etcd.Get(ctx, hub)
	must(err)
	if err := unhealthy(ec); err != nil {
		t.Errorf("after the scale: %v", err)
	}

	// Reachable again: the next backup succeeds.
	proxy.SetMode(faultproxy.Forward)
	healed := time.Now()
	token := "reachable-" + healed.UTC().Format("150405.000")
	must(requestBackup(ctx, hub, in.Etcd, token))
	must(WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "a backup once the store answers", Timeout: 2 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		st := ec.Status.Backup
		if st == nil || st.LastRequest != token {
			return "request not handled yet"
		}
		c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
		if st.LastSuccess == nil || st.LastSuccess.Request != token || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("the request once the store answers failed: %+v, condition %v", st.LastFailure, c)
		}
		t.Logf("store answering: backup at revision %d stored at %s %.1fs later (%d members)", st.LastSuccess.Revision, st.LastSuccess.Location, time.Since(healed).Seconds(), len(ec.Status.Members))
		return ""
	}}))

	ec, err = in.Etcd.Get(ctx, hub)
	must(err)
	before = ec.DeepCopy()
	ec.Spec.Backup = nil
	must(hub.Client.Patch(ctx, ec, client.MergeFrom(before)))
}

// requestBackup asks the hub for an on-demand backup of m (as `etcdfed
// backup` does).
func requestBackup(ctx context.Context, hub *Cluster, m *ManagedEtcd, token string) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[etcdfedv1.AnnotationBackupRequested] = token
	if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("request a backup: %w", err)
	}
	return nil
}

// backupSampler samples an EtcdCluster's status every 100 ms while its
// store hangs, and asks for a new backup whenever none is in progress, so
// that an attempt hangs on the store for as long as it runs.
type backupSampler struct {
	hanging atomic.Int64
	cancel  context.CancelFunc
	done    chan backupSamples
}

// WaitForHanging waits until the sampler has seen a backup attempt in
// progress (hanging on the store; timeout: a minute when zero).
func (s *backupSampler) WaitForHanging(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, time.Minute), "a backup attempt hanging on the store", func(context.Context) (string, error) {
		if s.hanging.Load() == 0 {
			return "no attempt in progress yet", nil
		}
		return "", nil
	})
}

// backupSamples is what a backupSampler saw.
type backupSamples struct {
	samples, hanging, overlap int
	// steps are the distinct membership operation steps ("Add main-3
	// AddLearner") seen while an attempt was in progress.
	steps []string
	// started and failures count the attempts seen start and fail.
	started, failures int
	problems          []string
}

// earlier is the location of the last success before the store became
// unreachable ("" when none): no other may appear.
func startBackupSampler(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, earlier string) *backupSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &backupSampler{cancel: cancel, done: make(chan backupSamples, 1)}
	go func() {
		var out backupSamples
		seenStep := map[string]bool{}
		var pending, lastStart string
		var lastFailure time.Time
		problem := func(format string, args ...any) {
			if len(out.problems) < 10 {
				out.problems = append(out.problems, fmt.Sprintf(format, args...))
			}
		}
		for ctx.Err() == nil {
			ec, err := m.Get(ctx, hub)
			if err != nil {
				sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
			out.samples++
			st := ec.Status.Backup
			if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy); c != nil && c.Status == metav1.ConditionTrue {
				problem("BackupHealthy=True while the store hangs: %s", c.Message)
			}
			if st != nil && st.LastSuccess != nil && st.LastSuccess.Location != earlier {
				problem("a backup succeeded while the store hangs: %+v", st.LastSuccess)
			}
			if st != nil && st.LastFailure != nil && st.LastFailure.Time.After(lastFailure) {
				if !lastFailure.IsZero() {
					out.failures++
				}
				lastFailure = st.LastFailure.Time.Time
			}
			op := ec.Status.Operation
			if op != nil {
				switch op.Type {
				case etcdfedv1.OperationAdd, etcdfedv1.OperationRemove, etcdfedv1.OperationReplace, etcdfedv1.OperationMoveLeader:
				default:
					problem("operation %s %s in flight during a scale", op.Type, op.Member)
				}
			}
			inProgress := st != nil && st.InProgress != nil
			if inProgress {
				out.hanging++
				s.hanging.Add(1)
				if k := st.InProgress.StartedAt.UTC().Format(time.RFC3339Nano); k != lastStart {
					lastStart = k
					out.started++
				}
				if op != nil {
					out.overlap++
					if k := fmt.Sprintf("%s %s %s", op.Type, op.Member, op.Step); !seenStep[k] {
						seenStep[k] = true
						out.steps = append(out.steps, k)
					}
				}
			} else if st == nil || pending == "" || st.LastRequest == pending {
				pending = fmt.Sprintf("hang-%d", time.Now().UnixNano())
				if err := requestBackup(ctx, hub, m, pending); err != nil && ctx.Err() == nil {
					t.Logf("sampler: %v", err)
				}
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
		s.done <- out
	}()
	return s
}

func (s *backupSampler) stop() backupSamples {
	s.cancel()
	return <-s.done
}
