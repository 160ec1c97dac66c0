package backupstore

import (
	"sort"
	"time"
)

// Retention says which snapshots to keep. Zero fields do not limit.
type Retention struct {
	// MaxCount keeps the newest MaxCount snapshots.
	MaxCount int
	// MaxAge keeps snapshots taken within MaxAge of now.
	MaxAge time.Duration
}

// Expired returns the snapshots retention no longer keeps, oldest first.
// A snapshot goes when either limit says so; the newest snapshot always
// stays, whatever its age, so a store never ends up empty because backups
// stopped for a while.
func Expired(snaps []Snapshot, r Retention, now time.Time) []Snapshot {
	sorted := append([]Snapshot(nil), snaps...)
	sortNewestFirst(sorted)
	var out []Snapshot
	for i, s := range sorted {
		if i == 0 {
			continue
		}
		if (r.MaxCount > 0 && i >= r.MaxCount) || (r.MaxAge > 0 && now.Sub(s.Effective()) > r.MaxAge) {
			out = append(out, s)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// sortNewestFirst orders by effective time (Snapshot.Effective), then
// revision, then key, newest first.
func sortNewestFirst(s []Snapshot) {
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i], s[j]
		if ta, tb := a.Effective(), b.Effective(); !ta.Equal(tb) {
			return ta.After(tb)
		}
		if a.Revision != b.Revision {
			return a.Revision > b.Revision
		}
		return a.Key > b.Key
	})
}
