package spokes

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// The gossip key. The spokes of one hub form one memberlist ring, and
// memberlist authenticates and encrypts with one shared key: whoever has
// it can join and forge liveness. The hub generates the key of its ring
// (32 random bytes, the Secret etcdfedv1.GossipSecretName in the hub's
// namespace, created once and never replaced by the hub) and writes a
// copy into every member cluster's ring namespace, where the spoke reads
// it. Gossip is therefore encrypted by default, with a key no other
// installation shares. A key is rotated by editing the hub's Secret
// (docs/certificates.md, "Gossip encryption"): the hub copies every change.

// gossipKeyLabels mark the hub's copies.
func gossipKeyLabels() map[string]string {
	return map[string]string{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue, etcdfedv1.LabelComponent: "gossip-key"}
}

// hubGossipKey reads the key Secret's data from the hub cluster, and
// creates it with a new key when it does not exist.
func (r *Reconciler) hubGossipKey(ctx context.Context) (map[string][]byte, error) {
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
	return gossipData(sec.Data), nil
}

// gossipData is what the copies hold: the key, and the keys accepted
// beside it.
func gossipData(d map[string][]byte) map[string][]byte {
	out := map[string][]byte{etcdfedv1.GossipSecretKey: bytes.Clone(d[etcdfedv1.GossipSecretKey])}
	if a := d[etcdfedv1.GossipSecretAccept]; len(a) > 0 {
		out[etcdfedv1.GossipSecretAccept] = bytes.Clone(a)
	}
	return out
}

// writeGossipKey brings the member cluster's copy in line with data. A
// Secret of that name the hub did not write (no managed-by label) is left
// alone while it holds another key: an operator who distributed a key by
// hand keeps it. Once it holds the same data as the hub's Secret (the
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
	if maps.EqualFunc(gossipData(cur.Data), data, bytes.Equal) {
		if cur.Labels[etcdfedv1.LabelManagedBy] == etcdfedv1.ManagedByValue {
			return nil
		}
		upd := cur.DeepCopy()
		if upd.Labels == nil {
			upd.Labels = map[string]string{}
		}
		maps.Copy(upd.Labels, gossipKeyLabels())
		if err := c.Update(ctx, upd); err != nil {
			return fmt.Errorf("take over the gossip key Secret: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Took over a gossip key Secret written by hand: it holds the hub's key, and follows the hub's Secret from now on", "secret", key)
		return nil
	}
	if cur.Labels[etcdfedv1.LabelManagedBy] != etcdfedv1.ManagedByValue {
		ctrl.LoggerFrom(ctx).Info("Leaving a gossip key Secret the hub did not write; put the same key into the hub's Secret to hand it over", "secret", key)
		return nil
	}
	upd := cur.DeepCopy()
	upd.Data = data
	if err := c.Update(ctx, upd); err != nil {
		return fmt.Errorf("update gossip key Secret: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Updated the spokes' gossip key", "secret", key)
	return nil
}
