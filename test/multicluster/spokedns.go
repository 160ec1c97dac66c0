package multicluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// DNSLoad asks a member cluster's DNS servers for names without pause, the
// way a resolver configured with all of them does (CoreDNS forward, glibc,
// Go): a query goes to one server (in turn), and to the next only when
// that one gives no answer at all (timeout, port closed). An answer that
// is not NOERROR with records is a failed answer (a resolver passes
// REFUSED, SERVFAIL and NXDOMAIN on), and so is a query no server
// answered.
type DNSLoad struct {
	servers []string
	names   []string
	timeout time.Duration

	total, failed atomic.Int64
	mu            sync.Mutex
	samples       []string
	stop          chan struct{}
	wg            sync.WaitGroup
}

// StartDNSLoad starts workers goroutines querying names (A records) at
// servers.
func StartDNSLoad(servers, names []string, workers int) *DNSLoad {
	l := &DNSLoad{servers: servers, names: names, timeout: 500 * time.Millisecond, stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go l.run(w)
	}
	return l
}

func (l *DNSLoad) run(w int) {
	defer l.wg.Done()
	c := &dns.Client{Timeout: l.timeout}
	for i := w; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		name := dns.Fqdn(l.names[i%len(l.names)])
		l.total.Add(1)
		if err := l.query(c, name, i); err != nil {
			l.failed.Add(1)
			l.mu.Lock()
			if len(l.samples) < 10 {
				l.samples = append(l.samples, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), name, err))
			}
			l.mu.Unlock()
		}
	}
}

// query asks the servers in turn from the i-th, moving on only when a
// server does not answer.
func (l *DNSLoad) query(c *dns.Client, name string, i int) error {
	var errs []string
	for k := range l.servers {
		server := l.servers[(i+k)%len(l.servers)]
		r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), server)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", server, err))
			continue
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return fmt.Errorf("%s answered %s with %d records", server, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		return nil
	}
	return fmt.Errorf("no server answered: %v", errs)
}

// Stop stops the load and returns the queries made, those that failed,
// and the first failures.
func (l *DNSLoad) Stop() (total, failed int64, samples []string) {
	close(l.stop)
	l.wg.Wait()
	return l.total.Load(), l.failed.Load(), l.samples
}

// SpokeRestartDNSSpecInput configures SpokeRestartDNSSpec.
type SpokeRestartDNSSpecInput struct {
	T        *testing.T
	Topology *Topology
	Etcd     *ManagedEtcd
	// Servers are the member cluster's DNS servers as its resolvers use
	// them (every replica's address, or its Service's).
	Servers []string
	// Rollout replaces every replica of the spoke, one at a time, each
	// ready before the next goes (a Deployment's RollingUpdate); Kill
	// kills the leading replica (a crash) and returns once it is back and
	// ready.
	Rollout, Kill func(ctx context.Context) error
}

// SpokeRestartDNSSpec puts a DNS query load for the ring's member names on
// one member cluster's DNS servers, rolls its spoke and kills it, under
// the recorded workload, and requires 0 failed answers.
func SpokeRestartDNSSpec(ctx context.Context, in SpokeRestartDNSSpecInput) {
	t := in.T
	ec, err := in.Etcd.Get(ctx, in.Topology.Hub)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ec.Status.Members {
		names = append(names, m.Name+"."+in.Etcd.Domain)
	}
	if len(names) == 0 {
		t.Fatal("the ring reports no members")
	}
	// Every name answers before the load starts.
	probe := StartDNSLoad(in.Servers, names, 1)
	sleepCtx(ctx, 2*time.Second)
	if total, failed, samples := probe.Stop(); failed > 0 || total == 0 {
		t.Fatalf("before any restart: %d of %d queries failed: %v", failed, total, samples)
	}

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "spokedns/", WatchEachEndpoint: true})
	load := StartDNSLoad(in.Servers, names, 4)
	start := time.Now()
	step := func(what string, f func(context.Context) error) {
		t0 := time.Now()
		if err := f(ctx); err != nil {
			load.Stop()
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s in %.1fs (%d queries so far, %d failed)", what, time.Since(t0).Seconds(), load.total.Load(), load.failed.Load())
	}
	step("spoke rolled", in.Rollout)
	step("leading spoke killed and back", in.Kill)
	total, failed, samples := load.Stop()
	t.Logf("DNS load on %v for %.0fs: %d queries, %d failed", in.Servers, time.Since(start).Seconds(), total, failed)
	if failed > 0 {
		t.Errorf("%d of %d DNS queries failed during the spoke's rollout and kill; first: %v", failed, total, samples)
	}
	if total < 100 {
		t.Errorf("only %d DNS queries made: the load did not run", total)
	}
	checkWorkload(ctx, t, w)
}
