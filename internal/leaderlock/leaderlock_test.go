package leaderlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestRestartedReplicaLeadsAtOnce: in a real apiserver, a replica named
// hub-1 leads and then dies without releasing the Lease (a crash). Its
// restarted process, under the same name, leads again while the Lease is
// still valid, a Lease long enough (10 minutes) that waiting it out is
// impossible within the test; a replica under another name (hub-2, the
// standby) does not lead meanwhile. Without the stable name (a random one,
// as controller-runtime gives) the restarted process would wait too.
func TestRestartedReplicaLeadsAtOnce(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, lease = "etcdfed-system", "etcdfed-hub"
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// run elects identity until ctx ends, and reports when it leads.
	run := func(ctx context.Context, identity string, leading *atomic.Bool, led chan<- struct{}) {
		t.Helper()
		lock, err := New(api.Config, ns, lease, identity)
		if err != nil {
			t.Fatal(err)
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 10 * time.Minute, RenewDeadline: RenewDeadline, RetryPeriod: 200 * time.Millisecond,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					leading.Store(true)
					close(led)
				},
				OnStoppedLeading: func() { leading.Store(false) },
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		go le.Run(ctx)
	}
	wait := func(what string, led <-chan struct{}) {
		t.Helper()
		select {
		case <-led:
		case <-ctx.Done():
			t.Fatalf("%s: not within the test's time", what)
		}
	}

	// hub-1 leads, then its process dies: no release, the Lease stays
	// valid for 10 minutes.
	first, die := context.WithCancel(ctx)
	var l1 atomic.Bool
	led1 := make(chan struct{})
	run(first, "hub-1", &l1, led1)
	wait("hub-1 leads", led1)
	die()

	// The standby and hub-1's restarted process both try.
	var standby, again atomic.Bool
	standbyLed, againLed := make(chan struct{}), make(chan struct{})
	run(ctx, "hub-2", &standby, standbyLed)
	run(ctx, "hub-1", &again, againLed)
	wait("hub-1 restarted leads again", againLed)
	// The standby had its chances meanwhile (a retry every 200 ms), and
	// more after: the Lease is hub-1's, valid, so it never leads.
	time.Sleep(time.Second)
	if standby.Load() {
		t.Fatal("hub-2 leads although hub-1 holds a valid Lease")
	}
}
