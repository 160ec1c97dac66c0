package localenv

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A UDP flow's conntrack entry is forgotten: a flow between two bound
// ports sent through a REDIRECT rule made after it started keeps going
// directly until forgetUDPFlow, then meets the rule. Root only.
func TestForgetUDPFlow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("conntrack and iptables need root")
	}
	if _, err := iptablesPath(); err != nil {
		t.Skip(err)
	}
	a := netip.MustParseAddrPort("127.251.0.1:7946")
	b := netip.MustParseAddrPort("127.251.0.2:7946")
	// A rule that needs conntrack in place before the flow starts, as
	// the environment's SNAT rules are: without one, the kernel tracks
	// nothing yet, and the REDIRECT below would be the first to see the
	// flow (nothing to forget).
	guard := []string{"-t", "nat", "OUTPUT", "-s", "127.251.0.9/32", "-m", "conntrack", "--ctstate", "NEW", "-j", "RETURN"}
	if out, err := runIPTables(append([]string{"-t", "nat", "-I"}, guard[2:]...)...); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	defer func() { _, _ = runIPTables(append([]string{"-t", "nat", "-D"}, guard[2:]...)...) }()
	// What an earlier run left (its entry, redirected to a port gone)
	// goes first, and this run's at the end.
	if err := forgetUDPFlow(a, b); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = forgetUDPFlow(a, b) }()
	ca, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(a))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(b))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	// A "proxy" port that counts what reaches it.
	px, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	// b and the proxy answer each datagram with their name, as gossip
	// answers pings: the flow is established both ways.
	for c, name := range map[*net.UDPConn]string{cb: "b", px: "proxy"} {
		go func() {
			buf := make([]byte, 8)
			for {
				_, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				_, _ = c.WriteToUDPAddrPort([]byte(name), from)
			}
		}()
	}
	via := func() string {
		if _, err := ca.WriteToUDPAddrPort([]byte("x"), b); err != nil {
			t.Fatal(err)
		}
		_ = ca.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 8)
		n, _, err := ca.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err.Error()
		}
		return string(buf[:n])
	}
	// The flow runs, and the kernel tracks it.
	if got := via(); got != "b" {
		t.Fatalf("the flow does not run: %s", got)
	}
	if data, err := os.ReadFile("/proc/net/nf_conntrack"); err != nil || !strings.Contains(string(data), "src=127.251.0.1 dst=127.251.0.2 sport=7946 dport=7946") {
		t.Fatalf("the flow is not tracked (/proc/net/nf_conntrack): %v", err)
	}
	rule := []string{"-t", "nat", "OUTPUT", "-p", "udp", "-s", "127.251.0.1", "-d", "127.251.0.2", "--dport", "7946",
		"-j", "REDIRECT", "--to-ports", strconv.Itoa(px.LocalAddr().(*net.UDPAddr).Port)}
	if out, err := runIPTables(append([]string{"-t", "nat", "-I"}, rule[2:]...)...); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	defer func() { _, _ = runIPTables(append([]string{"-t", "nat", "-D"}, rule[2:]...)...) }()
	if got := via(); got != "b" {
		t.Fatalf("the running flow went to %s once the rule came: nothing to forget", got)
	}
	if err := forgetUDPFlow(a, b); err != nil {
		t.Fatal(err)
	}
	if got := via(); got != "proxy" {
		t.Errorf("the forgotten flow went to %s, not through the rule", got)
	}
	if err := forgetUDPFlow(netip.MustParseAddrPort("127.251.0.9:1"), b); err != nil {
		t.Errorf("forgetting a flow that is not there: %v", err)
	}
}
