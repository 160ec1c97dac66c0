package clients

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// A consumer's Secret written before the EtcdCluster took a running ring
// over (under its own UID) or after (under the ring's) is the ring's; one
// of another EtcdCluster is not.
func TestOwnerOf(t *testing.T) {
	taken := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{UID: "new"}}
	taken.Status.TakeOver = &etcdfedv1.TakeOverStatus{Phase: etcdfedv1.TakeOverComplete, RingUID: "founder"}
	plain := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{UID: "new"}}
	for _, tc := range []struct {
		name  string
		ec    *etcdfedv1.EtcdCluster
		label string
		ours  bool
	}{
		{"taken over, written before the take-over", taken, "new", true},
		{"taken over, written under the ring's UID", taken, "founder", true},
		{"taken over, another EtcdCluster's", taken, "other", false},
		{"not taken over, its own", plain, "new", true},
		{"not taken over, the founder's", plain, "founder", false},
	} {
		if got := ownerOf(tc.ec, tc.label) == string(tc.ec.RingUID()); got != tc.ours {
			t.Errorf("%s: ours %v, want %v", tc.name, got, tc.ours)
		}
	}
}
