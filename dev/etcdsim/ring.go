package etcdsim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults, as the pinned bin/etcd (3.6) reports them.
const (
	// DefaultVersion is the server version members report.
	DefaultVersion = "3.6.16"
	// DefaultClusterVersion is the cluster version (/version etcdcluster).
	DefaultClusterVersion = "3.6.0"
	// DefaultStorageVersion is the storage version in status answers.
	DefaultStorageVersion = "3.6.0"
	// DefaultQuotaBytes is etcd's default backend quota (2 GiB).
	DefaultQuotaBytes = 2 * 1024 * 1024 * 1024
	// DefaultHealthInterval is etcd's HealthInterval: a peer counts as
	// active for the strict reconfiguration checks only once it has been
	// connected this long.
	DefaultHealthInterval = 5 * time.Second
	// DefaultRequestTimeout is how long a call that needs a quorum waits
	// for one before "etcdserver: request timed out": etcd's 5 s plus two
	// election timeouts of 1 s.
	DefaultRequestTimeout = 7 * time.Second
	// emptyDBSize is a new etcd's database file.
	emptyDBSize = 20480
)

// MemberSpec describes one initial member.
type MemberSpec struct {
	// Name (default <ring name>-<i>).
	Name string
	// PeerURL (default http://<name>.etcdsim.invalid:2380); nothing
	// listens there.
	PeerURL string
	// ListenAddr is the client listener's address (default 127.0.0.1:0).
	ListenAddr string
	// ClientURL is the advertised client URL (default
	// http(s)://<listener address>).
	ClientURL string
	// TLS overrides RingOptions.TLS for this member.
	TLS *tls.Config
	// Stopped: a founding member whose process has not started yet (etcd
	// lists it, without a name or client URLs, until it starts and
	// publishes them); StartMember starts it. The ring has no leader
	// until a quorum of its founding members runs, as a new etcd
	// cluster waits for its peers.
	Stopped bool
}

// RingOptions shape a simulated ring.
type RingOptions struct {
	// Name prefixes member names (default "sim").
	Name string
	// Size is the number of initial voters when Members is empty
	// (default 3).
	Size int
	// Members are the initial voters, all started, the first the leader.
	Members []MemberSpec
	// TLS is every member's server configuration (nil: plain HTTP).
	TLS *tls.Config
	// Seed makes IDs deterministic (0: random).
	Seed uint64
	// MaxLearners is etcd's --max-learners (default 1).
	MaxLearners int
	// CatchUp is how long a started learner takes to be in sync with the
	// leader (0: at once). Negative: only CatchUp(id) brings it in sync.
	CatchUp time.Duration
	// RequestTimeout bounds a call waiting for a quorum
	// (DefaultRequestTimeout when 0).
	RequestTimeout time.Duration
	// HealthInterval is how long a peer must have been connected to count
	// as active in MemberAdd's and MemberRemove's checks
	// (DefaultHealthInterval when 0; negative: at once). A ring just
	// created or a member just started refuses changes that long, as
	// etcd does.
	HealthInterval time.Duration
	// Version, ClusterVersion, StorageVersion reported (defaults above).
	Version, ClusterVersion, StorageVersion string
}

// MemberInfo is a member as the simulation sees it.
type MemberInfo struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	// ListenAddr is where its listener is (empty while stopped).
	ListenAddr string
	IsLearner  bool
	// Running: its "process" runs (the listener accepts).
	Running bool
	// Paused: it runs and answers nothing (as a frozen process).
	Paused bool
	// Group is its network partition (0 unless Partition put it apart).
	Group int
}

// StartOptions start an added member's "process".
type StartOptions struct {
	// Name is published in the member list (required the first time).
	Name string
	// ListenAddr (default 127.0.0.1:0).
	ListenAddr string
	// ClientURL advertised (default http(s)://<listener address>).
	ClientURL string
	// TLS overrides RingOptions.TLS.
	TLS *tls.Config
}

// Ring simulates one etcd cluster. All state is behind one mutex.
type Ring struct {
	srv  *Server
	opts RingOptions

	mu        sync.Mutex
	rnd       *rand.Rand
	clusterID uint64
	members   []*member // in the order added
	removed   map[uint64]bool
	leader    uint64
	term      uint64
	index     uint64
	alarms    []*pb.AlarmMember
	downgrade *pb.DowngradeInfo
	kv        *store
	auth      *authStore
	// changed is closed and replaced at every change, for calls waiting
	// for a quorum.
	changed chan struct{}
	closed  bool
}

type member struct {
	id   uint64
	name string // published name: "" until it first started
	// pendingName and pendingClientURLs wait to be published (the member
	// runs and has not reached the leader yet).
	pendingName       string
	pendingClientURLs []string
	peerURLs          []string
	clientURLs        []string // published with the name
	learner           bool
	caughtUp          bool
	startedAt         time.Time
	// activeSince: when it last came up or changed partition.
	activeSince time.Time
	running     bool
	paused      bool
	group       int
	applied     uint64
	// storageVersion it reports: a member that joined has none until
	// storageVersionLocked finds it set.
	storageVersion string
	// startIndex is the committed index when it last started.
	startIndex uint64
	dbSize     int64
	dbInUse    int64

	tls        *tls.Config
	grpcS      *grpc.Server
	grpcL      *chanListener
	listenAddr string
	ln         net.Listener
	conns      map[net.Conn]struct{}
	connMu     sync.Mutex
}

// NewRing starts a ring of started voters, each on its own listener; the
// first is the leader.
func (s *Server) NewRing(o RingOptions) (*Ring, error) {
	if o.Name == "" {
		o.Name = "sim"
	}
	if len(o.Members) == 0 {
		if o.Size == 0 {
			o.Size = 3
		}
		for i := range o.Size {
			o.Members = append(o.Members, MemberSpec{Name: fmt.Sprintf("%s-%d", o.Name, i)})
		}
	}
	if o.MaxLearners == 0 {
		o.MaxLearners = 1
	}
	if o.HealthInterval == 0 {
		o.HealthInterval = DefaultHealthInterval
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.ClusterVersion == "" {
		o.ClusterVersion = DefaultClusterVersion
	}
	if o.StorageVersion == "" {
		o.StorageVersion = DefaultStorageVersion
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	r := &Ring{srv: s, opts: o, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		removed: map[uint64]bool{}, kv: newStore(), auth: newAuthStore(), changed: make(chan struct{}),
		downgrade: &pb.DowngradeInfo{}}
	r.clusterID = r.newID()
	// Every listener first, then the ring's state under its lock, then
	// the accept loops: a client that dials a fixed address early finds
	// a whole ring or nothing.
	var opened []*listening
	for i, spec := range o.Members {
		if spec.Name == "" {
			spec.Name = fmt.Sprintf("%s-%d", o.Name, i)
		}
		if spec.PeerURL == "" {
			spec.PeerURL = "http://" + spec.Name + ".etcdsim.invalid:2380"
		}
		m := &member{id: r.newID(), peerURLs: []string{spec.PeerURL}, dbSize: emptyDBSize, dbInUse: emptyDBSize / 2,
			storageVersion: o.StorageVersion, caughtUp: true}
		if spec.Stopped {
			r.members = append(r.members, m)
			opened = append(opened, nil)
			continue
		}
		l, err := r.listen(m, StartOptions{Name: spec.Name, ListenAddr: spec.ListenAddr, ClientURL: spec.ClientURL, TLS: spec.TLS})
		if err != nil {
			for _, l := range opened {
				if l != nil {
					_ = l.ln.Close()
				}
			}
			return nil, err
		}
		r.members = append(r.members, m)
		opened = append(opened, l)
	}
	r.mu.Lock()
	// A new cluster: bootstrap entries, one per member, then the first
	// election and every member publishing its name.
	r.index = uint64(len(r.members))
	r.term = 1
	for i, m := range r.members {
		if opened[i] != nil {
			r.attachLocked(m, opened[i])
		}
	}
	r.electLocked()
	r.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		r.Close()
		return nil, errors.New("etcdsim: server closed")
	}
	s.rings = append(s.rings, r)
	return r, nil
}

func (r *Ring) newID() uint64 {
	for {
		if id := r.rnd.Uint64(); id != 0 {
			return id
		}
	}
}

// ClusterID is the ring's cluster ID.
func (r *Ring) ClusterID() uint64 { return r.clusterID }

// Endpoints are the client URLs of the running members.
func (r *Ring) Endpoints() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.members {
		if m.running {
			out = append(out, m.clientURLs...)
		}
	}
	return out
}

// Members lists every member in the order added.
func (r *Ring) Members() []MemberInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]MemberInfo, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, MemberInfo{ID: m.id, Name: m.name, PeerURLs: slices.Clone(m.peerURLs), ClientURLs: slices.Clone(m.clientURLs),
			ListenAddr: m.listenAddr, IsLearner: m.learner, Running: m.running, Paused: m.paused, Group: m.group})
	}
	return out
}

// Leader is the leader's ID (0 when no voter group has a quorum).
func (r *Ring) Leader() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

// Term and Index are the raft term and committed index.
func (r *Ring) Term() uint64 { r.mu.Lock(); defer r.mu.Unlock(); return r.term }

// Index is the raft committed index.
func (r *Ring) Index() uint64 { r.mu.Lock(); defer r.mu.Unlock(); return r.index }

func (r *Ring) find(id uint64) *member {
	for _, m := range r.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// ErrUnknownMember: a command named a member the ring does not have.
var ErrUnknownMember = errors.New("etcdsim: no such member")

// StartMember starts the "process" of a member (one added by MemberAdd,
// or one stopped): its listener opens, and it publishes its name and
// client URLs once it reaches the leader, as etcd does.
func (r *Ring) StartMember(id uint64, o StartOptions) (MemberInfo, error) {
	r.mu.Lock()
	m := r.find(id)
	if m == nil {
		r.mu.Unlock()
		return MemberInfo{}, fmt.Errorf("start %x: %w", id, ErrUnknownMember)
	}
	if m.running {
		r.mu.Unlock()
		return MemberInfo{}, fmt.Errorf("start %x: already running", id)
	}
	r.mu.Unlock()
	l, err := r.listen(m, o)
	if err != nil {
		return MemberInfo{}, err
	}
	r.mu.Lock()
	if r.closed || m.running || r.find(id) == nil {
		r.mu.Unlock()
		_ = l.ln.Close()
		return MemberInfo{}, fmt.Errorf("start %x: ring closed, member removed or started meanwhile", id)
	}
	r.attachLocked(m, l)
	r.electLocked()
	r.mu.Unlock()
	for _, mi := range r.Members() {
		if mi.ID == id {
			return mi, nil
		}
	}
	return MemberInfo{}, fmt.Errorf("start %x: %w", id, ErrUnknownMember)
}

// listening is a member's listener opened, not serving yet.
type listening struct {
	ln        net.Listener
	cfg       *tls.Config
	name      string
	clientURL string
}

// listen opens m's listener (m does not run: nothing else touches it).
func (r *Ring) listen(m *member, o StartOptions) (*listening, error) {
	addr := o.ListenAddr
	if addr == "" {
		addr = m.listenAddr
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	cfg := o.TLS
	if cfg == nil {
		cfg = m.tls
	}
	if cfg == nil {
		cfg = r.opts.TLS
	}
	cfg = serverTLS(cfg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for member %x: %w", m.id, err)
	}
	l := &listening{ln: ln, cfg: cfg, name: o.Name, clientURL: o.ClientURL}
	if l.name == "" {
		l.name = fmt.Sprintf("%s-%x", r.opts.Name, m.id)
	}
	if l.clientURL == "" {
		scheme := "http"
		if cfg != nil {
			scheme = "https"
		}
		l.clientURL = scheme + "://" + ln.Addr().String()
	}
	return l, nil
}

// attachLocked makes m run on l; its name and client URL are published
// once it reaches the leader (electLocked), the first time only.
func (r *Ring) attachLocked(m *member, l *listening) {
	m.ln, m.tls, m.listenAddr = l.ln, l.cfg, l.ln.Addr().String()
	m.connMu.Lock()
	m.conns = map[net.Conn]struct{}{}
	m.connMu.Unlock()
	m.running, m.paused, m.startedAt, m.activeSince = true, false, time.Now(), time.Now()
	m.startIndex = r.index
	m.grpcS, m.grpcL = newGRPC(), newChanListener()
	go func(gs *grpc.Server, l *chanListener) { _ = gs.Serve(l) }(m.grpcS, m.grpcL)
	if m.name == "" {
		m.pendingName, m.pendingClientURLs = l.name, []string{l.clientURL}
	}
	go r.acceptLoop(m, l.ln, l.cfg, m.grpcL)
}

func (r *Ring) acceptLoop(m *member, ln net.Listener, cfg *tls.Config, grpcL *chanListener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go r.srv.serveConn(r, m, c, cfg, grpcL)
	}
}

// track records a live connection of m, false when m no longer runs.
func (m *member) track(c net.Conn) bool {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if m.conns == nil {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

// stopLocked closes m's listener and every connection it accepted, as a
// process that dies.
func (r *Ring) stopLocked(m *member) {
	if conns, gs := r.detachLocked(m); gs != nil {
		for c := range conns {
			_ = c.Close()
		}
		go gs.Stop()
	}
}

// stopGracefullyLocked stops m as etcd stops a member that applied its own
// removal: the listener closes, gRPC clients get GOAWAY (the calls under
// way, such as the removal itself, answer first), HTTP connections close.
func (r *Ring) stopGracefullyLocked(m *member) {
	if conns, gs := r.detachLocked(m); gs != nil {
		go func() {
			gs.GracefulStop()
			for c := range conns {
				_ = c.Close()
			}
		}()
	}
}

func (r *Ring) detachLocked(m *member) (map[net.Conn]struct{}, *grpc.Server) {
	if !m.running {
		return nil, nil
	}
	m.running, m.paused = false, false
	_ = m.ln.Close()
	_ = m.grpcL.Close()
	gs := m.grpcS
	m.ln, m.grpcS, m.grpcL = nil, nil, nil
	m.connMu.Lock()
	conns := m.conns
	m.conns = nil
	m.connMu.Unlock()
	return conns, gs
}

// StopMember kills a member's "process": its listener refuses, its
// connections close; its membership stays.
func (r *Ring) StopMember(id uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.find(id)
	if m == nil {
		return fmt.Errorf("stop %x: %w", id, ErrUnknownMember)
	}
	r.stopLocked(m)
	r.electLocked()
	return nil
}

// PauseMember freezes a member: connections are accepted and no call is
// answered (as a process under SIGSTOP, or behind a partition that drops
// packets); its peers see it down. ResumeMember undoes it.
func (r *Ring) PauseMember(id uint64) error { return r.setPaused(id, true) }

// ResumeMember lets a paused member answer again.
func (r *Ring) ResumeMember(id uint64) error { return r.setPaused(id, false) }

func (r *Ring) setPaused(id uint64, p bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.find(id)
	if m == nil {
		return fmt.Errorf("pause %x: %w", id, ErrUnknownMember)
	}
	if !m.running {
		return fmt.Errorf("pause %x: not running", id)
	}
	m.paused = p
	m.activeSince = time.Now()
	r.electLocked()
	return nil
}

// Partition splits the ring: members of each group given reach each other
// and nobody else; members named in no group form group 0 together.
// Clients still reach every member. Partition() heals.
func (r *Ring) Partition(groups ...[]uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[uint64]int{}
	for i, g := range groups {
		for _, id := range g {
			if r.find(id) == nil {
				return fmt.Errorf("partition %x: %w", id, ErrUnknownMember)
			}
			next[id] = i + 1
		}
	}
	for _, m := range r.members {
		if m.group != next[m.id] {
			m.group, m.activeSince = next[m.id], time.Now()
		}
	}
	r.electLocked()
	return nil
}

// CatchUp brings a learner in sync with the leader at once.
func (r *Ring) CatchUp(id uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.find(id)
	if m == nil {
		return fmt.Errorf("catch up %x: %w", id, ErrUnknownMember)
	}
	m.caughtUp = true
	r.notifyLocked()
	return nil
}

// RaiseAlarm raises an alarm (such as NOSPACE) for a member, as etcd
// does when its database reaches the quota.
func (r *Ring) RaiseAlarm(id uint64, a pb.AlarmType) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.find(id) == nil {
		return fmt.Errorf("raise alarm on %x: %w", id, ErrUnknownMember)
	}
	r.activateAlarmLocked(&pb.AlarmMember{MemberID: id, Alarm: a})
	return nil
}

// SetDBSize sets what a member reports as its database size and the part
// in use (defragmentation brings the size down to the part in use).
func (r *Ring) SetDBSize(id uint64, size, inUse int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.find(id)
	if m == nil {
		return fmt.Errorf("set db size of %x: %w", id, ErrUnknownMember)
	}
	m.dbSize, m.dbInUse = size, inUse
	return nil
}

// Close stops every member and forgets the ring.
func (r *Ring) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	for _, m := range r.members {
		r.stopLocked(m)
	}
	r.closed = true
	r.leader = 0
	r.notifyLocked()
	r.mu.Unlock()
	r.srv.mu.Lock()
	r.srv.rings = slices.DeleteFunc(r.srv.rings, func(o *Ring) bool { return o == r })
	r.srv.mu.Unlock()
}

// MemberByPeerURL finds a member by one of its peer URLs (as a spoke
// knows the member it runs).
func (r *Ring) MemberByPeerURL(peerURL string) (MemberInfo, bool) {
	for _, m := range r.Members() {
		if slices.Contains(m.PeerURLs, peerURL) {
			return m, true
		}
	}
	return MemberInfo{}, false
}

// ForceNewCluster restarts a member as etcd --force-new-cluster does:
// every other member leaves the membership (they are stopped, and their
// IDs count as removed), the member is the only voter and leads, in a new
// term; the cluster ID and the keys stay. The member is started (at its
// last address) if it was not running.
func (r *Ring) ForceNewCluster(id uint64) error {
	r.mu.Lock()
	m := r.find(id)
	if m == nil {
		r.mu.Unlock()
		return fmt.Errorf("force new cluster from %x: %w", id, ErrUnknownMember)
	}
	r.stopLocked(m)
	r.mu.Unlock()
	l, err := r.listen(m, StartOptions{})
	if err != nil {
		return fmt.Errorf("force new cluster from %x: %w", id, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || m.running {
		_ = l.ln.Close()
		return fmt.Errorf("force new cluster from %x: ring closed or member started meanwhile", id)
	}
	for _, o := range r.members {
		if o != m {
			r.stopLocked(o)
			r.removed[o.id] = true
		}
	}
	r.members = []*member{m}
	m.learner, m.caughtUp, m.group = false, true, 0
	r.attachLocked(m, l)
	r.leader = 0
	r.index++ // the forced configuration
	r.electLocked()
	return nil
}

// --- the raft-like model (all under r.mu) ---

func (m *member) up() bool { return m.running && !m.paused }

func connected(a, b *member) bool { return a.up() && b.up() && a.group == b.group }

func (r *Ring) voters() []*member {
	var out []*member
	for _, m := range r.members {
		if !m.learner {
			out = append(out, m)
		}
	}
	return out
}

func quorum(n int) int { return n/2 + 1 }

// activeFor: m sees v as an active peer, connected for HealthInterval
// (etcd's transport ActiveSince); m itself always counts.
func (r *Ring) activeFor(m, v *member) bool {
	if v == m {
		return true
	}
	if !connected(m, v) {
		return false
	}
	if r.opts.HealthInterval < 0 {
		return true
	}
	return time.Since(later(m.activeSince, v.activeSince)) >= r.opts.HealthInterval
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// activeVoters counts the voters m sees active (etcd's numConnectedSince).
func (r *Ring) activeVoters(m *member) int {
	n := 0
	for _, v := range r.voters() {
		if r.activeFor(m, v) {
			n++
		}
	}
	return n
}

// reach counts the voters m is connected to, itself included.
func (r *Ring) reach(m *member) int {
	n := 0
	for _, v := range r.voters() {
		if connected(m, v) {
			n++
		}
	}
	return n
}

// electLocked keeps the leader while it reaches a quorum of voters, or
// elects the first voter that does (a new term, an empty entry), or none;
// then members that reach the leader publish their names and apply the
// log. Every change of state ends here.
func (r *Ring) electLocked() {
	defer r.notifyLocked()
	if r.closed {
		return
	}
	q := quorum(len(r.voters()))
	if l := r.find(r.leader); l == nil || l.learner || !l.up() || r.reach(l) < q {
		r.leader = 0
		for _, v := range r.voters() {
			if v.up() && r.reach(v) >= q {
				r.leader = v.id
				r.term++
				r.index++
				break
			}
		}
	}
	l := r.find(r.leader)
	if l == nil {
		return
	}
	for _, m := range r.members {
		if m.pendingName != "" && connected(m, l) {
			m.name, m.clientURLs = m.pendingName, m.pendingClientURLs
			m.pendingName, m.pendingClientURLs = "", nil
			r.index++
		}
	}
	r.applyLocked()
}

// applyLocked brings every member that reaches the leader (a learner: in
// sync) up to the committed index.
func (r *Ring) applyLocked() {
	l := r.find(r.leader)
	if l == nil {
		return
	}
	for _, m := range r.members {
		if connected(m, l) && (!m.learner || r.inSyncLocked(m)) {
			m.applied = r.index
		}
	}
}

// inSyncLocked: a learner is in sync with the leader when it runs, reaches
// the leader and has caught up (RingOptions.CatchUp, or CatchUp).
func (r *Ring) inSyncLocked(m *member) bool {
	l := r.find(r.leader)
	if l == nil || !connected(m, l) {
		return false
	}
	if !m.caughtUp && r.opts.CatchUp >= 0 && time.Since(m.startedAt) >= r.opts.CatchUp {
		m.caughtUp = true
	}
	return m.caughtUp
}

// storageVersionInterval is etcd's monitorVersionInterval: every 4 s a
// member writes the storage version, which a member that joined can do
// only once it applied an entry of its own (before, "missing term
// information").
const storageVersionInterval = 4 * time.Second

// storageVersionLocked is what m reports as its storage version.
func (r *Ring) storageVersionLocked(m *member) string {
	if m.storageVersion == "" && m.running && m.applied > m.startIndex && time.Since(m.startedAt) >= storageVersionInterval {
		m.storageVersion = r.opts.StorageVersion
	}
	return m.storageVersion
}

// commitLocked appends one entry to the log.
func (r *Ring) commitLocked() {
	r.index++
	r.applyLocked()
	r.notifyLocked()
}

func (r *Ring) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// leaderOf is the leader m sees (0: none, or m does not reach it).
func (r *Ring) leaderOf(m *member) uint64 {
	l := r.find(r.leader)
	if l == nil || !connected(m, l) {
		return 0
	}
	return l.id
}

// errNoLeaderTimeout is what etcd answers a proposal or a linearizable
// read that found no leader within its request timeout: raft takes no
// proposal without a leader, so the server's own deadline expires.
var errNoLeaderTimeout = status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())

// waitQuorum waits until m reaches a leader (a proposal or a linearizable
// read can be served), at most RequestTimeout, and returns with r.mu
// held when it succeeds. (etcd's "request timed out" comes from a
// proposal a leader took and could not commit; here a leader always
// commits at once.)
func (r *Ring) waitQuorum(ctx context.Context, m *member) error {
	timer := time.NewTimer(r.opts.RequestTimeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		if r.closed || !m.running {
			r.mu.Unlock()
			return rpctypes.ErrGRPCStopped
		}
		if r.leaderOf(m) != 0 {
			return nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-timer.C:
			return errNoLeaderTimeout
		}
	}
}

// waitAnswer blocks while m is paused (a frozen process answers nothing),
// and fails when it no longer runs.
func (r *Ring) waitAnswer(ctx context.Context, m *member) error {
	for {
		r.mu.Lock()
		if r.closed || !m.running {
			r.mu.Unlock()
			return rpctypes.ErrGRPCStopped
		}
		if !m.paused {
			r.mu.Unlock()
			return nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

func (r *Ring) header(m *member) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: r.clusterID, MemberId: m.id, RaftTerm: r.term, Revision: r.kv.rev}
}

func (r *Ring) clusterHeader(m *member) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: r.clusterID, MemberId: m.id, RaftTerm: r.term}
}

func (r *Ring) protoMembersLocked() []*pb.Member {
	ms := slices.Clone(r.members)
	slices.SortFunc(ms, func(a, b *member) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	out := make([]*pb.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, &pb.Member{ID: m.id, Name: m.name, PeerURLs: slices.Clone(m.peerURLs), ClientURLs: slices.Clone(m.clientURLs), IsLearner: m.learner})
	}
	return out
}

func (r *Ring) activateAlarmLocked(a *pb.AlarmMember) bool {
	for _, have := range r.alarms {
		if have.MemberID == a.MemberID && have.Alarm == a.Alarm {
			return false
		}
	}
	r.alarms = append(r.alarms, &pb.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm})
	r.commitLocked()
	return true
}
