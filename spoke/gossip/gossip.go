// Package gossip runs the spoke's member of the memberlist ring that all
// spokes of a ring form across member clusters. Each spoke's node is named
// after its member cluster; the ring tells each spoke which peer clusters it
// can reach, and the spoke publishes that view in its EtcdSpoke status.
//
// The view is a witness for the hub (a zone is declared failed only when the
// hub's own observation of a spoke's Lease is stale and a majority of the
// other spokes' views agree). The spoke never acts on it.
//
// memberlist shares one encryption key among all members, so there is no
// per-node identity: a node that has the key can claim any name.
//
// Settings come in profiles (memberlist's own defaults):
//
//	wan:   probe every 5s, probe timeout 3s, suspicion multiplier 6;
//	       detects a dead peer in about 30-40s. The default, for member
//	       clusters in different zones or regions.
//	lan:   probe every 1s, timeout 500ms, suspicion multiplier 4; about 5s.
//	local: probe every 1s, timeout 200ms, suspicion multiplier 3; for
//	       loopback (the local environment).
//
// ProbeInterval, ProbeTimeout and SuspicionMult override the profile.
package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Profiles.
const (
	ProfileWAN   = "wan"
	ProfileLAN   = "lan"
	ProfileLocal = "local"
)

// Label is put on every gossip packet so that the ring never merges with
// another memberlist cluster on the same addresses.
const Label = "etcdfed"

// DefaultRejoinInterval is how often seeds that are not alive members are
// joined again, so that the ring heals after a partition.
const DefaultRejoinInterval = 10 * time.Second

// ErrBadKey is returned for an encryption key of the wrong size.
var ErrBadKey = errors.New("gossip: the encryption key must be 16, 24 or 32 bytes (AES-128, -192, -256)")

// Config configures an Agent.
type Config struct {
	// BindAddr is the host:port to listen on (UDP and TCP); port 0 picks one.
	BindAddr string
	// AdvertiseAddr is the host:port other spokes reach this one on; empty:
	// the bound address (or, when bound to 0.0.0.0, a private IP).
	AdvertiseAddr string
	// Profile is wan (default), lan or local.
	Profile string
	// ProbeInterval, ProbeTimeout and SuspicionMult override the profile
	// when not zero.
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	SuspicionMult int
	// RejoinInterval: 0 means DefaultRejoinInterval.
	RejoinInterval time.Duration
	// Log receives the agent's and memberlist's messages.
	Log logr.Logger
}

// MemberlistConfig returns memberlist's configuration for the profile with
// the overrides applied.
func (c Config) MemberlistConfig() (*memberlist.Config, error) {
	var mc *memberlist.Config
	switch c.Profile {
	case "", ProfileWAN:
		mc = memberlist.DefaultWANConfig()
	case ProfileLAN:
		mc = memberlist.DefaultLANConfig()
	case ProfileLocal:
		mc = memberlist.DefaultLocalConfig()
	default:
		return nil, fmt.Errorf("gossip: unknown profile %q (wan, lan or local)", c.Profile)
	}
	if c.ProbeInterval > 0 {
		mc.ProbeInterval = c.ProbeInterval
	}
	if c.ProbeTimeout > 0 {
		mc.ProbeTimeout = c.ProbeTimeout
	}
	if c.SuspicionMult > 0 {
		mc.SuspicionMult = c.SuspicionMult
	}
	host, port, err := splitHostPort(c.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip: bind address: %w", err)
	}
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = host, port, port
	if c.AdvertiseAddr != "" {
		host, port, err := splitHostPort(c.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("gossip: advertise address: %w", err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = host, port
	}
	mc.Label = Label
	return mc, nil
}

// Settings describes the effective memberlist settings, for logs and notes.
func Settings(mc *memberlist.Config) string {
	return fmt.Sprintf("probeInterval=%s probeTimeout=%s suspicionMult=%d gossipInterval=%s pushPullInterval=%s tcpTimeout=%s indirectChecks=%d",
		mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult, mc.GossipInterval, mc.PushPullInterval, mc.TCPTimeout, mc.IndirectChecks)
}

func splitHostPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", s)
	}
	return host, port, nil
}

type peer struct {
	alive bool
	since time.Time
	addr  string
}

// Agent is one spoke's gossip member. Configure starts it; it is safe for
// concurrent use.
type Agent struct {
	cfg     Config
	changes chan struct{}

	mu       sync.Mutex
	ml       *memberlist.Memberlist
	name     string
	key      []byte
	seeds    []string
	peers    map[string]*peer
	stop     chan struct{}
	loopDone chan struct{}
	now      func() time.Time
}

// New returns an agent that is not yet running.
func New(cfg Config) *Agent {
	if cfg.RejoinInterval == 0 {
		cfg.RejoinInterval = DefaultRejoinInterval
	}
	return &Agent{cfg: cfg, changes: make(chan struct{}, 1), peers: map[string]*peer{}, now: time.Now}
}

// Changes signals (coalesced) every change of the view.
func (a *Agent) Changes() <-chan struct{} { return a.changes }

// Configure starts the agent under name, or restarts it when name or key
// changed, and joins seeds (host:port) that are not alive members yet. An
// empty key runs the ring unencrypted.
func (a *Agent) Configure(name string, key []byte, seeds []string) error {
	if name == "" {
		return errors.New("gossip: empty node name")
	}
	if len(key) != 0 && len(key) != 16 && len(key) != 24 && len(key) != 32 {
		return ErrBadKey
	}
	seeds = slices.Sorted(slices.Values(seeds))
	seeds = slices.Compact(seeds)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ml != nil && (a.name != name || !bytes.Equal(a.key, key)) {
		a.cfg.Log.Info("Restarting gossip: node name or key changed", "old", a.name, "new", name)
		a.stopLocked()
	}
	if a.ml == nil {
		if err := a.startLocked(name, key); err != nil {
			return err
		}
	}
	changed := !slices.Equal(a.seeds, seeds)
	a.seeds = seeds
	if changed {
		go a.joinSeeds()
	}
	return nil
}

func (a *Agent) startLocked(name string, key []byte) error {
	mc, err := a.cfg.MemberlistConfig()
	if err != nil {
		return err
	}
	mc.Name = name
	mc.Events = &events{a: a}
	mc.Logger = log.New(&logWriter{log: a.cfg.Log.WithName("memberlist")}, "", 0)
	if len(key) > 0 {
		mc.SecretKey = slices.Clone(key)
	} else {
		a.cfg.Log.Info("WARNING: gossip runs UNENCRYPTED: anyone who reaches the gossip port can join the ring and forge peer liveness; set --gossip-secret")
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("gossip: start memberlist: %w", err)
	}
	a.ml, a.name, a.key = ml, name, slices.Clone(key)
	a.stop, a.loopDone = make(chan struct{}), make(chan struct{})
	n := ml.LocalNode()
	a.cfg.Log.Info("Gossip started", "node", name, "address", n.Address(), "encrypted", len(key) > 0, "settings", Settings(mc))
	go a.rejoinLoop(a.stop, a.loopDone)
	return nil
}

// Stop leaves nothing behind: memberlist is shut down without a leave
// message, as a crash would, so peers see this spoke as failed (a witness
// has no graceful goodbye that the hub would treat differently).
func (a *Agent) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopLocked()
}

func (a *Agent) stopLocked() {
	if a.ml == nil {
		return
	}
	close(a.stop)
	ml := a.ml
	a.ml = nil
	a.mu.Unlock()
	<-a.loopDone
	_ = ml.Shutdown()
	a.mu.Lock()
	a.peers = map[string]*peer{}
	a.signal()
}

// Running reports whether memberlist runs, and under which name.
func (a *Agent) Running() (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.name, a.ml != nil
}

// Address is the advertised gossip host:port, empty when not running.
func (a *Agent) Address() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ml == nil {
		return ""
	}
	return a.ml.LocalNode().Address()
}

// View returns every peer the agent knows of (seen alive at some point, or
// named in expected), sorted by cluster name, without this spoke itself.
// Peers never seen are reported dead without a since time.
func (a *Agent) View(expected []string) []etcdfedv1.GossipPeerStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	names := map[string]bool{}
	for n := range a.peers {
		names[n] = true
	}
	for _, n := range expected {
		names[n] = true
	}
	delete(names, a.name)
	out := make([]etcdfedv1.GossipPeerStatus, 0, len(names))
	for _, n := range slices.Sorted(maps.Keys(names)) {
		ps := etcdfedv1.GossipPeerStatus{Cluster: n}
		if p := a.peers[n]; p != nil {
			ps.Alive = p.alive
			t := metav1.NewTime(p.since).Rfc3339Copy()
			ps.Since = &t
		}
		out = append(out, ps)
	}
	return out
}

// AliveCount returns how many peers (not counting this spoke) are alive.
func (a *Agent) AliveCount() (alive, dead int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for n, p := range a.peers {
		if n == a.name {
			continue
		}
		if p.alive {
			alive++
		} else {
			dead++
		}
	}
	return alive, dead
}

func (a *Agent) setPeer(n *memberlist.Node, alive bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n.Name == a.name {
		return
	}
	p := a.peers[n.Name]
	if p != nil && p.alive == alive {
		p.addr = n.Address()
		return
	}
	a.peers[n.Name] = &peer{alive: alive, since: a.now(), addr: n.Address()}
	a.cfg.Log.Info("Gossip peer changed", "peer", n.Name, "address", n.Address(), "alive", alive)
	alivePeers, deadPeers := 0, 0
	for name, p := range a.peers {
		if name == a.name {
			continue
		}
		if p.alive {
			alivePeers++
		} else {
			deadPeers++
		}
	}
	peersGauge.WithLabelValues("alive").Set(float64(alivePeers))
	peersGauge.WithLabelValues("dead").Set(float64(deadPeers))
	a.signal()
}

func (a *Agent) signal() {
	select {
	case a.changes <- struct{}{}:
	default:
	}
}

func (a *Agent) rejoinLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(a.cfg.RejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			a.joinSeeds()
		}
	}
}

// joinSeeds joins every seed that is not the address of an alive member.
func (a *Agent) joinSeeds() {
	a.mu.Lock()
	ml := a.ml
	if ml == nil {
		a.mu.Unlock()
		return
	}
	self := ml.LocalNode().Address()
	alive := map[string]bool{self: true}
	for _, p := range a.peers {
		if p.alive {
			alive[p.addr] = true
		}
	}
	var todo []string
	for _, s := range a.seeds {
		if alive[s] {
			continue
		}
		if addr, err := net.ResolveTCPAddr("tcp", s); err == nil && alive[addr.String()] {
			continue
		}
		todo = append(todo, s)
	}
	a.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	n, err := ml.Join(todo)
	if err != nil {
		a.cfg.Log.V(1).Info("Joining gossip seeds", "seeds", todo, "reached", n, "error", err.Error())
	}
}

type events struct{ a *Agent }

func (e *events) NotifyJoin(n *memberlist.Node)   { e.a.setPeer(n, true) }
func (e *events) NotifyLeave(n *memberlist.Node)  { e.a.setPeer(n, false) }
func (e *events) NotifyUpdate(n *memberlist.Node) { e.a.setPeer(n, true) }

// logWriter turns memberlist's "[LEVEL] memberlist: msg" lines into logr
// messages: DEBUG at V(2), INFO at V(1), WARN and ERR at V(0).
type logWriter struct{ log logr.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level, msg, ok := strings.Cut(line, " ")
	if !ok {
		level, msg = "", line
	}
	msg = strings.TrimPrefix(msg, "memberlist: ")
	switch level {
	case "[DEBUG]":
		w.log.V(2).Info(msg)
	case "[INFO]":
		w.log.V(1).Info(msg)
	case "[WARN]", "[ERR]", "[ERROR]":
		w.log.Info(msg, "level", strings.Trim(level, "[]"))
	default:
		w.log.Info(line)
	}
	return len(p), nil
}
