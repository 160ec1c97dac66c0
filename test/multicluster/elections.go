package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/workload"
)

// ElectionWatch checks the promise for operations that restart
// members or move leadership (CA rotation, certificate renewal): "no failed
// client request beyond one election". It looks at every member through
// its own endpoint every 100 ms (workload.WatchRing): the moments a member
// stops or starts answering and the moments a member sees another leader.
// FailuresWithinElections then requires every failed request of the
// workload to overlap one of those moments widened by the ring's election
// timeout (spec.etcd.electionTimeoutMillis, 1 s by default) on both sides.
// A moment is known to within one look (100 ms plus the look's own time),
// which widens the window by as much.
type ElectionWatch struct {
	ring       *workload.RingWatch
	et         time.Duration
	start, end time.Time
	once       sync.Once
	ds         []workload.Disruption
	looks      int
	logged     bool
}

// ElectionLookEvery is how often an ElectionWatch looks at each member.
const ElectionLookEvery = 100 * time.Millisecond

// StartElectionWatch starts watching the ring's members with cfg (its
// endpoints and credentials); start it before the workload.
func StartElectionWatch(ctx context.Context, t testing.TB, cfg EtcdClientConfig, ec *etcdfedv1.EtcdCluster) *ElectionWatch {
	t.Helper()
	et := time.Duration(etcdfedv1.DefaultElectionTimeoutMillis) * time.Millisecond
	if p := ec.Spec.Etcd.ElectionTimeoutMillis; p != nil {
		et = time.Duration(*p) * time.Millisecond
	}
	e := &ElectionWatch{ring: workload.WatchRing(ctx, cfg, ElectionLookEvery, time.Second), et: et, start: time.Now()}
	t.Cleanup(func() { e.Disruptions() })
	return e
}

// FailuresWithinElections stops the watch and fails the test for every
// failed request of w that overlaps no member stop, start or leader change
// widened by one election timeout, naming the nearest one. It returns a
// summary for the scenario's log line and docs.
func (e *ElectionWatch) FailuresWithinElections(t testing.TB, w *Workload) string {
	t.Helper()
	return e.Check(t, "request", w.Failures())
}

// Check is FailuresWithinElections for any client's failures (what names
// them in messages), with extra moments that excuse a failure as well
// (the client's own restart).
func (e *ElectionWatch) Check(t testing.TB, what string, failures []workload.Failure, extra ...workload.Disruption) string {
	t.Helper()
	ds := append(slices.Clone(e.Disruptions()), extra...)
	kinds := map[string]int{}
	for _, d := range e.ds {
		kinds[d.Kind]++
	}
	for _, f := range workload.Unexplained(failures, ds, e.et) {
		if d, gap, ok := workload.Nearest(f, ds); ok {
			t.Errorf("a failed %s beyond one election (%s): %s; the nearest member stop, start or leader change was %s away: %s", what, e.et, f, gap.Round(time.Millisecond), d)
		} else {
			t.Errorf("a failed %s beyond one election (%s): %s; no member stopped, started or changed leader during the run", what, e.et, f)
		}
	}
	for _, f := range failures {
		t.Logf("failed %s: %s", what, f)
	}
	if !e.logged {
		e.logged = true
		for _, d := range e.ds {
			t.Logf("seen: %s", d)
		}
	}
	var byKind []string
	for _, k := range []string{workload.DisruptionStopped, workload.DisruptionAnswers, workload.DisruptionLeaderChanged} {
		byKind = append(byKind, fmt.Sprintf("%d %s", kinds[k], k))
	}
	return fmt.Sprintf("%d failed %s(s), each checked to fall within %s of a member stop, start or leader change (%s seen in %d looks over %.0fs)",
		len(failures), what, e.et, strings.Join(byKind, ", "), e.looks, e.end.Sub(e.start).Seconds())
}

// Disruptions are the moments seen, once the watch has stopped.
func (e *ElectionWatch) Disruptions() []workload.Disruption {
	e.once.Do(func() { e.ds, e.looks = e.ring.Stop(); e.end = time.Now() })
	return e.ds
}
