package etcdops

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/internal/etcddial"
)

// TestReconnectBackoffIsBounded: a member that keeps failing the hub's
// connection attempts is retried at least every etcddial.MaxReconnectDelay (plus
// jitter), not on gRPC's default back-off, which doubles to 120 s. The
// member here is a TCP listener that closes every connection it accepts,
// as a restarting etcd does. In 20 s gRPC's default makes 6 or 7 attempts
// (at 0, 1, 2.6, 5.2, 9.3 and 15.8 s, each delay ±20 %); the bounded
// back-off makes 6 in its first 4 s and then one at least every 2.4 s.
func TestReconnectBackoffIsBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var attempts atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			attempts.Add(1)
			_ = c.Close()
		}
	}()
	c, err := New(Config{Endpoints: []string{"http://" + l.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const window = 20 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), window)
	defer cancel()
	for ctx.Err() == nil {
		// Calls keep the client wanting a connection, as the hub's passes do.
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		if _, err := c.c.Get(cctx, "k"); err == nil {
			t.Fatal("a listener that closes every connection answered a Get")
		}
		ccancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	n := attempts.Load()
	t.Logf("%d connection attempts in %v", n, window)
	if n < 10 {
		t.Errorf("%d connection attempts in %v: the back-off is not bounded by %v (gRPC's default makes 6 or 7)", n, window, etcddial.MaxReconnectDelay)
	}
}
