package etcdops

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestObserveKeepsStatusConnections: passes over a ring at rest make no
// new connection (clientv3's Status dials one per request: a lookup, a
// TCP and a TLS handshake per member and pass); a member whose request
// failed loses its connection, so that once it is back the next request
// dials it afresh and it answers.
func TestObserveKeepsStatusConnections(t *testing.T) {
	testenv.SkipIfShort(t, "etcd processes")
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "statusconn"})
	var dials atomic.Int64
	cl, err := New(Config{Endpoints: c.Endpoints(), CheckAddr: func(netip.Addr) error {
		dials.Add(1)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	cl.Probes = &ProbeMemory{}
	ctx := context.Background()
	healthy := func(what string, want int) {
		t.Helper()
		e := cl.Observe(ctx)
		n := 0
		for _, m := range e.Members {
			if m.Healthy {
				n++
			}
		}
		if n != want {
			t.Fatalf("%s: %d healthy members, want %d (%s)", what, n, want, e.Error)
		}
	}
	healthy("first pass", 3)
	first := dials.Load()
	for i := range 5 {
		healthy("pass at rest", 3)
		if n := dials.Load(); n != first {
			t.Fatalf("pass %d at rest made %d new connections (%d in the first pass)", i+2, n-first, first)
		}
	}
	if got := cl.statusURLs(); len(got) != 3 {
		t.Fatalf("status connections to %v, want one per member", got)
	}

	stopped := c.Members[2]
	if err := c.MakeFollower(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	stopped.Stop()
	healthy("a follower stopped", 2)
	if slices.Contains(cl.statusURLs(), stopped.AdvertisedClientURL) {
		t.Errorf("the stopped member's failed connection was kept")
	}
	c.Restart(stopped)
	eventually(t, "the restarted member answers", func() error {
		e := cl.Observe(ctx)
		for _, m := range e.Members {
			if !m.Healthy {
				return fmt.Errorf("%s not healthy (%s)", m.Name, e.Error)
			}
		}
		return nil
	})
}

// statusURLs are the member URLs with a kept status connection, sorted.
func (c *Client) statusURLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for u := range c.members {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}
