package spokes

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/gossip"
)

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
