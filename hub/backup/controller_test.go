package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/tenancy"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
	"github.com/etcdfed/etcdfed/pkg/diskspace"
	"github.com/etcdfed/etcdfed/pkg/etcdsnapshot"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// fixture is a real apiserver with the backup controller running in a
// namespace of its own. The test plays the EtcdCluster reconciler: it
// writes status.clusterID and status.endpoints and the hub's client
// certificate Secret, as the hub does once etcd has formed.
type fixture struct {
	api     *testenv.Cluster
	c       client.Client
	ns      string
	scratch string
}

const yearly = "0 0 1 1 *" // after the first backup, only requests run

// start runs the controller under a policy that allows file:// stores,
// which most of these tests write to.
func start(t *testing.T) *fixture {
	return startWith(t, tenancy.Policy{AmbientStoreCredentials: true})
}

func startWith(t *testing.T, p tenancy.Policy) *fixture {
	t.Helper()
	return startFree(t, p, nil)
}

// startFree is startWith with the free space of the scratch directory
// read by free (nil: statfs).
func startFree(t *testing.T, p tenancy.Policy, free diskspace.Free) *fixture {
	t.Helper()
	api := testenv.Shared(t, "backup")
	ns := testenv.NamespaceT(t, api, "backup")
	f := &fixture{api: api, c: api.Client, ns: ns, scratch: t.TempDir()}
	testenv.StartManager(t, api, ns, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("backup-test"), ScratchDir: f.scratch, Policy: p, FreeSpace: free}
		return r.SetupWithManager(mgr)
	})
	return f
}

// A tenant's store without credentials would be written with the hub's
// own cloud identity, a file:// store on the hub's filesystem: under the
// default policy neither is touched; BackupHealthy=False says why and
// what the hub's operator would set to allow it. No backup is attempted
// (no etcd runs behind this ring: one would fail otherwise).
func TestStoreRefusedByTheHubsPolicy(t *testing.T) {
	f := startWith(t, tenancy.Policy{})
	ctx := context.Background()
	for _, tc := range []struct{ name, url, says string }{
		{"ambient", "s3://etcd-backups/ring", "--allow-ambient-store-credentials"},
		{"file", "file:///var/lib/etcdfed/backups", "hub's own filesystem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ec := &etcdfedv1.EtcdCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: tc.name},
				Spec: etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: tc.name + ".etcd.test"},
					Backup: &etcdfedv1.BackupSpec{Schedule: "@hourly", Store: etcdfedv1.BackupStore{URL: tc.url}}},
			}
			g.Expect(f.c.Create(ctx, ec)).To(Succeed())
			// A merge patch, not an update: the refusal does not wait for
			// etcd to form, so the hub may have written its condition
			// already (an update would conflict with it).
			before := ec.DeepCopy()
			ec.Status.ClusterID = "abc"
			g.Expect(f.c.Status().Patch(ctx, ec, client.MergeFrom(before))).To(Succeed())
			g.Eventually(func(g Gomega) {
				got := f.get(g, tc.name)
				c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(etcdfedv1.BackupReasonForbidden), c.Message)
				g.Expect(c.Message).To(ContainSubstring(tc.says))
				g.Expect(got.Status.Backup == nil || (got.Status.Backup.InProgress == nil && got.Status.Backup.LastFailure == nil)).To(BeTrue(), "a backup was attempted: %+v", got.Status.Backup)
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		})
	}
}

// ring creates an EtcdCluster for a running etcd with its formed status,
// then turns backups on (so the first reconcile sees a formed cluster).
func (f *fixture) ring(t *testing.T, name string, e *etcdtest.Cluster, b etcdfedv1.BackupSpec) *etcdfedv1.EtcdCluster {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: name + ".etcd.test"}},
	}
	if e.CA == nil {
		ec.Spec.TLS.Mode = etcdfedv1.TLSDisabled
	} else {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: pki.HubClientSecretName(ec)},
			Data:       map[string][]byte{pki.KeyCA: e.CA.CertPEM, pki.KeyCert: e.Client.CertPEM, pki.KeyKey: e.Client.KeyPEM},
		}
		g.Expect(f.c.Create(ctx, sec)).To(Succeed())
	}
	g.Expect(f.c.Create(ctx, ec)).To(Succeed())
	st, err := e.NewClient().Status(ctx, e.Members[0].ClientURL)
	g.Expect(err).NotTo(HaveOccurred())
	ec.Status.ClusterID = strconv.FormatUint(st.Header.ClusterId, 16)
	ec.Status.Endpoints = e.Endpoints()
	g.Expect(f.c.Status().Update(ctx, ec)).To(Succeed())
	ec.Spec.Backup = &b
	g.Expect(f.c.Update(ctx, ec)).To(Succeed())
	return ec
}

func (f *fixture) get(g Gomega, name string) *etcdfedv1.EtcdCluster {
	ec := &etcdfedv1.EtcdCluster{}
	g.Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, ec)).To(Succeed())
	return ec
}

// request asks for a backup with the annotation, as etcdfed backup does.
func (f *fixture) request(t *testing.T, name, token string) {
	t.Helper()
	ec := f.get(NewWithT(t), name)
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[etcdfedv1.AnnotationBackupRequested] = token
	NewWithT(t).Expect(f.c.Patch(context.Background(), ec, client.MergeFrom(before))).To(Succeed())
}

// waitBackup waits until the backup of request token (empty: the first
// scheduled one) has been handled and returns the EtcdCluster.
func (f *fixture) waitBackup(t *testing.T, name, token string) *etcdfedv1.EtcdCluster {
	t.Helper()
	var ec *etcdfedv1.EtcdCluster
	NewWithT(t).Eventually(func(g Gomega) {
		ec = f.get(g, name)
		st := ec.Status.Backup
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.InProgress).To(BeNil())
		if token != "" {
			g.Expect(st.LastRequest).To(Equal(token))
		} else {
			g.Expect(st.LastSuccess != nil || st.LastFailure != nil).To(BeTrue(), "no backup yet")
		}
	}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return ec
}

func healthy(ec *etcdfedv1.EtcdCluster) *metav1.Condition {
	return meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
}

func putKeys(t *testing.T, e *etcdtest.Cluster, prefix string, n int) int64 {
	t.Helper()
	cl := e.NewClient()
	var rev int64
	for i := range n {
		resp, err := cl.Put(context.Background(), fmt.Sprintf("%s%04d", prefix, i), strings.Repeat("x", 200))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// objects lists the .db files under dir on disk.
func objects(t *testing.T, dir string) []string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "*"+backupstore.SnapshotExt))
	sort.Strings(matches)
	return matches
}

func scratchEmpty(g Gomega, dir string) {
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty(), "scratch files left behind")
}

// TestBackupsToS3 runs the whole path against a real S3 server (versitygw)
// and a real 3-member etcd with TLS: the first backup at once from a
// follower, checked and stored with its sidecar; three on-demand backups
// with newer revisions; retention keeping the newest two; status, events
// and metrics saying so.
func TestBackupsToS3(t *testing.T) {
	f := start(t)
	ca, err := pki.NewCA("backup test CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := etcdtest.Start(t, etcdtest.Options{Members: 3, CA: ca, Name: "main"})
	srv := s3test.StartT(t, "etcd-backups")
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(f.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "s3-creds"}, Data: srv.Credentials()})).To(Succeed())
	rev := putKeys(t, e, "before/", 100)

	f.ring(t, "main", e, etcdfedv1.BackupSpec{
		Schedule:  yearly,
		Retention: etcdfedv1.BackupRetention{MaxCount: ptr.To[int32](2)},
		Store:     srv.Store("etcd-backups", "ring", "s3-creds"),
	})
	ec := f.waitBackup(t, "main", "")
	st := ec.Status.Backup
	g.Expect(st.LastFailure).To(BeNil())
	first := st.LastSuccess
	g.Expect(first.Revision).To(BeNumerically(">=", rev))
	g.Expect(first.Trigger).To(Equal(etcdfedv1.BackupTriggerSchedule))
	leader, err := e.Leader(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Member).NotTo(BeEmpty())
	g.Expect(first.Member).NotTo(Equal(leader.Name), "snapshot taken from the leader while followers were healthy")
	dirKey := backupstore.ClusterDir(f.ns, "main", ec.Status.ClusterID)
	g.Expect(first.Location).To(HavePrefix("s3://etcd-backups/ring/" + dirKey))
	g.Expect(healthy(ec).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(healthy(ec).Reason).To(Equal(etcdfedv1.BackupReasonSucceeded))
	next, _ := time.Parse(time.RFC3339, fmt.Sprintf("%d-01-01T00:00:00Z", time.Now().UTC().Year()+1))
	g.Expect(st.NextScheduleTime.Time.Equal(next)).To(BeTrue(), "next schedule %v", st.NextScheduleTime)

	// What is in the bucket is a valid snapshot at that revision, with its
	// sidecar, as read back through the S3 API.
	store, err := backupstore.Open(ctx, ec.Spec.Backup.Store, srv.Credentials())
	g.Expect(err).NotTo(HaveOccurred())
	defer store.Close()
	key := strings.TrimPrefix(first.Location, "s3://etcd-backups/ring/")
	info, md, err := store.FetchVerified(ctx, key, filepath.Join(t.TempDir(), "first.db"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Revision).To(Equal(first.Revision))
	g.Expect(info.HashHex()).To(Equal(first.Hash))
	g.Expect(info.TotalKeys).To(Equal(100))
	g.Expect(info.Size).To(Equal(first.SizeBytes))
	g.Expect(md.Member).To(Equal(first.Member))
	g.Expect(md.ClusterID).To(Equal(ec.Status.ClusterID))

	// Three requests, each after more writes.
	var revs []int64
	for i := 1; i <= 3; i++ {
		r := putKeys(t, e, fmt.Sprintf("req%d/", i), 20)
		token := fmt.Sprintf("test-%d", i)
		f.request(t, "main", token)
		ec = f.waitBackup(t, "main", token)
		s := ec.Status.Backup.LastSuccess
		g.Expect(s.Trigger).To(Equal(etcdfedv1.BackupTriggerRequest))
		g.Expect(s.Revision).To(BeNumerically(">=", r), "request %s", token)
		g.Expect(s.Member).NotTo(Equal(leader.Name))
		revs = append(revs, s.Revision)
	}
	g.Expect(ec.Status.Backup.Retained).To(Equal(int32(2)))
	list, err := store.List(ctx, dirKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(HaveLen(2))
	g.Expect(list[0].Revision).To(Equal(revs[2]))
	g.Expect(list[1].Revision).To(Equal(revs[1]))
	onDisk := objects(t, filepath.Join(srv.Dir, "etcd-backups", "ring", dirKey))
	g.Expect(onDisk).To(HaveLen(2))
	for _, p := range onDisk {
		_, err := os.Stat(strings.TrimSuffix(p, ".db") + ".json")
		g.Expect(err).NotTo(HaveOccurred(), "sidecar of %s", p)
	}
	scratchEmpty(g, f.scratch)

	// Events and metrics.
	NewWithT(t).Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(f.c.List(ctx, &evs, client.InNamespace(f.ns))).To(Succeed())
		n := 0
		for _, ev := range evs.Items {
			if ev.Reason == "BackupSucceeded" && ev.Regarding.Name == "main" {
				n += max(1, int(ptr.Deref(ev.Series, eventsv1.EventSeries{Count: 1}).Count))
			}
		}
		g.Expect(n).To(BeNumerically(">=", 1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(testutil.ToFloat64(metricRevision.WithLabelValues(f.ns, "main"))).To(Equal(float64(revs[2])))
	g.Expect(testutil.ToFloat64(metricRetained.WithLabelValues(f.ns, "main"))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(metricLastSuccess.WithLabelValues(f.ns, "main"))).To(BeNumerically(">", 0))
	g.Expect(testutil.CollectAndCount(metricDuration)).To(BeNumerically(">=", 1))
	g.Expect(testutil.ToFloat64(metricFailures.WithLabelValues(f.ns, "main", etcdfedv1.BackupReasonStoreUnreachable))).To(Equal(0.0))
}

// TestBackupToFileAndRestore backs up a plain-HTTP ring to a file:// store,
// restores a new one-member etcd from what is in the store with the
// library the restore path will use, and finds every key; then turning
// backups off removes the condition.
func TestBackupToFileAndRestore(t *testing.T) {
	f := start(t)
	e := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "plain"})
	storeDir := t.TempDir()
	rev := putKeys(t, e, "k/", 250)
	f.ring(t, "plain", e, etcdfedv1.BackupSpec{Schedule: "@every 1h", Store: etcdfedv1.BackupStore{URL: "file://" + storeDir + "/backups"}})
	ec := f.waitBackup(t, "plain", "")
	g := NewWithT(t)
	s := ec.Status.Backup.LastSuccess
	g.Expect(s).NotTo(BeNil(), "failure: %+v", ec.Status.Backup.LastFailure)
	g.Expect(s.Revision).To(BeNumerically(">=", rev))
	g.Expect(s.Location).To(HavePrefix("file://" + storeDir + "/backups/" + f.ns + "/plain/"))
	g.Expect(ec.Status.Backup.NextScheduleTime.Time.Sub(s.Time.Time)).To(BeNumerically("~", time.Hour, time.Second))

	ctx := context.Background()
	store, err := backupstore.Open(ctx, ec.Spec.Backup.Store, nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer store.Close()
	latest, err := store.Latest(ctx, backupstore.ClusterDir(f.ns, "plain", ec.Status.ClusterID))
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "latest.db")
	// The sidecar is signed with the ring's snapshot key, kept in the hub
	// cluster without an owner (it outlives the ring).
	keySecret := &corev1.Secret{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: backupstore.KeySecretName("plain")}, keySecret)).To(Succeed())
	g.Expect(keySecret.OwnerReferences).To(BeEmpty())
	mk := keySecret.Data[backupstore.KeySecretField]
	g.Expect(mk).To(HaveLen(backupstore.MACKeySize))
	_, md, err := store.FetchAccepted(ctx, latest.Key, path, func(md backupstore.Metadata) error { return md.CheckMAC(latest.Key, mk) })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(md.MAC).To(HavePrefix("hmac-sha256:"))
	peer, clientURL := etcdtest.FreeURL(t), etcdtest.FreeURL(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	_, err = etcdsnapshot.Restore(etcdsnapshot.RestoreInput{SnapshotPath: path, Name: "restored", PeerURLs: []string{peer},
		InitialCluster: "restored=" + peer, Token: "restored-" + f.ns, DataDir: dataDir, BumpRevision: 1000, MarkCompacted: true})
	g.Expect(err).NotTo(HaveOccurred())
	restored := etcdtest.StartMember(t, "restored", dataDir, peer, clientURL)
	resp, err := restored.NewClient().Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Count).To(Equal(int64(250)))

	ec = f.get(g, "plain")
	before := ec.DeepCopy()
	ec.Spec.Backup = nil
	g.Expect(f.c.Patch(ctx, ec, client.MergeFrom(before))).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		ec := f.get(g, "plain")
		g.Expect(healthy(ec)).To(BeNil())
		g.Expect(ec.Status.Backup.NextScheduleTime).To(BeNil())
		g.Expect(ec.Status.Backup.LastSuccess).NotTo(BeNil(), "history kept")
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// TestUnreachableStore: a store nobody answers, and one whose credentials
// Secret is missing, make BackupHealthy=False with the reason, take no
// snapshot, and are retried; fixing the store makes the next backup
// succeed.
func TestUnreachableStore(t *testing.T) {
	f := start(t)
	e := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "dark"})
	srv := s3test.StartT(t, "dark-backups")
	// With credentials, so the SDK's default chain (which asks the cloud's
	// metadata address) is never consulted.
	g0 := NewWithT(t)
	g0.Expect(f.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "dead-creds"}, Data: srv.Credentials()})).To(Succeed())
	dead := srv.Store("dark-backups", "", "dead-creds")
	dead.S3.Endpoint = "http://127.0.0.1:1"
	f.ring(t, "dark", e, etcdfedv1.BackupSpec{Schedule: yearly, Store: dead})
	ec := f.waitBackup(t, "dark", "")
	g := NewWithT(t)
	g.Expect(ec.Status.Backup.LastSuccess).To(BeNil())
	fail := ec.Status.Backup.LastFailure
	g.Expect(fail.Reason).To(Equal(etcdfedv1.BackupReasonStoreUnreachable))
	g.Expect(fail.Message).To(ContainSubstring("connection refused"))
	g.Expect(ec.Status.Backup.ConsecutiveFailures).To(BeNumerically(">=", 1))
	c := healthy(ec)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(etcdfedv1.BackupReasonStoreUnreachable))
	g.Expect(ec.Status.Backup.NextScheduleTime.Time.Sub(fail.Time.Time)).To(BeNumerically("~", RetryBase, time.Second))
	g.Expect(testutil.ToFloat64(metricFailures.WithLabelValues(f.ns, "dark", etcdfedv1.BackupReasonStoreUnreachable))).To(BeNumerically(">=", 1))
	scratchEmpty(g, f.scratch)

	// Credentials that do not exist.
	ctx := context.Background()
	ec = f.get(g, "dark")
	before := ec.DeepCopy()
	ec.Spec.Backup.Store = srv.Store("dark-backups", "", "no-such-secret")
	g.Expect(f.c.Patch(ctx, ec, client.MergeFrom(before))).To(Succeed())
	f.request(t, "dark", "after-creds")
	ec = f.waitBackup(t, "dark", "after-creds")
	g.Expect(ec.Status.Backup.LastFailure.Reason).To(Equal(etcdfedv1.BackupReasonCredentials))
	g.Expect(ec.Status.Backup.LastFailure.Message).To(ContainSubstring("no-such-secret"))

	// Fixed: the next request succeeds and the failure count resets.
	g.Expect(f.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "no-such-secret"}, Data: srv.Credentials()})).To(Succeed())
	f.request(t, "dark", "fixed")
	ec = f.waitBackup(t, "dark", "fixed")
	g.Expect(ec.Status.Backup.LastSuccess).NotTo(BeNil(), "failure: %+v", ec.Status.Backup.LastFailure)
	g.Expect(ec.Status.Backup.ConsecutiveFailures).To(BeZero())
	g.Expect(healthy(ec).Status).To(Equal(metav1.ConditionTrue))
}

// TestScratchSpaceChecked: a backup whose source member's database file
// (plus the margin) does not fit in the free space of the hub's scratch
// directory fails InsufficientSpace before anything is streamed, naming
// the bytes needed and available; nothing is left in the scratch
// directory or the store. With room, the next request succeeds. The free
// space is the statfs seam's; the real statfs is TestRealFilesystem's
// (pkg/diskspace).
func TestScratchSpaceChecked(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 20)
	f := startFree(t, tenancy.Policy{AmbientStoreCredentials: true}, func(string) (int64, error) { return free.Load(), nil })
	e := etcdtest.Start(t, etcdtest.Options{Members: 1, Name: "tight"})
	putKeys(t, e, "k/", 100)
	storeDir := t.TempDir()
	f.ring(t, "tight", e, etcdfedv1.BackupSpec{Schedule: yearly, Store: etcdfedv1.BackupStore{URL: "file://" + storeDir}})
	ec := f.waitBackup(t, "tight", "")
	g := NewWithT(t)
	g.Expect(ec.Status.Backup.LastSuccess).To(BeNil())
	fail := ec.Status.Backup.LastFailure
	g.Expect(fail.Reason).To(Equal(etcdfedv1.BackupReasonInsufficientSpace), fail.Message)
	g.Expect(fail.Message).To(MatchRegexp(`needs [0-9]+ bytes .* free on the filesystem of %s, 1048576 bytes \(1.0 MiB\) are available`, regexp.QuoteMeta(f.scratch)))
	g.Expect(healthy(ec).Reason).To(Equal(etcdfedv1.BackupReasonInsufficientSpace))
	scratchEmpty(g, f.scratch)
	stored, _ := filepath.Glob(filepath.Join(storeDir, "*", "*", "*", "*"))
	g.Expect(stored).To(BeEmpty())

	free.Store(1 << 40)
	f.request(t, "tight", "room")
	ec = f.waitBackup(t, "tight", "room")
	g.Expect(ec.Status.Backup.LastSuccess).NotTo(BeNil(), "failure: %+v", ec.Status.Backup.LastFailure)
	scratchEmpty(g, f.scratch)
}

// TestCorruptedSnapshotRefused flips one bit of the snapshot on its way
// from the member to the hub (a proxy in front of every member's client
// port): the backup fails VerificationFailed with the checksum error,
// nothing reaches the store, and the next backup, on a clean network,
// succeeds.
func TestCorruptedSnapshotRefused(t *testing.T) {
	f := start(t)
	e := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "flaky", Proxied: true})
	putKeys(t, e, "k/", 2000) // several hundred KiB: many snapshot messages
	for _, m := range e.Members {
		m.Proxy.Corrupt.Store(true)
	}
	storeDir := t.TempDir()
	f.ring(t, "flaky", e, etcdfedv1.BackupSpec{Schedule: yearly, Store: etcdfedv1.BackupStore{URL: "file://" + storeDir}})
	ec := f.waitBackup(t, "flaky", "")
	g := NewWithT(t)
	g.Expect(ec.Status.Backup.LastSuccess).To(BeNil())
	fail := ec.Status.Backup.LastFailure
	g.Expect(fail.Reason).To(Equal(etcdfedv1.BackupReasonVerificationFailed))
	g.Expect(fail.Message).To(ContainSubstring("does not match the checksum etcd appended"))
	g.Expect(healthy(ec).Reason).To(Equal(etcdfedv1.BackupReasonVerificationFailed))
	var flipped int64
	for _, m := range e.Members {
		flipped += m.Proxy.Flipped.Load()
	}
	g.Expect(flipped).To(BeNumerically(">=", 1))
	stored, _ := filepath.Glob(filepath.Join(storeDir, "*", "*", "*", "*"))
	g.Expect(stored).To(BeEmpty(), "a refused snapshot reached the store")
	scratchEmpty(g, f.scratch)

	for _, m := range e.Members {
		m.Proxy.Corrupt.Store(false)
	}
	f.request(t, "flaky", "clean")
	ec = f.waitBackup(t, "flaky", "clean")
	g.Expect(ec.Status.Backup.LastSuccess).NotTo(BeNil(), "failure: %+v", ec.Status.Backup.LastFailure)
	raw, err := os.ReadFile(strings.TrimSuffix(strings.TrimPrefix(ec.Status.Backup.LastSuccess.Location, "file://"), ".db") + ".json")
	g.Expect(err).NotTo(HaveOccurred())
	var md backupstore.Metadata
	g.Expect(json.Unmarshal(raw, &md)).To(Succeed())
	g.Expect(md.TotalKeys).To(Equal(2000))
}
