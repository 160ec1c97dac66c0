package testenv

import (
	"context"
	"testing"
)

// StartT starts one apiserver per name for a test (or a TestMain-owned
// testing.TB) and stops them when it ends. A missing bin/ fails the test with
// the command that fixes it: tests never skip silently.
func StartT(t testing.TB, names ...string) []*Cluster {
	t.Helper()
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

// NamespaceT creates a fresh namespace in c for the test.
func NamespaceT(t testing.TB, c *Cluster, prefix string) string {
	t.Helper()
	ns, err := c.CreateNamespace(context.Background(), prefix)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return ns
}
