package spokes

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"

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
