package workload

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// "No failed client request beyond one election" made checkable: a
// RingWatch looks at every member through its own endpoint every few
// tens of milliseconds and records the moments a client may fail (a
// member stops or starts answering, a member sees another leader or
// none); Unexplained names the failed requests that overlap none of them
// widened by the ring's election timeout.

// Kinds of Disruption.
const (
	DisruptionStopped       = "stopped answering"
	DisruptionAnswers       = "answers again"
	DisruptionLeaderChanged = "leader changed"
)

// Disruption is a moment the ring's clients may see failures, as one
// member's endpoint showed it. From and To bracket it: the start of the
// last look before it and the end of the first look that saw it.
type Disruption struct {
	Kind     string
	Endpoint string
	From, To time.Time
	// Detail says what changed (the leader's ID before and after, the
	// error of the look that failed).
	Detail string
}

func (d Disruption) String() string {
	return fmt.Sprintf("%s %s between %s and %s (%s)", d.Endpoint, d.Kind, d.From.Format("15:04:05.000"), d.To.Format("15:04:05.000"), d.Detail)
}

// Unexplained returns the failures whose time (from call to return)
// overlaps no disruption widened by within on both sides.
func Unexplained(failures []Failure, ds []Disruption, within time.Duration) []Failure {
	var out []Failure
	for _, f := range failures {
		if !slices.ContainsFunc(ds, func(d Disruption) bool {
			return !f.Return.Before(d.From.Add(-within)) && !f.Call.After(d.To.Add(within))
		}) {
			out = append(out, f)
		}
	}
	return out
}

// Nearest is the disruption closest in time to f, for messages; false
// when there is none.
func Nearest(f Failure, ds []Disruption) (Disruption, time.Duration, bool) {
	var best Disruption
	bestD := time.Duration(-1)
	for _, d := range ds {
		var gap time.Duration
		switch {
		case f.Return.Before(d.From):
			gap = d.From.Sub(f.Return)
		case f.Call.After(d.To):
			gap = f.Call.Sub(d.To)
		}
		if bestD < 0 || gap < bestD {
			best, bestD = d, gap
		}
	}
	return best, bestD, bestD >= 0
}

// RingWatch looks at each member of a ring through its own endpoint
// until stopped.
type RingWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	ds     []Disruption
	looks  int
}

// WatchRing starts a look at every endpoint of cfg every interval: a TCP
// connection (a stopped member refuses it at once), then
// Maintenance.Status for the leader the member sees, both within timeout,
// each look on connections of its own, so a member that is back is seen
// at the next look, not after a reconnection back-off.
func WatchRing(ctx context.Context, cfg ClientConfig, every, timeout time.Duration) *RingWatch {
	ctx, cancel := context.WithCancel(ctx)
	r := &RingWatch{cancel: cancel}
	for _, ep := range cfg.Endpoints {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.watch(ctx, cfg.Endpoint(ep), ep, every, timeout)
		}()
	}
	return r
}

func (r *RingWatch) watch(ctx context.Context, cfg ClientConfig, ep string, every, timeout time.Duration) {
	look, err := newLooker(cfg, ep, "", timeout)
	if err != nil {
		r.mu.Lock()
		r.ds = append(r.ds, Disruption{Kind: DisruptionStopped, Endpoint: ep, From: time.Now(), To: time.Now(), Detail: "cannot look: " + err.Error()})
		r.mu.Unlock()
		return
	}
	var (
		looked         bool
		prevOK         bool
		prevLeader     uint64
		prevStart      time.Time
		prevLeaderSeen bool
	)
	for ctx.Err() == nil {
		start := time.Now()
		st, err := look(ctx)
		end := time.Now()
		var leader uint64
		if err == nil {
			leader = st.Leader
		}
		if ctx.Err() != nil {
			return
		}
		ok := err == nil
		r.mu.Lock()
		r.looks++
		switch {
		case !looked:
		case prevOK && !ok:
			r.ds = append(r.ds, Disruption{Kind: DisruptionStopped, Endpoint: ep, From: prevStart, To: end, Detail: err.Error()})
		case !prevOK && ok:
			r.ds = append(r.ds, Disruption{Kind: DisruptionAnswers, Endpoint: ep, From: prevStart, To: end, Detail: fmt.Sprintf("leader %x", leader)})
		}
		if ok && prevLeaderSeen && prevOK && leader != prevLeader {
			r.ds = append(r.ds, Disruption{Kind: DisruptionLeaderChanged, Endpoint: ep, From: prevStart, To: end, Detail: fmt.Sprintf("leader %x -> %x", prevLeader, leader)})
		}
		r.mu.Unlock()
		looked, prevOK, prevStart = true, ok, start
		if ok {
			prevLeader, prevLeaderSeen = leader, true
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(every))):
		}
	}
}

// newLooker returns one look at ep: a TCP connection (a stopped member
// refuses it at once), then Maintenance.Status over a connection of its
// own, failing fast: etcd's client retries a refused connection until
// its deadline, so a member that stops during a look would be seen only
// at the look's timeout. serverName is the name TLS expects in the
// member's certificate; "" means ep's host (a DNS name).
func newLooker(cfg ClientConfig, ep, serverName string, timeout time.Duration) (func(context.Context) (*pb.StatusResponse, error), error) {
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: not a URL", ep)
	}
	res := Resolver(cfg.DNSServers)
	dialer := net.Dialer{Resolver: res, Timeout: timeout}
	creds := insecure.NewCredentials()
	if u.Scheme == "https" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.TLS != nil {
			tc = cfg.TLS.Clone()
		}
		tc.ServerName = u.Hostname()
		if serverName != "" {
			tc.ServerName = serverName
		}
		creds = credentials.NewTLS(tc)
	}
	return func(ctx context.Context) (*pb.StatusResponse, error) {
		lctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		conn, err := dialer.DialContext(lctx, "tcp", u.Host)
		if err != nil {
			return nil, err
		}
		_ = conn.Close()
		cc, err := grpc.NewClient("passthrough:///"+u.Host, grpc.WithTransportCredentials(creds),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) }))
		if err != nil {
			return nil, err
		}
		defer func() { _ = cc.Close() }()
		return pb.NewMaintenanceClient(cc).Status(lctx, &pb.StatusRequest{})
	}, nil
}

// Stop stops the looks and returns the disruptions seen, in order of
// their start, and how many looks were taken.
func (r *RingWatch) Stop() ([]Disruption, int) {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	ds := slices.Clone(r.ds)
	slices.SortFunc(ds, func(a, b Disruption) int { return a.From.Compare(b.From) })
	return ds, r.looks
}
