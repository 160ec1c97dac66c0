// Command dnsbench-zone writes the zone file and the dnsperf query file of
// hack/bench-dns.sh: the record set dnsprovider.Build computes for an etcd
// cluster, and a query mix over it (member addresses, SRV, SOA, NS, a
// CNAME, NODATA and NXDOMAIN).
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/etcdfed/etcdfed/dnsprovider"
)

func main() {
	domain := flag.String("domain", "main.etcd.bench.", "zone origin")
	members := flag.Int("members", 9, "etcd members")
	zoneFile := flag.String("zone", "db.bench", "zone file to write")
	queryFile := flag.String("queries", "queries.txt", "dnsperf query file to write")
	freePorts := flag.Int("free-ports", 0, "print this many loopback ports free for TCP and UDP, then exit")
	flag.Parse()
	if *freePorts > 0 {
		for range *freePorts {
			p, err := freePort()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Println(p)
		}
		return
	}

	spec := dnsprovider.Spec{
		Domain: *domain, TTL: 30, Owner: "bench", TLS: true,
		NameServers: []dnsprovider.NameServer{{Name: "ns1." + *domain, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}},
	}
	for i := range *members {
		m := dnsprovider.Member{Name: fmt.Sprintf("main-%d", i)}
		switch {
		case i == *members-1 && i > 0:
			m.Hostname = "lb.example.net"
		case i%2 == 0:
			m.Addresses = []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i), 10}), netip.MustParseAddr(fmt.Sprintf("fd00::%x:10", i))}
		default:
			m.Addresses = []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i), 10})}
		}
		spec.Members = append(spec.Members, m)
	}
	set, err := dnsprovider.Build(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var q strings.Builder
	for i := range *members {
		fmt.Fprintf(&q, "main-%d.%s A\n", i, *domain)
		fmt.Fprintf(&q, "main-%d.%s AAAA\n", i, *domain)
	}
	fmt.Fprintf(&q, "_etcd-server-ssl._tcp.%s SRV\n", *domain)
	fmt.Fprintf(&q, "_etcd-client-ssl._tcp.%s SRV\n", *domain)
	fmt.Fprintf(&q, "%s SOA\n%s NS\n", *domain, *domain)
	fmt.Fprintf(&q, "missing-1.%s A\nmissing-2.%s AAAA\n", *domain, *domain)
	if err := os.WriteFile(*zoneFile, []byte(set.ZoneFile()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*queryFile, []byte(q.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// freePort returns a loopback port that was free for TCP and UDP. The
// listeners stay open until exit, so two calls give two ports.
func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			l.Close()
			continue
		}
		held = append(held, l, u)
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port")
}

var held []io.Closer
