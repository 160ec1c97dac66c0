package backupstore

import (
	"fmt"
	"testing"
	"time"
)

func TestExpired(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// snap i was taken i hours ago, revision 100-i.
	snaps := func(n int) []Snapshot {
		var out []Snapshot
		for i := range n {
			ts := now.Add(-time.Duration(i) * time.Hour)
			out = append(out, Snapshot{Key: SnapshotKey("d/", ts, int64(100-i)), Time: ts, Revision: int64(100 - i)})
		}
		return out
	}
	ages := func(s []Snapshot) string {
		out := ""
		for _, x := range s {
			out += fmt.Sprintf("%dh ", int(now.Sub(x.Time).Hours()))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []Snapshot
		r    Retention
		want string // ages of expired snapshots, oldest first
	}{
		{"nothing stored", nil, Retention{MaxCount: 3}, ""},
		{"under the count", snaps(3), Retention{MaxCount: 3}, ""},
		{"over the count", snaps(5), Retention{MaxCount: 3}, "4h 3h "},
		{"count 1 keeps the newest", snaps(3), Retention{MaxCount: 1}, "2h 1h "},
		{"by age", snaps(6), Retention{MaxAge: 150 * time.Minute}, "5h 4h 3h "},
		{"age exactly at the limit stays", snaps(4), Retention{MaxAge: 2 * time.Hour}, "3h "},
		{"both: count is stricter", snaps(6), Retention{MaxCount: 2, MaxAge: 10 * time.Hour}, "5h 4h 3h 2h "},
		{"both: age is stricter", snaps(6), Retention{MaxCount: 5, MaxAge: 90 * time.Minute}, "5h 4h 3h 2h "},
		{"newest kept however old", []Snapshot{{Key: "d/old", Time: now.Add(-1000 * time.Hour)}}, Retention{MaxAge: time.Hour}, ""},
		{"no limits keep all", snaps(4), Retention{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Input order must not matter.
			in := append([]Snapshot(nil), tc.in...)
			for i, j := 0, len(in)-1; i < j; i, j = i+1, j-1 {
				in[i], in[j] = in[j], in[i]
			}
			if got := ages(Expired(in, tc.r, now)); got != tc.want {
				t.Errorf("expired %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExpiredSameTimeByRevision: two snapshots in the same millisecond
// (a request and a schedule) keep the higher revision.
func TestExpiredSameTimeByRevision(t *testing.T) {
	ts := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := Snapshot{Key: SnapshotKey("d/", ts, 5), Time: ts, Revision: 5}
	b := Snapshot{Key: SnapshotKey("d/", ts, 6), Time: ts, Revision: 6}
	got := Expired([]Snapshot{b, a}, Retention{MaxCount: 1}, ts)
	if len(got) != 1 || got[0].Revision != 5 {
		t.Fatalf("expired %+v, want the revision-5 one", got)
	}
}
