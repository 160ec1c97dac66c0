package etcdops

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestNewDoesNotWaitForAConnection: creating the hub's etcd client never
// waits for a member (no grpc.WithBlock, which the etcd 3.7 client ignores
// anyway: its creation is non-blocking,
// https://github.com/etcd-io/etcd/pull/21942); the wait, and its
// bound, is each call's own context. The member here accepts TCP
// connections and never answers, as a frozen process does. A client whose
// creation blocked would fail New after DialTimeout instead.
func TestNewDoesNotWaitForAConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // accepted, never answered
		}
	}()
	c, err := New(Config{Endpoints: []string{"http://" + l.Addr().String()}})
	if err != nil {
		t.Fatalf("New waited for a member that never answers and failed: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = c.c.Get(ctx, "k")
	if err == nil {
		t.Fatal("a member that never answers answered a Get")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("the Get failed before its context ended: %v", err)
	}
}
