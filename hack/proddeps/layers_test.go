package main

import (
	"testing"
)

func TestFloor(t *testing.T) {
	for _, tc := range []struct {
		rel   string
		floor int
	}{
		{"api/v1alpha1", FloorBase},
		{"config/rbac/hub", FloorBase},
		{"pkg/topology", FloorBase},
		{"internal/etcddial", FloorBase},
		{"dnsprovider/embedded", FloorBase},
		{"hub/etcdcluster", FloorComponents},
		{"spoke/member", FloorComponents},
		{"cli/install", FloorCLI},
		{"dev/localenv", FloorDev},
		{"dev/workload", FloorDev},
		{"test/multicluster", FloorDev},
		{"hack/proddeps", FloorDev},
		// A fixture is dev tooling wherever it sits.
		{"spoke/internal/testetcd", FloorDev},
		{"pkg/internal/snapshottest", FloorDev},
		{"cmd/hub", FloorMain},
		{"newfolder/x", -1},
	} {
		if got := Floor(tc.rel); got != tc.floor {
			t.Errorf("Floor(%q) = %d; want %d", tc.rel, got, tc.floor)
		}
	}
}

func TestCheckLayers(t *testing.T) {
	m := func(rel string) string { return Module + "/" + rel }
	g := map[string][]string{
		m("internal/status"):     {m("hub/pki"), m("internal/text"), "fmt"},
		m("internal/text"):       {"strings"},
		m("hub/pki"):             {m("api/v1alpha1")},
		m("cli/install"):         {m("hub/registry"), m("internal/scheme")},
		m("spoke/member"):        {m("cli/install")},
		m("pkg/backupstore"):     {m("dev/s3test")},
		m("cmd/etcdfed"):         {m("dev/localenv"), m("cli/install")},
		m("dev/localenv"):        {m("cli/install"), m("hub/registry")},
		m("spoke/internal/test"): {m("dev/testenv")},
		m("newfolder/x"):         {m("internal/text")},
		"example.com/other":      {m("hub/pki")},
	}
	want := []string{
		"internal/status (base) imports hub/pki (components)",
		"newfolder/x (no floor: add its folder to Floor) imports internal/text (base)",
		"pkg/backupstore (base) imports dev/s3test (dev)",
		"spoke/member (components) imports cli/install (cli)",
	}
	got := CheckLayers(g)
	if len(got) != len(want) {
		t.Fatalf("CheckLayers = %v; want %q", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("finding %d = %q; want %q", i, got[i], want[i])
		}
	}
}

// TestNoImportRunsUpAFloor checks etcdfed's own tree: the rule of
// layers.go holds for every package (make verify runs the same check).
func TestNoImportRunsUpAFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the whole module")
	}
	g, err := treeGraph()
	if err != nil {
		t.Fatal(err)
	}
	if len(g) < 50 {
		t.Fatalf("go list found %d packages; want the whole module", len(g))
	}
	for _, u := range CheckLayers(g) {
		t.Errorf("import runs up a floor: %s", u)
	}
}
