package credential

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// The chain's end, read from the anchor: before it, wait until then; at
// or after it, or with no readable end, the chain ends. (The whole chain
// against real apiservers: hub/registration's TestCredentialChainEnds.)
func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	anchor := func(v string, set bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubCredentialAnchor}}
		if set {
			s.Annotations = map[string]string{etcdfedv1.AnnotationCredentialNotAfter: v}
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		sec   *corev1.Secret
		ended bool
		left  time.Duration
	}{
		{"an hour left", anchor(now.Add(time.Hour).Format(time.RFC3339), true), false, time.Hour},
		{"at the end", anchor(now.Format(time.RFC3339), true), true, 0},
		{"past the end", anchor(now.Add(-time.Second).Format(time.RFC3339), true), true, 0},
		{"no end: ends at once", anchor("", false), true, 0},
		{"an unreadable end: ends at once", anchor("next year", true), true, 0},
	} {
		ended, left, why := Decide(tc.sec, now)
		if ended != tc.ended || left != tc.left || (ended && why == "") {
			t.Errorf("%s: ended %v, left %s (%q); want %v, %s", tc.name, ended, left, why, tc.ended, tc.left)
		}
	}
}
