package localenv_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// probeEnv set in a pod's environment makes this test binary the pod's
// process: a probe that measures the network from inside a zone (see
// runProbe).
const probeEnv = "LOCALENV_TEST_PROBE"

// probePort is where a probe serves, on its pod IP.
const probePort = 7000

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		runProbe(os.Getenv("POD_IP"))
		return
	}
	os.Exit(m.Run())
}

// runProbe serves one command per connection on ip:probePort, answering
// one line:
//
//	ECHO                echo the rest of the connection
//	WHO                 the connection's remote address (host)
//	TCP host:port n     round trips (µs) of n pings to the probe at host:port
//	WHOAT host:port     what the probe at host:port answers WHO
//	UDP host:port n     round trips (µs) of n datagrams to an echo at host:port
//
// and "ERR why" when something fails.
func runProbe(ip string) {
	l, err := net.Listen("tcp4", net.JoinHostPort(ip, strconv.Itoa(probePort)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(1)
		}
		go serveProbe(c)
	}
}

func serveProbe(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	answer := func(s string, err error) {
		if err != nil {
			s = "ERR " + err.Error()
		}
		fmt.Fprintln(c, s)
	}
	n := 0
	if len(f) > 2 {
		n, _ = strconv.Atoi(f[2])
	}
	switch f[0] {
	case "ECHO":
		_, _ = io.Copy(c, r)
	case "WHO":
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		answer(host, nil)
	case "WHOAT":
		answer(ask(f[1], "WHO"))
	case "TCP":
		answer(tcpPings(f[1], n))
	case "UDP":
		answer(udpPings(f[1], n))
	default:
		answer("", fmt.Errorf("unknown command %q", f[0]))
	}
}

// ask sends one command to the probe at addr and returns its answer.
func ask(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp4", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintln(c, cmd); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if why, ok := strings.CutPrefix(line, "ERR "); ok {
		return "", fmt.Errorf("%s", why)
	}
	return line, nil
}

func tcpPings(addr string, n int) (string, error) {
	c, err := net.DialTimeout("tcp4", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintln(c, "ECHO"); err != nil {
		return "", err
	}
	var out []string
	buf := make([]byte, 5)
	for range n {
		t0 := time.Now()
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return "", err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return "", err
		}
		out = append(out, strconv.FormatInt(time.Since(t0).Microseconds(), 10))
	}
	return strings.Join(out, " "), nil
}

func udpPings(addr string, n int) (string, error) {
	c, err := net.Dial("udp4", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var out []string
	buf := make([]byte, 64)
	for range n {
		t0 := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(buf); err != nil {
			return "", err
		}
		out = append(out, strconv.FormatInt(time.Since(t0).Microseconds(), 10))
	}
	return strings.Join(out, " "), nil
}

// rtts parses a probe's round trips.
func rtts(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Fields(s) {
		us, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("probe answered %q", s)
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out, nil
}
