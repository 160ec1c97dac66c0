package restore

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/tenancy"
)

// TestSlowStoreOfOneTenantDoesNotStallAnotherRestore: a tenant whose
// store takes every request and answers none (its own store, or one it
// points at) gets one of the hub's restore workers, not all of them: a
// restore of another tenant is resolved meanwhile (issue 37, "one tenant
// starves the hub's workers": before, the restore controller ran one
// resolution at a time, and each of the slow tenant's rings held it for
// the whole resolution timeout, 15 minutes).
func TestSlowStoreOfOneTenantDoesNotStallAnotherRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	api := testenv.StartT(t, "hub")[0]
	slow, fast := testenv.NamespaceT(t, api, "slow"), testenv.NamespaceT(t, api, "fast")
	testenv.StartManager(t, api, "", func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), ScratchDir: t.TempDir(), Policy: tenancy.Policy{}}
		return r.SetupWithManager(mgr)
	})
	srv := s3test.StartT(t, "backups")
	release := make(chan struct{})
	var held atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "slow store", http.StatusServiceUnavailable)
	}))
	t.Cleanup(func() { close(release); hs.Close() })
	for _, ns := range []string{slow, fast} {
		g.Expect(api.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, Data: srv.Credentials()})).To(Succeed())
	}
	slowStore := srv.Store("backups", "hub", "s3")
	slowStore.S3.Endpoint = hs.URL
	for _, name := range []string{"a", "b"} {
		g.Expect(api.Client.Create(ctx, restoring(api.Client, slow, name, etcdfedv1.SnapshotSource{Store: slowStore, Object: slow + "/main/1111111111111111/x.db"}))).To(Succeed())
	}
	g.Eventually(held.Load).WithTimeout(time.Minute).Should(BeNumerically(">=", 1))

	// Another tenant's restore, of a snapshot its store does not hold: it
	// is resolved (and refused, NotFound) while the slow store holds on.
	other := restoring(api.Client, fast, "c", etcdfedv1.SnapshotSource{Store: srv.Store("backups", "hub", "s3"), Object: fast + "/main/2222222222222222/x.db"})
	g.Expect(api.Client.Create(ctx, other)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, cond := verified(g, api.Client, client.ObjectKeyFromObject(other))
		g.Expect(cond.Reason).To(Equal(etcdfedv1.SnapshotReasonNotFound), cond.Message)
	}).WithTimeout(45*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "the other tenant's restore was not resolved while the slow store held %d requests", held.Load())
	g.Consistently(held.Load).WithTimeout(5*time.Second).Should(BeNumerically("==", 1), "the slow tenant held more than one worker")
}
