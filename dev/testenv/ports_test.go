package testenv

import (
	"net"
	"strconv"
	"testing"
)

// Ports handed out lie below the kernel's ephemeral range, are never
// handed out twice by one process, and can be bound for TCP and UDP.
// Before, a port came from listen(":0"): inside the range, where any
// process's next listen(":0") or outgoing connection could take it
// before the etcd it was meant for bound it.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low-lowestPort < 1000 {
		t.Skipf("the ephemeral range starts at %d: no room below it, FreePort uses the kernel's choice", low)
	}
	seen := map[int]bool{}
	for range 300 {
		p := FreePort(t)
		if p < lowestPort || p >= low {
			t.Fatalf("port %d is outside [%d, %d)", p, lowestPort, low)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	for p := range seen {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("TCP %s: %v", addr, err)
		}
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("UDP %s: %v", addr, err)
		}
		_ = l.Close()
		_ = u.Close()
	}
}
