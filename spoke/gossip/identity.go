package gossip

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Gossip identities. memberlist's key is shared by every spoke, so the key
// alone lets any holder claim any node name. The hub therefore gives each
// member cluster its own ed25519 key (its identity) and every spoke the
// table of the registered clusters' public keys (Peers). A spoke puts into
// its node metadata a counter (its clock in nanoseconds when it signed)
// and its signature over the name and the counter, and signs again every
// RejoinInterval (memberlist re-broadcasts the node). A spoke with an
// identity:
//
//   - refuses an alive message (memberlist's AliveDelegate) for a name that
//     is not in its table (unknown, or revoked: the hub removed the cluster),
//     whose signature does not verify with that name's key, or whose counter
//     is lower than one it accepted before for that name;
//   - counts a peer alive only while a counter it had not seen arrived
//     within staleAfter (three RejoinIntervals) on its own clock: anyone can
//     replay a node's last metadata (memberlist gossips it to everyone), so
//     a replay keeps a dead node alive for that long at most. No clock is
//     compared across clusters.
//
// A name the spoke cannot check is abstained on, never counted either
// way: a name not in its table (a cluster registered after the table this
// spoke holds, or an identity the hub could not hand over yet), or any
// name while its table is empty (not loaded). Such a name is left out of
// the view the spoke reports (View), so the hub reads it as a witness
// that says nothing of that cluster, neither alive nor dead
// (hub/liveness): an unverifiable name never becomes evidence that a
// cluster failed. A name in the table is checked: no fresh counter signed
// with its key (a forgery, a replay gone stale, or the node really gone)
// is dead, as memberlist's own failure detection says. Abstaining depends
// on the spoke's table only, never on what a peer sends, so no member
// cluster can make the witnesses abstain on another cluster's name.
//
// What a member cluster can therefore do: speak as itself, with its own
// key. It cannot speak as another cluster (alive or dead), and a cluster
// the hub removed from the table is refused by every spoke whose table the
// hub updated. The key itself is rotated when a cluster leaves
// (hub/spokes), so that a removed cluster cannot even read the ring.

// metaMagic starts the node metadata of a signed node.
var metaMagic = []byte("efg1")

// metaSize is the metadata's size: magic, counter, signature.
const metaSize = 4 + 8 + ed25519.SignatureSize

// Errors of identity checks.
var (
	ErrUnknownName = errors.New("gossip: the name is not in the table of identities (unknown, or removed by the hub)")
	ErrBadIdentity = errors.New("gossip: the node's metadata is not signed for its name")
	ErrReplayed    = errors.New("gossip: the node's signed counter is older than one already accepted (a replay)")
)

// Identity is what a spoke needs to speak as its cluster and to check
// the others.
type Identity struct {
	// Key is this cluster's private key.
	Key ed25519.PrivateKey
	// Peers are the public keys of every cluster registered with the hub,
	// this one included, by cluster name.
	Peers map[string]ed25519.PublicKey
}

// signedMessage is what a node signs: its name and its counter.
func signedMessage(name string, counter uint64) []byte {
	var b bytes.Buffer
	b.WriteString("etcdfed gossip identity v1\x00")
	b.WriteString(name)
	b.WriteByte(0)
	_ = binary.Write(&b, binary.BigEndian, counter)
	return b.Bytes()
}

// SignMeta returns the node metadata of name at counter, signed with key.
func SignMeta(key ed25519.PrivateKey, name string, counter uint64) []byte {
	out := make([]byte, 0, metaSize)
	out = append(out, metaMagic...)
	out = binary.BigEndian.AppendUint64(out, counter)
	return append(out, ed25519.Sign(key, signedMessage(name, counter))...)
}

// VerifyMeta checks that meta is signed for name with pub, and returns its
// counter.
func VerifyMeta(pub ed25519.PublicKey, name string, meta []byte) (uint64, error) {
	if len(meta) != metaSize || !bytes.Equal(meta[:4], metaMagic) {
		return 0, fmt.Errorf("%w: %d bytes of metadata, not a signed identity", ErrBadIdentity, len(meta))
	}
	counter := binary.BigEndian.Uint64(meta[4:12])
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, signedMessage(name, counter), meta[12:]) {
		return 0, ErrBadIdentity
	}
	return counter, nil
}

// FormatPeers renders a table of public keys for a Secret: one line per
// cluster, "name base64-key", sorted by name.
func FormatPeers(peers map[string]ed25519.PublicKey) []byte {
	names := make([]string, 0, len(peers))
	for n := range peers {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", n, base64.StdEncoding.EncodeToString(peers[n]))
	}
	return []byte(b.String())
}

// ParsePeers reads FormatPeers's table.
func ParsePeers(data []byte) (map[string]ed25519.PublicKey, error) {
	out := map[string]ed25519.PublicKey{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, enc, ok := strings.Cut(line, " ")
		if !ok || name == "" || len(name) > 253 {
			return nil, fmt.Errorf("gossip: identity table line %d: want \"name base64-key\"", i+1)
		}
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
		if err != nil || len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("gossip: identity table line %d (%s): not a base64 ed25519 public key", i+1, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("gossip: identity table names %s twice", name)
		}
		out[name] = k
	}
	return out, nil
}

// PrivateKey reads a private key as a Secret holds it: the 32-byte seed
// or the 64-byte key.
func PrivateKey(data []byte) (ed25519.PrivateKey, error) {
	switch len(data) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(data), nil
	case ed25519.PrivateKeySize:
		k := ed25519.PrivateKey(bytes.Clone(data))
		if !bytes.Equal(ed25519.NewKeyFromSeed(k.Seed()), k) {
			return nil, errors.New("gossip: the identity key is not a consistent ed25519 key")
		}
		return k, nil
	}
	return nil, fmt.Errorf("gossip: the identity key is %d bytes, not an ed25519 seed (32) or key (64)", len(data))
}

// identities holds the agent's identity and what it accepted of each
// peer's. It is called by memberlist with memberlist's locks held: it
// takes only its own lock and never calls memberlist.
type identities struct {
	mu  sync.Mutex
	id  *Identity
	now func() time.Time
	// staleAfter: a peer whose counter has not moved for this long is not
	// counted alive.
	staleAfter time.Duration
	// last is, per name, the highest counter accepted and when (on this
	// spoke's clock) it first arrived.
	last map[string]seen
	// refused counts alive messages refused, by name, for logs and tests.
	refused map[string]int
	// lastErr is the last refusal per name.
	lastErr map[string]string
	// onFresh is called (without blocking, under memberlist's locks) when
	// a peer that was not counted becomes countable: the view changed
	// without any memberlist event.
	onFresh func()
	// freshened: onFresh was called since the last takeFreshened.
	freshened bool
}

// takeFreshened reports whether a peer became countable since the last
// call.
func (s *identities) takeFreshened() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.freshened
	s.freshened = false
	return f
}

type seen struct {
	counter uint64
	at      time.Time
	pub     string // the key it verified with
}

func (s *identities) set(id *Identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id = id
	if id == nil {
		return
	}
	// A peer whose key changed or went (revoked) starts over.
	for n, l := range s.last {
		if pub, ok := id.Peers[n]; !ok || string(pub) != l.pub {
			delete(s.last, n)
		}
	}
}

func (s *identities) get() *Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// check is memberlist's AliveDelegate: nil accepts the alive message.
func (s *identities) check(self string, n *memberlist.Node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == nil || n.Name == self {
		return nil
	}
	err := s.checkLocked(n)
	if err != nil {
		s.refused[n.Name]++
		s.lastErr[n.Name] = err.Error()
	}
	return err
}

func (s *identities) checkLocked(n *memberlist.Node) error {
	pub, ok := s.id.Peers[n.Name]
	if !ok {
		return ErrUnknownName
	}
	counter, err := VerifyMeta(pub, n.Name, n.Meta)
	if err != nil {
		return err
	}
	l, ok := s.last[n.Name]
	switch {
	case ok && counter < l.counter:
		return fmt.Errorf("%w: %d < %d", ErrReplayed, counter, l.counter)
	case !ok || counter > l.counter:
		now := s.now()
		wasFresh := ok && now.Before(l.at.Add(s.staleAfter))
		s.last[n.Name] = seen{counter: counter, at: now, pub: string(pub)}
		if !wasFresh {
			s.freshened = true
			if s.onFresh != nil {
				s.onFresh()
			}
		}
	}
	return nil
}

// Reasons a spoke abstains on a name (Unverifiable).
const (
	AbstainNotInTable = "not in this spoke's table of identities"
	AbstainNoTable    = "this spoke has no table of identities yet"
)

// unverifiable says why name cannot be checked ("" when it can, or when
// names are not checked at all: no identity).
func (s *identities) unverifiable(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.id == nil:
		return ""
	case len(s.id.Peers) == 0:
		return AbstainNoTable
	}
	if _, ok := s.id.Peers[name]; !ok {
		return AbstainNotInTable
	}
	return ""
}

// Unverifiable returns the peers (known to memberlist or named in
// expected, this spoke excluded) whose names this spoke cannot check, each
// with the reason: View leaves them out, the spoke abstains on them.
func (a *Agent) Unverifiable(expected []string) map[string]string {
	a.peersMu.Lock()
	names := slices.Collect(maps.Keys(a.peers))
	self := a.self
	a.peersMu.Unlock()
	out := map[string]string{}
	for _, n := range append(names, expected...) {
		if n == self {
			continue
		}
		if why := a.ids.unverifiable(n); why != "" {
			out[n] = why
		}
	}
	return out
}

// fresh reports whether name may be counted alive: always without an
// identity; with one, when name is in the table and a new counter of it
// arrived within staleAfter. staleAt is when it went (or goes) stale.
func (s *identities) fresh(name string) (ok bool, staleAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == nil {
		return true, time.Time{}
	}
	if _, known := s.id.Peers[name]; !known {
		return false, time.Time{}
	}
	l, seen := s.last[name]
	if !seen {
		return false, time.Time{}
	}
	staleAt = l.at.Add(s.staleAfter)
	return s.now().Before(staleAt), staleAt
}

// Refusals returns how many alive messages for name this agent refused,
// and why the last one was.
func (a *Agent) Refusals(name string) (int, string) {
	a.ids.mu.Lock()
	defer a.ids.mu.Unlock()
	return a.ids.refused[name], a.ids.lastErr[name]
}

// SetIdentity installs this cluster's identity and the table of its
// peers' (nil: names are not checked, as before identities). It takes
// effect at once: the node's metadata is signed again and broadcast, peers
// not in the new table are no longer counted, and alive messages are
// checked against it from now on.
func (a *Agent) SetIdentity(id *Identity) {
	if id != nil {
		id = &Identity{Key: bytes.Clone(id.Key), Peers: clonePeers(id.Peers)}
	}
	if sameIdentity(a.ids.get(), id) {
		return
	}
	a.ids.set(id)
	if id == nil {
		a.cfg.Log.Info("WARNING: gossip identity removed: names are no longer checked")
	} else {
		a.cfg.Log.Info("Gossip identity installed", "identity", Fingerprint(id.Key.Public().(ed25519.PublicKey)), "identities", len(id.Peers))
	}
	if r := a.cur.Load(); r != nil {
		go a.refreshMeta(r)
	}
	a.signal()
}

func clonePeers(m map[string]ed25519.PublicKey) map[string]ed25519.PublicKey {
	out := make(map[string]ed25519.PublicKey, len(m))
	for k, v := range m {
		out[k] = bytes.Clone(v)
	}
	return out
}

// refreshMeta signs the node's metadata again and broadcasts it.
func (a *Agent) refreshMeta(r *run) {
	if a.ids.get() == nil {
		return
	}
	if err := r.ml.UpdateNode(time.Second); err != nil {
		a.cfg.Log.V(1).Info("Broadcasting the signed gossip identity", "error", err.Error())
	}
}

// delegate gives memberlist the node's signed metadata.
type delegate struct {
	a    *Agent
	name string
}

func (d *delegate) NodeMeta(limit int) []byte {
	id := d.a.ids.get()
	if id == nil || len(id.Key) != ed25519.PrivateKeySize || limit < metaSize {
		return nil
	}
	return SignMeta(id.Key, d.name, uint64(d.a.now().UnixNano()))
}
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// alives is memberlist's AliveDelegate.
type alives struct {
	a    *Agent
	name string
}

func (al *alives) NotifyAlive(n *memberlist.Node) error { return al.a.ids.check(al.name, n) }

// LocalMeta is this node's metadata as memberlist gossips it to every peer
// (nil when not running): what any member of the ring can copy.
func (a *Agent) LocalMeta() []byte {
	r := a.cur.Load()
	if r == nil {
		return nil
	}
	return bytes.Clone(r.ml.LocalNode().Meta)
}

func sameIdentity(a, b *Identity) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !bytes.Equal(a.Key, b.Key) || len(a.Peers) != len(b.Peers) {
		return false
	}
	for n, k := range a.Peers {
		if !bytes.Equal(k, b.Peers[n]) {
			return false
		}
	}
	return true
}

// IdentityInfo returns the fingerprint of the public key this agent signs
// its name with and how many identities it checks peers against ("", 0
// without an identity).
func (a *Agent) IdentityInfo() (string, int) {
	id := a.ids.get()
	if id == nil || len(id.Key) != ed25519.PrivateKeySize {
		return "", 0
	}
	return Fingerprint(id.Key.Public().(ed25519.PublicKey)), len(id.Peers)
}
