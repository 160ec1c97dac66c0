package multicluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
)

// The pure parts of BenchmarkWAN (`make bench-wan`): its knobs, the
// percentiles and gaps it reports and the markdown it writes.

// ParseWANDistances reads a comma-separated list of round trips between
// zones in milliseconds ("0,10,20,40"), each 0..1000, none twice.
func ParseWANDistances(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "ms"))
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > 1000 {
			return nil, fmt.Errorf("WAN_DISTANCES %q: want milliseconds 0..1000 separated by commas, e.g. 0,10,20,40", s)
		}
		d := time.Duration(n) * time.Millisecond
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("WAN_DISTANCES %q: %d ms given twice", s, n)
		}
		out = append(out, d)
	}
	return out, nil
}

// WANTiming is a heartbeat interval and election timeout in milliseconds.
type WANTiming struct{ Heartbeat, Election int }

func (t WANTiming) String() string { return fmt.Sprintf("%d/%d", t.Heartbeat, t.Election) }

// ParseWANTimings reads "100/1000,50/500" (heartbeat/election in ms,
// each pair as etcd accepts it: election at least five heartbeats, at
// most 50000); "" or "none" is no timing.
func ParseWANTimings(s string) ([]WANTiming, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []WANTiming
	for _, f := range strings.Split(s, ",") {
		hb, el, ok := strings.Cut(strings.TrimSpace(f), "/")
		h, err1 := strconv.Atoi(hb)
		e, err2 := strconv.Atoi(el)
		if !ok || err1 != nil || err2 != nil || h < 1 || e < 5*h || e > 50000 {
			return nil, fmt.Errorf("WAN_SWEEP %q: want HEARTBEAT/ELECTION in ms with the election at least five heartbeats and at most 50000, e.g. 100/1000,30/300", s)
		}
		out = append(out, WANTiming{h, e})
	}
	return out, nil
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of
// sorted durations; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted)) + 0.999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// LongestGap is the longest time between two consecutive acknowledgements
// in acks (any order) that lie in [from, to], the edges counting as
// acknowledgements, and where it began.
func LongestGap(acks []time.Time, from, to time.Time) (time.Duration, time.Time) {
	pts := []time.Time{from}
	for _, a := range acks {
		if !a.Before(from) && !a.After(to) {
			pts = append(pts, a)
		}
	}
	pts = append(pts, to)
	slices.SortFunc(pts, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	at := from
	for i := 1; i < len(pts); i++ {
		if d := pts[i].Sub(pts[i-1]); d > gap {
			gap, at = d, pts[i-1]
		}
	}
	return gap, at
}

// WANCell is one system's write latency from one client zone.
type WANCell struct {
	P50, P99 time.Duration
	Writes   int
	Errors   int
}

func (c WANCell) String() string {
	if c.Writes == 0 {
		return "-"
	}
	s := fmt.Sprintf("%s / %s", ms(c.P50), ms(c.P99))
	if c.Errors > 0 {
		s += fmt.Sprintf(" (%d err)", c.Errors)
	}
	return s
}

// WANRow is one distance and client zone, a cell per system (in the order
// of WANTable's systems).
type WANRow struct {
	Distance time.Duration
	Zone     string
	// Note marks the zone (e.g. "preferred, 2 members").
	Note  string
	Cells []WANCell
}

// WANLeaders says, per distance, where each system's leader was and with
// which timing, in the order of WANTable's systems.
type WANLeaders struct {
	Distance time.Duration
	Where    []string
}

// WANTable renders the latency table: a row per distance and client zone,
// a column per system (p50 / p99 in ms), then where the leaders were.
func WANTable(systems []string, rows []WANRow, leaders []WANLeaders) string {
	var b strings.Builder
	b.WriteString("| distance | client zone |")
	for _, s := range systems {
		b.WriteString(" " + s + " p50 / p99 ms |")
	}
	b.WriteString("\n| --- | --- |" + strings.Repeat(" --- |", len(systems)) + "\n")
	for _, r := range rows {
		z := r.Zone
		if r.Note != "" {
			z += " (" + r.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %s |", ms(r.Distance), z)
		for i := range systems {
			c := WANCell{}
			if i < len(r.Cells) {
				c = r.Cells[i]
			}
			b.WriteString(" " + c.String() + " |")
		}
		b.WriteString("\n")
	}
	if len(leaders) > 0 {
		b.WriteString("\n| distance |")
		for _, s := range systems {
			b.WriteString(" " + s + ": leader, timing |")
		}
		b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(systems)) + "\n")
		for _, l := range leaders {
			fmt.Fprintf(&b, "| %s |", ms(l.Distance))
			for i := range systems {
				w := "-"
				if i < len(l.Where) {
					w = l.Where[i]
				}
				b.WriteString(" " + w + " |")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// ms formats a duration in milliseconds: one decimal below 100 ms.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	if f < 100 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 0, 64)
}

// SoakTally counts a ring's elections and leader changes from members'
// status answers sampled one after the other (the stability run reads
// every member every second). Only answers at the highest term seen so
// far count: a member that has not heard of the newest term yet still
// names the old leader, and counting every change between two members'
// answers (as the run did before) counted one election two or three
// times. A change is a new term whose leader differs from the last
// leader known.
type SoakTally struct {
	// Term0 and Term are the first and highest raft terms seen.
	Term0, Term uint64
	// Leaders are the leaders seen (member IDs).
	Leaders map[uint64]bool
	// Changes counts leader changes: a new term led by another member.
	Changes int
	// Misses counts status reads that failed.
	Misses int
	// leader is the leader known at Term (0: not known yet).
	leader, last uint64
}

// SoakChange is a new term's leader SoakTally.Observe found.
type SoakChange struct {
	Term     uint64
	From, To uint64
	// LeaderChanged: the new term is led by another member than the
	// last (a re-election of the same leader is not a change).
	LeaderChanged bool
}

// Observe takes one member's answer: its raft term and the leader it
// knows (0: none). It reports a new term's leader once it is known
// (false for the first answer and for anything else).
func (t *SoakTally) Observe(term, leader uint64) (SoakChange, bool) {
	if t.Leaders == nil {
		t.Leaders = map[uint64]bool{}
	}
	if t.Term0 == 0 {
		t.Term0, t.Term = term, term
	}
	if term < t.Term {
		return SoakChange{}, false // a member behind names an old leader
	}
	if term > t.Term {
		t.Term, t.leader = term, 0
	}
	if leader == 0 || t.leader != 0 {
		return SoakChange{}, false
	}
	t.leader = leader
	t.Leaders[leader] = true
	c := SoakChange{Term: term, From: t.last, To: leader}
	first := t.last == 0
	if !first && leader != t.last {
		t.Changes++
		c.LeaderChanged = true
	}
	t.last = leader
	return c, !first
}

// Elections is the term increments less the leadership transfers a
// controller made (each MoveLeader raises the term once): the elections
// nobody asked for.
func (t *SoakTally) Elections(transfers int) int {
	return int(t.Term-t.Term0) - transfers
}

// WALFsyncsOver reads etcd's WAL fsync histogram
// (etcd_disk_wal_fsync_duration_seconds) from a metrics page: the fsyncs
// that took longer than the bucket bound le (as etcd prints it, such as
// "1.024"), and all of them. A leader whose fsync outlasts the election
// timeout sends no heartbeat meanwhile, and its followers elect another.
func WALFsyncsOver(metrics, le string) (over, total int64, err error) {
	bound, err := strconv.ParseFloat(le, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("bucket bound %q: %w", le, err)
	}
	m, err := etcdstatus.ParseMetrics(strings.NewReader(metrics), "")
	if err != nil {
		return 0, 0, err
	}
	o, n, ok := m.WALFsync.Over(bound)
	if !ok {
		return 0, 0, fmt.Errorf("no etcd_disk_wal_fsync_duration_seconds bucket le=%q in the metrics", le)
	}
	return int64(o), int64(n), nil
}
