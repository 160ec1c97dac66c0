package timing

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
)

// Bounds and steps of the chosen values, in milliseconds.
const (
	// HeartbeatStep: a derived heartbeat is rounded up to a multiple.
	HeartbeatStep int32 = 10
	// MinHeartbeat and MinElection are the floors of Auto: etcd's own
	// defaults (100 and 1000), so that nothing changes and nothing rolls
	// at zero distance. Lower floors fail over faster at a distance
	// (docs/measurements/wan.md: a bare etcd at 50/500 failed over at
	// 20 ms in 0.57 to 0.76 s against 1.0 to 1.2 s on etcd's defaults),
	// but 30/300 lost its leader several times in a 10-minute run at
	// 20 ms with 10 ms jitter under CPU load, and 50/500 more often than
	// 100/1000 in such a run (13 elections against 8, each set off by a
	// stall of the machine's disk): the floors stay where etcd puts them.
	MinHeartbeat int32 = etcdfedv1.DefaultHeartbeatIntervalMillis
	MinElection  int32 = etcdfedv1.DefaultElectionTimeoutMillis
	// MaxHeartbeat is the API's bound of heartbeatIntervalMillis; ten
	// times it is etcd's limit of the election timeout.
	MaxHeartbeat int32 = 5000
	// MaxElection is etcd's limit of --election-timeout.
	MaxElection int32 = 50000
	// ElectionFactor: the election timeout is ten heartbeats (the tuning
	// guide's advice: at least ten round trips; etcd's defaults are 100
	// and 1000).
	ElectionFactor int32 = 10
	// ChangeMillis is the least change of a derived value that is applied
	// (with more than a quarter of the old value): anything smaller is not
	// worth a roll.
	ChangeMillis int32 = 50
)

// Input is what Choose needs.
type Input struct {
	// Etcd is the EtcdCluster's spec.etcd.
	Etcd etcdfedv1.EtcdConfig
	// Voters are the member clusters of the ring's voters (repeats and
	// order do not matter).
	Voters []string
	// Matrix is the ring's round-trip matrix (status.roundTrips).
	Matrix []etcdfedv1.RoundTrip
	// Previous is what was chosen before (status.timing), nil at first.
	Previous *etcdfedv1.TimingStatus
	// Running says the ring's members run Previous, so that a change of
	// the derived values rolls every one of them: it is then applied only
	// once the round trips between the voters' clusters have held still
	// for Settle before Now (Held). A ring with no member yet is founded on
	// what is measured at once.
	Running bool
	// Now is the time of the choice (the matrix's ObservedAt are compared
	// with it); read only with Running.
	Now time.Time
	// Disks are the voters' WAL sync views (status.etcd.walFsync of their
	// EtcdMembers), where the spokes report one. They change no value;
	// a disk slow enough to cost the ring its leader is said in the
	// message (DiskWarning).
	Disks []Disk
}

// Disk is one voter's WAL sync view; View nil when its spoke reports
// none (or its cluster is out of the hub's sight).
type Disk struct {
	Member string
	View   *etcdfedv1.MemberDiskView
}

// DiskWarning says, when a voter's slowest WAL sync of its window reached
// half the election timeout or more (its bucket's upper bound at least the
// election timeout), which voter's disk it was and what it means; "" when
// none did. A leader sends no heartbeat while it waits for a sync, so a
// stall that long makes its followers campaign on links that are fine.
func DiskWarning(disks []Disk, electionMillis int32) string {
	var worst *Disk
	for i := range disks {
		if d := &disks[i]; d.View != nil && (worst == nil || d.View.MaxMillis > worst.View.MaxMillis) {
			worst = d
		}
	}
	if worst == nil || worst.View.MaxMillis < int64(electionMillis) {
		return ""
	}
	// Only the tail's buckets, not the counts, so that the message moves
	// only when the tail does.
	return fmt.Sprintf("voter %s's slowest recent WAL sync took %d to %d ms (p99 up to %d ms), half the election timeout (%d ms) or more: a leader that stalls so long on its disk loses its term; here the disk, not the distance, limits the timing",
		worst.Member, worst.View.MaxMillis/2, worst.View.MaxMillis, worst.View.P99Millis, electionMillis)
}

// Settle is how long the round trips between a running ring's voters'
// clusters must have stayed as recorded before a change of the timing
// derived from them rolls the ring. A spoke that has just restarted, or
// whose peer's cluster has just come back (a killed cluster restored:
// its node starting every pod at once), measures its first probes on a
// loaded machine, and publishes its first window of ten of them at once:
// on real nodes a median of 174 ms and a p99 of 286 ms between two
// clusters at loopback (member-1 to member-3, 25 s after member-1's spoke
// restarted; 53 ms 20 s later), which asked for 290/2900 and rolled every
// member of the ring for nothing, right after the ring had moved a member
// back into the restored cluster (issue 38). A burst's median is recorded
// again as soon as the window's median comes back; its stalled probes keep
// the window's p99 up until they leave the window (WindowSize probes,
// about four minutes with three clusters), and a p99 alone is recorded
// again only P99Hold after the pair was last recorded: Settle is that
// hold, so that the pass that ends it records the p99 come back before it
// chooses. A real change of distance holds still and is applied Settle
// after it was last recorded; a new ring is founded on it at once.
const Settle = P99Hold

// Choose returns the heartbeat interval and election timeout etcd runs
// with, their source and why. Explicit values in spec.etcd win; with
// timing Manual a missing one is etcd's default; with Auto (or unset) it
// is derived from the round trips between two different voter clusters
// (the largest of wanted: 1.5 medians and a quarter of the jitter, at
// most half a median), and
// kept at Previous's value unless it differs by more than a
// quarter and by at least ChangeMillis; on a running ring such a change
// waits until the round trips between the voters' clusters have held
// still for Settle (Held). When the voters span several
// clusters but no round trip between them is known yet, Previous is kept
// (etcd's defaults without one): no measurement, no change.
func Choose(in Input) etcdfedv1.TimingStatus {
	st := choose(in)
	if w := DiskWarning(in.Disks, st.ElectionTimeoutMillis); w != "" {
		st.Message = text.Truncate(st.Message, maxMessage-len(w)-2) + "; " + w
	}
	return st
}

// maxMessage is the API's bound of status.timing.message.
const maxMessage = 1024

// choose is Choose without the disks' warning.
func choose(in Input) etcdfedv1.TimingStatus {
	specHB, specEl := in.Etcd.HeartbeatIntervalMillis, in.Etcd.ElectionTimeoutMillis
	explicit := specHB != nil || specEl != nil
	if in.Etcd.Timing == etcdfedv1.TimingManual {
		st := etcdfedv1.TimingStatus{
			HeartbeatIntervalMillis: valueOr(specHB, etcdfedv1.DefaultHeartbeatIntervalMillis),
			ElectionTimeoutMillis:   valueOr(specEl, etcdfedv1.DefaultElectionTimeoutMillis),
			Source:                  etcdfedv1.TimingSourceManual,
			Message:                 "timing Manual: etcd's defaults where spec.etcd gives no value",
		}
		if explicit {
			st.Source, st.Message = etcdfedv1.TimingSourceSpec, "timing Manual: "+given(specHB, specEl)+"; etcd's default for the other"
			if specHB != nil && specEl != nil {
				st.Message = "timing Manual: " + given(specHB, specEl)
			}
		}
		return st
	}

	hb, el, why := derive(in)
	// Hysteresis against what runs: only a change that matters rolls. The
	// election timeout follows the heartbeat: it changes only with it.
	if p := in.Previous; p != nil && !changes(p.HeartbeatIntervalMillis, hb) && !floorRaises(in) {
		if p.HeartbeatIntervalMillis != hb || p.ElectionTimeoutMillis != el {
			why += fmt.Sprintf("; keeping %d/%d: the derived %d/%d differs too little to roll the ring", p.HeartbeatIntervalMillis, p.ElectionTimeoutMillis, hb, el)
		}
		hb, el = p.HeartbeatIntervalMillis, p.ElectionTimeoutMillis
	}
	if until, e := held(in, hb, el); e != nil {
		p := in.Previous
		why += fmt.Sprintf("; keeping %d/%d until %s: the derived %d/%d rests on round trips recorded less than %s before (%s to %s at %s), and a change rolls every member",
			p.HeartbeatIntervalMillis, p.ElectionTimeoutMillis, until.UTC().Format(time.RFC3339), hb, el, Settle, e.From, e.To, e.ObservedAt.UTC().Format(time.RFC3339))
		hb, el = p.HeartbeatIntervalMillis, p.ElectionTimeoutMillis
	}
	st := etcdfedv1.TimingStatus{HeartbeatIntervalMillis: hb, ElectionTimeoutMillis: el, Source: etcdfedv1.TimingSourceAuto, Message: why, LateHeartbeatsAt: lateAt(in)}
	if !explicit {
		return st
	}
	// A value given wins; the other stays derived, within what etcd and
	// the API's rule accept (election timeout at least 5 heartbeats).
	st.Source = etcdfedv1.TimingSourceSpec
	switch {
	case specHB != nil && specEl != nil:
		st.HeartbeatIntervalMillis, st.ElectionTimeoutMillis = *specHB, *specEl
		st.Message = given(specHB, specEl)
		return st
	case specHB != nil:
		st.HeartbeatIntervalMillis = *specHB
		st.ElectionTimeoutMillis = min(max(el, 5**specHB), MaxElection)
	default:
		st.ElectionTimeoutMillis = *specEl
		st.HeartbeatIntervalMillis = max(min(hb, *specEl/5), 1)
	}
	st.Message = given(specHB, specEl) + "; the other derived: " + why
	return st
}

// Held returns when the change of the derived timing that Choose holds
// back (Settle) may be applied: zero when none is held.
func Held(in Input) time.Time {
	if in.Etcd.Timing == etcdfedv1.TimingManual {
		return time.Time{}
	}
	hb, el, _ := derive(in)
	if p := in.Previous; p != nil && !changes(p.HeartbeatIntervalMillis, hb) && !floorRaises(in) {
		return time.Time{}
	}
	until, _ := held(in, hb, el)
	return until
}

// held says whether the derived hb/el (after the hysteresis), a change
// from Previous on a running ring, waits: until when, and the round trip
// between the voters' clusters recorded last, within Settle before Now;
// nil when the change (if any) is applied now.
func held(in Input, hb, el int32) (time.Time, *etcdfedv1.RoundTrip) {
	p := in.Previous
	if !in.Running || p == nil || (p.HeartbeatIntervalMillis == hb && p.ElectionTimeoutMillis == el) || floorRaises(in) {
		return time.Time{}, nil
	}
	var last *etcdfedv1.RoundTrip
	for _, e := range voterPairs(in, voterSet(in)) {
		if e.ObservedAt != nil && (last == nil || e.ObservedAt.After(last.ObservedAt.Time)) {
			last = e
		}
	}
	if last == nil {
		return time.Time{}, nil
	}
	if until := last.ObservedAt.Add(Settle); in.Now.Before(until) {
		return until, last
	}
	return time.Time{}, nil
}

// voterSet is the set of the voters' clusters.
func voterSet(in Input) map[string]bool {
	voters := map[string]bool{}
	for _, v := range in.Voters {
		voters[v] = true
	}
	return voters
}

// voterPairs are the matrix's round trips between two different clusters
// of voters.
func voterPairs(in Input, voters map[string]bool) []*etcdfedv1.RoundTrip {
	var out []*etcdfedv1.RoundTrip
	for i := range in.Matrix {
		if e := &in.Matrix[i]; e.From != e.To && voters[e.From] && voters[e.To] {
			out = append(out, e)
		}
	}
	return out
}

// Derived says whether Choose derives a value from the matrix for spec:
// timing not Manual, and not both values given.
func Derived(spec etcdfedv1.EtcdConfig) bool {
	return spec.Timing != etcdfedv1.TimingManual && (spec.HeartbeatIntervalMillis == nil || spec.ElectionTimeoutMillis == nil)
}

// derive is the Auto rule without hysteresis.
func derive(in Input) (hb, el int32, why string) {
	voters := voterSet(in)
	var worst *etcdfedv1.RoundTrip
	for _, e := range voterPairs(in, voters) {
		if worst == nil || wanted(e) > wanted(worst) {
			worst = e
		}
	}
	minHB, minEl, floorWhy, _ := floors(in)
	hb, el = minHB, minEl
	if worst == nil {
		if len(voters) > 1 {
			// One message with or without Previous: the status must not
			// move from one pass to the next while nothing is measured.
			why = fmt.Sprintf("no round trip measured yet between the voters' clusters (%s): the values stay as they are (etcd's defaults for a new ring)", names(voters))
			if p := in.Previous; p != nil {
				return p.HeartbeatIntervalMillis, p.ElectionTimeoutMillis, why
			}
			return hb, el, why
		}
		if floorWhy != "" {
			return hb, el, "the voters share one member cluster: " + floorWhy
		}
		return hb, el, "the voters share one member cluster: etcd's defaults"
	}
	// The tuning guide's heartbeat (up to 1.5 round trips) with a margin
	// for jitter, rounded up to the step.
	hb = heartbeat(worst, minHB)
	el = electionFor(hb, minEl)
	why = fmt.Sprintf("max round trip between voters median %s, p99 %s (%s to %s); heartbeat 1.5 x median + a quarter of (p99 - median), at most half a median, in %d ms steps, at least %d; election timeout %d heartbeats, at least %d",
		millis(worst.MedianMicros), millis(worst.P99Micros), worst.From, worst.To, HeartbeatStep, minHB, ElectionFactor, minEl)
	if floorWhy != "" {
		why += "; " + floorWhy
	}
	return hb, el, why
}

// Floors of timingFloor Disk.
const (
	// DiskElectionFactor: the election timeout is at least this many times
	// the voters' slowest WAL sync of the window (its bucket's upper
	// bound), so that a leader stalled on its disk keeps its term.
	DiskElectionFactor = 4
	// DiskMinElection is the least election timeout of timingFloor Disk:
	// at 20 ms between zones a bare etcd at 300 ms failed over in 0.40 to
	// 0.45 s against 1.0 to 1.2 s on etcd's defaults (wan.md).
	DiskMinElection int32 = 300
	// diskElectionStep: the disk's election floor is rounded up to it.
	diskElectionStep int32 = 100
)

// floors are the least heartbeat and election timeout Auto derives, and
// why when they are not etcd's defaults ("" for timingFloor
// EtcdDefaults, whose rule the message already gives).
//
// With timingFloor Disk they come from the voters' WAL syncs: an election
// timeout of DiskElectionFactor times the slowest sync any voter reported
// in its window, at least DiskMinElection, rounded up to 100 ms, and a
// heartbeat of a tenth of it; but never below etcd's defaults while a
// voter reports heartbeats it sent late as leader in its window. A late
// heartbeat is a stall of the leader's raft loop for two heartbeats, on
// its disk or for the CPU: the disk's syncs show the one and not the
// other, and under CPU load (two busy processes on two cores, 20 ms
// between zones) a ring on the disk's floor of 30/300 lost its leader four
// times in ten minutes where etcd's defaults lost it none
// (docs/measurements/wan.md). A stall of two heartbeats is a warning an
// election timeout of ten does not give. While a voter reports no view, or a window
// shorter than etcdfedv1.DiskWindowSeconds (it or its spoke restarted, as
// every member does in a roll), the floor may only rise above what runs
// (Previous, etcd's defaults for a new ring): a roll the floor asked for
// does not lower it again before its members' windows are full, and a
// stall seen by a young window still counts.
func floors(in Input) (hb, el int32, why string, late bool) {
	if in.Etcd.TimingFloor != etcdfedv1.TimingFloorDisk {
		return MinHeartbeat, MinElection, "", false
	}
	slowest, slowestOf, full, reported := int64(0), "", true, 0
	for _, d := range in.Disks {
		if d.View == nil {
			full = false
			continue
		}
		reported++
		if d.View.WindowSeconds < etcdfedv1.DiskWindowSeconds {
			full = false
		}
		if slowestOf == "" || d.View.MaxMillis > slowest {
			slowest, slowestOf = d.View.MaxMillis, d.Member
		}
	}
	keepHB, keepEl := MinHeartbeat, MinElection
	if p := in.Previous; p != nil {
		keepHB, keepEl = p.HeartbeatIntervalMillis, p.ElectionTimeoutMillis
	}
	if reported == 0 {
		return keepHB, keepEl, fmt.Sprintf("timingFloor Disk: no voter's WAL syncs reported yet, the floor stays at %d/%d", keepHB, keepEl), false
	}
	el = diskElection(slowest)
	hb = max(el/ElectionFactor/HeartbeatStep*HeartbeatStep, HeartbeatStep)
	why = fmt.Sprintf("timingFloor Disk: the voters' slowest recent WAL sync took up to %d ms (%s), so the floor is %d/%d (election timeout %d x that, at least %d ms)",
		slowest, slowestOf, hb, el, DiskElectionFactor, DiskMinElection)
	if n, lateOf := lateHeartbeats(in.Disks); n > 0 && el < MinElection {
		hb, el, late = max(hb, MinHeartbeat), MinElection, true
		why = fmt.Sprintf("timingFloor Disk: %s sent %d heartbeats late in its window (its raft loop stalled for two heartbeats, on its disk or for the CPU), so the floor is etcd's defaults %d/%d for %s after the last are reported",
			lateOf, n, hb, el, LateHeartbeatsHold)
	} else if until := lateHold(in); !until.IsZero() && el < MinElection {
		hb, el, late = max(hb, MinHeartbeat), MinElection, true
		why += fmt.Sprintf("; but a voter sent heartbeats late at %s: etcd's defaults %d/%d until %s",
			in.Previous.LateHeartbeatsAt.UTC().Format(time.RFC3339), hb, el, until.UTC().Format(time.RFC3339))
	}
	if !full && el < keepEl {
		return keepHB, keepEl, why + fmt.Sprintf("; kept at %d/%d until every voter reports ten minutes of syncs (%d of %d do)", keepHB, keepEl, fullWindows(in.Disks), len(in.Disks)), false
	}
	return hb, el, why, late
}

// LateHeartbeatsHold is how long after a voter last reported late
// heartbeats timingFloor Disk stays at etcd's defaults. The roll that
// raised the floor restarts every member and their counts; at the raised
// timing a heartbeat counts as late only after a stall of 200 ms, not the
// 60 ms that raised it, so clear windows would lower the floor again
// after ten minutes under the same load: on the project's two-core
// machine under two busy processes, the floor went down to 30/300 eleven
// minutes after the raise, and back up two minutes later, two rolls
// (docs/measurements/wan.md).
const LateHeartbeatsHold = time.Hour

// lateRefresh: while voters report late heartbeats, the time of them in
// status (LateHeartbeatsAt) is moved on at most this often.
const lateRefresh = time.Minute

// lateHold is when the hold after the late heartbeats Previous recorded
// ends (zero when there is none, or it ended by Now).
func lateHold(in Input) time.Time {
	p := in.Previous
	if p == nil || p.LateHeartbeatsAt == nil || in.Now.IsZero() {
		return time.Time{}
	}
	if until := p.LateHeartbeatsAt.Add(LateHeartbeatsHold); in.Now.Before(until) {
		return until
	}
	return time.Time{}
}

// lateAt is status.timing.lateHeartbeatsAt for in: Now when a voter
// reports late heartbeats (kept at Previous's while less than lateRefresh
// old), Previous's while its hold lasts, else nil. Only for timingFloor
// Disk.
func lateAt(in Input) *metav1.Time {
	if in.Etcd.TimingFloor != etcdfedv1.TimingFloorDisk || in.Now.IsZero() {
		return nil
	}
	var prev *metav1.Time
	if p := in.Previous; p != nil {
		prev = p.LateHeartbeatsAt
	}
	if late, _ := lateHeartbeats(in.Disks); late > 0 {
		if prev != nil && in.Now.Sub(prev.Time) < lateRefresh {
			return prev.DeepCopy()
		}
		return &metav1.Time{Time: in.Now}
	}
	if !lateHold(in).IsZero() {
		return prev.DeepCopy()
	}
	return nil
}

// lateHeartbeats is the most heartbeats a voter sent late in its window,
// and which voter did.
func lateHeartbeats(disks []Disk) (int64, string) {
	var most int64
	var of string
	for _, d := range disks {
		if d.View != nil && d.View.LateHeartbeats > most {
			most, of = d.View.LateHeartbeats, d.Member
		}
	}
	return most, of
}

// floorRaises says whether the floor asks for a longer election timeout
// than what runs (Previous) by enough to roll the ring at once, neither
// kept back as too small to roll for nor held until the round trips
// settle: a raise to etcd's defaults for late heartbeats, or a raise of
// the disks' floor by more than a quarter of what runs (a leader stalled
// on its disk for longer than the election timeout loses its term). A
// smaller raise of the disks' floor goes through the hysteresis like any
// derived change: what runs is still more than three times the slowest
// sync (DiskElectionFactor over 1.25), and each roll restarts every
// member (at 20 ms between zones a ring on 100/1000 rolled onto
// 110/1100 for one sync of 128 to 256 ms, its third roll in six
// minutes: docs/measurements/wan.md, 2026-12-02).
func floorRaises(in Input) bool {
	_, el, _, late := floors(in)
	p := in.Previous
	if p == nil || el <= p.ElectionTimeoutMillis {
		return false
	}
	return late || 4*(el-p.ElectionTimeoutMillis) > p.ElectionTimeoutMillis
}

// diskElection is the election timeout floor of a slowest sync of
// slowest ms: DiskElectionFactor times it, at least DiskMinElection,
// rounded up to diskElectionStep, at most etcd's limit.
func diskElection(slowest int64) int32 {
	el := max(int64(DiskMinElection), DiskElectionFactor*slowest)
	step := int64(diskElectionStep)
	el = (el + step - 1) / step * step
	return int32(min(el, int64(MaxElection)))
}

// fullWindows counts the disks whose view reaches a full window back.
func fullWindows(disks []Disk) int {
	n := 0
	for _, d := range disks {
		if d.View != nil && d.View.WindowSeconds >= etcdfedv1.DiskWindowSeconds {
			n++
		}
	}
	return n
}

// wanted is the heartbeat a round trip asks for, in microseconds: one
// and a half medians (the upper end of etcd's tuning guide, "0.5 to 1.5
// times the round trip") and a quarter of the p99's excess over the
// median for the link's jitter. The median carries the distance: a few
// probes stalled on a loaded machine (a pause of the prober, not of the
// network) move the p99 but not the median, and count for a quarter
// only. A clean link (p99 a quarter above the median) asks for 1.25 x
// its p99. The jitter's margin is at most half a median (JitterCap): a
// loaded machine stalls a window's probes for as long as it stalls, not
// in proportion to the distance, and on real nodes at loopback (a load
// average of 25 to 35 on two cores) windows whose median stayed at 5 to
// 11 ms had p99s of 0.5 to 1.2 s, which asked for 310/3100 between
// clusters none of which had restarted (issue 38). A link's own jitter
// beyond that is absorbed by the election timeout, ten heartbeats.
func wanted(e *etcdfedv1.RoundTrip) int64 {
	m, p := max(e.MedianMicros, 0), max(e.P99Micros, 0)
	return m + m/2 + min(max(p-m, 0)/4, m/JitterCap)
}

// JitterCap: the jitter's margin in the heartbeat a round trip asks for
// (wanted) is at most its median divided by JitterCap, so that a pair asks
// for at most two medians.
const JitterCap = 2

// heartbeat is the heartbeat (ms) Auto derives from one round trip:
// wanted rounded up to HeartbeatStep, between floor and MaxHeartbeat (integer arithmetic in microseconds, so the result is
// exact).
func heartbeat(e *etcdfedv1.RoundTrip, floor int32) int32 {
	stepMicros := int64(HeartbeatStep) * 1000
	steps := (wanted(e) + stepMicros - 1) / stepMicros
	if d := int64(MaxHeartbeat / HeartbeatStep); steps > d {
		steps = d
	}
	return max(int32(steps)*HeartbeatStep, floor)
}

// electionFor is the election timeout of heartbeat hb: ten heartbeats,
// at least floor, at most etcd's limit.
func electionFor(hb, floor int32) int32 {
	return min(max(ElectionFactor*hb, floor), MaxElection)
}

// changes: a derived value moving from old to new is applied.
func changes(old, new int32) bool {
	d := new - old
	if d < 0 {
		d = -d
	}
	return d >= ChangeMillis && 4*d > old
}

func valueOr(p *int32, def int32) int32 {
	if p != nil {
		return *p
	}
	return def
}

func given(hb, el *int32) string {
	switch {
	case hb != nil && el != nil:
		return fmt.Sprintf("spec.etcd gives heartbeatIntervalMillis %d and electionTimeoutMillis %d", *hb, *el)
	case hb != nil:
		return fmt.Sprintf("spec.etcd gives heartbeatIntervalMillis %d", *hb)
	}
	return fmt.Sprintf("spec.etcd gives electionTimeoutMillis %d", *el)
}

func names(set map[string]bool) string {
	var out []string
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	s := ""
	for i, n := range out {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// millis formats microseconds as milliseconds, with one decimal below 10.
func millis(us int64) string {
	if us < 10_000 {
		return fmt.Sprintf("%.1f ms", float64(us)/1000)
	}
	return fmt.Sprintf("%d ms", (us+500)/1000)
}

// Render returns the etcd settings an EtcdMember runs with: spec.etcd with
// the chosen values, written only where they differ from what the spec
// already says (a value etcd's default stays unset, so that a ring at
// zero distance renders exactly as before timing existed and nothing
// rolls), and timing cleared (the hub resolves it). t nil: spec as is.
func Render(spec etcdfedv1.EtcdConfig, t *etcdfedv1.TimingStatus) etcdfedv1.EtcdConfig {
	out := spec
	out.Timing, out.TimingFloor = "", ""
	if t == nil {
		return out
	}
	out.HeartbeatIntervalMillis = pick(spec.HeartbeatIntervalMillis, t.HeartbeatIntervalMillis, etcdfedv1.DefaultHeartbeatIntervalMillis)
	out.ElectionTimeoutMillis = pick(spec.ElectionTimeoutMillis, t.ElectionTimeoutMillis, etcdfedv1.DefaultElectionTimeoutMillis)
	return out
}

func pick(spec *int32, chosen, def int32) *int32 {
	if spec != nil && *spec == chosen {
		return spec
	}
	if spec == nil && chosen == def {
		return nil
	}
	return &chosen
}
