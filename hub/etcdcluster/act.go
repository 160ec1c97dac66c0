package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/membership"
)

// soon is the requeue after a step whose effect the next reconcile checks.
const soon = 200 * time.Millisecond

// act carries out one decision. The operation is recorded in status with
// the decision; ActBegin records it before anything else happens (the
// status patch at the end of this reconcile), and the next reconcile acts.
func (r *Reconciler) act(ctx context.Context, v *view, d membership.Decision) (ctrl.Result, error) {
	ec := v.ec
	if d.Operation != nil {
		ec.Status.Operation = toAPIOperation(d.Operation, d.Reason)
	}
	res := ctrl.Result{RequeueAfter: d.RequeueAfter}
	var err error
	switch d.Action {
	case membership.ActNone, membership.ActWait:
		return res, nil
	case membership.ActBegin:
		r.begin(v, d)
		return ctrl.Result{RequeueAfter: soon}, nil
	case membership.ActCreateObjects:
		err = r.createObjects(ctx, v, d.Members)
	case membership.ActStartBootstrap:
		err = r.startBootstrap(ctx, v, d.Members)
	case membership.ActFinishBootstrap:
		r.finishBootstrap(v)
	case membership.ActAddLearner:
		err = r.addLearner(ctx, v, d)
	case membership.ActStartMember:
		err = r.startMember(ctx, v, d)
	case membership.ActPromote:
		err = r.withEtcd(ctx, v, func(c *etcdops.Client) error { return c.Promote(ctx, d.MemberID) })
		if err == nil {
			r.event(ec, corev1.EventTypeNormal, "MemberPromoted", "Promote", "%s is a voting member", d.Member)
		}
	case membership.ActMoveLeader:
		err = r.moveLeader(ctx, v, d)
	case membership.ActRemoveMember:
		err = r.withEtcd(ctx, v, func(c *etcdops.Client) error { return c.Remove(ctx, d.MemberID) })
		if err == nil {
			r.event(ec, corev1.EventTypeNormal, "MemberRemoved", "Remove", "Removed %s [%x] from etcd", d.Member, d.MemberID)
		}
	case membership.ActDeleteObject:
		err = r.deleteObject(ctx, v, d.Member, d.From.Cluster)
	case membership.ActFinish:
		r.finish(v, d)
	default:
		err = fmt.Errorf("unknown action %q", d.Action)
	}
	if err == nil {
		return ctrl.Result{RequeueAfter: max(soon, d.RequeueAfter)}, nil
	}
	// etcd saying "not yet" is a wait, not a failure.
	if notYet(err) {
		if ec.Status.Operation != nil {
			ec.Status.Operation.Message = truncate(err.Error(), 1024)
		}
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	v.actErr = err
	return ctrl.Result{}, err
}

func notYet(err error) bool {
	return errors.Is(err, etcdops.ErrLearnerNotReady) || errors.Is(err, etcdops.ErrUnhealthyCluster) || errors.Is(err, etcdops.ErrTooManyLearners) ||
		errors.Is(err, etcdops.ErrAnswererStopped)
}

// begin records the operation and its assignments.
func (r *Reconciler) begin(v *view, d membership.Decision) {
	ec := v.ec
	now := metav1.NewTime(v.now)
	for _, a := range d.Assign {
		m := statusMember(ec, a.Member)
		if m == nil {
			ec.Status.Members = append(ec.Status.Members, etcdfedv1.MemberStatus{Name: a.Member})
			m = &ec.Status.Members[len(ec.Status.Members)-1]
		}
		m.Cluster, m.Zone, m.Incarnation = a.Domain.Cluster, labelZone(a.Domain.Zone), a.Incarnation
		// The address stays: it is what the member's DNS name resolves to,
		// and the old incarnation (maybe the leader, which the hub must
		// reach to move leadership away) runs there until its ID is
		// removed. The new incarnation's address replaces it once its
		// spoke reports one.
		m.ID, m.Ready, m.Role = "", false, ""
		m.Since, m.LastTransitionTime = &now, &now
		ec.Status.LastIncarnation = max(ec.Status.LastIncarnation, a.Incarnation)
	}
	sortMembers(ec.Status.Members)
	r.event(ec, corev1.EventTypeNormal, "MembershipChange", string(d.Operation.Type), "%s", d.Reason)
}

func (r *Reconciler) createObjects(ctx context.Context, v *view, members []string) error {
	var errs []error
	for _, name := range members {
		m := statusMember(v.ec, name)
		if m == nil {
			continue
		}
		cv := v.cluster(m.Cluster)
		if cv == nil || !cv.visible() {
			errs = append(errs, fmt.Errorf("member cluster %s is not visible", m.Cluster))
			continue
		}
		if err := r.ensureMemberSecret(ctx, v, cv, name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.writeMember(ctx, v, cv, m, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeMember creates or updates a member's object with the desired spec.
// bootstrap nil keeps the existing one for the same incarnation (a new
// incarnation always starts without).
func (r *Reconciler) writeMember(ctx context.Context, v *view, cv *clusterView, m *etcdfedv1.MemberStatus, bootstrap *etcdfedv1.BootstrapSpec) error {
	existing := cv.objects[m.Name]
	want := desiredMember(v.ec, m, existing, r.RingNamespace)
	if bootstrap != nil {
		want.Spec.Bootstrap = bootstrap
	}
	if existing == nil {
		if err := cv.client.Create(ctx, want); err != nil {
			return fmt.Errorf("create EtcdMember %s in %s: %w", m.Name, cv.name, err)
		}
		cv.objects[m.Name] = want
		return nil
	}
	if existing.Spec.Cluster.UID != string(v.ec.UID) {
		return fmt.Errorf("EtcdMember %s in %s belongs to another EtcdCluster (uid %s)", m.Name, cv.name, existing.Spec.Cluster.UID)
	}
	patched := existing.DeepCopy()
	patched.Labels = want.Labels
	patched.Spec = want.Spec
	if err := cv.client.Patch(ctx, patched, client.MergeFrom(existing)); err != nil {
		return fmt.Errorf("update EtcdMember %s in %s: %w", m.Name, cv.name, err)
	}
	cv.objects[m.Name] = patched
	return nil
}

// startBootstrap sets bootstrap "new" with the whole founding cluster on
// every founding member at once (rule 2).
func (r *Reconciler) startBootstrap(ctx context.Context, v *view, members []string) error {
	var pairs []string
	for _, name := range members {
		obj := objectOf(v, name)
		if obj == nil || obj.Status.PeerURL == "" {
			return fmt.Errorf("founding member %s has no peer URL yet", name)
		}
		pairs = append(pairs, name+"="+obj.Status.PeerURL)
	}
	b := &etcdfedv1.BootstrapSpec{InitialCluster: strings.Join(pairs, ","), InitialClusterState: etcdfedv1.InitialClusterNew, Token: string(v.ec.UID)}
	var errs []error
	for _, name := range members {
		m := statusMember(v.ec, name)
		errs = append(errs, r.writeMember(ctx, v, v.cluster(m.Cluster), m, b))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) finishBootstrap(v *view) {
	ec := v.ec
	ec.Status.ClusterID = hexID(v.etcd.ClusterID)
	ec.Status.Operation = nil
	r.event(ec, corev1.EventTypeNormal, "Bootstrapped", "Bootstrap", "etcd cluster %s formed with %d members", ec.Status.ClusterID, len(v.etcd.Members))
}

func (r *Reconciler) addLearner(ctx context.Context, v *view, d membership.Decision) error {
	obj := objectOf(v, d.Member)
	if obj == nil || obj.Status.PeerURL == "" {
		return fmt.Errorf("%s has no peer URL", d.Member)
	}
	var id uint64
	err := r.withEtcd(ctx, v, func(c *etcdops.Client) (err error) {
		id, err = c.AddLearner(ctx, obj.Status.PeerURL)
		return err
	})
	if err != nil {
		return err
	}
	if op := v.ec.Status.Operation; op != nil {
		op.NewMemberID = hexID(id)
	}
	if m := statusMember(v.ec, d.Member); m != nil {
		m.ID = hexID(id)
	}
	r.event(v.ec, corev1.EventTypeNormal, "LearnerAdded", "AddLearner", "Added %s [%x] as a learner", d.Member, id)
	return nil
}

// startMember lets the member's pod start with "existing" and an initial
// cluster naming every current member (the learner under its own name).
func (r *Reconciler) startMember(ctx context.Context, v *view, d membership.Decision) error {
	m := statusMember(v.ec, d.Member)
	var pairs []string
	for _, em := range v.etcd.Members {
		name := em.Name
		if em.ID == d.MemberID {
			name = d.Member
		}
		if name == "" || len(em.PeerURLs) == 0 {
			continue
		}
		for _, u := range em.PeerURLs {
			pairs = append(pairs, name+"="+u)
		}
	}
	slices.Sort(pairs)
	b := &etcdfedv1.BootstrapSpec{InitialCluster: strings.Join(pairs, ","), InitialClusterState: etcdfedv1.InitialClusterExisting, Token: string(v.ec.UID)}
	return r.writeMember(ctx, v, v.cluster(m.Cluster), m, b)
}

func (r *Reconciler) moveLeader(ctx context.Context, v *view, d membership.Decision) error {
	var leaderURLs []string
	for _, em := range v.etcd.Members {
		if em.ID == v.etcd.LeaderID {
			leaderURLs = em.ClientURLs
		}
	}
	if len(leaderURLs) == 0 {
		return fmt.Errorf("%w: leader's client URL unknown", etcdops.ErrUnhealthyCluster)
	}
	err := r.withEtcd(ctx, v, func(c *etcdops.Client) error { return c.MoveLeader(ctx, leaderURLs, d.TransfereeID) })
	if err == nil {
		r.event(v.ec, corev1.EventTypeNormal, "LeaderMoved", "MoveLeader", "Moved leadership from %s to [%x]", d.Member, d.TransfereeID)
	}
	return err
}

// deleteObject deletes a member's object and certificate Secret in one
// cluster. The spoke deletes the pod and keeps the volume.
func (r *Reconciler) deleteObject(ctx context.Context, v *view, member, cluster string) error {
	cv := v.cluster(cluster)
	if cv == nil || !cv.visible() {
		return nil
	}
	obj := cv.objects[member]
	if obj == nil {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting member object", "member", member, "cluster", cluster, "incarnation", obj.Spec.Incarnation)
	if err := cv.client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete EtcdMember %s in %s: %w", member, cluster, err)
	}
	delete(cv.objects, member)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.RingNamespace, Name: MemberSecretName(member)}}
	if err := cv.client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s in %s: %w", sec.Name, cluster, err)
	}
	return nil
}

func (r *Reconciler) finish(v *view, d membership.Decision) {
	ec := v.ec
	op := ec.Status.Operation
	if op != nil && op.Type == etcdfedv1.OperationRemove {
		ec.Status.Members = slices.DeleteFunc(ec.Status.Members, func(m etcdfedv1.MemberStatus) bool { return m.Name == op.Member })
	} else if m := statusMember(ec, d.Member); m != nil && d.MemberID != 0 {
		m.ID = hexID(d.MemberID)
	}
	if op != nil {
		r.event(ec, corev1.EventTypeNormal, "MembershipChangeDone", string(op.Type), "%s (%s) done after %s: %s",
			op.Type, op.Reason, v.now.Sub(op.StartedAt.Time).Truncate(time.Second), d.Reason)
	}
	ec.Status.Operation = nil
}

// withEtcd runs f with the EtcdCluster's etcd client.
func (r *Reconciler) withEtcd(_ context.Context, v *view, f func(*etcdops.Client) error) error {
	c, ok := r.etcd.current(v.ec.UID)
	if !ok {
		return errors.New("no etcd client")
	}
	return f(c)
}

func (r *Reconciler) event(ec *etcdfedv1.EtcdCluster, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ec, nil, typ, reason, action, format, args...)
	}
}
