package workload

import (
	"strings"
	"testing"
)

func acked(k, v string, rev int64) PutRecord {
	return PutRecord{Key: k, Value: v, Acked: true, Revision: rev}
}
func unknown(k, v string) PutRecord        { return PutRecord{Key: k, Value: v} }
func ev(k, v string, rev int64) WatchEvent { return WatchEvent{Key: k, Value: v, Revision: rev} }

// CheckWatch accepts a complete stream in order and names every way a
// stream can be wrong: a gap, a duplicate, an event out of order, another
// value or key at a revision, an event nobody wrote, a compaction that is
// not allowed, a watch that stopped early.
func TestCheckWatch(t *testing.T) {
	puts := []PutRecord{acked("a", "1", 10), acked("b", "2", 11), acked("a", "3", 12), unknown("b", "4"), acked("c", "5", 14)}
	all := []WatchEvent{ev("a", "1", 10), ev("b", "2", 11), ev("a", "3", 12), ev("c", "5", 14)}
	for _, tc := range []struct {
		name            string
		puts            []PutRecord
		events          []WatchEvent
		start           int64
		compactions     []Compaction
		complete, allow bool
		// want is empty for a pass, else a fragment of the error.
		want string
		// check inspects the verdict further.
		check func(t *testing.T, v WatchVerdict)
	}{
		{name: "complete and in order", puts: puts, events: all, start: 10, complete: true,
			check: func(t *testing.T, v WatchVerdict) {
				if v.Seen != 4 || v.Expected != 4 || v.Covered != 14 || v.LastAcked != 14 {
					t.Errorf("seen %d expected %d covered %d last %d", v.Seen, v.Expected, v.Covered, v.LastAcked)
				}
			}},
		{name: "unknown put that took effect is fine", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 11), ev("a", "3", 12), ev("b", "4", 13), ev("c", "5", 14)}},
		{name: "gap", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("a", "3", 12), ev("c", "5", 14)},
			want:   "1 acknowledged puts missed (revisions 11)"},
		{name: "duplicate", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 11), ev("b", "2", 11), ev("a", "3", 12), ev("c", "5", 14)},
			want:   "1 duplicate events (put(b, 2)@11)"},
		{name: "duplicate after a resume from an older revision", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 11), ev("a", "3", 12), ev("a", "1", 10), ev("b", "2", 11), ev("a", "3", 12), ev("c", "5", 14)},
			want:   "3 duplicate events"},
		{name: "out of order across keys", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("a", "3", 12), ev("b", "2", 11), ev("c", "5", 14)},
			want:   "put(b, 2)@11 after revision 12"},
		{name: "value mismatch", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "9", 11), ev("a", "3", 12), ev("c", "5", 14)},
			want:   "revision 11: acknowledged put(b, 2), watch saw put(b, 9)@11",
			check: func(t *testing.T, v WatchVerdict) {
				if len(v.Missed) != 0 {
					t.Errorf("a mismatch is not also a miss: %v", v.Missed)
				}
			}},
		{name: "key mismatch", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("z", "2", 11), ev("a", "3", 12), ev("c", "5", 14)},
			want:   "acknowledged put(b, 2), watch saw put(z, 2)@11"},
		{name: "acknowledged put seen at another revision", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 13), ev("a", "3", 12), ev("c", "5", 14)},
			want:   "put(b, 2)@13, but that put was acknowledged at revision 11"},
		{name: "never written", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 11), ev("a", "3", 12), ev("x", "?", 13), ev("c", "5", 14)},
			want:   "put(x, ?)@13 was never written by the workload"},
		{name: "delete", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 11), ev("a", "3", 12), {Key: "a", Revision: 13, Delete: true}, ev("c", "5", 14)},
			want:   "delete(a)@13 (the workload never deletes)"},
		{name: "event before the start revision", puts: puts, start: 11, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 11), ev("a", "3", 12), ev("c", "5", 14)},
			want:   "before the start revision 11"},
		{name: "acknowledged puts before the start are not expected", puts: puts, start: 12, complete: true,
			events: []WatchEvent{ev("a", "3", 12), ev("c", "5", 14)},
			check: func(t *testing.T, v WatchVerdict) {
				if v.Expected != 2 {
					t.Errorf("expected %d, want 2", v.Expected)
				}
			}},
		{name: "stopped early", puts: puts, start: 10, complete: true,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 11)},
			want:   "stopped at revision 11 before the last acknowledged put at 14 (2 not delivered: 12, 14)"},
		{name: "stopped early is fine when completeness is not required", puts: puts, start: 10,
			events: []WatchEvent{ev("a", "1", 10), ev("b", "2", 11)},
			check: func(t *testing.T, v WatchVerdict) {
				if len(v.NotReached) != 2 {
					t.Errorf("not reached %v", v.NotReached)
				}
			}},
		{name: "nothing at all", puts: puts, start: 10, complete: true,
			want: "stopped at revision 0"},
		{name: "compaction not allowed", puts: puts, start: 10, complete: true,
			compactions: []Compaction{{From: 10, To: 12}},
			events:      []WatchEvent{ev("a", "3", 12), ev("c", "5", 14)},
			want:        "compacted (revisions 10..11, 2 acknowledged puts among them), which this run does not allow"},
		{name: "compaction allowed", puts: puts, start: 10, complete: true, allow: true,
			compactions: []Compaction{{From: 10, To: 12}},
			events:      []WatchEvent{ev("a", "3", 12), ev("c", "5", 14)},
			check: func(t *testing.T, v WatchVerdict) {
				if len(v.CompactedAway) != 2 || v.Seen != 2 {
					t.Errorf("compacted away %v, seen %d", v.CompactedAway, v.Seen)
				}
			}},
		{name: "a gap outside the compacted range is still a gap", puts: puts, start: 10, complete: true, allow: true,
			compactions: []Compaction{{From: 10, To: 11}},
			events:      []WatchEvent{ev("b", "2", 11), ev("c", "5", 14)},
			want:        "1 acknowledged puts missed (revisions 12)"},
		{name: "two acknowledged puts at one revision", start: 10, complete: true,
			puts:   []PutRecord{acked("a", "1", 10), acked("b", "2", 10)},
			events: []WatchEvent{ev("a", "1", 10)},
			want:   "two acknowledged puts at revision 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckWatch(WatchCheckInput{Puts: tc.puts, Log: WatchLog{Name: "w", Start: tc.start, Events: tc.events, Compactions: tc.compactions},
				RequireComplete: tc.complete, AllowCompaction: tc.allow})
			err := v.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want a pass, got %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("want a failure with %q, got a pass: %s", tc.want, v)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
			if tc.check != nil {
				tc.check(t, v)
			}
		})
	}
}

func TestLostWrites(t *testing.T) {
	puts := []PutRecord{acked("p/u/1", "a", 1), acked("p/u/2", "b", 2), unknown("p/u/3", "c"), acked("p/k", "d", 4), acked("p/u/1", "e", 5)}
	for _, tc := range []struct {
		name      string
		present   []string
		wantAcked int
		wantLost  string
	}{
		{"all there", []string{"p/u/1", "p/u/2"}, 2, ""},
		{"one lost", []string{"p/u/2", "p/u/3"}, 2, "p/u/1"},
		{"all lost", nil, 2, "p/u/1,p/u/2"},
	} {
		have := map[string]bool{}
		for _, k := range tc.present {
			have[k] = true
		}
		n, lost := LostWrites(puts, "p/u/", have)
		if n != tc.wantAcked || strings.Join(lost, ",") != tc.wantLost {
			t.Errorf("%s: acked %d lost %v, want %d and %q", tc.name, n, lost, tc.wantAcked, tc.wantLost)
		}
	}
}
