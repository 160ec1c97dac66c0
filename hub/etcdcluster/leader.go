package etcdcluster

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// The leader's placement (spec.leader, rule 16) in one place: its policy
// for the planner and the placement, the record that carries its
// hysteresis across passes (status.leaderPlacement), the step that
// moves leadership, and its metrics. The decision is pkg/topology's
// DecideLeader; the operation is the planner's MoveLeader (leader.go
// there).

// Defaults of spec.leader.
const (
	defaultLeaderSettle      = 30 * time.Second
	defaultLeaderMinInterval = 5 * time.Minute
)

var (
	metricLeaderMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_leader_placement_moves_total", Help: "Moves of leadership the hub made for spec.leader (MoveLeader operations' transfers), by placement and result.",
	}, []string{"namespace", "name", "placement", "result"})
	metricLeaderInPlace = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_leader_placement_in_place", Help: "1 when the leader is where spec.leader wants it (or spec.leader wants nothing in particular), else 0.",
	}, labelsNN)
)

func init() {
	metrics.Registry.MustRegister(metricLeaderMoves, metricLeaderInPlace)
}

// leaderPolicy is spec.leader with its defaults resolved: unset placement
// is Preferred when places are listed, else None.
func leaderPolicy(ec *etcdfedv1.EtcdCluster) topology.LeaderPolicy {
	l := ec.Spec.Leader
	if l == nil {
		return topology.LeaderPolicy{Placement: topology.LeaderNone}
	}
	p := topology.LeaderPolicy{
		Placement:   topology.LeaderPlacement(l.Placement),
		Settle:      secondsOr(l.SettleSeconds, defaultLeaderSettle),
		MinInterval: secondsOr(l.MinIntervalSeconds, defaultLeaderMinInterval),
	}
	for _, pr := range l.Preferred {
		p.Preferred = append(p.Preferred, topology.Place{Cluster: pr.Cluster, Zone: pr.Zone})
	}
	if p.Placement == "" {
		p.Placement = topology.LeaderNone
		if len(p.Preferred) > 0 {
			p.Placement = topology.LeaderPreferred
		}
	}
	return p
}

func secondsOr(s *int32, def time.Duration) time.Duration {
	if s == nil {
		return def
	}
	return time.Duration(*s) * time.Second
}

// leaderPlaces are the places the member placement favours (Input.Prefer).
func leaderPlaces(ec *etcdfedv1.EtcdCluster) []topology.Place {
	if p := leaderPolicy(ec); p.Placement == topology.LeaderPreferred {
		return p.Preferred
	}
	return nil
}

// leaderInput is the planner's leader input: the policy, the recorded
// times, and the round-trip matrix (status.roundTrips; with none measured
// Auto does nothing, and says so).
func leaderInput(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) planner.LeaderInput {
	in := planner.LeaderInput{Policy: leaderPolicy(ec), RoundTrip: roundTrips(ec, st)}
	if lp := st.LeaderPlacement; lp != nil {
		if lp.OutsideSince != nil {
			in.OutsideSince = lp.OutsideSince.Time
		}
		if lp.LastMoveTime != nil {
			in.LastMoved = lp.LastMoveTime.Time
		}
	}
	return in
}

// roundTrips is the ring's measured matrix between member clusters
// (status.roundTrips, kept by the hub from the spokes' reports), nil when
// none is measured. A pair reads the median either way: the spoke of
// either end may have measured it, and a probe's round trip is the same
// path both ways.
func roundTrips(_ *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) topology.RoundTrip {
	return roundTripsOf(st.RoundTrips)
}

// roundTripsOf turns a matrix into the lookup leader placement reads.
func roundTripsOf(matrix []etcdfedv1.RoundTrip) topology.RoundTrip {
	if len(matrix) == 0 {
		return nil
	}
	median := make(map[[2]string]time.Duration, 2*len(matrix))
	for _, e := range matrix {
		d := time.Duration(e.MedianMicros) * time.Microsecond
		for _, k := range [][2]string{{e.From, e.To}, {e.To, e.From}} {
			if old, ok := median[k]; !ok || d > old {
				median[k] = d // both ends measured: the longer counts
			}
		}
	}
	return func(from, to string) (time.Duration, bool) {
		d, ok := median[[2]string{from, to}]
		return d, ok
	}
}

// recordLeader records the leader's placement as this pass decided it
// (status.leaderPlacement): where the leader is, where it is wanted, why
// it is or is not moved, and the times the hysteresis counts from. A
// MoveLeader begun counts as a move from now.
func recordLeader(s *snapshot, st *etcdfedv1.EtcdClusterStatus, d planner.Decision) {
	pol := leaderPolicy(s.ec)
	if d.Leader == nil {
		return
	}
	if pol.Placement == topology.LeaderNone && st.LeaderPlacement == nil {
		return // nothing asked, nothing recorded
	}
	lp := st.LeaderPlacement
	if lp == nil {
		lp = &etcdfedv1.LeaderPlacementStatus{}
		st.LeaderPlacement = lp
	}
	ld := d.Leader
	lp.Placement = etcdfedv1.LeaderPlacement(pol.Placement)
	lp.Leader, lp.Cluster, lp.Zone = "", "", ""
	for _, m := range st.Members {
		if id := parseID(m.ID); id != 0 && id == s.etcd.LeaderID && s.etcd.Reachable {
			lp.Leader, lp.Cluster, lp.Zone = m.Name, m.Cluster, m.Zone
		}
	}
	lp.Wanted = truncate(ld.Wanted, 512)
	lp.InPlace = ld.InPlace
	lp.Reason = string(ld.Reason)
	lp.Message = truncate(ld.Message, 1024)
	lp.OutsideSince = nil
	if !ld.OutsideSince.IsZero() {
		t := metav1.NewTime(ld.OutsideSince)
		lp.OutsideSince = &t
	}
	if d.Action == planner.ActBegin && d.Operation != nil && d.Operation.Type == planner.OpMoveLeader {
		t := metav1.NewTime(s.now)
		lp.LastMoveTime = &t
		lp.Moves++
	}
}

// TransferLeadership: etcd's MoveLeader, asked of the leader, to the
// member where spec.leader wants it.
func (r *Reconciler) applyTransferLeadership(ctx context.Context, t *taking) error {
	ec, p := t.s.ec, t.d.plan
	placement := string(leaderPolicy(ec).Placement)
	err := t.etcd.MoveLeader(ctx, t.d.step.leaderURLs, p.TransfereeID)
	if err != nil {
		metricLeaderMoves.WithLabelValues(ec.Namespace, ec.Name, placement, "error").Inc()
		return err
	}
	metricLeaderMoves.WithLabelValues(ec.Namespace, ec.Name, placement, "ok").Inc()
	from := ""
	if lp := t.d.ledger.LeaderPlacement; lp != nil && lp.Leader != "" {
		from = " from " + lp.Leader + " in " + lp.Cluster + "/" + lp.Zone
	}
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventLeaderPlaced, "MoveLeader", "Moved leadership%s to %s [%x] for spec.leader (%s)", from, p.Member, p.TransfereeID, placement)
	return nil
}

// recordLeaderMetrics exports whether the leader is where it is wanted.
func recordLeaderMetrics(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) {
	in := 1.0
	if lp := st.LeaderPlacement; lp != nil && lp.Placement != etcdfedv1.LeaderPlacementNone && !lp.InPlace {
		in = 0
	}
	metricLeaderInPlace.WithLabelValues(ec.Namespace, ec.Name).Set(in)
}

// leader is the feature of spec.leader (rule 16): the planner's leader
// input and status.leaderPlacement recorded.
type leader struct{ s *snapshot }

func (f *leader) observe(*etcdfedv1.EtcdClusterStatus, *decision) {}

func (f *leader) input(in *planner.Input, st *etcdfedv1.EtcdClusterStatus) {
	in.Leader = leaderInput(f.s.ec, st)
}

func (f *leader) record(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	recordLeader(f.s, st, d.plan)
}

func (f *leader) status(*etcdfedv1.EtcdClusterStatus, *decision, applyResult) {}
