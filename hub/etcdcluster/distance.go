package etcdcluster

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/timing"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// recordDistance brings the ring's round-trip matrix and the etcd timing
// chosen from it up to date in the ledger (rule 15, pkg/timing). The
// matrix is fed by the spokes of the ring's clusters (eligible or holding
// a member) that are visible, whose gossip may witness (GossipHealthy)
// and whose report the hub accepted (checkReports); an entry changes only
// when its round trip changed by what matters to the ring's decisions
// (matrixReaders, timing.RecordAgain), so a ring at rest writes nothing. The timing is chosen from the round trips between the voters'
// clusters, with hysteresis against what was chosen before; desiredMember
// renders it into every member's etcd flags (timing.Render), and a change
// is rolled like any change of spec.etcd (planner rollStep, leader last).
func recordDistance(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	clusters := distanceClusters(s, st)
	var reports []timing.Report
	for _, cs := range s.clusters {
		if !slices.Contains(clusters, cs.name) {
			continue
		}
		if cs.visible() && cs.spoke != nil && gossipAbstains(cs.spoke) == "" {
			reports = append(reports, timing.Report{From: cs.name, RoundTrips: cs.spoke.Status.RoundTrips})
		}
	}
	if m := timing.Matrix(st.RoundTrips, reports, clusters, s.now, matrixReaders(s.ec)); !equality.Semantic.DeepEqual(m, st.RoundTrips) {
		st.RoundTrips = m
	}
	previous := st.Timing
	if previous == nil {
		previous = runningTiming(s, st)
	}
	t := timing.Choose(timingInput(s, st, clusters, previous))
	if st.Timing == nil || *st.Timing != t {
		st.Timing = &t
	}
}

// timingInput is what the ring's timing is chosen from: its voters'
// clusters and matrix, previous as what its members run. A ring with
// members recorded is Running: a change that rolls them waits until the
// round trips it rests on held still (timing.Settle).
func timingInput(s *snapshot, st *etcdfedv1.EtcdClusterStatus, clusters []string, previous *etcdfedv1.TimingStatus) timing.Input {
	voters := voterClusters(st)
	running := len(voters) > 0
	if !running {
		// Before the first members are recorded (a new ring), the
		// clusters it may be placed in: it is founded on the timing of
		// its distance rather than rolled onto it right after.
		voters = clusters
	}
	return timing.Input{Etcd: s.ec.Spec.Etcd, Voters: voters, Matrix: st.RoundTrips, Previous: previous, Running: running, Now: s.now, Disks: voterDisks(s, st)}
}

// voterDisks are the WAL sync views the spokes report of the ring's
// voters (their current EtcdMembers, in clusters the hub sees), one per
// voter, View nil where none is reported.
func voterDisks(s *snapshot, st *etcdfedv1.EtcdClusterStatus) []timing.Disk {
	var out []timing.Disk
	for _, m := range st.Members {
		if m.Role == etcdfedv1.RoleLearner {
			continue
		}
		d := timing.Disk{Member: m.Name}
		if o := s.currentObject(st, m.Name); o != nil && o.Spec.Incarnation == m.Incarnation && o.Status.Etcd != nil && o.Status.Etcd.WALFsync != nil {
			d.View = o.Status.Etcd.WALFsync.DeepCopy()
		}
		out = append(out, d)
	}
	return out
}

// nextTimingChoice is how long after now the change of timing st holds
// back may be applied (timing.Held), 0 when none is held: the pass that
// applies it comes then, not at the resync.
func nextTimingChoice(s *snapshot, st *etcdfedv1.EtcdClusterStatus, now time.Time) time.Duration {
	if st.Timing == nil {
		return 0
	}
	at := timing.Held(timingInput(s, st, distanceClusters(s, st), st.Timing))
	if at.IsZero() {
		return 0
	}
	return max(at.Sub(now), soon)
}

// runningTiming is the timing the ring's members run when its status
// records none, nil when no member object of it is seen: a ring taken
// over by a rebuilt hub (or whose status was lost) starts with no
// status.timing, and without this the first timing derived from round
// trips measured on a loaded machine rolled every member the take-over had
// just left running (110/1100 against the 100/1000 they ran, a change the
// hysteresis keeps a recorded choice from). The objects' spec.etcd is what
// their pods run (etcd's defaults where it gives nothing, as timing.Render
// leaves them).
func runningTiming(s *snapshot, st *etcdfedv1.EtcdClusterStatus) *etcdfedv1.TimingStatus {
	for _, m := range st.Members {
		cs := s.cluster(m.Cluster)
		if cs == nil || cs.members[m.Name] == nil {
			continue
		}
		e := cs.members[m.Name].Spec.Etcd
		t := etcdfedv1.TimingStatus{
			HeartbeatIntervalMillis: etcdfedv1.DefaultHeartbeatIntervalMillis,
			ElectionTimeoutMillis:   etcdfedv1.DefaultElectionTimeoutMillis,
			Source:                  etcdfedv1.TimingSourceAuto,
		}
		if e.HeartbeatIntervalMillis != nil {
			t.HeartbeatIntervalMillis = *e.HeartbeatIntervalMillis
		}
		if e.ElectionTimeoutMillis != nil {
			t.ElectionTimeoutMillis = *e.ElectionTimeoutMillis
		}
		return &t
	}
	return nil
}

// matrixReaders are the ring's decisions that read its matrix: the
// timing when it is derived (Auto), leader placement Auto.
func matrixReaders(ec *etcdfedv1.EtcdCluster) timing.Readers {
	return timing.Readers{Timing: timing.Derived(ec.Spec.Etcd), Leader: leaderPolicy(ec).Placement == topology.LeaderAuto,
		BelowDefaults: ec.Spec.Etcd.TimingFloor == etcdfedv1.TimingFloorDisk}
}

// distanceClusters are the member clusters of the ring's round-trip
// matrix: the eligible ones and those holding a member.
func distanceClusters(s *snapshot, st *etcdfedv1.EtcdClusterStatus) []string {
	var out []string
	for _, cs := range s.clusters {
		if cs.eligible || hasMembers(st, cs.name) {
			out = append(out, cs.name)
		}
	}
	return out
}

// voterClusters are the member clusters of the recorded members that are
// not learners, sorted, each once.
func voterClusters(st *etcdfedv1.EtcdClusterStatus) []string {
	var out []string
	for _, m := range st.Members {
		if m.Cluster != "" && m.Role != etcdfedv1.RoleLearner {
			out = append(out, m.Cluster)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// timingEvent is the TimingChanged event's message when the values etcd
// runs with changed between before and after ("" otherwise: a first
// choice, or only the message changed).
func timingEvent(before, after *etcdfedv1.TimingStatus) string {
	if before == nil || after == nil ||
		(before.HeartbeatIntervalMillis == after.HeartbeatIntervalMillis && before.ElectionTimeoutMillis == after.ElectionTimeoutMillis) {
		return ""
	}
	return fmt.Sprintf("heartbeat %d -> %d ms, election timeout %d -> %d ms (%s): %s; members roll onto it one at a time",
		before.HeartbeatIntervalMillis, after.HeartbeatIntervalMillis, before.ElectionTimeoutMillis, after.ElectionTimeoutMillis, after.Source, after.Message)
}

// roundTripsChanged lists the entries of after that are not in before, as
// "from->to median/p99 µs", for the log.
func roundTripsChanged(before, after []etcdfedv1.RoundTrip) []string {
	var out []string
	for _, a := range after {
		if !slices.ContainsFunc(before, func(b etcdfedv1.RoundTrip) bool {
			return b.From == a.From && b.To == a.To && b.MedianMicros == a.MedianMicros && b.P99Micros == a.P99Micros
		}) {
			out = append(out, fmt.Sprintf("%s->%s %d/%d µs", a.From, a.To, a.MedianMicros, a.P99Micros))
		}
	}
	return out
}

// distance is the feature of rule 15: the round-trip matrix and the etcd
// timing chosen from it, recorded from the spokes' reports. The planner
// sees it through the members' outdated specs (a Roll) and the leader's
// placement.
type distance struct{ s *snapshot }

func (f *distance) observe(st *etcdfedv1.EtcdClusterStatus, _ *decision) {
	recordDistance(f.s, st)
}

func (f *distance) input(*planner.Input, *etcdfedv1.EtcdClusterStatus)          {}
func (f *distance) record(*etcdfedv1.EtcdClusterStatus, *decision)              {}
func (f *distance) status(*etcdfedv1.EtcdClusterStatus, *decision, applyResult) {}
