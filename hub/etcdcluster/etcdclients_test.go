package etcdcluster

import (
	"testing"
	"time"
)

// A ring at rest does not hold its etcd connections: a client no pass used
// for idleAfter is closed when another ring's pass comes, or by the sweep
// when none comes, and the ring's next pass dials again. A client in use is
// kept.
func TestClientCacheClosesIdleClients(t *testing.T) {
	clock := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := clientCache{idleAfter: 2 * time.Minute, now: func() time.Time { return clock }}
	// Endpoints nobody serves: the client does not dial until used.
	a, err := c.get("a", []string{"http://127.0.0.1:1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.get("b", []string{"http://127.0.0.1:2"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(90 * time.Second)
	if again, _ := c.get("a", []string{"http://127.0.0.1:1"}, nil, nil); again != a {
		t.Fatal("a client used 90s ago was replaced")
	}
	clock = clock.Add(60 * time.Second) // b idle 150s, a 60s
	if _, err := c.get("a", []string{"http://127.0.0.1:1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.clients["b"]; ok {
		t.Error("b's client, unused for 150s, is still open")
	}
	if _, ok := c.clients["a"]; !ok {
		t.Error("a's client, in use, was closed")
	}
	// At rest no pass comes: the sweep alone closes a's client once idle.
	clock = clock.Add(119 * time.Second)
	c.sweep()
	if _, ok := c.clients["a"]; !ok {
		t.Error("a's client, used 119s ago, was closed by the sweep")
	}
	clock = clock.Add(2 * time.Second)
	c.sweep()
	if len(c.clients) != 0 {
		t.Errorf("after the sweep at rest, %d clients are still open", len(c.clients))
	}
	c.drop("a")
}
