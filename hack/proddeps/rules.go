package main

import (
	"slices"
	"strings"
)

// Module is etcdfed's module path.
const Module = "github.com/etcdfed/etcdfed"

// devPackages are etcdfed's packages (and everything below them) that
// exist for tests, drills or the local environment and never for a
// production binary: the dev/ tier as a whole (the local environment, the
// image builder, the nemesis, the drills, the recorded workload, the test
// fixtures), the tests and the build tooling.
var devPackages = []string{
	"dev",
	"test",
	"hack",
}

// Forbidden says why a production binary must not link pkg, "" when it
// may.
func Forbidden(pkg string) string {
	switch {
	case pkg == "testing" || strings.HasPrefix(pkg, "testing/"):
		return "the standard library's test framework"
	case pkg == "net/http/httptest":
		return "the standard library's HTTP test server"
	case slices.Contains(strings.Split(pkg, "/"), "envtest"):
		return "envtest starts test apiservers"
	}
	rel, ok := strings.CutPrefix(pkg, Module+"/")
	if !ok {
		return ""
	}
	for _, d := range devPackages {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return "etcdfed's test or dev code (" + d + ")"
		}
	}
	if isFixture(rel) {
		return "etcdfed's test fixtures (" + rel + ")"
	}
	return ""
}

// isFixture says whether one of etcdfed's packages (rel is its path below
// the module) is a test fixture by the naming rule that fixtures outside
// dev/ follow: a package named *test or test* (spoke/internal/spoketest,
// testcerts, testetcd).
func isFixture(rel string) bool {
	base := rel[strings.LastIndexByte(rel, '/')+1:]
	return strings.HasSuffix(base, "test") || strings.HasPrefix(base, "test")
}

// Finding is one forbidden package in a binary.
type Finding struct {
	Package string
	Why     string
	// Chain is the shortest import chain from the binary's main package.
	Chain []string
}

// Check walks the import graph g from root and returns every forbidden
// package with the shortest chain of imports that reaches it, in the
// order found (breadth first, imports sorted).
func Check(g map[string][]string, root string) []Finding {
	parent := map[string]string{root: ""}
	queue := []string{root}
	var out []Finding
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if why := Forbidden(p); why != "" {
			out = append(out, Finding{Package: p, Why: why, Chain: chain(parent, p)})
			continue // what it imports is reported through it
		}
		imps := slices.Clone(g[p])
		slices.Sort(imps)
		for _, i := range imps {
			if _, seen := parent[i]; !seen {
				parent[i] = p
				queue = append(queue, i)
			}
		}
	}
	return out
}

func chain(parent map[string]string, p string) []string {
	var c []string
	for ; p != ""; p = parent[p] {
		c = append(c, p)
	}
	slices.Reverse(c)
	return c
}
