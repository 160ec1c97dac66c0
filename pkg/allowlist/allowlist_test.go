package allowlist

import "testing"

func TestAllowsKey(t *testing.T) {
	for _, tc := range []struct {
		list []string
		key  string
		want bool
	}{
		{nil, "a", false},
		{[]string{Any}, "sidecar.istio.io/inject", true},
		{[]string{"prometheus.io/"}, "prometheus.io/scrape", true},
		{[]string{"prometheus.io/"}, "prometheus.io", false},
		{[]string{"example.com."}, "example.com.team/x", true},
		{[]string{"prometheus.io"}, "prometheus.io/scrape", false}, // no '/' or '.' at the end: the key itself only
		{[]string{"prometheus.io"}, "prometheus.io", true},
		{[]string{"prometheus.io/"}, "sidecar.istio.io/inject", false},
	} {
		if got := AllowsKey(tc.list, tc.key); got != tc.want {
			t.Errorf("AllowsKey(%q, %q) = %v, want %v", tc.list, tc.key, got, tc.want)
		}
	}
	if String(nil) != "none allowed" || String([]string{"a", "b/"}) != "allowed: a, b/" {
		t.Errorf("String: %q, %q", String(nil), String([]string{"a", "b/"}))
	}
}
