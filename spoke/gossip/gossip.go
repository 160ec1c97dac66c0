// Package gossip runs the spoke's member of the memberlist ring that all
// spokes of a ring form across member clusters. Each spoke's node is named
// after its member cluster; the ring tells each spoke which peer clusters it
// can reach, and the spoke publishes that view in its EtcdSpoke status.
//
// The view is a witness for the hub (a member cluster is declared failed
// only when the hub's own observation of its spoke's Lease is stale and a
// majority of the other spokes' views agree, hub/liveness). The spoke never
// acts on it.
//
// memberlist shares one encryption key among all members, so the key is
// no per-node identity; names are bound to clusters by identities the hub
// issues (identity.go): each spoke signs its name, refuses names not
// signed by their cluster, and abstains on names it cannot check (not in
// its table): they are left out of its view, neither alive nor dead for
// the hub. The hub
// generates the key of its ring of spokes and hands it to every spoke (the
// Secret etcdfed-gossip in the ring namespace); besides the key that
// encrypts, the Secret may name keys that are accepted on receipt, which
// is how a key is rotated without a moment where two spokes cannot read
// each other (docs/certificates.md, "Gossip encryption"). Keys accepted and
// the key that encrypts change in place (memberlist's keyring); only
// turning encryption on or off restarts memberlist.
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
//
// Every direct probe also measures the round trip to its peer
// (roundtrips.go): the spoke publishes a window's median and p99 per peer
// in its EtcdSpoke status, and the hub derives etcd's timing from them
// (rule 15, pkg/timing).
package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Label is put on every gossip packet so that the ring never merges with
// another memberlist cluster on the same addresses.
const Label = "etcdfed"

// DefaultRejoinInterval is how often every seed is joined again (a state
// exchange), so that the ring heals after a partition and a restarted spoke
// is taken back quickly.
const DefaultRejoinInterval = 10 * time.Second

// ErrBadKey is returned for an encryption key of the wrong size.
var ErrBadKey = errors.New("gossip: the encryption key must be 16, 24 or 32 bytes (AES-128, -192, -256)")

type peer struct {
	alive bool
	since time.Time
	addr  string
}

// run is one life of memberlist under one name and key. It is never
// modified once published; a change of seeds publishes a copy.
type run struct {
	ml         *memberlist.Memberlist
	kr         *memberlist.Keyring // nil when unencrypted
	name, addr string
	key        []byte
	accept     [][]byte
	seeds      []string
	stop, done chan struct{}
}

// Agent is one spoke's gossip member. Configure starts it; it is safe for
// concurrent use.
//
// Locking: memberlist calls the event delegate with its own locks held, so
// the delegate only takes peersMu, and nothing calls memberlist while
// holding peersMu. cfgMu serialises Configure and Stop; the rejoin loop
// reads the current run without it.
type Agent struct {
	cfg     Config
	changes chan struct{}

	cfgMu sync.Mutex
	cur   atomic.Pointer[run]

	peersMu sync.Mutex
	self    string
	peers   map[string]*peer
	// rtts are the round trips to each peer alive (roundtrips.go).
	rtts map[string]*roundTrips
	// seed are the round trips the next run carries on from (Seed, or
	// what the last run published).
	seed []etcdfedv1.PeerRoundTrip
	// joinedAt is when this run first saw a peer alive (zero: never).
	joinedAt time.Time
	// startedAt is when this run started.
	startedAt time.Time
	now       func() time.Time

	// ids checks peers' names (identity.go).
	ids identities
	// staleNames are the peers memberlist has alive that the last check
	// found stale, to signal a change when the set changes.
	staleNames []string
}

// New returns an agent that is not yet running.
func New(cfg Config) *Agent {
	if cfg.RejoinInterval == 0 {
		cfg.RejoinInterval = DefaultRejoinInterval
	}
	a := &Agent{cfg: cfg, changes: make(chan struct{}, 1), peers: map[string]*peer{}, rtts: map[string]*roundTrips{}, now: time.Now}
	a.ids = identities{now: a.now, staleAfter: StaleAfter(cfg.RejoinInterval), last: map[string]seen{}, refused: map[string]int{}, lastErr: map[string]string{}, onFresh: a.signal}
	return a
}

// StaleAfter is how long a peer with an identity is counted alive after
// the last new signed counter of it arrived: three rejoin intervals (the
// peer signs again every interval, and every interval exchanges state with
// every seed).
func StaleAfter(rejoin time.Duration) time.Duration {
	if rejoin <= 0 {
		rejoin = DefaultRejoinInterval
	}
	return 3 * rejoin
}

// Changes signals (coalesced) every change of the view.
func (a *Agent) Changes() <-chan struct{} { return a.changes }

// Configure starts the agent under name, or restarts it when name
// changed or encryption is turned on or off, and joins seeds (host:port)
// when they changed, alive members included (joinSeeds; the rejoin loop
// joins them again every RejoinInterval). key encrypts (empty: the ring runs
// unencrypted); accept are further keys accepted on receipt. A change of
// key or accept on a running encrypted agent is made in place.
func (a *Agent) Configure(name string, key []byte, seeds []string, accept ...[]byte) error {
	if name == "" {
		return errors.New("gossip: empty node name")
	}
	for _, k := range append([][]byte{key}, accept...) {
		if len(k) != 0 && len(k) != 16 && len(k) != 24 && len(k) != 32 {
			return ErrBadKey
		}
	}
	if len(key) == 0 {
		accept = nil
	}
	accept = slices.DeleteFunc(slices.Clone(accept), func(k []byte) bool { return len(k) == 0 || bytes.Equal(k, key) })
	seeds = slices.Compact(slices.Sorted(slices.Values(seeds)))
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	r := a.cur.Load()
	if r != nil && (r.name != name || (len(r.key) == 0) != (len(key) == 0)) {
		a.cfg.Log.Info("Restarting gossip: node name changed, or encryption turned on or off", "old", r.name, "new", name, "encrypted", len(key) > 0)
		a.stopRun(r)
		r = nil
	}
	if r == nil {
		var err error
		if r, err = a.start(name, key, accept); err != nil {
			return err
		}
	}
	if !bytes.Equal(r.key, key) || !sameKeys(r.accept, accept) {
		if err := rekey(r.kr, key, accept); err != nil {
			return fmt.Errorf("gossip: change keys: %w", err)
		}
		a.cfg.Log.Info("Gossip keys changed", "encrypts", Fingerprint(key), "accepts", fingerprints(accept))
		next := *r
		next.key, next.accept = slices.Clone(key), cloneKeys(accept)
		a.cur.Store(&next)
		r = &next
	}
	if !slices.Equal(r.seeds, seeds) {
		next := *r
		next.seeds = seeds
		a.cur.Store(&next)
		go a.joinSeeds()
	}
	return nil
}

func (a *Agent) start(name string, key []byte, accept [][]byte) (*run, error) {
	mc, err := a.cfg.MemberlistConfig()
	if err != nil {
		return nil, err
	}
	mc.Name = name
	mc.Events = &events{a: a}
	mc.Ping = &pings{a: a}
	mc.Delegate = &delegate{a: a, name: name}
	mc.Alive = &alives{a: a, name: name}
	mc.Logger = log.New(&logWriter{log: a.cfg.Log.WithName("memberlist")}, "", 0)
	if len(key) > 0 {
		kr, err := memberlist.NewKeyring(cloneKeys(accept), slices.Clone(key))
		if err != nil {
			return nil, fmt.Errorf("gossip: keyring: %w", err)
		}
		mc.Keyring = kr
	} else {
		a.cfg.Log.Info("WARNING: gossip runs UNENCRYPTED: anyone who reaches the gossip port can join the ring and forge peer liveness; set --gossip-secret")
	}
	a.peersMu.Lock()
	a.self, a.peers, a.joinedAt, a.startedAt = name, map[string]*peer{}, time.Time{}, a.now()
	a.seedLocked(name)
	a.peersMu.Unlock()
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: start memberlist: %w", err)
	}
	r := &run{ml: ml, kr: mc.Keyring, name: name, addr: ml.LocalNode().Address(), key: slices.Clone(key), accept: cloneKeys(accept),
		stop: make(chan struct{}), done: make(chan struct{})}
	a.cur.Store(r)
	a.cfg.Log.Info("Gossip started", "node", name, "address", r.addr, "encrypted", len(key) > 0, "identity", a.ids.get() != nil, "settings", Settings(mc))
	if a.ids.get() == nil {
		a.cfg.Log.Info("WARNING: gossip runs without an identity: names are not checked, and any holder of the key can speak as any cluster")
	}
	go a.rejoinLoop(r.stop, r.done)
	return r, nil
}

// Stop shuts memberlist down without a leave message, as a crash would, so
// peers see this spoke as failed (a witness has no graceful goodbye that
// the hub would treat differently).
func (a *Agent) Stop() {
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if r := a.cur.Load(); r != nil {
		a.stopRun(r)
	}
}

func (a *Agent) stopRun(r *run) {
	a.cur.Store(nil)
	close(r.stop)
	<-r.done
	_ = r.ml.Shutdown()
	a.peersMu.Lock()
	a.peers, a.joinedAt, a.startedAt = map[string]*peer{}, time.Time{}, time.Time{}
	a.carryLocked()
	a.peersMu.Unlock()
	a.signal()
}

// Running reports whether memberlist runs, and under which name.
func (a *Agent) Running() (string, bool) {
	if r := a.cur.Load(); r != nil {
		return r.name, true
	}
	return "", false
}

// Address is the advertised gossip host:port, empty when not running.
func (a *Agent) Address() string {
	if r := a.cur.Load(); r != nil {
		return r.addr
	}
	return ""
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
			if r := a.cur.Load(); r != nil {
				a.refreshMeta(r)
			}
			a.joinSeeds()
			a.checkStale()
		}
	}
}

// joinSeeds exchanges state with every seed (a memberlist join is a TCP
// push/pull). Seeds that are alive members are joined too: the exchange
// carries this spoke's alive message, which lets a peer accept a spoke that
// restarted on a new address as soon as its old self is dead, instead of at
// the next random push/pull (15s to 60s by profile). For the few clusters
// of a ring this costs little.
func (a *Agent) joinSeeds() {
	r := a.cur.Load()
	if r == nil || len(r.seeds) == 0 {
		return
	}
	todo := make([]string, 0, len(r.seeds))
	for _, s := range r.seeds {
		if s != r.addr {
			todo = append(todo, s)
		}
	}
	if len(todo) == 0 {
		return
	}
	if n, err := r.ml.Join(todo); err != nil {
		a.cfg.Log.V(1).Info("Joining gossip seeds", "seeds", todo, "reached", n, "error", err.Error())
	}
}
