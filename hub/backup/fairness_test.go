package backup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/tenancy"
)

// stallingStore is the S3 server behind a proxy that passes reads and
// holds every upload until the test ends: a store that answers its check
// and then is slow, as a tenant's own store can be. stalled counts the
// uploads held.
func stallingStore(t *testing.T, srv *s3test.Server) (endpoint string, stalled *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	release := make(chan struct{})
	stalled = &atomic.Int32{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut || r.Method == http.MethodPost {
			stalled.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.Error(w, "slow store", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(release); hs.Close() })
	return hs.URL, stalled
}

// TestSlowStoreOfOneTenantDoesNotStallAnother: a tenant whose store
// answers its check and then holds every upload gets one of the hub's
// backup workers, not all of them. Before, each of its rings held a
// worker for the whole spec.backup.timeout (up to 24 h), and with two
// rings on the default two workers no other tenant's backup ran at all.
func TestSlowStoreOfOneTenantDoesNotStallAnother(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	api := testenv.StartT(t, "hub")[0]
	slow, fast := testenv.NamespaceT(t, api, "slow"), testenv.NamespaceT(t, api, "fast")
	testenv.StartManager(t, api, "", func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), ScratchDir: t.TempDir(), MaxConcurrentBackups: 2, Policy: tenancy.Policy{}}
		return r.SetupWithManager(mgr)
	})
	e := etcdtest.Start(t, etcdtest.Options{Members: 1, Name: "shared"})
	st, err := e.NewClient().Status(ctx, e.Members[0].ClientURL)
	g.Expect(err).NotTo(HaveOccurred())
	srv := s3test.StartT(t, "backups")
	endpoint, stalled := stallingStore(t, srv)
	for _, ns := range []string{slow, fast} {
		g.Expect(api.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, Data: srv.Credentials()})).To(Succeed())
	}
	// ring points an EtcdCluster at the etcd above (every ring here
	// shares it: what is measured is the hub's workers) and turns backups
	// on once its status says formed.
	ring := func(ns, name string, store etcdfedv1.BackupStore) {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: name + "." + ns + ".etcd.test"},
				TLS: etcdfedv1.TLSSpec{Mode: etcdfedv1.TLSDisabled}}}
		g.Expect(api.Client.Create(ctx, ec)).To(Succeed())
		ec.Status.ClusterID = strconv.FormatUint(st.Header.ClusterId, 16)
		ec.Status.Endpoints = e.Endpoints()
		g.Expect(api.Client.Status().Update(ctx, ec)).To(Succeed())
		ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: yearly, Store: store, Timeout: &metav1.Duration{Duration: time.Hour}}
		g.Expect(api.Client.Update(ctx, ec)).To(Succeed())
	}
	slowStore := srv.Store("backups", "slow", "s3")
	slowStore.S3.Endpoint = endpoint
	ring(slow, "a", slowStore)
	ring(slow, "b", slowStore)
	// As many of the slow tenant's uploads as the hub lets start.
	g.Eventually(stalled.Load).WithTimeout(time.Minute).Should(BeNumerically(">=", 1))
	g.Consistently(stalled.Load).WithTimeout(10 * time.Second).Should(BeNumerically("<=", 2))

	ring(fast, "c", srv.Store("backups", "fast", "s3"))
	g.Eventually(func(g Gomega) {
		got := &etcdfedv1.EtcdCluster{}
		g.Expect(api.Client.Get(ctx, client.ObjectKey{Namespace: fast, Name: "c"}, got)).To(Succeed())
		g.Expect(got.Status.Backup).NotTo(BeNil())
		g.Expect(got.Status.Backup.LastSuccess).NotTo(BeNil(), "the other tenant's backup has not run while the slow store holds %d uploads", stalled.Load())
	}).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	g.Expect(stalled.Load()).To(BeNumerically("==", 1), "the slow tenant held more than one worker")
}

// TestBackupTimeBoundedByTheHub: a tenant's spec.backup.timeout of 24 h
// on a store that holds every upload holds one of the hub's shared backup
// workers for no longer than the hub's bound (--max-backup-timeout), and
// the failure says so (issue 37, "one tenant starves the hub's workers":
// before, the tenant's own timeout was the only bound).
func TestBackupTimeBoundedByTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	api := testenv.StartT(t, "hub")[0]
	ns := testenv.NamespaceT(t, api, "slow")
	testenv.StartManager(t, api, "", func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), ScratchDir: t.TempDir(), MaxTimeout: 5 * time.Second, Policy: tenancy.Policy{}}
		return r.SetupWithManager(mgr)
	})
	e := etcdtest.Start(t, etcdtest.Options{Members: 1, Name: "bounded"})
	st, err := e.NewClient().Status(ctx, e.Members[0].ClientURL)
	g.Expect(err).NotTo(HaveOccurred())
	srv := s3test.StartT(t, "backups")
	endpoint, stalled := stallingStore(t, srv)
	g.Expect(api.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, Data: srv.Credentials()})).To(Succeed())
	store := srv.Store("backups", "slow", "s3")
	store.S3.Endpoint = endpoint
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"},
		Spec: etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "a." + ns + ".etcd.test"},
			TLS: etcdfedv1.TLSSpec{Mode: etcdfedv1.TLSDisabled}}}
	g.Expect(api.Client.Create(ctx, ec)).To(Succeed())
	ec.Status.ClusterID = strconv.FormatUint(st.Header.ClusterId, 16)
	ec.Status.Endpoints = e.Endpoints()
	g.Expect(api.Client.Status().Update(ctx, ec)).To(Succeed())
	ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: yearly, Store: store, Timeout: &metav1.Duration{Duration: 24 * time.Hour}}
	g.Expect(api.Client.Update(ctx, ec)).To(Succeed())
	g.Eventually(stalled.Load).WithTimeout(time.Minute).Should(BeNumerically(">=", 1))
	g.Eventually(func(g Gomega) {
		got := &etcdfedv1.EtcdCluster{}
		g.Expect(api.Client.Get(ctx, client.ObjectKeyFromObject(ec), got)).To(Succeed())
		g.Expect(got.Status.Backup).NotTo(BeNil())
		g.Expect(got.Status.Backup.LastFailure).NotTo(BeNil(), "the upload held for 24 h still holds the worker")
		g.Expect(got.Status.Backup.LastFailure.Message).To(ContainSubstring("--max-backup-timeout"))
	}).WithTimeout(45 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
}
