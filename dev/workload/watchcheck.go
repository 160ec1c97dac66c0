package workload

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// WatchEvent is one event a watcher received.
type WatchEvent struct {
	Key, Value string
	// Revision is the event's modification revision.
	Revision int64
	// Delete marks a delete event (the workload never deletes).
	Delete bool
}

func (e WatchEvent) String() string {
	if e.Delete {
		return fmt.Sprintf("delete(%s)@%d", e.Key, e.Revision)
	}
	return fmt.Sprintf("put(%s, %s)@%d", e.Key, e.Value, e.Revision)
}

// Compaction says a watcher asked for revisions from From on but the
// cluster had compacted them: revisions From..To-1 could not be delivered,
// and the watch went on from To.
type Compaction struct{ From, To int64 }

// WatchLog is what one watcher saw, in the order it saw it.
type WatchLog struct {
	// Name says which watcher: "all endpoints" or an endpoint.
	Name string
	// Start is the first revision watched.
	Start int64
	// Events in the order they were received.
	Events []WatchEvent
	// Compactions the watcher was told about.
	Compactions []Compaction
	// Resumes counts watches re-established from the last seen revision
	// + 1 (after an error, a lost leader or a compaction); LastError is
	// the last reason.
	Resumes   int
	LastError string
}

// WatchCheckInput is the input of CheckWatch.
type WatchCheckInput struct {
	// Puts are every put the workload attempted.
	Puts []PutRecord
	Log  WatchLog
	// RequireComplete requires the watch to have reached the last
	// acknowledged put.
	RequireComplete bool
	// AllowCompaction excuses puts the watcher could not get because they
	// were compacted; otherwise a compaction fails the check.
	AllowCompaction bool
}

// WatchVerdict is the outcome of CheckWatch for one watcher.
type WatchVerdict struct {
	Watcher string
	// Events received.
	Events int
	// Expected acknowledged puts (at or after the start revision), and of
	// them Seen in the stream at their revision with their value.
	Expected, Seen int
	// Covered is the highest revision the watcher saw; LastAcked the
	// highest acknowledged revision.
	Covered, LastAcked int64
	// Missed are revisions of acknowledged puts within the covered range
	// that never came; NotReached those after it (a failure only when
	// the watch must be complete).
	Missed, NotReached []int64
	// CompactedAway are acknowledged revisions lost to a compaction.
	CompactedAway []int64
	// Duplicates, OutOfOrder, Mismatched (a revision with another key or
	// value than its acknowledged put) and Unexpected (an event no put of
	// the workload explains) describe the offending events.
	Duplicates, OutOfOrder, Mismatched, Unexpected []string
	Compactions                                    []Compaction
	Resumes                                        int
	// Incomplete: the watch had to reach LastAcked and did not.
	Incomplete bool
	// CompactionAllowed echoes the input.
	CompactionAllowed bool
}

// ErrWatch says a watch missed events, saw some twice or out of order,
// or saw what was never written.
var ErrWatch = errors.New("workload: watch incomplete or out of order")

// OK reports whether the watch passed.
func (v WatchVerdict) OK() bool { return v.Err() == nil }

// Err describes every problem of the watch, or nil.
func (v WatchVerdict) Err() error {
	var parts []string
	revs := func(r []int64) string {
		s := make([]string, len(r))
		for i, x := range r {
			s[i] = fmt.Sprint(x)
		}
		return firstFew(s, 10)
	}
	if len(v.Missed) > 0 {
		parts = append(parts, fmt.Sprintf("%d acknowledged puts missed (revisions %s)", len(v.Missed), revs(v.Missed)))
	}
	if v.Incomplete {
		parts = append(parts, fmt.Sprintf("stopped at revision %d before the last acknowledged put at %d (%d not delivered: %s)", v.Covered, v.LastAcked, len(v.NotReached), revs(v.NotReached)))
	}
	if len(v.Duplicates) > 0 {
		parts = append(parts, fmt.Sprintf("%d duplicate events (%s)", len(v.Duplicates), firstFew(v.Duplicates, 5)))
	}
	if len(v.OutOfOrder) > 0 {
		parts = append(parts, fmt.Sprintf("%d events out of order (%s)", len(v.OutOfOrder), firstFew(v.OutOfOrder, 5)))
	}
	if len(v.Mismatched) > 0 {
		parts = append(parts, fmt.Sprintf("%d events differ from the acknowledged put (%s)", len(v.Mismatched), firstFew(v.Mismatched, 5)))
	}
	if len(v.Unexpected) > 0 {
		parts = append(parts, fmt.Sprintf("%d unexpected events (%s)", len(v.Unexpected), firstFew(v.Unexpected, 5)))
	}
	if len(v.Compactions) > 0 && !v.CompactionAllowed {
		var cs []string
		for _, c := range v.Compactions {
			cs = append(cs, fmt.Sprintf("%d..%d", c.From, c.To-1))
		}
		parts = append(parts, fmt.Sprintf("compacted (revisions %s, %d acknowledged puts among them), which this run does not allow", strings.Join(cs, ", "), len(v.CompactedAway)))
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%w: watcher %s: %s", ErrWatch, v.Watcher, strings.Join(parts, "; "))
}

func (v WatchVerdict) String() string {
	if err := v.Err(); err != nil {
		return err.Error()
	}
	s := fmt.Sprintf("watcher %s: %d of %d acknowledged puts seen once and in order (%d events, up to revision %d, %d resumes)", v.Watcher, v.Seen, v.Expected, v.Events, v.Covered, v.Resumes)
	if len(v.CompactedAway) > 0 {
		s += fmt.Sprintf(", %d lost to an allowed compaction", len(v.CompactedAway))
	}
	return s
}

type keyRev struct {
	key string
	rev int64
}

type keyValue struct{ key, value string }

// CheckWatch checks one watcher's stream against the workload's puts:
// every acknowledged put at or after the watch's start revision appears
// exactly once, at the revision its response carried, with its key and
// value; revisions never go down across events and strictly rise per key;
// every other event is a put the workload attempted without an answer
// (it took effect after all). Compacted ranges are excused only when
// allowed. With RequireComplete the watch must have reached the last
// acknowledged put.
func CheckWatch(in WatchCheckInput) WatchVerdict {
	log := in.Log
	v := WatchVerdict{Watcher: log.Name, Events: len(log.Events), Compactions: log.Compactions, Resumes: log.Resumes, CompactionAllowed: in.AllowCompaction}
	acked, attempted := v.ackedPuts(in.Puts, log.Start)
	v.Expected = len(acked)
	delivered, seenRev := v.checkEvents(log, acked, attempted)
	v.account(acked, delivered, seenRev, log.Compactions)
	v.Incomplete = in.RequireComplete && len(v.NotReached) > 0
	return v
}

// ackedPuts returns the acknowledged puts at or after the watch's start,
// by revision (two at one revision are a mismatch), and every put
// attempted, by key and value.
func (v *WatchVerdict) ackedPuts(puts []PutRecord, start int64) (map[int64]PutRecord, map[keyValue][]PutRecord) {
	acked := map[int64]PutRecord{}
	attempted := map[keyValue][]PutRecord{}
	for _, p := range puts {
		attempted[keyValue{p.Key, p.Value}] = append(attempted[keyValue{p.Key, p.Value}], p)
		if !p.Acked || p.Revision < start {
			continue
		}
		if q, dup := acked[p.Revision]; dup {
			v.Mismatched = append(v.Mismatched, fmt.Sprintf("two acknowledged puts at revision %d: put(%s, %s) and put(%s, %s)", p.Revision, q.Key, q.Value, p.Key, p.Value))
			continue
		}
		acked[p.Revision] = p
		v.LastAcked = max(v.LastAcked, p.Revision)
	}
	return acked, attempted
}

// checkEvents checks the stream's events: none twice, in order, each an
// acknowledged put at its revision or a put attempted without an answer.
// It returns the revisions of acknowledged puts delivered, and every
// revision seen; v.Covered is the highest.
func (v *WatchVerdict) checkEvents(log WatchLog, acked map[int64]PutRecord, attempted map[keyValue][]PutRecord) (delivered, seenRev map[int64]bool) {
	seen := map[keyRev]bool{}
	seenRev = map[int64]bool{}
	delivered = map[int64]bool{}
	lastOfKey := map[string]int64{}
	var last int64
	for _, ev := range log.Events {
		kr := keyRev{ev.Key, ev.Revision}
		if seen[kr] {
			v.Duplicates = append(v.Duplicates, ev.String())
			continue
		}
		seen[kr] = true
		seenRev[ev.Revision] = true
		switch {
		case ev.Revision < last:
			v.OutOfOrder = append(v.OutOfOrder, fmt.Sprintf("%s after revision %d", ev, last))
		case ev.Revision <= lastOfKey[ev.Key]:
			v.OutOfOrder = append(v.OutOfOrder, fmt.Sprintf("%s after revision %d of the same key", ev, lastOfKey[ev.Key]))
		}
		last = max(last, ev.Revision)
		lastOfKey[ev.Key] = max(lastOfKey[ev.Key], ev.Revision)
		if ev.Revision < log.Start {
			v.Unexpected = append(v.Unexpected, fmt.Sprintf("%s before the start revision %d", ev, log.Start))
			continue
		}
		if ev.Delete {
			v.Unexpected = append(v.Unexpected, ev.String()+" (the workload never deletes)")
			continue
		}
		if p, ok := acked[ev.Revision]; ok {
			if p.Key != ev.Key || p.Value != ev.Value {
				v.Mismatched = append(v.Mismatched, fmt.Sprintf("revision %d: acknowledged put(%s, %s), watch saw %s", ev.Revision, p.Key, p.Value, ev))
				continue
			}
			delivered[ev.Revision] = true
			continue
		}
		// No acknowledged put at this revision: it must be a put the
		// workload made without getting an answer.
		unknown, ackedAt := false, []string{}
		for _, p := range attempted[keyValue{ev.Key, ev.Value}] {
			if p.Acked {
				ackedAt = append(ackedAt, fmt.Sprint(p.Revision))
			} else {
				unknown = true
			}
		}
		switch {
		case unknown:
		case len(ackedAt) > 0:
			v.Mismatched = append(v.Mismatched, fmt.Sprintf("%s, but that put was acknowledged at revision %s", ev, strings.Join(ackedAt, ", ")))
		default:
			v.Unexpected = append(v.Unexpected, ev.String()+" was never written by the workload")
		}
	}
	v.Covered = last
	return delivered, seenRev
}

// account sorts every acknowledged put into seen, compacted away, not
// reached, or missed.
func (v *WatchVerdict) account(acked map[int64]PutRecord, delivered, seenRev map[int64]bool, compactions []Compaction) {
	compacted := func(rev int64) bool {
		for _, c := range compactions {
			if rev >= c.From && rev < c.To {
				return true
			}
		}
		return false
	}
	revs := make([]int64, 0, len(acked))
	for r := range acked {
		revs = append(revs, r)
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	for _, r := range revs {
		switch {
		case delivered[r]:
			v.Seen++
		case compacted(r):
			v.CompactedAway = append(v.CompactedAway, r)
		case r > v.Covered:
			v.NotReached = append(v.NotReached, r)
		case seenRev[r]:
			// Another key or value at this revision: reported as mismatched.
		default:
			v.Missed = append(v.Missed, r)
		}
	}
}
