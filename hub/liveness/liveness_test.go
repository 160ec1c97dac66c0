package liveness

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestTrackerUsesHubClock(t *testing.T) {
	now := t0
	tr := NewTracker(func() time.Time { return now })
	// The spoke's clock is an hour off; only the change matters.
	tr.ObserveLease("a", t0.Add(time.Hour), "spoke-1")
	now = now.Add(5 * time.Second)
	tr.ObserveLease("a", t0.Add(time.Hour), "spoke-1") // no renewal
	if seen, _ := tr.LastSeen("a"); !seen.Equal(t0) {
		t.Fatalf("unchanged lease moved lastSeen to %v", seen)
	}
	tr.ObserveLease("a", t0.Add(time.Hour+2*time.Second), "spoke-1")
	if seen, _ := tr.LastSeen("a"); !seen.Equal(now) {
		t.Fatalf("renewal not recorded at hub time: %v", seen)
	}
	if _, ok := tr.LastSeen("b"); ok {
		t.Fatal("unknown cluster reported seen")
	}
}

func TestJudge(t *testing.T) {
	stale, grace := 15*time.Second, time.Minute
	fresh := t0.Add(-time.Second)
	long := t0.Add(-2 * time.Minute)
	short := t0.Add(-30 * time.Second)
	for _, tc := range []struct {
		name string
		obs  []Observation
		want map[string]State
	}{
		{"all fresh", []Observation{{Cluster: "a", LastSeen: fresh}, {Cluster: "b", LastSeen: fresh}}, map[string]State{"a": Alive, "b": Alive}},
		{"stale, both peers agree, beyond grace: failed", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false, "c": true}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": true}},
		}, map[string]State{"a": Failed, "b": Alive, "c": Alive}},
		{"stale, peers agree, within grace: unknown", []Observation{
			{Cluster: "a", LastSeen: short},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false}},
		}, map[string]State{"a": Unknown}},
		{"stale to the hub but peers see it: unknown (hub's path failed)", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": true}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": true}},
		}, map[string]State{"a": Unknown}},
		{"one of two peers agrees: no majority, unknown", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": true}},
		}, map[string]State{"a": Unknown}},
		{"a stale witness does not count", []Observation{
			{Cluster: "a", LastSeen: long},
			{Cluster: "b", LastSeen: long, Gossip: map[string]bool{"a": false}},
			{Cluster: "c", LastSeen: fresh, Gossip: map[string]bool{"a": false, "b": false}},
		}, map[string]State{"a": Failed, "b": Failed, "c": Alive}},
		{"alone: never failed", []Observation{{Cluster: "a", LastSeen: long}}, map[string]State{"a": Unknown}},
		{"hub lost everything: nobody failed", []Observation{
			{Cluster: "a", LastSeen: long, Gossip: map[string]bool{"b": true}},
			{Cluster: "b", LastSeen: long, Gossip: map[string]bool{"a": true}},
		}, map[string]State{"a": Unknown, "b": Unknown}},
		{"never seen, peers agree: unknown", []Observation{
			{Cluster: "a"},
			{Cluster: "b", LastSeen: fresh, Gossip: map[string]bool{"a": false}},
		}, map[string]State{"a": Unknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]Verdict{}
			for _, v := range Judge(tc.obs, t0, stale, grace) {
				got[v.Cluster] = v
			}
			for c, want := range tc.want {
				if got[c].State != want {
					t.Errorf("%s: %s (%s), want %s", c, got[c].State, got[c].Reason, want)
				}
				if got[c].Reason == "" {
					t.Errorf("%s: no reason", c)
				}
			}
		})
	}
}
