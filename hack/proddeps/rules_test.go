package main

import (
	"slices"
	"testing"
)

func TestForbidden(t *testing.T) {
	for _, tc := range []struct {
		pkg       string
		forbidden bool
	}{
		{"testing", true},
		{"testing/fstest", true},
		{"net/http/httptest", true},
		{"net/http", false},
		{"sigs.k8s.io/controller-runtime/pkg/envtest", true},
		{"sigs.k8s.io/controller-runtime/pkg/envtest/komega", true},
		{"sigs.k8s.io/controller-runtime/pkg/client", false},
		// client-go's typed clients import it themselves: not ours to ban.
		{"k8s.io/client-go/testing", false},
		{Module + "/dev/localenv", true},
		{Module + "/dev/localenv/nodeagent", true},
		{Module + "/dev/testenv/testproc", true},
		{Module + "/dev/workload", true},
		{Module + "/dev/drill", true},
		{Module + "/cli/install", false},
		{Module + "/dev/images", true},
		{Module + "/spoke/internal/spoketest", true},
		{Module + "/spoke/internal/testcerts", true},
		{Module + "/test/multicluster", true},
		{Module + "/hack/proddeps", true},
		{Module + "/internal/etcddial", false},
		{Module + "/internal/localenvx", false},
		{Module + "/spoke/restore", false},
		{Module + "/hub/etcdcluster", false},
	} {
		if got := Forbidden(tc.pkg) != ""; got != tc.forbidden {
			t.Errorf("Forbidden(%q) = %q; want forbidden %v", tc.pkg, Forbidden(tc.pkg), tc.forbidden)
		}
	}
}

func TestCheckShortestChain(t *testing.T) {
	g := map[string][]string{
		"main":                  {"a", "b", "fmt"},
		"a":                     {"c"},
		"b":                     {Module + "/dev/testenv"},
		"c":                     {Module + "/dev/testenv", "testing"},
		Module + "/dev/testenv": {"testing"},
		"testing":               nil,
		"fmt":                   nil,
	}
	got := Check(g, "main")
	if len(got) != 2 {
		t.Fatalf("Check = %+v; want testenv and testing", got)
	}
	if got[0].Package != Module+"/dev/testenv" || !slices.Equal(got[0].Chain, []string{"main", "b", Module + "/dev/testenv"}) {
		t.Errorf("first finding %+v; want testenv through b", got[0])
	}
	if got[1].Package != "testing" || !slices.Equal(got[1].Chain, []string{"main", "a", "c", "testing"}) {
		t.Errorf("second finding %+v; want testing through a and c", got[1])
	}
	if f := Check(map[string][]string{"main": {"fmt"}, "fmt": nil}, "main"); len(f) != 0 {
		t.Errorf("clean graph: %+v", f)
	}
}
