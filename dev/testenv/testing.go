package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
)

// SkipIfShort skips a test that needs real processes when go test runs with
// -short (make test-unit), saying why, so the skip is counted and explained.
func SkipIfShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration test: needs %s; run `make test`", needs)
	}
}

// StartT starts one apiserver per name for a test and stops them when it
// ends. A missing bin/ fails the test with the command that fixes it: tests
// never skip silently.
func StartT(t testing.TB, names ...string) []*Cluster {
	t.Helper()
	SkipIfShort(t, "kube-apiserver")
	clusters, err := Start(context.Background(), Options{}, names...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		for _, c := range clusters {
			if err := c.Stop(); err != nil {
				t.Errorf("%v", err)
			}
		}
	})
	return clusters
}

var shared struct {
	sync.Mutex
	clusters map[string]*Cluster
	errs     map[string]error
}

// Shared returns an apiserver started once per test binary under name and
// shared by every test that asks for it; RunMain stops it. Tests using it
// must isolate themselves with a namespace each (NamespaceT).
func Shared(t testing.TB, name string) *Cluster {
	t.Helper()
	SkipIfShort(t, "kube-apiserver")
	shared.Lock()
	defer shared.Unlock()
	if c, ok := shared.clusters[name]; ok {
		return c
	}
	if err, ok := shared.errs[name]; ok {
		t.Fatalf("%v", err)
	}
	if shared.clusters == nil {
		shared.clusters, shared.errs = map[string]*Cluster{}, map[string]error{}
	}
	cs, err := Start(context.Background(), Options{}, name)
	if err != nil {
		shared.errs[name] = err
		t.Fatalf("%v", err)
	}
	shared.clusters[name] = cs[0]
	return cs[0]
}

// RunMain runs the tests and stops every shared apiserver. Use it as
// `func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }`.
func RunMain(m *testing.M) int {
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	for _, c := range shared.clusters {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	testproc.Finish()
	return code
}

// NamespaceT creates a fresh namespace in c for the test.
func NamespaceT(t testing.TB, c *Cluster, prefix string) string {
	t.Helper()
	ns, err := c.CreateNamespace(context.Background(), prefix)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return ns
}
