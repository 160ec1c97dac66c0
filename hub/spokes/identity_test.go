package spokes

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/spoke/gossip"
)

// TestGossipIdentitiesIssuedRevokedRotated (issue 37, gossip names bound
// to clusters), against a real apiserver: the hub issues each registered cluster its own gossip
// identity (the private key in that cluster's copy only, the public key in
// the table every copy holds), keeps it over passes, issues a new one when
// a copy no longer matches; when member-b is no longer registered (what
// `etcdfed cluster unjoin` does first), its identity leaves the table and
// the gossip key is rotated in three steps, each taken only once member-a's
// spoke reports holding the previous one; at the end member-b is left with
// a key and an identity nobody accepts.
func TestGossipIdentitiesIssuedRevokedRotated(t *testing.T) {
	// One apiserver (frugal): the hub's namespace and one ring namespace
	// per member cluster stand for the three clusters.
	c := testenv.StartT(t, "hub-and-members")[0].Client
	ctx := context.Background()
	nsOf := map[string]string{"hub": "etcdfed-hub", "member-a": "ring-a", "member-b": "ring-b"}
	for _, ns := range nsOf {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	rec := events.NewFakeRecorder(100)
	r := &Reconciler{HubNamespace: nsOf["hub"], HubClient: c, HubReader: c, Recorder: rec}
	reach := reachIn(c, nsOf)
	// report is what cluster's spoke reports installed (EtcdSpoke
	// status.gossipKeys), which the rotation waits for.
	report := func(cluster string, keys *etcdfedv1.GossipKeysStatus) {
		t.Helper()
		reportKeys(t, c, nsOf[cluster], keys)
	}
	pass := func(registered ...string) {
		t.Helper()
		for _, name := range registered {
			if err := r.gossip(ctx, registeredAs(registered...), reach(ctx, []string{name})[0], reach); err != nil {
				t.Fatal(err)
			}
		}
	}
	get := func(where string) *corev1.Secret {
		t.Helper()
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: nsOf[where], Name: etcdfedv1.GossipSecretName}, sec); err != nil {
			t.Fatal(err)
		}
		return sec
	}
	tableOf := func(sec *corev1.Secret) map[string]ed25519.PublicKey {
		t.Helper()
		tb, err := gossip.ParsePeers(sec.Data[etcdfedv1.GossipSecretPeers])
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	identityOf := func(where string) ed25519.PublicKey {
		t.Helper()
		k, err := gossip.PrivateKey(get(where).Data[etcdfedv1.GossipSecretIdentity])
		if err != nil {
			t.Fatalf("the copy holds no identity: %v", err)
		}
		return k.Public().(ed25519.PublicKey)
	}
	drain := func() []string {
		var out []string
		for {
			select {
			case e := <-rec.Events:
				out = append(out, strings.Fields(e)[1])
			default:
				return out
			}
		}
	}

	// 1. Issued: each cluster its own, the table in every copy.
	pass("member-a", "member-b")
	hub := get("hub")
	tb := tableOf(hub)
	if len(tb) != 2 {
		t.Fatalf("the hub's table holds %d identities, want 2", len(tb))
	}
	for _, name := range []string{"member-a", "member-b"} {
		if !bytes.Equal(identityOf(name), tb[name]) {
			t.Errorf("%s's copy holds an identity the table does not name for it", name)
		}
	}
	if bytes.Equal(tb["member-a"], tb["member-b"]) {
		t.Error("two clusters share an identity")
	}
	if _, ok := hub.Data[etcdfedv1.GossipSecretIdentity]; ok {
		t.Error("the hub's Secret holds a private identity key")
	}
	rv := hub.ResourceVersion
	pass("member-a", "member-b")
	if get("hub").ResourceVersion != rv {
		t.Error("a second pass changed the hub's Secret")
	}
	// Every copy holds the whole table.
	for _, name := range []string{"member-a", "member-b"} {
		if !bytes.Equal(get(name).Data[etcdfedv1.GossipSecretPeers], hub.Data[etcdfedv1.GossipSecretPeers]) {
			t.Errorf("%s's copy holds another table", name)
		}
	}
	if got := drain(); len(got) != 2 || got[0] != etcdfedv1.EventGossipIdentityIssued {
		t.Errorf("events %v, want two %s", got, etcdfedv1.EventGossipIdentityIssued)
	}

	// 2. A copy that no longer matches the table gets a new identity.
	cp := get("member-b")
	cp.Data[etcdfedv1.GossipSecretIdentity] = bytes.Repeat([]byte{3}, 32)
	if err := c.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	pass("member-a", "member-b")
	tb2 := tableOf(get("hub"))
	if bytes.Equal(tb2["member-b"], tb["member-b"]) || !bytes.Equal(identityOf("member-b"), tb2["member-b"]) {
		t.Error("member-b's broken copy did not get a new identity matching the table")
	}
	if !bytes.Equal(tb2["member-a"], tb["member-a"]) {
		t.Error("member-a's identity changed")
	}
	drain()

	// 3. member-b unjoined: revoked, and the key rotated.
	oldKey := get("hub").Data[etcdfedv1.GossipSecretKey]
	bIdentity := identityOf("member-b")
	pass("member-a")
	hub = get("hub")
	if _, ok := tableOf(hub)["member-b"]; ok {
		t.Fatal("member-b's identity is still in the table")
	}
	if _, ok := tableOf(get("member-a"))["member-b"]; ok {
		t.Error("member-a's copy still names member-b")
	}
	newKey := hub.Data[etcdfedv1.GossipSecretAccept]
	if hub.Annotations[etcdfedv1.AnnotationGossipRotationPhase] != etcdfedv1.GossipRotationAccepting || len(newKey) != 32 || !bytes.Equal(hub.Data[etcdfedv1.GossipSecretKey], oldKey) {
		t.Fatalf("rotation not started: annotations %v", hub.Annotations)
	}
	if !strings.Contains(hub.Annotations[etcdfedv1.AnnotationGossipRotationReason], "member-b removed") {
		t.Errorf("rotation reason %q", hub.Annotations[etcdfedv1.AnnotationGossipRotationReason])
	}
	if got := drain(); strings.Join(got, ",") != etcdfedv1.EventGossipIdentityRevoked+","+etcdfedv1.EventGossipKeyRotationStarted {
		t.Errorf("events %v", got)
	}
	// No report from member-a's spoke yet: the rotation waits.
	pass("member-a")
	if h := get("hub"); h.Annotations[etcdfedv1.AnnotationGossipRotationPhase] != etcdfedv1.GossipRotationAccepting || !strings.Contains(h.Annotations[AnnotationGossipRotationWaiting], "member-a") {
		t.Fatalf("the rotation did not wait for member-a: %v", h.Annotations)
	}
	oldFP, newFP := gossip.Fingerprint(oldKey), gossip.Fingerprint(newKey)
	report("member-a", &etcdfedv1.GossipKeysStatus{Encrypts: oldFP, Accepts: []string{newFP}})
	pass("member-a")
	hub = get("hub")
	if hub.Annotations[etcdfedv1.AnnotationGossipRotationPhase] != etcdfedv1.GossipRotationSwitching || !bytes.Equal(hub.Data[etcdfedv1.GossipSecretKey], newKey) || !bytes.Equal(hub.Data[etcdfedv1.GossipSecretAccept], oldKey) {
		t.Fatalf("not switched: %v", hub.Annotations)
	}
	if cp := get("member-a"); !bytes.Equal(cp.Data[etcdfedv1.GossipSecretKey], newKey) {
		t.Error("member-a's copy does not encrypt with the new key")
	}
	pass("member-a") // member-a still reports the old key encrypting
	if get("hub").Annotations[etcdfedv1.AnnotationGossipRotationPhase] != etcdfedv1.GossipRotationSwitching {
		t.Fatal("the old key was dropped before every spoke encrypts with the new one")
	}
	report("member-a", &etcdfedv1.GossipKeysStatus{Encrypts: newFP, Accepts: []string{oldFP}})
	pass("member-a")
	hub = get("hub")
	if len(hub.Data[etcdfedv1.GossipSecretAccept]) != 0 || len(hub.Annotations) != 0 {
		t.Fatalf("rotation not completed: accept %d bytes, annotations %v", len(hub.Data[etcdfedv1.GossipSecretAccept]), hub.Annotations)
	}
	if cp := get("member-a"); len(cp.Data[etcdfedv1.GossipSecretAccept]) != 0 || !bytes.Equal(cp.Data[etcdfedv1.GossipSecretKey], newKey) {
		t.Error("member-a's copy still accepts the old key")
	}
	if got := drain(); strings.Join(got, ",") != etcdfedv1.EventGossipKeyRotationSwitched+","+etcdfedv1.EventGossipKeyRotationCompleted {
		t.Errorf("events %v", got)
	}
	// What member-b kept is accepted nowhere.
	left := get("member-b")
	if !bytes.Equal(left.Data[etcdfedv1.GossipSecretKey], oldKey) {
		t.Error("member-b's copy changed after it left")
	}
	for n, k := range tableOf(get("member-a")) {
		if bytes.Equal(k, bIdentity) {
			t.Errorf("member-b's identity is in member-a's table as %s", n)
		}
	}
}

// reachIn reaches each cluster of nsOf as a ring namespace of one
// apiserver (c), as gossipTargets reaches engaged member clusters; a
// cluster not in nsOf is not engaged.
func reachIn(c client.Client, nsOf map[string]string) func(context.Context, []string) []gossipTarget {
	return func(_ context.Context, names []string) []gossipTarget {
		var out []gossipTarget
		for _, n := range names {
			if ns, ok := nsOf[n]; ok {
				out = append(out, gossipTarget{name: n, client: c, reader: c, namespace: ns, timeout: copyTimeout})
			}
		}
		return out
	}
}

func registeredAs(names ...string) []registry.MemberCluster {
	var out []registry.MemberCluster
	for _, n := range names {
		out = append(out, registry.MemberCluster{Name: n})
	}
	return out
}

// reportKeys writes the EtcdSpoke of ns with status.gossipKeys, as the
// spoke does.
func reportKeys(t *testing.T, c client.Client, ns string, keys *etcdfedv1.GossipKeysStatus) {
	t.Helper()
	ctx := context.Background()
	sp := &etcdfedv1.EtcdSpoke{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: etcdfedv1.SpokeObjectName}, sp)
	if apierrors.IsNotFound(err) {
		sp = &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: etcdfedv1.SpokeObjectName}}
		err = c.Create(ctx, sp)
	}
	if err != nil {
		t.Fatal(err)
	}
	sp.Status.GossipKeys = keys
	if err := c.Status().Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
}

// TestIdentitiesIssuedToEveryClusterAtOnce (issue 37; what reverted the
// first merge of gossip identities): the hub issued a cluster's identity
// only in the pass over that cluster's own EtcdSpoke, and the others'
// copies got the table at their own next pass. In
// TestScenarioHubPartitioned member-2's came 42 s after the others', its
// peers' spokes refused its name meanwhile, and the hub replaced a live
// member. Now one pass, over any cluster's EtcdSpoke, issues an identity
// to every registered cluster it reaches and hands every copy the whole
// table; an identity enters the table only once its cluster's copy holds
// it, so a cluster the hub could not write to is in no table (the spokes
// abstain on its name) rather than in every table with a key it lacks;
// and an identity issued again reaches every other copy in the same pass.
func TestIdentitiesIssuedToEveryClusterAtOnce(t *testing.T) {
	c := testenv.StartT(t, "hub-and-members")[0].Client
	ctx := context.Background()
	nsOf := map[string]string{"hub": "etcdfed-hub", "member-a": "ring-a", "member-b": "ring-b", "member-c": "ring-c",
		// member-e is engaged, but its ring namespace does not exist:
		// its copy cannot be written.
		"member-e": "ring-e"}
	for n, ns := range nsOf {
		if n == "member-e" {
			continue
		}
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	r := &Reconciler{HubNamespace: nsOf["hub"], HubClient: c, HubReader: c}
	reach := reachIn(c, nsOf)
	// member-d is registered but not engaged (reach leaves it out).
	regs := registeredAs("member-a", "member-b", "member-c", "member-d", "member-e")
	passOver := func(cluster string) {
		t.Helper()
		if err := r.gossip(ctx, regs, reach(ctx, []string{cluster})[0], reach); err != nil {
			t.Fatal(err)
		}
	}
	copyOf := func(cluster string) (ed25519.PublicKey, map[string]ed25519.PublicKey) {
		t.Helper()
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: nsOf[cluster], Name: etcdfedv1.GossipSecretName}, sec); err != nil {
			t.Fatalf("%s's copy: %v", cluster, err)
		}
		tb, err := gossip.ParsePeers(sec.Data[etcdfedv1.GossipSecretPeers])
		if err != nil {
			t.Fatal(err)
		}
		k, err := gossip.PrivateKey(sec.Data[etcdfedv1.GossipSecretIdentity])
		if err != nil {
			t.Fatalf("%s's copy holds no identity: %v", cluster, err)
		}
		return k.Public().(ed25519.PublicKey), tb
	}
	hubTable := func() map[string]ed25519.PublicKey {
		t.Helper()
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: nsOf["hub"], Name: etcdfedv1.GossipSecretName}, sec); err != nil {
			t.Fatal(err)
		}
		tb, err := gossip.ParsePeers(sec.Data[etcdfedv1.GossipSecretPeers])
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	members := []string{"member-a", "member-b", "member-c"}

	// One pass, over member-a's EtcdSpoke only.
	passOver("member-a")
	tb := hubTable()
	if got := slices.Sorted(maps.Keys(tb)); !slices.Equal(got, members) {
		t.Fatalf("after one pass the hub's table names %v, want %v", got, members)
	}
	for _, n := range members {
		id, copyTable := copyOf(n)
		if !bytes.Equal(id, tb[n]) {
			t.Errorf("%s's copy holds an identity the table does not name for it", n)
		}
		if got := slices.Sorted(maps.Keys(copyTable)); !slices.Equal(got, members) {
			t.Errorf("%s's copy names %v, want %v", n, got, members)
		}
	}

	// member-c's copy lost its identity: the pass over member-c's
	// EtcdSpoke issues it again, and member-b's copy holds the new key
	// at once, not at member-b's next pass.
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsOf["member-c"], Name: etcdfedv1.GossipSecretName}, sec); err != nil {
		t.Fatal(err)
	}
	delete(sec.Data, etcdfedv1.GossipSecretIdentity)
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	passOver("member-c")
	cID, _ := copyOf("member-c")
	if bytes.Equal(cID, tb["member-c"]) || !bytes.Equal(hubTable()["member-c"], cID) {
		t.Fatal("member-c's copy without its identity was not issued a new one in the table")
	}
	if _, bTable := copyOf("member-b"); !bytes.Equal(bTable["member-c"], cID) {
		t.Error("member-b's copy still holds member-c's old key after the pass that issued the new one")
	}
}

// TestDecideRotation: the steps that wait.
func TestDecideRotation(t *testing.T) {
	k1, k2, k3 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	f1, f2 := gossip.Fingerprint(k1), gossip.Fingerprint(k2)
	pending := map[string]string{etcdfedv1.AnnotationGossipRotationPending: "cluster c removed"}
	accepting := map[string]string{etcdfedv1.AnnotationGossipRotationPhase: etcdfedv1.GossipRotationAccepting}
	for _, tc := range []struct {
		name   string
		data   map[string][]byte
		ann    map[string]string
		spokes map[string]*etcdfedv1.GossipKeysStatus
		step   string
		wait   string
	}{
		{"nothing pending", map[string][]byte{"key": k1}, nil, nil, "", ""},
		{"a rotation by hand runs", map[string][]byte{"key": k1, "accept": k2}, pending, nil, "", "by hand"},
		{"starts", map[string][]byte{"key": k1}, pending, map[string]*etcdfedv1.GossipKeysStatus{"a": nil}, etcdfedv1.EventGossipKeyRotationStarted, "a (no report)"},
		{"a spoke without a report holds it", map[string][]byte{"key": k1, "accept": k2}, accepting,
			map[string]*etcdfedv1.GossipKeysStatus{"a": {Encrypts: f1, Accepts: []string{f2}}, "b": nil}, "", "b (no report)"},
		{"an unencrypted spoke takes no part", map[string][]byte{"key": k1, "accept": k2}, accepting,
			map[string]*etcdfedv1.GossipKeysStatus{"a": {Encrypts: f1, Accepts: []string{f2}}, "b": {}}, etcdfedv1.EventGossipKeyRotationSwitched, "b"},
		{"a spoke not accepting holds it", map[string][]byte{"key": k1, "accept": k2}, accepting,
			map[string]*etcdfedv1.GossipKeysStatus{"a": {Encrypts: f1}}, "", "waiting for a to accept"},
		{"accept edited into two keys", map[string][]byte{"key": k1, "accept": append(bytes.Clone(k2), k3...)}, accepting, nil, "", "not one key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideRotation(tc.data, tc.ann, tc.spokes, k3)
			if d.reason != tc.step {
				t.Errorf("step %q, want %q", d.reason, tc.step)
			}
			if w := d.annotations[AnnotationGossipRotationWaiting]; tc.wait == "" && w != "" || !strings.Contains(w, tc.wait) {
				t.Errorf("waiting %q, want it to name %q", w, tc.wait)
			}
		})
	}
}
