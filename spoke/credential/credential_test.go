package credential

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/tokenseal"
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

// When the spoke mints the hub's next token: at once when none is sealed,
// or the sealed one is of another anchor or key; else once a third of the
// sealed one's life has passed; never for an anchor without a sealing key
// (a join before sealing: the hub renews itself there) nor when the chain
// ends before another token could live; and never past the chain's end.
func TestDecideSeal(t *testing.T) {
	now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	_, key, err := tokenseal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, _ := tokenseal.GenerateKey()
	anchor := func(end time.Duration, key, life string) *corev1.Secret {
		a := map[string]string{etcdfedv1.AnnotationCredentialNotAfter: now.Add(end).Format(time.RFC3339)}
		if key != "" {
			a[etcdfedv1.AnnotationHubSealingKey] = key
		}
		if life != "" {
			a[etcdfedv1.AnnotationHubTokenLifetime] = life
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubCredentialAnchor, UID: "anchor-1", Annotations: a}}
	}
	sealed := func(issued time.Duration, life time.Duration, anchorUID, key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubSealedToken, Annotations: map[string]string{
			etcdfedv1.AnnotationSealedIssued: now.Add(issued).Format(time.RFC3339),
			etcdfedv1.AnnotationSealedExpiry: now.Add(issued + life).Format(time.RFC3339),
			etcdfedv1.AnnotationSealedAnchor: anchorUID,
			etcdfedv1.AnnotationSealedKey:    key,
		}}, Data: map[string][]byte{etcdfedv1.HubSealedTokenKey: []byte("box")}}
	}
	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdfedv1.HubSealedToken}}
	for _, tc := range []struct {
		name   string
		anchor *corev1.Secret
		sealed *corev1.Secret
		mint   time.Duration // 0: no mint
		after  time.Duration
		err    bool
	}{
		{"no key: the hub renews itself", anchor(90*24*time.Hour, "", "24h0m0s"), empty, 0, 0, false},
		{"none sealed yet", anchor(90*24*time.Hour, key, "24h0m0s"), empty, 24 * time.Hour, 0, false},
		{"no Secret to seal into", anchor(90*24*time.Hour, key, "24h0m0s"), nil, 0, 0, true},
		{"a third not passed", anchor(90*24*time.Hour, key, "24h0m0s"), sealed(-2*time.Hour, 24*time.Hour, "anchor-1", key), 0, 6 * time.Hour, false},
		{"a third passed", anchor(90*24*time.Hour, key, "24h0m0s"), sealed(-8*time.Hour, 24*time.Hour, "anchor-1", key), 24 * time.Hour, 0, false},
		{"another anchor's", anchor(90*24*time.Hour, key, "24h0m0s"), sealed(-time.Hour, 24*time.Hour, "anchor-0", key), 24 * time.Hour, 0, false},
		{"another key's", anchor(90*24*time.Hour, key, "24h0m0s"), sealed(-time.Hour, 24*time.Hour, "anchor-1", otherKey), 24 * time.Hour, 0, false},
		{"the join's lifetime", anchor(90*24*time.Hour, key, "1h0m0s"), empty, time.Hour, 0, false},
		{"cut to the chain's end", anchor(3*time.Hour, key, "24h0m0s"), empty, 3 * time.Hour, 0, false},
		{"the chain ends too soon for another", anchor(5*time.Minute, key, "24h0m0s"), empty, 0, 0, false},
		{"an unreadable lifetime", anchor(90*24*time.Hour, key, "a day"), empty, 0, 0, true},
		{"an unreadable key", anchor(90*24*time.Hour, "not a key", "24h0m0s"), empty, 0, 0, true},
	} {
		m, after, err := DecideSeal(tc.anchor, tc.sealed, now)
		var got time.Duration
		if m != nil {
			got = m.Lifetime
		}
		if got != tc.mint || after != tc.after || (err != nil) != tc.err {
			t.Errorf("%s: mint %s, after %s, %v; want mint %s, after %s, error %v", tc.name, got, after, err, tc.mint, tc.after, tc.err)
		}
	}
}
