package spokes

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
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
	pubs := issueIdentities(ctx, hub, t, tgs, states)
	if issued := enterIssued(t, tgs, pubs); len(issued) > 0 {
		if err := r.publishTable(ctx, hub, t, issued); err != nil {
			// The copies hold identities the table does not name: the
			// next pass issues them again.
			return nil, err
		}
		if more != nil {
			tgs, states = withTheRest(ctx, hub, t, tgs, states, more)
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

// issueIdentities writes a new identity into the copy of every target
// reached whose copy holds no identity of the table t (with t, plus
// itself), and records it in the target's state. It returns the public
// keys issued, by target (nil: none).
func issueIdentities(ctx context.Context, hub *corev1.Secret, t map[string]ed25519.PublicKey, tgs []gossipTarget, states []copyState) []ed25519.PublicKey {
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
	return pubs
}

// enterIssued enters the identities issued into the table t and returns
// one message for each, for its event.
func enterIssued(t map[string]ed25519.PublicKey, tgs []gossipTarget, pubs []ed25519.PublicKey) []string {
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
	return issued
}

// publishTable writes the table t into the hub's Secret, in one write,
// and makes an event of each identity issued.
func (r *Reconciler) publishTable(ctx context.Context, hub *corev1.Secret, t map[string]ed25519.PublicKey, issued []string) error {
	upd := hub.DeepCopy()
	if upd.Data == nil {
		upd.Data = map[string][]byte{}
	}
	upd.Data[etcdfedv1.GossipSecretPeers] = gossip.FormatPeers(t)
	if err := r.updateHub(ctx, upd); err != nil {
		return err
	}
	*hub = *upd
	for _, msg := range issued {
		r.event(hub, corev1.EventTypeNormal, etcdfedv1.EventGossipIdentityIssued, "Issue", msg)
	}
	return nil
}

// withTheRest adds to the pass every other registered cluster (more:
// how to reach those not in tgs), its copy read, so that it gets the new
// table now.
func withTheRest(ctx context.Context, hub *corev1.Secret, t map[string]ed25519.PublicKey, tgs []gossipTarget, states []copyState, more func([]string) []gossipTarget) ([]gossipTarget, []copyState) {
	var done []string
	for _, tg := range tgs {
		done = append(done, tg.name)
	}
	rest := more(done)
	restStates := make([]copyState, len(rest))
	eachTarget(ctx, rest, func(ctx context.Context, i int, tg gossipTarget) { restStates[i] = readCopy(ctx, tg, hub, t) })
	return append(slices.Clone(tgs), rest...), append(states, restStates...)
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
