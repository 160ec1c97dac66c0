package version

import (
	"strings"
	"testing"
)

func TestCheckSkew(t *testing.T) {
	for _, tc := range []struct {
		hub, spoke string
		want       Skew
		why        string
	}{
		{"v0.5.0", "v0.5.0", SkewSupported, ""},
		{"v0.5.2", "v0.5.0", SkewSupported, ""},
		{"v0.5.0", "v0.5.3", SkewSupported, ""},            // patch ahead: fine
		{"v0.5.0", "v0.4.9", SkewSupported, ""},            // one minor behind
		{"v0.5.0-rc.1", "v0.4.0+build", SkewSupported, ""}, // suffixes ignored
		{"0.5.0", "v0.4.0", SkewSupported, ""},
		{"v0.5.0", "v0.3.1", SkewUnsupported, "2 minor versions behind"},
		{"v0.5.0", "v0.6.0", SkewUnsupported, "upgrade the hub first"},
		{"v1.0.0", "v0.9.0", SkewUnsupported, "another major"},
		{"dev-0123456789ab", "dev-0123456789ab", SkewSupported, ""},
		{"dev-0123456789ab", "v0.5.0", SkewUnknown, "cannot be compared"},
		{"v0.5.0", "dev", SkewUnknown, "cannot be compared"},
		{"v0.5.0", "v0.5", SkewUnknown, "cannot be compared"},
		{"v0.5.0", "v0.x.0", SkewUnknown, "cannot be compared"},
		{"v0.5.0", "v0.-1.0", SkewUnknown, "cannot be compared"},
	} {
		got, why := CheckSkew(tc.hub, tc.spoke)
		if got != tc.want || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("CheckSkew(%q, %q) = %v %q, want %v containing %q", tc.hub, tc.spoke, got, why, tc.want, tc.why)
		}
	}
}
