package spokestatus

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestGossipHealth: a spoke's view witnesses for the hub only while its
// gossip runs and sees a peer alive; otherwise it abstains, and says why.
func TestGossipHealth(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	dead := []etcdfedv1.GossipPeerStatus{{Cluster: "b"}, {Cluster: "c"}}
	oneAlive := []etcdfedv1.GossipPeerStatus{{Cluster: "b", Alive: true}, {Cluster: "c"}}
	for _, tc := range []struct {
		name            string
		enabled         bool
		readyReason     string
		view            []etcdfedv1.GossipPeerStatus
		abstains        map[string]string
		joined, started time.Time
		status          metav1.ConditionStatus
		reason, says    string
	}{
		{"disabled", false, ReasonReady, nil, nil, time.Time{}, time.Time{}, metav1.ConditionFalse, etcdfedv1.ReasonGossipNotRunning, "gossip is disabled"},
		{"key missing", true, ReasonGossipKeyMissing, nil, nil, time.Time{}, time.Time{}, metav1.ConditionFalse, etcdfedv1.ReasonGossipNotRunning, "the key"},
		{"never joined", true, ReasonReady, dead, nil, time.Time{}, t0, metav1.ConditionFalse, etcdfedv1.ReasonGossipNeverJoined, "has never reached a peer (b, c all dead to it)"},
		{"joined, now alone", true, ReasonReady, dead, nil, t0, t0, metav1.ConditionFalse, etcdfedv1.ReasonGossipNoPeerAlive, "cannot tell its own cut from every peer's death"},
		{"one peer alive", true, ReasonReady, oneAlive, nil, t0, t0, metav1.ConditionTrue, etcdfedv1.ReasonGossipHealthy, "gossip sees 1 of 2 peers alive (b)"},
		{"one peer alive, one name it cannot check", true, ReasonReady, oneAlive, map[string]string{"d": "not in this spoke's table of identities"}, t0, t0, metav1.ConditionTrue, etcdfedv1.ReasonGossipHealthy,
			"gossip sees 1 of 2 peers alive (b); abstains on d (not in this spoke's table of identities): neither alive nor dead to the hub"},
		{"only names it cannot check", true, ReasonReady, []etcdfedv1.GossipPeerStatus{}, map[string]string{"b": "this spoke has no table of identities yet"}, t0, t0, metav1.ConditionFalse, etcdfedv1.ReasonGossipNoPeerAlive,
			"abstains on b (this spoke has no table of identities yet)"},
	} {
		status, reason, msg := gossipHealth(tc.enabled, tc.readyReason, "the key is missing", tc.view, tc.abstains, tc.joined, tc.started)
		if status != tc.status || reason != tc.reason || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %s %s %q, want %s %s with %q", tc.name, status, reason, msg, tc.status, tc.reason, tc.says)
		}
		if status == metav1.ConditionFalse && !strings.Contains(msg, "abstains") {
			t.Errorf("%s: %q does not say the spoke abstains", tc.name, msg)
		}
	}
}
