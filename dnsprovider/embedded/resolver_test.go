package embedded

import (
	"context"
	"errors"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// goResolver points Go's own resolver at the server.
func goResolver(s *Server) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, s.Addr().String())
		},
	}
}

func TestGoResolver(t *testing.T) {
	s := startServer(t, Config{}, mustBuild(t, testSpec()), bigZone(t))
	r := goResolver(s)
	ctx := context.Background()

	t.Run("A", func(t *testing.T) {
		got, err := r.LookupHost(ctx, "main-0.main.etcd.test")
		if err != nil || !slices.Equal(got, []string{"10.0.0.10"}) {
			t.Errorf("LookupHost = %v, %v", got, err)
		}
	})
	t.Run("A and AAAA", func(t *testing.T) {
		got, err := r.LookupHost(ctx, "MAIN-1.Main.Etcd.Test.")
		sort.Strings(got)
		if err != nil || !slices.Equal(got, []string{"10.0.1.10", "fd00::1:10"}) {
			t.Errorf("LookupHost = %v, %v", got, err)
		}
	})
	t.Run("CNAME", func(t *testing.T) {
		got, err := r.LookupCNAME(ctx, "main-2.main.etcd.test")
		if err != nil || got != "lb-2.example.net." {
			t.Errorf("LookupCNAME = %q, %v", got, err)
		}
		// In-zone CNAME target: chased in the same answer.
		addrs, err := r.LookupHost(ctx, "main-3.main.etcd.test")
		if err != nil || !slices.Equal(addrs, []string{"10.0.0.10"}) {
			t.Errorf("LookupHost(main-3) = %v, %v", addrs, err)
		}
	})
	t.Run("SRV", func(t *testing.T) {
		cname, srvs, err := r.LookupSRV(ctx, "etcd-server-ssl", "tcp", "main.etcd.test")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range srvs {
			got = append(got, s.Target+":"+itoa(int(s.Port)))
		}
		sort.Strings(got)
		want := []string{"main-0.main.etcd.test.:2380", "main-1.main.etcd.test.:2380", "main-2.main.etcd.test.:2380", "main-3.main.etcd.test.:2380"}
		if cname != "_etcd-server-ssl._tcp.main.etcd.test." || !slices.Equal(got, want) {
			t.Errorf("LookupSRV = %q %v", cname, got)
		}
	})
	t.Run("NS", func(t *testing.T) {
		ns, err := r.LookupNS(ctx, "main.etcd.test")
		if err != nil || len(ns) != 1 || ns[0].Host != "ns1.main.etcd.test." {
			t.Errorf("LookupNS = %v, %v", ns, err)
		}
	})
	t.Run("TXT ownership", func(t *testing.T) {
		txt, err := r.LookupTXT(ctx, "_etcdfed-owner.main.etcd.test")
		if err != nil || len(txt) != 1 || !strings.Contains(txt[0], "owner="+testOwner) {
			t.Errorf("LookupTXT = %q, %v", txt, err)
		}
	})
	t.Run("NXDOMAIN", func(t *testing.T) {
		_, err := r.LookupHost(ctx, "main-9.main.etcd.test")
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("LookupHost(main-9) error = %v, want not found", err)
		}
	})
	t.Run("NODATA", func(t *testing.T) {
		_, err := r.LookupTXT(ctx, "main-0.main.etcd.test")
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("LookupTXT(main-0) error = %v, want not found", err)
		}
	})
	t.Run("REFUSED", func(t *testing.T) {
		_, err := r.LookupHost(ctx, "example.com")
		var de *net.DNSError
		if !errors.As(err, &de) || de.IsNotFound {
			t.Errorf("LookupHost(example.com) error = %v, want a server failure, not an answer", err)
		}
	})
	t.Run("TCP fallback", func(t *testing.T) {
		before := s.Stats().Responses["tcp"]["NOERROR"]
		got, err := r.LookupIPAddr(ctx, "many.big.test")
		if err != nil || len(got) != 100 {
			t.Fatalf("LookupIPAddr(many) = %d addresses, %v", len(got), err)
		}
		if s.Stats().Responses["tcp"]["NOERROR"] == before {
			t.Error("100 AAAA records came back without a TCP query")
		}
	})
}

func itoa(i int) string { return strconv.Itoa(i) }
