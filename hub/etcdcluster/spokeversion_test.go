package etcdcluster

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestSpokeVersionSkewSeen: the version a spoke reports in its EtcdSpoke
// (written on a real apiserver, read back the way a pass reads it) is
// judged against the hub's. A spoke two minors behind turns SpokeVersions
// False naming the cluster, its version and what to upgrade, with one
// Warning event when it begins; one minor behind is supported. Before,
// status.version was written by every spoke and read by nobody: a hub
// running beside spokes it does not support said nothing.
func TestSpokeVersionSkewSeen(t *testing.T) {
	for _, tc := range []struct {
		spoke  string
		status metav1.ConditionStatus
		reason string
		want   string
	}{
		{"v0.3.2", metav1.ConditionFalse, etcdfedv1.ReasonSpokeVersionSkewed, "the spoke of member-2 runs v0.3.2 is 2 minor versions behind the hub's v0.5.0"},
		{"v0.6.0", metav1.ConditionFalse, etcdfedv1.ReasonSpokeVersionSkewed, "upgrade the hub first"},
		{"dev-0123456789ab", metav1.ConditionUnknown, etcdfedv1.ReasonSpokeVersionUnknown, "member-2"},
		{"v0.4.7", metav1.ConditionTrue, etcdfedv1.ReasonSpokeVersionsSupported, "member-2 v0.4.7"},
	} {
		t.Run(tc.spoke, func(t *testing.T) {
			s := ring()
			s.hubVersion = "v0.5.0"
			reportFixture(t, s, func(_ *etcdfedv1.EtcdMemberStatus, sp *etcdfedv1.EtcdSpokeStatus) { sp.Version = tc.spoke })
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{Recorder: rec}
			ec := s.ec
			before := spokeVersionsSkewed(&ec.Status)
			ec.Status = computeStatus(s, decide(s), applyResult{}, "")
			r.spokeVersionEvent(ec, before)
			c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionSpokeVersions)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.want) {
				t.Fatalf("SpokeVersions = %+v; want %s %s containing %q", c, tc.status, tc.reason, tc.want)
			}
			// The event, once: a second pass with the skew still there
			// records nothing more.
			r.spokeVersionEvent(ec, spokeVersionsSkewed(&ec.Status))
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			wantEvents := 0
			if tc.status == metav1.ConditionFalse {
				wantEvents = 1
			}
			if len(got) != wantEvents || (wantEvents == 1 && (!strings.HasPrefix(got[0], "Warning "+etcdfedv1.ReasonSpokeVersionSkewed+" ") || !strings.Contains(got[0], tc.want))) {
				t.Errorf("events %q; want %d Warning %s", got, wantEvents, etcdfedv1.ReasonSpokeVersionSkewed)
			}
		})
	}
	// No spoke reported a version: the condition is not made up.
	s := ring()
	s.hubVersion = "v0.5.0"
	st := computeStatus(s, decide(s), applyResult{}, "")
	if c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionSpokeVersions); c != nil {
		t.Errorf("SpokeVersions without any reported version: %+v", c)
	}
}
