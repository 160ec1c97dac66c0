// Package etcdops performs the hub's reads and changes on one etcd cluster
// through go.etcd.io/etcd/client/v3:
//
//   - the observation (Observe): the member list with each member's health,
//     sizes, version and raft index, the leader, the alarms, the cluster
//     version and the downgrade state, members out of sight asked in the
//     background (probes.go);
//   - membership: add as learner, promote, remove, leader transfer;
//   - maintenance (maintenance.go): defragment, compact, disarm NOSPACE;
//   - versions (versions.go): enable and cancel a downgrade;
//   - a snapshot stream from one member (snapshot.go);
//   - authentication (auth.go): users, roles, turning it on and off, and
//     ForRing, the hub's connection for its controllers beside the
//     EtcdCluster reconciler.
//
// Errors etcd uses to say "not yet" are mapped to sentinels the reconciler
// turns into a requeue.
package etcdops

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/internal/etcddial"
)

// Sentinel errors.
var (
	// ErrLearnerNotReady: the learner has not caught up; promote again later.
	ErrLearnerNotReady = errors.New("etcdops: learner not ready to be promoted")
	// ErrUnhealthyCluster: etcd's strict reconfiguration check refused the
	// change (too few started voters, or no quorum seen recently).
	ErrUnhealthyCluster = errors.New("etcdops: etcd refused the change: cluster not healthy enough")
	// ErrTooManyLearners: another learner exists.
	ErrTooManyLearners = errors.New("etcdops: etcd allows no more learners")
	// ErrAnswererStopped: the member that took the request stopped before
	// it answered. A member that applies its own removal does exactly this,
	// so after a Remove the change has most likely been made; the next
	// member list tells.
	ErrAnswererStopped = errors.New("etcdops: the member that took the request stopped (after a removal: most likely itself)")
	// ErrDowngradeRefused: etcd refused to validate or enable a downgrade.
	ErrDowngradeRefused = errors.New("etcdops: etcd refused the downgrade")
)

// Timeouts for the calls the hub makes while reconciling.
const (
	DialTimeout    = 2 * time.Second
	RequestTimeout = 5 * time.Second
	ListTimeout    = 2 * time.Second
	StatusTimeout  = 2 * time.Second
)

// Config says how to reach one etcd cluster.
type Config struct {
	// Endpoints are client URLs (DNS names).
	Endpoints []string
	// TLS is nil for plain HTTP.
	TLS *tls.Config
	// CheckAddr, when set, is asked about every address a connection is
	// about to be made to, after name resolution: an error refuses the
	// connection before a packet is sent (ErrDialRefused). The hub
	// refuses so the addresses no ring may make it dial (an endpoint a
	// spec names is any host its author chose).
	CheckAddr func(netip.Addr) error
}

// ErrDialRefused: CheckAddr refused the address a connection was to be
// made to.
var ErrDialRefused = errors.New("etcdops: address refused by the hub's dial policy")

// Client talks to one etcd cluster.
type Client struct {
	cfg Config
	c   *clientv3.Client
	// Probes, when set, remembers which members did not answer, so that an
	// observation asks them in the background instead of waiting for them
	// (see planProbe).
	Probes *ProbeMemory

	// members holds one connection per member client URL for status
	// requests (statusConn).
	mu      sync.Mutex
	members map[string]*grpc.ClientConn
	closed  bool
}

// New connects (lazily: the first call dials).
func New(cfg Config) (*Client, error) {
	cc := clientConfig(cfg.Endpoints, cfg.TLS)
	if cfg.CheckAddr != nil {
		cc.DialOptions = append(cc.DialOptions, grpc.WithContextDialer(checkedDialer(cfg.CheckAddr)))
	}
	c, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("create etcd client for %v: %w", cfg.Endpoints, err)
	}
	return &Client{cfg: cfg, c: c}, nil
}

func clientConfig(endpoints []string, tlsCfg *tls.Config) clientv3.Config {
	return clientv3.Config{
		Endpoints:            slices.Clone(endpoints),
		TLS:                  tlsCfg,
		DialTimeout:          DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		AutoSyncInterval:     0,
		Logger:               zap.NewNop(),
		DialOptions:          []grpc.DialOption{etcddial.Reconnect(DialTimeout)},
	}
}

// checkedDialer dials TCP, refusing an address check refuses once the
// name is resolved (net.Dialer.Control sees each address tried).
func checkedDialer(check func(netip.Addr) error) func(context.Context, string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrDialRefused, address, err)
		}
		if err := check(ap.Addr()); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrDialRefused, address, err)
		}
		return nil
	}}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
}

// Close closes the connections.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	members := c.members
	c.members = nil
	c.mu.Unlock()
	for _, conn := range members {
		_ = conn.Close()
	}
	return c.c.Close()
}

// ObserveOptions is what the caller already knows before asking etcd.
type ObserveOptions struct {
	// OutOfSight are the IDs of members the caller has its own evidence
	// against (the hub: their member cluster or zone is not seen). One
	// that answered its last status request is asked with
	// FailingStatusTimeout (a live member answers in milliseconds), not
	// StatusTimeout; one that did not, or was never asked, is asked in the
	// background only, at most every OutOfSightProbeEvery (planProbe). A
	// member that does not answer, or is not asked, counts unhealthy, the
	// cautious side of every quorum check.
	OutOfSight map[uint64]bool
}

// Observe reads the member list (linearizable: it needs a quorum) and asks
// every started member for its status, in parallel.
func (c *Client) Observe(ctx context.Context) planner.Etcd {
	return c.ObserveWith(ctx, ObserveOptions{})
}

// ObserveWith is Observe with what the caller knows (ObserveOptions).
func (c *Client) ObserveWith(ctx context.Context, opts ObserveOptions) planner.Etcd {
	began := time.Now()
	lctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := c.c.MemberList(lctx)
	listTook := time.Since(began)
	if err != nil {
		return planner.Etcd{Error: describe(err)}
	}
	out := planner.Etcd{Reachable: true, ClusterID: resp.Header.ClusterId}
	c.keepStatusConns(resp.Members)
	out.Members = make([]planner.ListEntry, len(resp.Members))
	var wg sync.WaitGroup
	leaders := make([]uint64, len(resp.Members))
	took := make([]string, len(resp.Members))
	downgrades := make([]planner.Downgrade, len(resp.Members))
	listed := make(map[uint64]bool, len(resp.Members))
	for i, m := range resp.Members {
		out.Members[i] = planner.ListEntry{ID: m.ID, Name: m.Name, PeerURLs: slices.Clone(m.PeerURLs), ClientURLs: slices.Clone(m.ClientURLs), IsLearner: m.IsLearner}
		listed[m.ID] = true
		if len(m.ClientURLs) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			plan := c.Probes.plan(m.ID, start, opts.OutOfSight[m.ID], m.IsLearner)
			if plan.background > 0 {
				// Asked in the background, never waited for; the first
				// observation after it answered asks the member itself.
				go func() {
					bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), plan.background)
					defer cancel()
					at := time.Now()
					st, answered := c.askStatus(bctx, m)
					c.Probes.record(m.ID, answered, answered && st.Leader == 0, at)
				}()
			}
			if plan.timeout == 0 {
				took[i] = fmt.Sprintf("%x not asked (did not answer, or a learner not asked yet)", m.ID)
				return // unhealthy
			}
			sctx, cancel := context.WithTimeout(ctx, plan.timeout)
			defer cancel()
			st, answered := c.askStatus(sctx, m)
			if answered {
				out.Members[i].Healthy = !statusErrors(st.Errors) && st.Leader != 0
				out.Members[i].DBSize, out.Members[i].DBSizeInUse, out.Members[i].DBSizeQuota = st.DbSize, st.DbSizeInUse, st.DbSizeQuota
				leaders[i] = st.Leader
				out.Members[i].Version, out.Members[i].RaftIndex, out.Members[i].StorageVersion = st.Version, st.RaftIndex, st.StorageVersion
				if di := st.DowngradeInfo; di != nil {
					downgrades[i] = planner.Downgrade{Enabled: di.Enabled, Target: di.TargetVersion}
				}
			}
			c.Probes.record(m.ID, answered, answered && st.Leader == 0, start)
			if answered && st.Leader == 0 {
				// Zero without memory: judged as before, from when it
				// went unready.
				out.Members[i].LeaderlessSince = c.Probes.leaderlessSince(m.ID)
			}
			took[i] = fmt.Sprintf("%x %s answered=%t timeout=%s", m.ID, time.Since(start).Round(time.Millisecond), answered, plan.timeout)
		}()
	}
	var alarmsTook time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		out.Alarms, out.AlarmsKnown = c.alarms(ctx)
		alarmsTook = time.Since(start)
	}()
	wg.Wait()
	c.Probes.forget(listed)
	out.LeaderID = majorityLeader(leaders)
	versionsAt := time.Now()
	c.observeVersions(ctx, &out, downgrades)
	// Where a slow observation's time went, for the hub's debug log.
	if total := time.Since(began); total > slowObservation {
		logr.FromContextOrDiscard(ctx).V(1).Info("Slow etcd observation", "total", total.Round(time.Millisecond),
			"memberList", listTook.Round(time.Millisecond), "status", took, "alarms", alarmsTook.Round(time.Millisecond),
			"version", time.Since(versionsAt).Round(time.Millisecond))
	}
	return out
}

// askStatus asks a member for its status at each of its client URLs in
// turn until one answers.
func (c *Client) askStatus(ctx context.Context, m *etcdserverpb.Member) (*clientv3.StatusResponse, bool) {
	for _, u := range m.ClientURLs {
		conn, release, err := c.statusConn(u)
		if err != nil {
			continue
		}
		st, err := clientv3.NewMaintenanceFromMaintenanceClient(clientv3.RetryMaintenanceClient(c.c, conn), c.c).Status(ctx, u)
		release(err != nil)
		if err == nil {
			return st, true
		}
	}
	return nil, false
}

// statusConn is the connection status requests to the member at u use.
// clientv3's Status dials a connection of its own for every request and
// closes it after: a name lookup, a TCP and a TLS handshake per member and
// pass, which at a fleet's scale was most of the hub's CPU (300 rings: two
// thirds of it in name lookups alone). A connection that served a request
// stays for the next one; one whose request failed is closed (release
// with true) and the next request dials afresh, as before: a member that
// comes back answers the first request after it, where a kept connection
// would wait out gRPC's reconnect delay (etcddial.MaxReconnectDelay).
// A closed Client (its background probes may outlive it) dials a
// connection for the one request.
func (c *Client) statusConn(u string) (*grpc.ClientConn, func(failed bool), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.members[u]; ok {
		return conn, func(failed bool) { c.dropStatusConn(u, conn, failed) }, nil
	}
	conn, err := c.c.Dial(u)
	if err != nil {
		return nil, nil, err
	}
	if c.closed {
		return conn, func(bool) { _ = conn.Close() }, nil
	}
	if c.members == nil {
		c.members = map[string]*grpc.ClientConn{}
	}
	c.members[u] = conn
	return conn, func(failed bool) { c.dropStatusConn(u, conn, failed) }, nil
}

// dropStatusConn closes conn, u's status connection, when its request
// failed.
func (c *Client) dropStatusConn(u string, conn *grpc.ClientConn, failed bool) {
	if !failed {
		return
	}
	c.mu.Lock()
	if c.members[u] == conn {
		delete(c.members, u)
	}
	c.mu.Unlock()
	_ = conn.Close()
}

// keepStatusConns closes the status connections to URLs no listed member
// has (a member removed, or moved to a new address).
func (c *Client) keepStatusConns(members []*etcdserverpb.Member) {
	listed := map[string]bool{}
	for _, m := range members {
		for _, u := range m.ClientURLs {
			listed[u] = true
		}
	}
	c.mu.Lock()
	var gone []*grpc.ClientConn
	for u, conn := range c.members {
		if !listed[u] {
			gone = append(gone, conn)
			delete(c.members, u)
		}
	}
	c.mu.Unlock()
	for _, conn := range gone {
		_ = conn.Close()
	}
}

// slowObservation: an observation longer than this logs where its time
// went (V(1)).
const slowObservation = 200 * time.Millisecond

// majorityLeader is the leader most members name (0 when none).
func majorityLeader(seen []uint64) uint64 {
	count := map[uint64]int{}
	var best uint64
	for _, l := range seen {
		if l == 0 {
			continue
		}
		count[l]++
		if count[l] > count[best] || (count[l] == count[best] && l < best) {
			best = l
		}
	}
	return best
}

// AddLearner adds peerURL as a learner and returns its new ID.
func (c *Client) AddLearner(ctx context.Context, peerURL string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	resp, err := c.c.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return 0, fmt.Errorf("add learner %s: %w", peerURL, classify(err))
	}
	return resp.Member.ID, nil
}

// Promote makes a learner a voter, asking the leader (reached at
// leaderURLs) itself. ErrLearnerNotReady means try later. A follower
// forwards a promotion to the leader over the peer port without the
// caller's identity, and with etcd authentication on the leader refuses
// it ("auth: user name is empty"): every promotion sent to a follower
// failed.
func (c *Client) Promote(ctx context.Context, leaderURLs []string, id uint64) error {
	lc, err := clientv3.New(clientConfig(leaderURLs, c.cfg.TLS))
	if err != nil {
		return fmt.Errorf("connect to leader %v: %w", leaderURLs, err)
	}
	defer func() { _ = lc.Close() }()
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	if _, err := lc.MemberPromote(ctx, id); err != nil {
		return fmt.Errorf("promote %x: %w", id, classify(err))
	}
	return nil
}

// Remove removes a member; a member already gone is success.
func (c *Client) Remove(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	if _, err := c.c.MemberRemove(ctx, id); err != nil {
		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil
		}
		return fmt.Errorf("remove %x: %w", id, classify(err))
	}
	return nil
}

// MoveLeader asks the leader (reached at leaderURLs) to hand leadership to
// transferee. MoveLeader must be sent to the leader itself.
func (c *Client) MoveLeader(ctx context.Context, leaderURLs []string, transferee uint64) error {
	lc, err := clientv3.New(clientConfig(leaderURLs, c.cfg.TLS))
	if err != nil {
		return fmt.Errorf("connect to leader %v: %w", leaderURLs, err)
	}
	defer func() { _ = lc.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 2*RequestTimeout)
	defer cancel()
	if _, err := lc.MoveLeader(ctx, transferee); err != nil {
		return fmt.Errorf("move leader to %x: %w", transferee, classify(err))
	}
	return nil
}

func classify(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrMemberLearnerNotReady), errors.Is(err, rpctypes.ErrGRPCLearnerNotReady):
		return fmt.Errorf("%w: %w", ErrLearnerNotReady, err)
	case errors.Is(err, rpctypes.ErrUnhealthy), errors.Is(err, rpctypes.ErrGRPCUnhealthy):
		return fmt.Errorf("%w: %w", ErrUnhealthyCluster, err)
	case errors.Is(err, rpctypes.ErrTooManyLearners), errors.Is(err, rpctypes.ErrGRPCTooManyLearners):
		return fmt.Errorf("%w: %w", ErrTooManyLearners, err)
	case errors.Is(err, rpctypes.ErrStopped), errors.Is(err, rpctypes.ErrGRPCStopped):
		return fmt.Errorf("%w: %w", ErrAnswererStopped, err)
	}
	return err
}

func describe(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within " + ListTimeout.String()
	}
	return err.Error()
}
