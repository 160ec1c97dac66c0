package main

import (
	"strings"
	"testing"

	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// --etcd-version is checked against the version policy before anything
// starts, with the policy's reason.
func TestCheckDemoVersion(t *testing.T) {
	for v, want := range map[string]string{
		etcdversion.Default().String(): "",
		"3.6.16":                       "",
		"3.5.35":                       "",
		"3.8.0":                        "unknown etcd version",
		"3.6.3":                        "fixed in 3.6.5",
		"v3.7.3":                       "not an etcd release",
	} {
		err := checkDemoVersion(v)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("checkDemoVersion(%q) = %v, want %q", v, err, want)
		}
	}
	if got := testedReleases(); !strings.HasSuffix(got, " and "+etcdversion.Default().String()) {
		t.Errorf("testedReleases() = %q, want the newest patches ending with the default", got)
	}
}
