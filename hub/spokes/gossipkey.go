package spokes

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/gossip"
)

// The gossip key and identities. The spokes of one hub form one memberlist
// ring, and memberlist authenticates and encrypts with one shared key:
// whoever has it can join. The hub generates the key of its ring (32
// random bytes, the Secret etcdfedv1.GossipSecretName in the hub's
// namespace, created once) and writes a copy into every member cluster's
// ring namespace, where the spoke reads it. Gossip is therefore encrypted
// by default, with a key no other installation shares. A key is rotated by
// editing the hub's Secret (docs/certificates.md, "Gossip encryption"):
// the hub copies every change.
//
// The key alone would let any member cluster speak as any other (a dead
// one included, and keep rings from failing over). So the hub also gives
// every registered member cluster its own gossip identity: an ed25519 key
// it generates, writes into that cluster's copy only (key "identity"), and
// whose public key it keeps in the table of its own Secret (key "peers");
// every copy holds the table, and every spoke refuses a name that is not
// in it or not signed with its key, and abstains on a name not in it as a
// witness (spoke/gossip, identity.go). A cluster whose copy no longer
// matches the table gets a new identity.
//
// Identities are issued to every registered cluster at once: a pass over
// any cluster's EtcdSpoke also tries every registered cluster that has no
// identity in the table yet (syncCopies). An identity enters the table
// only once its cluster's copy holds it, so a cluster the hub cannot
// write to is in no spoke's table (they abstain on its name) instead of
// in every table with a key it does not hold (they would count it dead).
// Whenever the table or the key changes, the same pass writes every
// registered cluster's copy, so that no spoke keeps an old table for a
// resync period.
//
// When a cluster is no longer registered (`etcdfed cluster unjoin`
// deletes its registration), the hub takes its identity out of the table
// (every copy gets the table without it in the same pass) and
// rotates the key in three steps, each taken once every registered spoke
// reports (EtcdSpoke status.gossipKeys) that it holds the previous one:
// the new key accepted, then encrypting with the old one accepted, then
// the old one dropped. The removed cluster is left with the old key and an
// identity nobody accepts. The Secret's annotations say where a rotation
// stands; events on it say each step.

// gossipKeyLabels mark the hub's copies.
func gossipKeyLabels() map[string]string {
	return map[string]string{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue, etcdfedv1.LabelComponent: etcdfedv1.ComponentGossipKey}
}

// AnnotationGossipRotationWaiting says, on the hub's Secret, which spokes a
// rotation step waits for.
const AnnotationGossipRotationWaiting = "etcdfed.dev/gossip-rotation-waiting"

// hubGossipSecret reads the hub's gossip Secret, and creates it with a new
// key when it does not exist.
func (r *Reconciler) hubGossipSecret(ctx context.Context) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: r.HubNamespace, Name: etcdfedv1.GossipSecretName}
	sec := &corev1.Secret{}
	err := r.HubReader.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, fmt.Errorf("generate the gossip key: %w", err)
		}
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: gossipKeyLabels()},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{etcdfedv1.GossipSecretKey: k}}
		ctrl.LoggerFrom(ctx).Info("Creating the spokes' gossip key", "secret", key)
		err = r.HubClient.Create(ctx, sec)
		if apierrors.IsAlreadyExists(err) {
			err = r.HubReader.Get(ctx, key, sec)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gossip key Secret %s in the hub cluster: %w", key, err)
	}
	if len(sec.Data[etcdfedv1.GossipSecretKey]) == 0 {
		return nil, fmt.Errorf("gossip key Secret %s in the hub cluster has no %q", key, etcdfedv1.GossipSecretKey)
	}
	return sec, nil
}

// hubGossipKey is the key part of the hub's Secret (gossipData).
func (r *Reconciler) hubGossipKey(ctx context.Context) (map[string][]byte, error) {
	sec, err := r.hubGossipSecret(ctx)
	if err != nil {
		return nil, err
	}
	return gossipData(sec.Data), nil
}

// gossipData is the key part of what the copies hold: the key, and the
// keys accepted beside it.
func gossipData(d map[string][]byte) map[string][]byte {
	out := map[string][]byte{etcdfedv1.GossipSecretKey: bytes.Clone(d[etcdfedv1.GossipSecretKey])}
	if a := d[etcdfedv1.GossipSecretAccept]; len(a) > 0 {
		out[etcdfedv1.GossipSecretAccept] = bytes.Clone(a)
	}
	return out
}

// table reads the identity table of the hub's Secret.
func table(sec *corev1.Secret) (map[string]ed25519.PublicKey, error) {
	t, err := gossip.ParsePeers(sec.Data[etcdfedv1.GossipSecretPeers])
	if err != nil {
		return nil, fmt.Errorf("gossip Secret %s/%s in the hub cluster, %q: %w (fix or remove it: every identity is then issued again)", sec.Namespace, sec.Name, etcdfedv1.GossipSecretPeers, err)
	}
	return t, nil
}

// updateHub writes the hub's Secret (optimistically: a conflict is
// retried by the next pass).
func (r *Reconciler) updateHub(ctx context.Context, sec *corev1.Secret) error {
	if err := r.HubClient.Update(ctx, sec); err != nil {
		return fmt.Errorf("update the hub's gossip Secret: %w", err)
	}
	return nil
}

func (r *Reconciler) event(sec *corev1.Secret, typ, reason, action, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(sec, nil, typ, reason, action, "%s", msg)
	}
}

// revoke takes out of the table every cluster not in registered, and
// marks the key rotation that follows as pending.
func (r *Reconciler) revoke(ctx context.Context, sec *corev1.Secret, registered []string) error {
	t, err := table(sec)
	if err != nil {
		return err
	}
	var removed []string
	for n := range t {
		if !slices.Contains(registered, n) {
			removed = append(removed, n)
		}
	}
	if len(removed) == 0 {
		return nil
	}
	slices.Sort(removed)
	for _, n := range removed {
		delete(t, n)
	}
	upd := sec.DeepCopy()
	upd.Data[etcdfedv1.GossipSecretPeers] = gossip.FormatPeers(t)
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	pending := upd.Annotations[etcdfedv1.AnnotationGossipRotationPending]
	for _, n := range removed {
		why := "cluster " + n + " removed"
		if !strings.Contains(pending, why) {
			pending = strings.TrimPrefix(pending+", "+why, ", ")
		}
	}
	upd.Annotations[etcdfedv1.AnnotationGossipRotationPending] = pending
	ctrl.LoggerFrom(ctx).Info("Revoking the gossip identity of clusters no longer registered; a key rotation follows", "clusters", removed)
	if err := r.updateHub(ctx, upd); err != nil {
		return err
	}
	*sec = *upd
	for _, n := range removed {
		r.event(sec, corev1.EventTypeNormal, etcdfedv1.EventGossipIdentityRevoked, "Revoke",
			fmt.Sprintf("cluster %s is no longer registered: its gossip identity left the table every spoke checks names against; the gossip key is rotated next", n))
	}
	return nil
}

// rotation is one pass's decision on the key rotation: the Secret's data
// and annotations after it, and the event to record (none: nothing moved).
type rotation struct {
	data        map[string][]byte
	annotations map[string]string
	reason, msg string
}

// decideRotation steps the key rotation. data and annotations are the hub
// Secret's; spokes are the registered clusters' reports (nil: none, so not
// known to hold anything); newKey is the key a rotation that starts now
// takes. Pure.
func decideRotation(data map[string][]byte, annotations map[string]string, spokes map[string]*etcdfedv1.GossipKeysStatus, newKey []byte) rotation {
	out := rotation{data: maps.Clone(data), annotations: maps.Clone(annotations)}
	if out.annotations == nil {
		out.annotations = map[string]string{}
	}
	key, accept := data[etcdfedv1.GossipSecretKey], data[etcdfedv1.GossipSecretAccept]
	// waitFor lists the spokes for which held is false; spokes that run
	// unencrypted take no part.
	waitFor := func(what string, held func(*etcdfedv1.GossipKeysStatus) bool) bool {
		var missing []string
		for _, n := range slices.Sorted(maps.Keys(spokes)) {
			s := spokes[n]
			switch {
			case s != nil && s.Encrypts == "":
			case s == nil:
				missing = append(missing, n+" (no report)")
			case !held(s):
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			delete(out.annotations, AnnotationGossipRotationWaiting)
			return true
		}
		out.annotations[AnnotationGossipRotationWaiting] = "waiting for " + strings.Join(missing, ", ") + " to " + what
		return false
	}
	switch annotations[etcdfedv1.AnnotationGossipRotationPhase] {
	case "":
		pending := annotations[etcdfedv1.AnnotationGossipRotationPending]
		if pending == "" {
			return out
		}
		if len(accept) > 0 {
			out.annotations[AnnotationGossipRotationWaiting] = "waiting for the rotation by hand (\"accept\" is set) to end"
			return out
		}
		out.data[etcdfedv1.GossipSecretAccept] = bytes.Clone(newKey)
		out.annotations[etcdfedv1.AnnotationGossipRotationPhase] = etcdfedv1.GossipRotationAccepting
		out.annotations[etcdfedv1.AnnotationGossipRotationReason] = pending
		delete(out.annotations, etcdfedv1.AnnotationGossipRotationPending)
		out.reason = etcdfedv1.EventGossipKeyRotationStarted
		out.msg = fmt.Sprintf("%s: every spoke accepts the new gossip key %s beside %s first", pending, gossip.Fingerprint(newKey), gossip.Fingerprint(key))
		waitFor("accept "+gossip.Fingerprint(newKey), func(*etcdfedv1.GossipKeysStatus) bool { return false })
	case etcdfedv1.GossipRotationAccepting:
		next := gossip.Fingerprint(accept)
		if len(accept) != len(key) {
			out.annotations[AnnotationGossipRotationWaiting] = fmt.Sprintf("\"accept\" holds %d bytes, not one key of %d: fix it by hand", len(accept), len(key))
			return out
		}
		if !waitFor("accept "+next, func(s *etcdfedv1.GossipKeysStatus) bool {
			return s.Encrypts == next || slices.Contains(s.Accepts, next)
		}) {
			return out
		}
		out.data[etcdfedv1.GossipSecretKey], out.data[etcdfedv1.GossipSecretAccept] = bytes.Clone(accept), bytes.Clone(key)
		out.annotations[etcdfedv1.AnnotationGossipRotationPhase] = etcdfedv1.GossipRotationSwitching
		out.reason = etcdfedv1.EventGossipKeyRotationSwitched
		out.msg = fmt.Sprintf("every spoke accepts %s: it now encrypts, %s is still accepted (%s)", next, gossip.Fingerprint(key), annotations[etcdfedv1.AnnotationGossipRotationReason])
		waitFor("encrypt with "+next, func(s *etcdfedv1.GossipKeysStatus) bool { return s.Encrypts == next })
	case etcdfedv1.GossipRotationSwitching:
		cur := gossip.Fingerprint(key)
		if !waitFor("encrypt with "+cur, func(s *etcdfedv1.GossipKeysStatus) bool { return s.Encrypts == cur }) {
			return out
		}
		delete(out.data, etcdfedv1.GossipSecretAccept)
		delete(out.annotations, etcdfedv1.AnnotationGossipRotationPhase)
		delete(out.annotations, etcdfedv1.AnnotationGossipRotationReason)
		out.reason = etcdfedv1.EventGossipKeyRotationCompleted
		out.msg = fmt.Sprintf("every spoke encrypts with %s; %s is dropped and no spoke accepts it (%s)", cur, gossip.Fingerprint(accept), annotations[etcdfedv1.AnnotationGossipRotationReason])
	default:
		out.annotations[AnnotationGossipRotationWaiting] = fmt.Sprintf("unknown phase %q: remove the annotation %s to start again", annotations[etcdfedv1.AnnotationGossipRotationPhase], etcdfedv1.AnnotationGossipRotationPhase)
	}
	return out
}

// rotate takes the rotation's next step, if any, on the hub's Secret.
func (r *Reconciler) rotate(ctx context.Context, sec *corev1.Secret, spokes map[string]*etcdfedv1.GossipKeysStatus) error {
	newKey := make([]byte, len(sec.Data[etcdfedv1.GossipSecretKey]))
	if _, err := rand.Read(newKey); err != nil {
		return fmt.Errorf("generate a gossip key: %w", err)
	}
	d := decideRotation(sec.Data, sec.Annotations, spokes, newKey)
	if maps.EqualFunc(d.data, sec.Data, bytes.Equal) && maps.Equal(d.annotations, sec.Annotations) {
		return nil
	}
	upd := sec.DeepCopy()
	upd.Data, upd.Annotations = d.data, d.annotations
	log := ctrl.LoggerFrom(ctx)
	if d.reason != "" {
		log.Info("Gossip key rotation: "+d.msg, "step", d.reason)
	} else {
		log.Info("Gossip key rotation waits", "phase", d.annotations[etcdfedv1.AnnotationGossipRotationPhase], "why", d.annotations[AnnotationGossipRotationWaiting])
	}
	if err := r.updateHub(ctx, upd); err != nil {
		return err
	}
	*sec = *upd
	if d.reason != "" {
		r.event(sec, corev1.EventTypeNormal, d.reason, "RotateGossipKey", d.msg)
	}
	return nil
}

// copyTimeout bounds a pass's read and write of the copy in a cluster
// other than the one whose EtcdSpoke it reconciles: a cluster the hub is
// cut off from holds the pass for that long at most.
const copyTimeout = 5 * time.Second

// gossipTarget is a registered member cluster whose copy a pass reads and
// writes (in namespace, the ring namespace).
type gossipTarget struct {
	name      string
	client    client.Client
	reader    client.Reader
	namespace string
	// timeout bounds its read and write (0: the pass's own deadline).
	timeout time.Duration
}

// copyState is what a pass found in a target's copy.
type copyState struct {
	// seed is the private key of the cluster's identity, when its copy
	// holds one that the table names for it.
	seed []byte
	// foreign: a Secret the hub did not write, holding another key; left
	// alone, and no identity is issued into it.
	foreign bool
	err     error
}

// readCopy reads tg's copy and tells whether it holds tg's identity as the
// table t names it.
func readCopy(ctx context.Context, tg gossipTarget, hub *corev1.Secret, t map[string]ed25519.PublicKey) copyState {
	key := client.ObjectKey{Namespace: tg.namespace, Name: etcdfedv1.GossipSecretName}
	cur := &corev1.Secret{}
	switch err := tg.reader.Get(ctx, key, cur); {
	case apierrors.IsNotFound(err):
		return copyState{}
	case err != nil:
		return copyState{err: fmt.Errorf("read gossip key Secret: %w", err)}
	case cur.Labels[etcdfedv1.LabelManagedBy] != etcdfedv1.ManagedByValue && !maps.EqualFunc(gossipData(cur.Data), gossipData(hub.Data), bytes.Equal):
		ctrl.LoggerFrom(ctx).Info("Leaving a gossip key Secret the hub did not write; put the same key into the hub's Secret to hand it over", "cluster", tg.name, "secret", key)
		return copyState{foreign: true}
	}
	if k, err := gossip.PrivateKey(cur.Data[etcdfedv1.GossipSecretIdentity]); err == nil && bytes.Equal(k.Public().(ed25519.PublicKey), t[tg.name]) {
		return copyState{seed: k.Seed()}
	}
	return copyState{}
}

// eachTarget runs f for every target at once, each under its own timeout.
func eachTarget(ctx context.Context, tgs []gossipTarget, f func(context.Context, int, gossipTarget)) {
	var wg sync.WaitGroup
	for i, tg := range tgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ctx
			if tg.timeout > 0 {
				var cancel context.CancelFunc
				c, cancel = context.WithTimeout(ctx, tg.timeout)
				defer cancel()
			}
			f(c, i, tg)
		}()
	}
	wg.Wait()
}

// syncCopies is one pass over the copies of tgs: it issues an identity to
// every target whose copy holds none that the table names for it, then
// brings every copy in line with the hub's Secret. Issuing goes copy
// first: a new identity is written into its cluster's copy (with the
// table it had, plus itself), and only the identities so handed over
// enter the hub's table, in one write. A cluster the hub cannot reach
// therefore never appears in the others' tables with a key it does not
// hold: they abstain on its name (spoke/gossip) until it does. When the
// table changed, every registered cluster's copy gets it in the same pass
// (more: how to reach the registered clusters not in tgs), so that no
// spoke holds an old table for a resync period. It returns the errors of
// the targets, by cluster.
func (r *Reconciler) syncCopies(ctx context.Context, hub *corev1.Secret, tgs []gossipTarget, more func([]string) []gossipTarget) (map[string]error, error) {
	t, err := table(hub)
	if err != nil {
		return nil, err
	}
	states := make([]copyState, len(tgs))
	eachTarget(ctx, tgs, func(ctx context.Context, i int, tg gossipTarget) { states[i] = readCopy(ctx, tg, hub, t) })

	// Issue: every target reached whose copy holds no identity of the table.
	pubs := make([]ed25519.PublicKey, len(tgs))
	eachTarget(ctx, tgs, func(ctx context.Context, i int, tg gossipTarget) {
		st := &states[i]
		if st.err != nil || st.foreign || st.seed != nil {
			return
		}
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			st.err = fmt.Errorf("generate a gossip identity: %w", err)
			return
		}
		own := maps.Clone(t)
		own[tg.name] = pub
		data := gossipCopy(hub, priv.Seed())
		data[etcdfedv1.GossipSecretPeers] = gossip.FormatPeers(own)
		ctrl.LoggerFrom(ctx).Info("Issuing a gossip identity", "cluster", tg.name, "identity", gossip.Fingerprint(pub), "replacing", t[tg.name] != nil)
		if err := writeGossipKey(ctx, tg.client, tg.reader, tg.namespace, data); err != nil {
			st.err = err
			return
		}
		pubs[i], st.seed = pub, priv.Seed()
	})
	var issued []string
	for i, pub := range pubs {
		if pub != nil {
			_, replaced := t[tgs[i].name]
			t[tgs[i].name] = pub
			msg := fmt.Sprintf("cluster %s: gossip identity %s issued", tgs[i].name, gossip.Fingerprint(pub))
			if replaced {
				msg += " (its copy no longer held the identity of the table)"
			}
			issued = append(issued, msg)
		}
	}
	if len(issued) > 0 {
		upd := hub.DeepCopy()
		if upd.Data == nil {
			upd.Data = map[string][]byte{}
		}
		upd.Data[etcdfedv1.GossipSecretPeers] = gossip.FormatPeers(t)
		if err := r.updateHub(ctx, upd); err != nil {
			// The copies hold identities the table does not name: the
			// next pass issues them again.
			return nil, err
		}
		*hub = *upd
		for _, msg := range issued {
			r.event(hub, corev1.EventTypeNormal, etcdfedv1.EventGossipIdentityIssued, "Issue", msg)
		}
		// Every other registered cluster's copy gets the new table now.
		var done []string
		for _, tg := range tgs {
			done = append(done, tg.name)
		}
		if more != nil {
			rest := more(done)
			restStates := make([]copyState, len(rest))
			eachTarget(ctx, rest, func(ctx context.Context, i int, tg gossipTarget) { restStates[i] = readCopy(ctx, tg, hub, t) })
			tgs, states = append(slices.Clone(tgs), rest...), append(states, restStates...)
		}
	}

	// Bring every copy with an identity in line with the hub's Secret.
	eachTarget(ctx, tgs, func(ctx context.Context, i int, tg gossipTarget) {
		st := &states[i]
		if st.err != nil || st.seed == nil {
			return
		}
		st.err = writeGossipKey(ctx, tg.client, tg.reader, tg.namespace, gossipCopy(hub, st.seed))
	})
	errs := map[string]error{}
	for i, st := range states {
		if st.err != nil {
			errs[tgs[i].name] = st.err
		}
	}
	return errs, nil
}

// gossipCopy is what a cluster's copy holds: the hub's keys, the
// cluster's identity and the table.
func gossipCopy(hub *corev1.Secret, seed []byte) map[string][]byte {
	out := gossipData(hub.Data)
	out[etcdfedv1.GossipSecretIdentity] = bytes.Clone(seed)
	if p := hub.Data[etcdfedv1.GossipSecretPeers]; len(p) > 0 {
		out[etcdfedv1.GossipSecretPeers] = bytes.Clone(p)
	}
	return out
}

// writeGossipKey brings the member cluster's copy in line with data. A
// Secret of that name the hub did not write (no managed-by label) is left
// alone while it holds another key: an operator who distributed a key by
// hand keeps it. Once it holds the same key as the hub's Secret (the
// operator put that key into the hub's Secret, as the log line asks), the
// hub takes it over by labelling it, so a later rotation reaches it.
func writeGossipKey(ctx context.Context, c client.Client, r client.Reader, ns string, data map[string][]byte) error {
	key := client.ObjectKey{Namespace: ns, Name: etcdfedv1.GossipSecretName}
	cur := &corev1.Secret{}
	switch err := r.Get(ctx, key, cur); {
	case apierrors.IsNotFound(err):
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name, Labels: gossipKeyLabels()}, Type: corev1.SecretTypeOpaque, Data: data}
		if err := c.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create gossip key Secret: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read gossip key Secret: %w", err)
	}
	managed := cur.Labels[etcdfedv1.LabelManagedBy] == etcdfedv1.ManagedByValue
	if !managed && !maps.EqualFunc(gossipData(cur.Data), gossipData(data), bytes.Equal) {
		ctrl.LoggerFrom(ctx).Info("Leaving a gossip key Secret the hub did not write; put the same key into the hub's Secret to hand it over", "secret", key)
		return nil
	}
	if managed && maps.EqualFunc(cur.Data, data, bytes.Equal) {
		return nil
	}
	upd := cur.DeepCopy()
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	maps.Copy(upd.Labels, gossipKeyLabels())
	upd.Data = data
	if err := c.Update(ctx, upd); err != nil {
		return fmt.Errorf("update gossip key Secret: %w", err)
	}
	if !managed {
		ctrl.LoggerFrom(ctx).Info("Took over a gossip key Secret the hub did not write (etcdfed cluster join's, or one written by hand): it holds the hub's key, and follows the hub's Secret from now on", "secret", key)
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Updated the spokes' gossip key and identities", "secret", key)
	return nil
}
