package clients

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// decision is what one pass writes, decided from the snapshot alone.
type decision struct {
	// removed says what becomes of each removed entry's Secret, in the
	// snapshot's order.
	removed []removal
	// access is the change of etcd's authentication (PlanAccess); nil when
	// it was not read (TLS off, or etcd not reached).
	access *AccessPlan
	// consumers says what each spec.clients entry's Secret needs, in spec
	// order; none while the snapshot waits for the CA or the endpoints.
	consumers []consumerStep
}

// removalAction is what becomes of a removed entry's Secret.
type removalAction int

const (
	// removalKeep: absent, or not the hub's (another ring's, a human's):
	// left alone.
	removalKeep removalAction = iota
	// removalLeave: in the hub cluster, where the hub deletes no Secret
	// (config/rbac/hub): left for a human, with an event.
	removalLeave
	// removalDelete: the hub's, in a member cluster: deleted.
	removalDelete
	// removalFailed: it could not be read; the entry stays in
	// status.clients and the next pass tries again.
	removalFailed
)

// removal is one removed entry's Secret and what becomes of it.
type removal struct {
	removedView
	action removalAction
}

// consumerStep is what one consumer's Secret needs in this pass.
type consumerStep struct {
	t Target
	// fail says why the Secret is not brought up to date ("" when it is):
	// the place is refused, the Secret could not be read or is not the
	// hub's, or the CA cannot issue. Nothing is written then.
	fail string
	// plan is Plan's answer (zero when fail was decided before it).
	plan Decision
	// write creates or updates the Secret: a certificate is issued, the
	// CA bundle or the endpoints changed, or labels or owners drifted.
	write bool
	// data is the Secret's content when no certificate is issued (apply
	// issues one when plan.Action is ActIssue, and builds it then).
	data map[string][]byte
	// cur is the Secret as read (nil: created); w writes in its cluster.
	cur *corev1.Secret
	w   client.Client
}

// decide turns a snapshot into the pass's writes: which removed Secrets
// are deleted, how etcd's authentication changes, and what each
// consumer's Secret needs. It reads nothing but the snapshot.
func decide(s *snapshot) *decision {
	d := &decision{}
	for _, v := range s.removed {
		d.removed = append(d.removed, removal{removedView: v, action: removalOf(s.ec, v.secretView)})
	}
	if !s.ec.Spec.TLS.Mode.Enabled() {
		return d
	}
	if s.auth.waiting == "" {
		p := PlanAccess(Grants(s.ec), MemberUsers(s.ec), s.auth.have, s.ec.Spec.TLS.AuthOn())
		d.access = &p
	}
	if s.waiting != "" {
		return d
	}
	for _, v := range s.consumers {
		d.consumers = append(d.consumers, consumerStepOf(s, v))
	}
	return d
}

// removalOf decides what becomes of a removed entry's Secret: deleted only
// when it is the hub's (its owner label is this ring's) and in a member
// cluster.
func removalOf(ec *etcdfedv1.EtcdCluster, v secretView) removalAction {
	switch {
	case v.t.Cluster == "":
		return removalLeave
	case v.err != nil:
		return removalFailed
	case v.cur == nil, ownerOf(ec, v.cur.Labels[etcdfedv1.LabelClusterUID]) != string(ec.RingUID()):
		return removalKeep
	}
	return removalDelete
}

// consumerStepOf decides what one consumer's Secret needs (Plan), and
// whether it is written.
func consumerStepOf(s *snapshot, v secretView) consumerStep {
	ec := s.ec
	c := consumerStep{t: v.t, cur: v.cur, w: v.w}
	switch {
	case v.refused != "":
		c.fail = "refused: " + v.refused
		return c
	case v.err != nil:
		c.fail = v.err.Error()
		return c
	}
	var found *Found
	if v.cur != nil {
		found = &Found{Owner: ownerOf(ec, v.cur.Labels[etcdfedv1.LabelClusterUID]), Data: v.cur.Data}
	}
	c.plan = Plan(s.ca, string(ec.RingUID()), v.t, s.endpoints, found, s.now)
	switch c.plan.Action {
	case ActRefuse:
		c.fail = c.plan.Reason
	case ActIssue:
		if !s.ca.Signer.CanSign() {
			c.fail = fmt.Sprintf("waiting for a CA that issues (%s): the ring was taken over without its CA's key, and this Secret is issued from the new CA once the rotation reaches Reissuing", c.plan.Reason)
			return c
		}
		c.write = true
	case ActUpdate:
		c.data = Data(s.ca.Bundle(), &pki.Leaf{CertPEM: v.cur.Data[etcdfedv1.ClientSecretKeyCert], KeyPEM: v.cur.Data[etcdfedv1.ClientSecretKeyKey]}, s.endpoints)
		c.write = true
	default:
		c.data = v.cur.Data
		c.write = !equality.Semantic.DeepEqual(v.cur.Labels, wantLabels(ec, v.t, v.cur.Labels)) ||
			!equality.Semantic.DeepEqual(v.cur.OwnerReferences, ownerRefs(ec, v.t, v.cur.OwnerReferences))
	}
	return c
}
