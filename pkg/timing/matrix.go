package timing

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Report is one spoke's round trips to its peers, as the hub accepted them
// (validated, from a fresh spoke of one of the ring's clusters).
type Report struct {
	// From is the spoke's member cluster.
	From string
	// RoundTrips are its round trips to each peer.
	RoundTrips []etcdfedv1.PeerRoundTrip
}

// Readers are the decisions of a ring that read its matrix, which set
// what a recorded pair must move by to be recorded again (RecordAgain).
// A ring that reads it for nothing (timing Manual, or both values given,
// and no leader placement Auto) records each pair once, when it is first
// reported: its spokes' EtcdSpoke status carries what they measure now.
type Readers struct {
	// Timing: the etcd timing is derived from the matrix (Choose with
	// Auto for at least one of the two values).
	Timing bool
	// Leader: leader placement Auto, which compares the medians of the
	// ring's clusters (within topology.AutoMarginPercent).
	Leader bool
	// BelowDefaults: the timing may go below etcd's defaults (timingFloor
	// Disk), so a heartbeat that moves below MinHeartbeat is news too.
	BelowDefaults bool
}

// Matrix merges reports into the ring's matrix prev, for the ring's
// member clusters only (sorted by from and to, at most
// etcdfedv1.MaxRoundTripMatrix entries):
//
//   - a reported pair new to the matrix is recorded at now;
//   - a reported pair already recorded keeps its recorded values and time
//     unless the move matters to the decisions that read it
//     (RecordAgain), when it is recorded anew at now;
//   - a recorded pair nobody reports now (its spoke stale, or its probes
//     not yet in) keeps its last values: the distance between two
//     clusters outlives a spoke's restart;
//   - a pair with a cluster no longer in clusters is dropped.
//
// So at rest, with only jitter, the result equals prev.
func Matrix(prev []etcdfedv1.RoundTrip, reports []Report, clusters []string, now time.Time, readers Readers) []etcdfedv1.RoundTrip {
	in := map[string]bool{}
	for _, c := range clusters {
		in[c] = true
	}
	type key struct{ from, to string }
	out := map[key]etcdfedv1.RoundTrip{}
	for _, e := range prev {
		if in[e.From] && in[e.To] && e.From != e.To {
			out[key{e.From, e.To}] = e
		}
	}
	at := metav1.NewTime(now).Rfc3339Copy()
	for _, r := range reports {
		if !in[r.From] {
			continue
		}
		for _, p := range r.RoundTrips {
			if !in[p.Cluster] || p.Cluster == r.From {
				continue
			}
			k := key{r.From, p.Cluster}
			if old, ok := out[k]; ok && !RecordAgain(old, p, now, readers) {
				continue
			}
			t := at
			out[k] = etcdfedv1.RoundTrip{From: r.From, To: p.Cluster, MedianMicros: p.MedianMicros, P99Micros: p.P99Micros, ObservedAt: &t}
		}
	}
	res := make([]etcdfedv1.RoundTrip, 0, len(out))
	for _, e := range out {
		res = append(res, e)
	}
	slices.SortFunc(res, func(a, b etcdfedv1.RoundTrip) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	if len(res) > etcdfedv1.MaxRoundTripMatrix {
		res = res[:etcdfedv1.MaxRoundTripMatrix]
	}
	if len(res) == 0 {
		return nil
	}
	return res
}

// P99Hold is how long a recorded pair keeps its values when only its p99
// moved. A loaded prober's p99 swings by hundreds of ms from one window to
// the next while its median stays (seen with twenty simulated spokes in
// one busy process: median 9 ms, p99 150 to 400 ms); every recorded swing
// is a status write and a pass for every ring with voters across the
// pair, and the hub's queue never emptied after a restart. A move of the
// median, which a real change of distance is, is recorded at once.
const P99Hold = 5 * time.Minute

// RecordMillis is the least move of the heartbeat a recorded pair asks
// for (Auto's rule: heartbeat) that records the pair again, with more
// than an eighth of the old one: half of what Choose applies
// (ChangeMillis and a quarter), so the recorded matrix never lags what is
// measured by a change that alone would roll the ring. Below etcd's
// default heartbeat (MinHeartbeat) every distance asks for the same: a
// loaded prober's medians at loopback, 6 to 54 ms over twenty simulated
// spokes in one busy process (docs/measurements/fleet.md), move nothing
// of the timing, and were 0.6 status writes a second over the fleet at
// rest, each woke and wrote every ring across the pair.
const RecordMillis = ChangeMillis / 2

// RecordAgain says whether a recorded pair is recorded anew with what a
// spoke reports now, for a ring whose matrix readers read (none: never):
//
//   - for leader placement Auto, its median moved significantly (Moved's
//     rule of the median);
//   - for the timing, the heartbeat it asks for moved by RecordMillis and
//     more than an eighth: at once when its median moved too (by more
//     than an eighth and SignificantMedianMicros: a change of distance),
//     else (its p99) only once the pair was recorded P99Hold ago or more.
func RecordAgain(old etcdfedv1.RoundTrip, p etcdfedv1.PeerRoundTrip, now time.Time, readers Readers) bool {
	medianMoved := moved(old.MedianMicros, p.MedianMicros, SignificantMedianMicros)
	if readers.Leader && medianMoved {
		return true
	}
	if !readers.Timing {
		return false
	}
	floor := MinHeartbeat
	if readers.BelowDefaults {
		floor = HeartbeatStep
	}
	was := heartbeat(&old, floor)
	is := heartbeat(&etcdfedv1.RoundTrip{MedianMicros: p.MedianMicros, P99Micros: p.P99Micros}, floor)
	if d := max(is-was, was-is); d < RecordMillis || 8*d <= was {
		return false
	}
	if d := max(p.MedianMicros-old.MedianMicros, old.MedianMicros-p.MedianMicros); d > SignificantMedianMicros && 8*d > old.MedianMicros {
		return true
	}
	return old.ObservedAt == nil || now.Sub(old.ObservedAt.Time) >= P99Hold
}
