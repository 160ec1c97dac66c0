// Command etcdfed-dns runs etcdfed's embedded authoritative DNS server on
// its own, serving zones read from RFC 1035 zone files or from JSON files
// holding a list of dnsprovider.Record. SIGHUP re-reads the files.
//
//	etcdfed-dns -listen 127.0.0.1:5353 -zone main.etcd.example.com.=db.main \
//	    -transfer-allow 127.0.0.0/8 -tsig-key etcdfed.:hmac-sha256:BASE64
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/dnsprovider/embedded"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdfed-dns:", err)
		os.Exit(1)
	}
}

func run() error {
	var zones, allow, keys listFlag
	listen := flag.String("listen", "127.0.0.1:5353", "UDP and TCP address to serve on")
	flag.Var(&zones, "zone", "ORIGIN=FILE: serve a zone from a zone file, or from a JSON list of records if FILE ends in .json (repeatable)")
	flag.Var(&allow, "transfer-allow", "CIDR allowed to transfer zones without TSIG (repeatable)")
	flag.Var(&keys, "tsig-key", "NAME:ALGORITHM:BASE64SECRET accepted for transfers and updates (repeatable)")
	allowUpdate := flag.Bool("allow-update", false, "accept RFC 2136 updates signed with a -tsig-key")
	sockets := flag.Int("udp-sockets", 0, "UDP sockets (0: GOMAXPROCS)")
	metricsAddr := flag.String("metrics-addr", "", "serve Prometheus metrics on this address (empty: off)")
	rrlRate := flag.Int("rate-limit", 0, "response-rate limit: UDP responses per second per client /24 (IPv6 /56); 0: off")
	rrlSlip := flag.Int("rate-limit-slip", 2, "every Nth response over the limit is sent truncated; -1 drops all")
	var rrlExempt listFlag
	flag.Var(&rrlExempt, "rate-limit-exempt", "CIDR never rate limited (repeatable)")
	verbose := flag.Bool("v", false, "log zone changes")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file until exit")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if len(zones) == 0 {
		return errors.New("give at least one -zone ORIGIN=FILE")
	}

	cfg := embedded.Config{Addr: *listen, AllowUpdate: *allowUpdate, UDPSockets: *sockets, Log: stderrLogger(*verbose),
		RRL: embedded.RRLConfig{ResponsesPerSecond: *rrlRate, Slip: *rrlSlip}}
	if err := addLists(&cfg, rrlExempt, allow, keys); err != nil {
		return err
	}
	srv, err := embedded.New(cfg)
	if err != nil {
		return err
	}
	load := func() error { return loadZones(srv, zones) }
	if err := load(); err != nil {
		return err
	}
	if *metricsAddr != "" {
		go serveMetrics(*metricsAddr, srv)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := srv.Start(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "etcdfed-dns: serving %s on %s\n", strings.Join(srv.Zones(), " "), srv.Addr())
	for {
		select {
		case <-ctx.Done():
			return srv.Stop()
		case <-hup:
			if err := load(); err != nil {
				fmt.Fprintln(os.Stderr, "etcdfed-dns: reload:", err)
			} else {
				fmt.Fprintln(os.Stderr, "etcdfed-dns: reloaded")
			}
		}
	}
}

// addLists adds the repeatable flags to cfg: the networks never rate
// limited, those allowed to transfer zones without TSIG, and the TSIG
// keys.
func addLists(cfg *embedded.Config, rrlExempt, allow, keys listFlag) error {
	for _, a := range rrlExempt {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return fmt.Errorf("-rate-limit-exempt %q: %w", a, err)
		}
		cfg.RRL.Exempt = append(cfg.RRL.Exempt, p)
	}
	for _, a := range allow {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return fmt.Errorf("-transfer-allow %q: %w", a, err)
		}
		cfg.TransferAllow = append(cfg.TransferAllow, p)
	}
	for _, k := range keys {
		parts := strings.SplitN(k, ":", 3)
		if len(parts) != 3 {
			return fmt.Errorf("-tsig-key %q: want NAME:ALGORITHM:SECRET", k)
		}
		cfg.TSIGKeys = append(cfg.TSIGKeys, embedded.TSIGKey{Name: parts[0], Algorithm: parts[1], Secret: parts[2]})
	}
	return nil
}

// loadZones reads every -zone ORIGIN=FILE and serves them all, in place of
// what srv served.
func loadZones(srv *embedded.Server, zones listFlag) error {
	var sets []*dnsprovider.RecordSet
	for _, z := range zones {
		origin, file, ok := strings.Cut(z, "=")
		if !ok {
			return fmt.Errorf("-zone %q: want ORIGIN=FILE", z)
		}
		set, err := readZone(origin, file)
		if err != nil {
			return err
		}
		sets = append(sets, set)
	}
	return srv.SetZones(sets)
}

// serveMetrics serves srv's metrics for Prometheus on addr, until it
// fails.
func serveMetrics(addr string, srv *embedded.Server) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(srv.Collector())
	err := http.ListenAndServe(addr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	fmt.Fprintln(os.Stderr, "etcdfed-dns: metrics:", err)
}

func readZone(origin, file string) (*dnsprovider.RecordSet, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(file, ".json") {
		var recs []dnsprovider.Record
		if err := json.Unmarshal(b, &recs); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return dnsprovider.ParseRecords(origin, recs)
	}
	set, err := dnsprovider.FromZoneFile(origin, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return set, nil
}

func stderrLogger(verbose bool) logr.Logger {
	v := 0
	if verbose {
		v = 1
	}
	return logr.New(&sink{v: v})
}

type sink struct {
	v    int
	name string
	kv   []any
}

func (s *sink) Init(logr.RuntimeInfo)          {}
func (s *sink) Enabled(level int) bool         { return level <= s.v }
func (s *sink) WithName(n string) logr.LogSink { return &sink{v: s.v, name: n, kv: s.kv} }
func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{v: s.v, name: s.name, kv: append(append([]any{}, s.kv...), kv...)}
}
func (s *sink) Info(_ int, msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"etcdfed-dns:", msg}, append(s.kv, kv...)...)...)
}
func (s *sink) Error(err error, msg string, kv ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"etcdfed-dns:", msg, "error", err}, append(s.kv, kv...)...)...)
}
