package gossip_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log"
	"maps"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"

	"github.com/etcdfed/etcdfed/spoke/gossip"
)

// identities issues one key per cluster name, as the hub does, and the
// table of their public keys.
func identities(t *testing.T, names ...string) (map[string]ed25519.PrivateKey, map[string]ed25519.PublicKey) {
	t.Helper()
	keys, table := map[string]ed25519.PrivateKey{}, map[string]ed25519.PublicKey{}
	for _, n := range names {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[n], table[n] = priv, pub
	}
	return keys, table
}

// signedAgent starts an agent named name that speaks with key and checks
// its peers against table.
func signedAgent(t *testing.T, name string, key ed25519.PrivateKey, table map[string]ed25519.PublicKey, gossipKey []byte, seeds []string) *gossip.Agent {
	t.Helper()
	ag := agent(t, gossip.ProfileLocal, logr.Discard())
	ag.SetIdentity(&gossip.Identity{Key: key, Peers: table})
	if err := ag.Configure(name, gossipKey, seeds); err != nil {
		t.Fatal(err)
	}
	return ag
}

// never fails when cond holds at any poll within d.
func never(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			t.Fatal(what)
		}
	}
}

func isAlive(a *gossip.Agent, peer string) bool {
	_, ok := alive(a, peer)
	return ok
}

// TestNameNotSignedIsRefused (issue 37, gossip names bound to clusters):
// a member cluster holds the ring's shared key and its own identity, and
// claims a dead cluster's name, then a name the hub never issued. Before
// identities, the first kept cluster-c alive in every view (memberlist
// lets a dead name be reclaimed after one probe interval), so the hub's
// witnesses never agreed that cluster-c failed. Now both are refused, and
// the real cluster-c, back, is accepted at once.
func TestNameNotSignedIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("forms rings on loopback (about 15s); run without -short")
	}
	k := key(t)
	keys, table := identities(t, "cluster-a", "cluster-b", "cluster-c", "cluster-x")
	a := signedAgent(t, "cluster-a", keys["cluster-a"], table, k, nil)
	seed := []string{a.Address()}
	b := signedAgent(t, "cluster-b", keys["cluster-b"], table, k, seed)
	c := signedAgent(t, "cluster-c", keys["cluster-c"], table, k, seed)
	waitFor(t, 30*time.Second, "ring with identities formed", func() bool {
		return isAlive(a, "cluster-b") && isAlive(a, "cluster-c") && isAlive(b, "cluster-c") && isAlive(c, "cluster-a")
	})

	c.Stop()
	waitFor(t, 30*time.Second, "cluster-c seen dead", func() bool {
		known, al := alive(a, "cluster-c")
		knownB, alB := alive(b, "cluster-c")
		return known && !al && knownB && !alB
	})

	// cluster-x, compromised, speaks as cluster-c with its own key.
	x := signedAgent(t, "cluster-c", keys["cluster-x"], table, k, []string{a.Address(), b.Address()})
	// and as a name the hub never issued.
	z := signedAgent(t, "cluster-z", keys["cluster-x"], table, k, []string{a.Address(), b.Address()})
	never(t, 5*time.Second, "a member speaking as the dead cluster-c is counted alive", func() bool {
		return isAlive(a, "cluster-c") || isAlive(b, "cluster-c")
	})
	if known, _ := alive(a, "cluster-z"); known {
		t.Error("a name the hub never issued joined the ring")
	}
	for _, n := range []string{"cluster-c", "cluster-z"} {
		refused, why := a.Refusals(n)
		if refused == 0 {
			t.Errorf("cluster-a refused no alive message for %s", n)
		}
		t.Logf("cluster-a refused %d alive messages for %s, the last: %s", refused, n, why)
	}
	_, why := a.Refusals("cluster-c")
	_, whyZ := a.Refusals("cluster-z")
	if why != gossip.ErrBadIdentity.Error() || whyZ != gossip.ErrUnknownName.Error() {
		t.Errorf("refused for %q and %q, want %q and %q", why, whyZ, gossip.ErrBadIdentity, gossip.ErrUnknownName)
	}
	x.Stop()
	z.Stop()

	// The real cluster-c, back on a new address, is counted alive again.
	c2 := signedAgent(t, "cluster-c", keys["cluster-c"], table, k, seed)
	back := waitFor(t, 30*time.Second, "the real cluster-c seen alive again", func() bool {
		return isAlive(a, "cluster-c") && isAlive(b, "cluster-c") && isAlive(c2, "cluster-b")
	})
	t.Logf("the real cluster-c seen alive again after %v", back.Round(time.Millisecond))
}

// replayer is a bare memberlist node (what a member holding the shared key
// can run) named name, whose metadata is a copy of another node's.
func replayer(t *testing.T, name string, gossipKey, meta []byte, seeds []string) *memberlist.Memberlist {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = name, "127.0.0.1", 0, 0
	mc.Label = gossip.Label
	mc.DeadNodeReclaimTime = mc.ProbeInterval
	kr, err := memberlist.NewKeyring(nil, gossipKey)
	if err != nil {
		t.Fatal(err)
	}
	mc.Keyring = kr
	mc.Delegate = fixedMeta(meta)
	mc.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	go func() {
		// Keep joining, as the rejoin loop does.
		for i := 0; i < 40; i++ {
			_, _ = ml.Join(seeds)
			time.Sleep(250 * time.Millisecond)
		}
	}()
	return ml
}

type fixedMeta []byte

func (m fixedMeta) NodeMeta(int) []byte           { return m }
func (fixedMeta) NotifyMsg([]byte)                {}
func (fixedMeta) GetBroadcasts(int, int) [][]byte { return nil }
func (fixedMeta) LocalState(bool) []byte          { return nil }
func (fixedMeta) MergeRemoteState([]byte, bool)   {}

// TestReplayedIdentityGoesStale: memberlist gossips every node's metadata
// to every member, so a member can copy cluster-c's signed metadata and,
// once cluster-c is dead, answer for it under its name. It is counted
// alive at most gossip.StaleAfter after cluster-c last signed, then never
// while the copy runs: the copy cannot sign a newer counter.
func TestReplayedIdentityGoesStale(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a ring on loopback and watches a replay (about 15s); run without -short")
	}
	k := key(t)
	keys, table := identities(t, "cluster-a", "cluster-b", "cluster-c")
	a := signedAgent(t, "cluster-a", keys["cluster-a"], table, k, nil)
	seed := []string{a.Address()}
	b := signedAgent(t, "cluster-b", keys["cluster-b"], table, k, seed)
	c := signedAgent(t, "cluster-c", keys["cluster-c"], table, k, seed)
	waitFor(t, 30*time.Second, "ring with identities formed", func() bool {
		return isAlive(a, "cluster-b") && isAlive(a, "cluster-c") && isAlive(b, "cluster-c")
	})
	meta := c.LocalMeta()
	if len(meta) == 0 {
		t.Fatal("cluster-c gossips no signed metadata")
	}
	c.Stop()
	replayer(t, "cluster-c", k, meta, []string{a.Address(), b.Address()})
	stale := gossip.StaleAfter(time.Second)
	dead := waitFor(t, stale+30*time.Second, "cluster-c not counted alive while a copy of its metadata answers for it", func() bool {
		return !isAlive(a, "cluster-c") && !isAlive(b, "cluster-c")
	})
	t.Logf("cluster-c no longer counted alive %v after it stopped (stale after %v)", dead.Round(time.Millisecond), stale)
	never(t, 2*stale, "cluster-c counted alive again on a replayed identity", func() bool {
		return isAlive(a, "cluster-c") || isAlive(b, "cluster-c")
	})
}

// TestRemovedClusterRefused: the hub removes cluster-c (its public key
// leaves the table every spoke holds) and rotates the gossip key. At once
// cluster-c is no longer counted, its alive messages are refused, and,
// restarted with its old key and its old identity, it never rejoins.
// cluster-a and cluster-b keep each other throughout.
func TestRemovedClusterRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a ring on loopback (about 15s); run without -short")
	}
	k1, k2 := key(t), key(t)
	keys, table := identities(t, "cluster-a", "cluster-b", "cluster-c")
	a := signedAgent(t, "cluster-a", keys["cluster-a"], table, k1, nil)
	seed := []string{a.Address()}
	b := signedAgent(t, "cluster-b", keys["cluster-b"], table, k1, seed)
	c := signedAgent(t, "cluster-c", keys["cluster-c"], table, k1, seed)
	waitFor(t, 30*time.Second, "ring with identities formed", func() bool {
		return isAlive(a, "cluster-b") && isAlive(a, "cluster-c") && isAlive(b, "cluster-c")
	})

	// Revocation: the table without cluster-c.
	revoked := maps.Clone(table)
	delete(revoked, "cluster-c")
	for _, ag := range []*gossip.Agent{a, b} {
		ag.SetIdentity(&gossip.Identity{Key: keys[map[*gossip.Agent]string{a: "cluster-a", b: "cluster-b"}[ag]], Peers: revoked})
	}
	waitFor(t, 5*time.Second, "cluster-c no longer counted once revoked", func() bool {
		return !isAlive(a, "cluster-c") && !isAlive(b, "cluster-c")
	})
	never(t, 3*time.Second, "cluster-c counted alive after its revocation", func() bool {
		return isAlive(a, "cluster-c") || isAlive(b, "cluster-c") || !isAlive(a, "cluster-b")
	})
	if n, why := a.Refusals("cluster-c"); n == 0 || why != gossip.ErrUnknownName.Error() {
		t.Errorf("cluster-a refused %d alive messages of the revoked cluster-c (last: %q)", n, why)
	}

	// The key rotation (hub/spokes: accept, switch, drop).
	for _, st := range []struct {
		key    []byte
		accept [][]byte
	}{{k1, [][]byte{k2}}, {k2, [][]byte{k1}}, {k2, nil}} {
		for i, ag := range []*gossip.Agent{a, b} {
			if err := ag.Configure([]string{"cluster-a", "cluster-b"}[i], st.key, seed, st.accept...); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.Stop()
	// cluster-c, restarted with what it held: the old key, its identity.
	c2 := signedAgent(t, "cluster-c", keys["cluster-c"], table, k1, []string{a.Address(), b.Address()})
	never(t, 4*time.Second, "the removed cluster-c, with the old key and identity, counted alive", func() bool {
		return isAlive(a, "cluster-c") || isAlive(b, "cluster-c") || isAlive(c2, "cluster-a")
	})
	if !isAlive(a, "cluster-b") || !isAlive(b, "cluster-a") {
		t.Error("cluster-a and cluster-b lost each other")
	}
}

// TestTablesArriveOneByOne: the hub issues identities cluster by cluster,
// so at first each spoke's table lacks the clusters issued after it (and
// refuses them). Once every table is whole, every spoke counts every
// other alive.
func TestTablesArriveOneByOne(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a ring on loopback (about 10s); run without -short")
	}
	k := key(t)
	keys, table := identities(t, "cluster-a", "cluster-b", "cluster-c")
	partial := func(names ...string) map[string]ed25519.PublicKey {
		out := map[string]ed25519.PublicKey{}
		for _, n := range names {
			out[n] = table[n]
		}
		return out
	}
	a := signedAgent(t, "cluster-a", keys["cluster-a"], partial("cluster-a"), k, nil)
	seed := []string{a.Address()}
	b := signedAgent(t, "cluster-b", keys["cluster-b"], partial("cluster-a", "cluster-b"), k, seed)
	c := signedAgent(t, "cluster-c", keys["cluster-c"], table, k, []string{a.Address(), b.Address()})
	time.Sleep(2 * time.Second)
	if isAlive(a, "cluster-b") || isAlive(b, "cluster-c") {
		t.Fatal("a spoke counted a cluster its table does not hold")
	}
	a.SetIdentity(&gossip.Identity{Key: keys["cluster-a"], Peers: table})
	b.SetIdentity(&gossip.Identity{Key: keys["cluster-b"], Peers: table})
	took := waitFor(t, 30*time.Second, "every spoke counts every other alive", func() bool {
		for _, ag := range []*gossip.Agent{a, b, c} {
			for _, n := range []string{"cluster-a", "cluster-b", "cluster-c"} {
				if name, _ := ag.Running(); name != n && !isAlive(ag, n) {
					return false
				}
			}
		}
		return true
	})
	t.Logf("whole %v after the tables were", took.Round(time.Millisecond))
	never(t, 4*time.Second, "a peer went stale while every spoke runs", func() bool {
		return !isAlive(a, "cluster-b") || !isAlive(a, "cluster-c") || !isAlive(c, "cluster-a") || !isAlive(b, "cluster-c")
	})
}

// TestViewChangeSignalledWhenIdentityArrives: the spoke writes its view
// into EtcdSpoke status only when the agent signals a change. Spokes that
// formed the ring before the hub's identities reached them install them
// while their peers are alive in memberlist: the peers are not counted
// until a signed counter of theirs arrives, which no memberlist event
// announces. The view read at the last signal must count them again (in
// the local environment the spokes' status said "no peer alive" for good,
// and every witness abstained).
func TestViewChangeSignalledWhenIdentityArrives(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a ring on loopback (about 5s); run without -short")
	}
	k := key(t)
	keys, table := identities(t, "cluster-a", "cluster-b")
	// Rejoin rarely, so that only the signal can tell the status.
	mk := func() *gossip.Agent {
		ag := gossip.New(gossip.Config{BindAddr: "127.0.0.1:0", Profile: gossip.ProfileLocal, RejoinInterval: time.Minute, Log: logr.Discard()})
		t.Cleanup(ag.Stop)
		return ag
	}
	a, b := mk(), mk()
	if err := a.Configure("cluster-a", k, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Configure("cluster-b", k, []string{a.Address()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "ring formed without identities", func() bool { return isAlive(a, "cluster-b") })
	// What a status reconciler would write: the view at each signal.
	reported := make(chan bool, 100)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-a.Changes():
				reported <- isAlive(a, "cluster-b")
			}
		}
	}()
	a.SetIdentity(&gossip.Identity{Key: keys["cluster-a"], Peers: table})
	b.SetIdentity(&gossip.Identity{Key: keys["cluster-b"], Peers: table})
	last := false
	for end := time.After(5 * time.Second); ; {
		select {
		case last = <-reported:
			continue
		case <-end:
		}
		break
	}
	if !last {
		t.Error("the last view reported after the identities arrived does not count cluster-b alive")
	}
}

// viewOf is a's view as the spoke reports it: name -> alive, for the
// peers named; expected as the spoke passes them (spec.gossipPeers).
func viewOf(a *gossip.Agent, expected ...string) map[string]bool {
	out := map[string]bool{}
	for _, p := range a.View(expected) {
		out[p.Cluster] = p.Alive
	}
	return out
}

// TestWitnessAbstainsOnNameItCannotCheck (issue 37; what reverted the
// first merge of gossip identities): in TestScenarioHubPartitioned the
// hub issued cluster member-2's identity 42 s after the others, the other
// spokes' tables did not hold it yet, they refused its name and reported
// it dead, and the hub, cut off from member-2 only, replaced a live
// member on that evidence. A spoke must abstain on a name it cannot
// check (not in its table, or no table at all): neither alive nor dead
// in the view it reports, whether memberlist knows the peer or the hub
// named it as expected. A name it can check stays evidence both ways: a
// peer in its table that stops is reported dead, one signed with another
// key is not counted alive.
func TestWitnessAbstainsOnNameItCannotCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a ring on loopback (about 10s); run without -short")
	}
	k := key(t)
	keys, table := identities(t, "cluster-a", "cluster-b", "cluster-c", "cluster-d")
	older := maps.Clone(table)
	delete(older, "cluster-d") // cluster-a's table predates cluster-d
	a := signedAgent(t, "cluster-a", keys["cluster-a"], older, k, nil)
	seed := []string{a.Address()}
	b := signedAgent(t, "cluster-b", keys["cluster-b"], table, k, seed)
	c := signedAgent(t, "cluster-c", keys["cluster-c"], table, k, seed)
	signedAgent(t, "cluster-d", keys["cluster-d"], table, k, seed)
	// A spoke that holds its identity but no table yet.
	e := signedAgent(t, "cluster-e", keys["cluster-a"], nil, k, seed)
	expected := []string{"cluster-a", "cluster-b", "cluster-c", "cluster-d"}
	waitFor(t, 30*time.Second, "ring formed", func() bool {
		v := viewOf(a, expected...)
		return v["cluster-b"] && v["cluster-c"] && viewOf(b, expected...)["cluster-d"]
	})
	never(t, 3*time.Second, "a spoke reported a name it cannot check, alive or dead", func() bool {
		_, reportsD := viewOf(a, expected...)["cluster-d"]
		return reportsD || len(viewOf(e, expected...)) > 0
	})
	if why := a.Unverifiable(expected)["cluster-d"]; why != gossip.AbstainNotInTable {
		t.Errorf("cluster-a abstains on cluster-d because %q, want %q", why, gossip.AbstainNotInTable)
	}
	if why := e.Unverifiable(expected)["cluster-b"]; why != gossip.AbstainNoTable {
		t.Errorf("a spoke without a table abstains on cluster-b because %q, want %q", why, gossip.AbstainNoTable)
	}
	// Once cluster-a's table holds cluster-d, it witnesses it.
	a.SetIdentity(&gossip.Identity{Key: keys["cluster-a"], Peers: table})
	waitFor(t, 30*time.Second, "cluster-d counted once cluster-a's table holds it", func() bool { return viewOf(a, expected...)["cluster-d"] })

	// A name it can check is still evidence: cluster-c stops, and a
	// member speaking as cluster-c with another key does not make
	// cluster-a abstain or count it alive.
	c.Stop()
	waitFor(t, 30*time.Second, "cluster-c reported dead", func() bool {
		alive, reported := viewOf(a, expected...)["cluster-c"]
		return reported && !alive
	})
	signedAgent(t, "cluster-c", keys["cluster-d"], table, k, []string{a.Address(), b.Address()})
	never(t, 4*time.Second, "a forged cluster-c made cluster-a abstain or count it alive", func() bool {
		alive, reported := viewOf(a, expected...)["cluster-c"]
		return !reported || alive
	})
}
