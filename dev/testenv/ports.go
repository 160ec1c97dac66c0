package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Ports handed to a process that binds them later (an etcd, named, an S3
// server) come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768 and up by default), at random.
// A port from net.Listen(":0"), closed and handed on, is in that range:
// until its process binds it, the next listen(":0") or outgoing
// connection of any process on the machine may be given the same port,
// and with the test packages running side by side that happened (an etcd
// of one test died with "address already in use"). Below the range only
// another caller of this helper picks ports, at random among thousands,
// and a port handed out once in a process is not handed out again by it.
const lowestPort = 10000

var (
	portsMu sync.Mutex
	handed  = map[int]bool{}
)

// FreePort is a port on 127.0.0.1 that nothing listens on now, for TCP
// or UDP, outside the kernel's ephemeral range (see FreePortOn).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := FreePortOn("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FreePortOn is a port on host that nothing listens on now, for TCP or
// UDP. It is chosen below the kernel's ephemeral range when that leaves
// room, so that no listen(":0") or outgoing connection takes it before
// the caller's process binds it.
func FreePortOn(host string) (int, error) {
	hi := ephemeralLow() - 1
	portsMu.Lock()
	defer portsMu.Unlock()
	if hi-lowestPort >= 1000 {
		for range 200 {
			p := lowestPort + rand.IntN(hi-lowestPort+1)
			if handed[p] || !bindable(host, p) {
				continue
			}
			handed[p] = true
			return p, nil
		}
	}
	// A machine whose ephemeral range leaves no room below it: a port the
	// kernel chooses, still checked for UDP.
	for range 50 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handed[p] && bindable(host, p) {
			handed[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s", host)
}

// bindable reports whether host:port can be bound for TCP and UDP now.
func bindable(host string, port int) bool {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer func() { _ = l.Close() }()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	_ = u.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range, 32768
// when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
