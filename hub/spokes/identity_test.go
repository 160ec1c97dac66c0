package spokes

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
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
	reconcilerOf := func(cluster string) *Reconciler {
		return &Reconciler{RingNamespace: nsOf[cluster], HubNamespace: nsOf["hub"], HubClient: c, HubReader: c, Recorder: rec}
	}
	r := reconcilerOf("hub")
	reports := map[string]*etcdfedv1.GossipKeysStatus{}
	pass := func(registered ...string) {
		t.Helper()
		for _, name := range registered {
			hub, err := r.hubGossipSecret(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.revoke(ctx, hub, registered); err != nil {
				t.Fatal(err)
			}
			rep := map[string]*etcdfedv1.GossipKeysStatus{}
			for _, n := range registered {
				rep[n] = reports[n]
			}
			if err := r.rotate(ctx, hub, rep); err != nil {
				t.Fatal(err)
			}
			if err := reconcilerOf(name).syncGossip(ctx, hub, name, c, c); err != nil {
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
	// A table reaches a copy at that cluster's next pass.
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
	reports["member-a"] = &etcdfedv1.GossipKeysStatus{Encrypts: oldFP, Accepts: []string{newFP}}
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
	reports["member-a"] = &etcdfedv1.GossipKeysStatus{Encrypts: newFP, Accepts: []string{oldFP}}
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
