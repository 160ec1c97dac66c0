package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echo serves line echo on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes a line and reads it back within d.
func roundTrip(c net.Conn, d time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo answered " + line)
	}
	return nil
}

func TestModes(t *testing.T) {
	p, err := Start("127.0.0.1:0", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	established := dial()
	if err := roundTrip(established, 5*time.Second); err != nil {
		t.Fatalf("forward: %v", err)
	}

	p.SetMode(BlackHole)
	if err := roundTrip(established, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("established connection while black-holed: %v, want no answer (deadline exceeded)", err)
	}
	if err := roundTrip(dial(), 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("new connection while black-holed: %v, want no answer (deadline exceeded)", err)
	}

	p.SetMode(Forward)
	if err := roundTrip(established, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("frozen connection after recovery: %v, want it closed", err)
	}
	if err := roundTrip(dial(), 5*time.Second); err != nil {
		t.Errorf("new connection after recovery: %v", err)
	}

	live := dial()
	if err := roundTrip(live, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetMode(Reset)
	if err := roundTrip(live, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("established connection on reset: %v, want it closed", err)
	}
	if err := roundTrip(dial(), 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("new connection on reset: %v, want it closed", err)
	}
}
