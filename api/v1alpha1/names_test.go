package v1alpha1_test

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func TestMemberObjectName(t *testing.T) {
	long := strings.Repeat("n", 63)
	for _, tc := range []struct {
		ns, ring, member string
		want             string
	}{
		{"default", "demo", "demo-0", "default-demo-0-" + etcdfedv1.RingHash("default", "demo")},
		{"team-b", "demo", "demo-0", "team-b-demo-0-" + etcdfedv1.RingHash("team-b", "demo")},
		// The namespace is cut from its end to fit 63 characters.
		{long, "demo", "demo-10", long[:46] + "-demo-10-" + etcdfedv1.RingHash(long, "demo")},
		// A namespace not starting with a letter is left out (a Service's
		// name must start with one).
		{"1team", "demo", "demo-0", "demo-0-" + etcdfedv1.RingHash("1team", "demo")},
		// No room for the namespace at all.
		{"ns", strings.Repeat("r", 52), strings.Repeat("r", 52) + "-1", strings.Repeat("r", 52) + "-1-" + etcdfedv1.RingHash("ns", strings.Repeat("r", 52))},
	} {
		got := etcdfedv1.MemberObjectName(tc.ns, tc.ring, tc.member)
		if got != tc.want {
			t.Errorf("MemberObjectName(%q, %q, %q) = %q, want %q", tc.ns, tc.ring, tc.member, got, tc.want)
		}
	}
}

// TestObjectNamesNeverCollide: names are valid Service names (so valid pod,
// PVC, Secret and EtcdMember names), at most 63 characters, and differ for
// rings whose readable parts read alike, for every member of a ring, and
// for long names that had to be cut.
func TestObjectNamesNeverCollide(t *testing.T) {
	seen := map[string]string{}
	add := func(ns, ring, member string) {
		t.Helper()
		name := etcdfedv1.MemberObjectName(ns, ring, member)
		if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
			t.Errorf("%s/%s member %s: %q is not a DNS-1035 label: %v", ns, ring, member, name, msgs)
		}
		for _, suffix := range []string{"-tls", "-store-credentials", "-data-9223372036854775807"} {
			if msgs := validation.IsDNS1123Subdomain(name + suffix); len(msgs) > 0 {
				t.Errorf("%q: %v", name+suffix, msgs)
			}
		}
		key := ns + "/" + ring + "/" + member
		if other, ok := seen[name]; ok {
			t.Errorf("%s and %s share the name %q", other, key, name)
		}
		seen[name] = key
	}
	longNS := strings.Repeat("a", 63)
	longRing := strings.Repeat("b", 60)
	for _, r := range []struct{ ns, ring string }{
		{"a-b", "c"}, {"a", "b-c"}, {"default", "demo"}, {"team-b", "demo"}, {"team", "b-demo"},
		{longNS, "demo"}, {longNS[:62], "demo"}, {"x", longRing}, {"y", longRing}, {"x", longRing[:59]},
	} {
		for _, o := range []string{"0", "1", "2", "10"} {
			add(r.ns, r.ring, r.ring+"-"+o)
		}
		zone := etcdfedv1.RingObjectName(r.ns, r.ring)
		if len(zone) > 63 {
			t.Errorf("zone name %q longer than 63", zone)
		}
	}
}

func TestIsMemberObjectName(t *testing.T) {
	scoped := etcdfedv1.MemberObjectName("default", "demo", "demo-0")
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"demo-0", true}, // written before the scheme
		{scoped, true},
		{etcdfedv1.MemberObjectName("team-b", "demo", "demo-0"), false},
		{etcdfedv1.MemberObjectName("default", "demo", "demo-1"), false},
		{"demo-1", false},
		// A Move inside one member cluster: the new incarnation's object.
		{etcdfedv1.IncarnationObjectName("default", "demo", "demo-0", 4), true},
		{etcdfedv1.IncarnationObjectName("default", "demo", "demo-0", 12345), true},
		{etcdfedv1.IncarnationObjectName("default", "demo", "demo-1", 4), false},
		{etcdfedv1.IncarnationObjectName("team-b", "demo", "demo-0", 4), false},
		{"default-demo-0-i0-" + etcdfedv1.RingHash("default", "demo"), false},
		{"default-demo-0-ix-" + etcdfedv1.RingHash("default", "demo"), false},
	} {
		if got := etcdfedv1.IsMemberObjectName(tc.name, "default", "demo", "demo-0"); got != tc.want {
			t.Errorf("IsMemberObjectName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An incarnation's object name (a Move inside one member cluster) is the
// scheme's with "-i<N>" after the member, fits 63 characters with its
// suffix whole, differs from the scheme's name and from every other
// incarnation's, and is recognised as the member's whatever its length.
func TestIncarnationObjectName(t *testing.T) {
	h := etcdfedv1.RingHash("default", "demo")
	if got, want := etcdfedv1.IncarnationObjectName("default", "demo", "demo-0", 4), "default-demo-0-i4-"+h; got != want {
		t.Errorf("IncarnationObjectName = %q, want %q", got, want)
	}
	longNS, longRing := strings.Repeat("a", 63), strings.Repeat("b", 60)
	seen := map[string]bool{}
	for _, r := range []struct{ ns, ring, member string }{
		{"default", "demo", "demo-0"}, {longNS, "demo", "demo-10"}, {"x", longRing, longRing + "-2"}, {"x", longRing, longRing + "-12"},
	} {
		base := etcdfedv1.MemberObjectName(r.ns, r.ring, r.member)
		seen[base] = true
		for _, inc := range []int64{4, 5, 123456789} {
			name := etcdfedv1.IncarnationObjectName(r.ns, r.ring, r.member, inc)
			if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
				t.Errorf("%q: %v", name, msgs)
			}
			if !strings.Contains(name, "-i"+strconv.FormatInt(inc, 10)+"-") {
				t.Errorf("%q does not say its incarnation %d", name, inc)
			}
			if seen[name] {
				t.Errorf("%q given twice", name)
			}
			seen[name] = true
			if !etcdfedv1.IsMemberObjectName(name, r.ns, r.ring, r.member) {
				t.Errorf("IsMemberObjectName(%q, %s/%s %s) = false", name, r.ns, r.ring, r.member)
			}
		}
	}
}
