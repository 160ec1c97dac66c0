package etcdsim

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
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
	// Version is the release its binary is, which it reports as its
	// server version (Status, /version) until it stops (default: the one
	// it ran before, else RingOptions.Version). The cluster version is
	// RingOptions.ClusterVersion whatever the members run: etcd's rise of
	// it once every member runs a higher minor is not simulated.
	Version string
}

// Ring simulates one etcd cluster. Its state is behind one mutex (mu); a
// member's live connections are behind the member's own (connMu).
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
	// version is its binary's release ("": the ring's Version).
	version string

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
	o.defaults()
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
	opened, err := r.openMembers()
	if err != nil {
		return nil, err
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

// versionLocked is the server version m reports.
func (r *Ring) versionLocked(m *member) string {
	if m.version != "" {
		return m.version
	}
	return r.opts.Version
}

// defaults fills in what o leaves unset.
func (o *RingOptions) defaults() {
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
}

// openMembers adds the ring's initial members and opens the listener of
// each started one (nil for a stopped one), serving nothing yet. On error
// it closes those it opened.
func (r *Ring) openMembers() ([]*listening, error) {
	o := r.opts
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
	return opened, nil
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

// Term is the raft term.
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
