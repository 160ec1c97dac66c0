package liveness

import (
	"testing"
	"time"
)

func TestNextStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	seen := map[string]time.Time{
		"a": now.Add(-1 * time.Second),
		"b": now.Add(-3 * time.Second),
		"c": now.Add(-10 * time.Second), // already stale
	}
	c, at, ok := NextStale(seen, now, 4*time.Second)
	if !ok || c != "b" || !at.Equal(now.Add(time.Second+time.Millisecond)) {
		t.Fatalf("NextStale = %s %v %v; want b at now+1.001s", c, at.Sub(now), ok)
	}
	// Judge agrees: fresh just before, stale at the instant.
	obs := []Observation{{Cluster: "b", LastSeen: seen["b"]}}
	if v := Judge(obs, at.Add(-2*time.Millisecond), 4*time.Second, time.Minute); v[0].State != Alive {
		t.Fatalf("before the instant: %v", v[0])
	}
	if v := Judge(obs, at, 4*time.Second, time.Minute); v[0].State == Alive {
		t.Fatalf("at the instant: %v", v[0])
	}
	if _, _, ok := NextStale(map[string]time.Time{"c": seen["c"]}, now, 4*time.Second); ok {
		t.Fatal("NextStale with only stale clusters: want none")
	}
}

func TestNextGraceEndIgnoresFreshLeases(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	obs := []Observation{
		{Cluster: "a", LastSeen: now.Add(-time.Second)},
		{Cluster: "b", LastSeen: now.Add(-time.Second)},
	}
	if d, ok := NextGraceEnd(obs, now, 4*time.Second, time.Minute); ok {
		t.Fatalf("all fresh: NextGraceEnd = %v; want none (the staleness timer covers it)", d)
	}
	obs = append(obs, Observation{Cluster: "c", LastSeen: now.Add(-10 * time.Second)})
	d, ok := NextGraceEnd(obs, now, 4*time.Second, time.Minute)
	if !ok || d != 50*time.Second {
		t.Fatalf("c stale for 10s: NextGraceEnd = %v %v; want 50s", d, ok)
	}
	obs[2].Bystander, obs[2].NotWitness = true, true
	if d, ok := NextGraceEnd(obs, now, 4*time.Second, time.Minute); ok {
		t.Fatalf("c stale but a bystander of the ring: NextGraceEnd = %v; want none", d)
	}
}

// A cluster whose Lease the hub has never seen (a hub started while the
// cluster was down) reaches its grace counted from when the hub started
// looking, and the ring must be woken then.
func TestNextGraceEndNeverSeen(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	obs := []Observation{
		{Cluster: "a", LastSeen: now.Add(-time.Second), Gossip: map[string]bool{"down": false}},
		{Cluster: "b", LastSeen: now.Add(-time.Second), Gossip: map[string]bool{"down": false}},
		{Cluster: "down", WatchedSince: now.Add(-20 * time.Second)},
	}
	d, ok := NextGraceEnd(obs, now, 4*time.Second, time.Minute)
	if !ok || d != 40*time.Second {
		t.Fatalf("never seen, watched for 20s: NextGraceEnd = %v %v; want 40s", d, ok)
	}
}
