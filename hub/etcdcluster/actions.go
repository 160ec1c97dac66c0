package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// An action is how the hub takes one kind of planner step, in one place:
// render turns the planner's decision into the objects and etcd calls it
// needs (in decide, from the snapshot alone); apply carries them out and
// tells what it did in events. Every planner action has its entry in
// actions (TestEveryPlannerActionHasAnEntry), so a new operation kind is
// its planner code plus one entry here for each new step.
type action struct {
	// render is nil for a step that needs nothing rendered.
	render func(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step
	// apply is nil for a step that does nothing here (a wait).
	apply func(r *Reconciler, ctx context.Context, t *taking) error
	// etcd: apply calls etcd with the pass's client (taking.etcd), and is
	// not called when the step could not be rendered.
	etcd bool
	// idle: no step is taken (the ring waits); logged at V(1), not
	// counted in etcdfed_cluster_steps_total.
	idle bool
	// waits: the planner names what it waits for (Progressing, Degraded).
	// asPlanned: the next pass comes at plan.RequeueAfter (else soon).
	// begins: an operation begins (the fleet-wide limit gates it; its
	// first step may chain). ends: the operation in flight ends (d.ended).
	waits, asPlanned, begins, ends bool
}

// taking is one step being taken: the pass's snapshot and decision, the CA
// it issues certificates from, the etcd client of an etcd action, and
// where apply leaves what it learned (a learner's ID).
type taking struct {
	s    *snapshot
	d    *decision
	ca   *pki.CA
	etcd *etcdops.Client
	res  *applyResult
}

// actions is every planner action the hub takes: "" is no decision (the
// placement failed).
var actions = map[planner.Action]action{
	"":                {idle: true, asPlanned: true},
	planner.ActNone:   {idle: true, asPlanned: true},
	planner.ActWait:   {idle: true, asPlanned: true, waits: true},
	planner.ActBegin:  {apply: (*Reconciler).applyBegin, begins: true},
	planner.ActFinish: {apply: (*Reconciler).applyFinish, ends: true},
	planner.ActHoldCARotation: {
		idle:  true,
		apply: (*Reconciler).applyHoldCARotation,
	},

	// Member objects.
	planner.ActCreateObjects:        {render: renderCreateObjects, apply: (*Reconciler).applyWrites},
	planner.ActStartBootstrap:       {render: renderStartBootstrap, apply: (*Reconciler).applyWrites},
	planner.ActStartMember:          {render: renderStartMember, apply: (*Reconciler).applyWrites},
	planner.ActUpdateObject:         {render: renderWrite, apply: (*Reconciler).applyWrites},
	planner.ActForceNewCluster:      {render: renderForceNewCluster, apply: (*Reconciler).applyWrites},
	planner.ActClearForceNewCluster: {render: renderForceNewCluster, apply: (*Reconciler).applyWrites},
	planner.ActGrantDisruption:      {render: renderWrite, apply: (*Reconciler).disruptionStep},
	planner.ActAwaitReturn:          {render: renderWrite, apply: (*Reconciler).disruptionStep},
	planner.ActDeleteObject:         {render: renderDeleteObject, apply: (*Reconciler).applyDeletes},
	planner.ActFinishBootstrap:      {apply: (*Reconciler).applyFinishBootstrap, ends: true},
	planner.ActRestartMember:        {apply: (*Reconciler).applyRestartMember},

	// etcd's membership.
	planner.ActAddLearner: {render: renderAddLearner, apply: (*Reconciler).applyAddLearner, etcd: true},
	planner.ActPromote:    {render: renderLeaderURLs, apply: (*Reconciler).applyPromote, etcd: true},
	planner.ActMoveLeader: {render: renderLeaderURLs, apply: (*Reconciler).applyMoveLeader, etcd: true},
	// The leader's placement (leader.go).
	planner.ActTransferLeadership: {render: renderLeaderURLs, apply: (*Reconciler).applyTransferLeadership, etcd: true},
	planner.ActRemoveMember:       {apply: (*Reconciler).applyRemoveMember, etcd: true},

	// Versions.
	planner.ActRequestBackup:      {apply: (*Reconciler).applyRequestBackup},
	planner.ActEnableDowngrade:    {apply: (*Reconciler).applyEnableDowngrade, etcd: true},
	planner.ActCancelDowngrade:    {apply: (*Reconciler).applyCancelDowngrade, etcd: true},
	planner.ActDefragment:         {render: renderDefragment, apply: (*Reconciler).applyDefragment, etcd: true},
	planner.ActDisarm:             {apply: (*Reconciler).applyDisarm, etcd: true},
	planner.ActAddCA:              {apply: (*Reconciler).applyCAChange},
	planner.ActSwitchCA:           {apply: (*Reconciler).applyCAChange},
	planner.ActDropCA:             {apply: (*Reconciler).applyCAChange},
	planner.ActCompleteCARotation: {apply: (*Reconciler).applyCompleteCARotation},
	planner.ActRefuseCARotation:   {apply: (*Reconciler).applyRefuseCARotation},
}

// operationEvents are the reasons of the events at an operation's start
// and at its end, by operation type; a type not listed is a membership
// change.
var operationEvents = map[planner.OpType]struct{ begin, done string }{
	planner.OpRoll:       {etcdfedv1.EventMemberRoll, etcdfedv1.EventMemberRollDone},
	planner.OpDefrag:     {etcdfedv1.EventDefragmentation, etcdfedv1.EventDefragmentationDone},
	planner.OpDisrupt:    {etcdfedv1.EventDisruptionGrant, etcdfedv1.EventDisruptionGrantDone},
	planner.OpRecover:    {etcdfedv1.EventQuorumRecovery, etcdfedv1.EventQuorumRecoveryDone},
	planner.OpRotateCA:   {etcdfedv1.EventCARotation, etcdfedv1.EventCARotationDone},
	planner.OpMoveLeader: {etcdfedv1.EventLeaderPlacement, etcdfedv1.EventLeaderPlacementDone},
}

// operationReasons are the reasons of the events at an operation's start
// and at its end.
func operationReasons(t planner.OpType) (begin, done string) {
	if e, ok := operationEvents[t]; ok {
		return e.begin, e.done
	}
	return etcdfedv1.EventMembershipChange, etcdfedv1.EventMembershipChangeDone
}

// idleAction: the planner's step takes no step (a wait, or none).
func idleAction(a planner.Action) bool { return actions[a].idle }

// renderStep turns the planner's step into objects and etcd calls.
func renderStep(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	if a := actions[p.Action]; a.render != nil {
		return a.render(s, st, p)
	}
	return step{}
}

// applyStep takes the one step, with the events that tell it.
func (r *Reconciler) applyStep(ctx context.Context, s *snapshot, d *decision, ca *pki.CA, res *applyResult) {
	ec, p := s.ec, d.plan
	a, known := actions[p.Action]
	if !a.idle {
		ctrl.LoggerFrom(ctx).Info("Step", "action", p.Action, "member", p.Member, "reason", p.Reason)
	} else if p.Action != "" && p.Action != planner.ActNone {
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting", "reason", p.Reason, "requeueAfter", p.RequeueAfter)
	}
	if d.requestRefused != "" && (ec.Status.LastRecoveryRequest == nil || d.ledger.LastRecoveryRequest == nil || ec.Status.LastRecoveryRequest.UID != d.ledger.LastRecoveryRequest.UID) {
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventRecoveryRequestRefused, "Recover", "%s", d.requestRefused)
	}
	t := &taking{s: s, d: d, ca: ca, res: res}
	err := d.step.err
	switch {
	case !known:
		err = fmt.Errorf("unknown action %q", p.Action)
	case a.apply == nil:
	case a.etcd:
		err = withEtcd(s, err, func(c *etcdops.Client) error {
			t.etcd = c
			return a.apply(r, ctx, t)
		})
	default:
		err = errors.Join(err, a.apply(r, ctx, t))
	}
	switch {
	case err == nil:
	case notYet(err):
		res.notYet = err // etcd saying "not yet" is a wait, not a failure
	default:
		res.stepErr = err
	}
}

// An operation begins: its event, and the events of a replacement.
func (r *Reconciler) applyBegin(_ context.Context, t *taking) error {
	ec, p := t.s.ec, t.d.plan
	begin, _ := operationReasons(p.Operation.Type)
	r.event(ec, corev1.EventTypeNormal, begin, string(p.Operation.Type), "%s", p.Reason)
	if cr := ec.Status.CARotation; p.Operation.Type == planner.OpRotateCA && p.Operation.Step == planner.ActSwitchCA &&
		cr != nil && cr.HeldSince != nil && cr.ContinuedAt == nil {
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventCARotationContinued, "RotateCA", "The CA rotation held since %s goes on (the request answered the hold): the new CA issues from now on",
			cr.HeldSince.UTC().Format(time.RFC3339))
	}
	events, evidence := beginEvents(t.s, p.Operation, p.Reason)
	for _, e := range events {
		r.event(ec, e.typ, e.reason, string(p.Operation.Type), "%s", e.message)
	}
	if evidence != "" {
		r.evidence.put(ec.UID, p.Operation.Member, p.Operation.Incarnation, evidence)
	}
	return nil
}

// An operation ends: done, or given up, and a replacement's MemberReplaced.
func (r *Reconciler) applyFinish(_ context.Context, t *taking) error {
	s, ec, p, op := t.s, t.s.ec, t.d.plan, t.d.ended
	switch {
	case op == nil:
	case p.GaveUp && op.Type == etcdfedv1.OperationRoll:
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventMemberRollGaveWay, string(op.Type), "%s (%s) gave way after %s: %s",
			op.Type, op.Reason, s.now.Sub(op.StartedAt.Time).Truncate(time.Second), p.Reason)
	case p.GaveUp:
		r.evidence.take(ec.UID, op.Member, op.Incarnation) // no MemberReplaced to tell it
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventMemberStartGivenUp, string(op.Type), "%s (%s) given up after %s: %s",
			op.Type, op.Reason, s.now.Sub(op.StartedAt.Time).Truncate(time.Second), p.Reason)
	default:
		_, done := operationReasons(planner.OpType(op.Type))
		r.event(ec, corev1.EventTypeNormal, done, string(op.Type), "%s (%s) done after %s: %s",
			op.Type, op.Reason, s.now.Sub(op.StartedAt.Time).Truncate(time.Second), p.Reason)
		switch op.Type {
		case etcdfedv1.OperationReplace, etcdfedv1.OperationMove:
			evidence, _ := r.evidence.take(ec.UID, op.Member, op.Incarnation)
			e := replacedEvent(s, op, evidence)
			r.event(ec, e.typ, e.reason, string(op.Type), "%s", e.message)
		case etcdfedv1.OperationRetire:
			// Told at the end, by whichever hub ends it: a hub killed
			// right after the removal never sends its event.
			r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventMemberRetired, "Retire", "Retired original member %s [%s]: removed from etcd", op.Member, op.MemberID)
		}
	}
	return nil
}

// CreateObjects: every member's object in its cluster, with its
// certificate; the visible clusters' objects are written even when another
// cluster is out of sight.
func renderCreateObjects(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	var out step
	var errs []error
	for _, name := range p.Members {
		m := statusMember(st, name)
		if m == nil {
			continue
		}
		cs := s.cluster(m.Cluster)
		if !cs.visible() {
			errs = append(errs, fmt.Errorf("member cluster %s is not visible", m.Cluster))
			continue
		}
		want := desiredMember(s, st, m, heldObject(s, st, cs, m))
		out.writes = append(out.writes, memberWrite{cluster: cs.name, want: want, cert: certDue(s, cs, want)})
	}
	out.err = errors.Join(errs...)
	return out
}

// StartBootstrap: bootstrap "new" with the whole founding cluster on every
// founding member at once (rule 2).
func renderStartBootstrap(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	var out step
	var pairs []string
	for _, name := range p.Members {
		obj := s.currentObject(st, name)
		if obj == nil || obj.Status.PeerURL == "" {
			out.err = fmt.Errorf("founding member %s has no peer URL yet", name)
			return out
		}
		pairs = append(pairs, name+"="+obj.Status.PeerURL)
	}
	b := &etcdfedv1.BootstrapSpec{InitialCluster: strings.Join(pairs, ","), InitialClusterState: etcdfedv1.InitialClusterNew, Token: bootstrapToken(s, st)}
	for _, name := range p.Members {
		// Founded from a snapshot (or recovered from a backup): every
		// member restores the one status.restore recorded.
		r, err := memberRestore(s, st, name)
		if err != nil {
			out.err = err
			return out
		}
		mb := b.DeepCopy()
		mb.Restore = r
		n := len(out.writes)
		out.write(s, st, name, mb)
		if len(out.writes) > n && r != nil && r.Store.CredentialsSecretName != "" {
			out.writes[n].storeCredentials = true
		}
	}
	return out
}

// StartMember: start with "existing" and an initial cluster naming every
// current member (the learner under its own name). etcd matches the other
// entries by peer URL only, but reads one name with two URLs as one
// member: the old incarnation a Move keeps beside the learner, of the same
// name, is listed under its ID.
func renderStartMember(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	var out step
	var pairs []string
	for _, em := range s.etcd.Members {
		name := em.Name
		switch {
		case em.ID == p.MemberID:
			name = p.Member
		case name == p.Member:
			name = fmt.Sprintf("%s-%x", name, em.ID)
		}
		if name == "" || len(em.PeerURLs) == 0 {
			continue
		}
		for _, u := range em.PeerURLs {
			pairs = append(pairs, name+"="+u)
		}
	}
	slices.Sort(pairs)
	out.write(s, st, p.Member, &etcdfedv1.BootstrapSpec{InitialCluster: strings.Join(pairs, ","), InitialClusterState: etcdfedv1.InitialClusterExisting, Token: string(s.ec.RingUID())})
	return out
}

// UpdateObject, GrantDisruption, AwaitReturn: the member's object as the
// ledger now has it.
func renderWrite(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	var out step
	out.write(s, st, p.Member, nil)
	return out
}

// ForceNewCluster, ClearForceNewCluster: the survivor's object with the
// switch on or off (recovery.go).
func renderForceNewCluster(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	var out step
	out.writeForceNewCluster(s, st, p.Member, p.Action == planner.ActForceNewCluster)
	return out
}

// applyWrites writes the step's member objects (certificates first).
func (r *Reconciler) applyWrites(ctx context.Context, t *taking) error {
	return r.writeMembers(ctx, t.s, t.ca, t.res.crl, t.d.step.writes)
}

// DeleteObject: the objects the step retires (retiredObjects: of a Move
// inside one member cluster, the old incarnation's beside the new one's);
// a cluster out of sight keeps them, the sweep deletes them when it is
// back.
func renderDeleteObject(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	return step{deletes: retiredObjects(s, st, p)}
}

func (r *Reconciler) applyDeletes(ctx context.Context, t *taking) error {
	return r.deleteMembers(ctx, t.s, t.d.step.deletes)
}

// FinishBootstrap: the cluster formed (or was found to adopt).
func (r *Reconciler) applyFinishBootstrap(_ context.Context, t *taking) error {
	ec := t.s.ec
	if t := t.d.ledger.TakeOver; t != nil && t.Phase == etcdfedv1.TakeOverComplete {
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventTakenOver, "TakeOver", "%s; members %s; reissued: %s", t.Message, strings.Join(t.Members, ", "), orNone(strings.Join(t.Reissued, "; ")))
		return nil
	}
	if ec.Spec.Adopt != nil {
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventAdopted, "Adopt", "Found the running etcd cluster %s to adopt, with %d original member(s); etcdfed's members join it one at a time", t.d.ledger.ClusterID, len(t.s.etcd.Members))
		return nil
	}
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventBootstrapped, "Bootstrap", "etcd cluster %s formed with %d members", t.d.ledger.ClusterID, len(t.s.etcd.Members))
	return nil
}

// AddLearner: the learner's peer URL, as its spoke reported it.
func renderAddLearner(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	var out step
	obj := s.currentObject(st, p.Member)
	if obj == nil || obj.Status.PeerURL == "" {
		out.err = fmt.Errorf("%s has no peer URL", p.Member)
		return out
	}
	out.peerURL = obj.Status.PeerURL
	return out
}

func (r *Reconciler) applyAddLearner(ctx context.Context, t *taking) (err error) {
	t.res.learnerID, err = t.etcd.AddLearner(ctx, t.d.step.peerURL)
	if err == nil {
		r.event(t.s.ec, corev1.EventTypeNormal, etcdfedv1.EventLearnerAdded, "AddLearner", "Added %s [%x] as a learner", t.d.plan.Member, t.res.learnerID)
	}
	return err
}

// Promote, MoveLeader: asked of the leader.
func renderLeaderURLs(s *snapshot, _ *etcdfedv1.EtcdClusterStatus, _ planner.Decision) step {
	var out step
	for _, em := range s.etcd.Members {
		if em.ID == s.etcd.LeaderID {
			out.leaderURLs = em.ClientURLs
		}
	}
	if len(out.leaderURLs) == 0 {
		out.err = fmt.Errorf("%w: leader's client URL unknown", etcdops.ErrUnhealthyCluster)
	}
	return out
}

func (r *Reconciler) applyPromote(ctx context.Context, t *taking) error {
	p := t.d.plan
	err := t.etcd.Promote(ctx, t.d.step.leaderURLs, p.MemberID)
	if err == nil {
		r.event(t.s.ec, corev1.EventTypeNormal, etcdfedv1.EventMemberPromoted, "Promote", "%s is a voting member", p.Member)
	}
	return err
}

func (r *Reconciler) applyMoveLeader(ctx context.Context, t *taking) error {
	p := t.d.plan
	err := t.etcd.MoveLeader(ctx, t.d.step.leaderURLs, p.TransfereeID)
	if err == nil {
		r.event(t.s.ec, corev1.EventTypeNormal, etcdfedv1.EventLeaderMoved, "MoveLeader", "Moved leadership from %s to [%x]", p.Member, p.TransfereeID)
	}
	return err
}

// RemoveMember: an incarnation's ID leaves etcd (a Retire's is an
// original's).
func (r *Reconciler) applyRemoveMember(ctx context.Context, t *taking) error {
	ec, p := t.s.ec, t.d.plan
	if err := t.etcd.Remove(ctx, p.MemberID); err != nil {
		return err
	}
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventMemberRemoved, "Remove", "Removed %s [%x] from etcd", p.Member, p.MemberID)
	return nil
}

// RequestBackup: the snapshot taken before a version change.
func (r *Reconciler) applyRequestBackup(ctx context.Context, t *taking) error {
	ec, p := t.s.ec, t.d.plan
	if err := r.requestBackup(ctx, ec, p.BackupRequest); err != nil {
		return err
	}
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventBackupRequested, "RequestBackup", "Asked for snapshot %s before the version change to %s", p.BackupRequest, ec.Spec.Version)
	return nil
}

func (r *Reconciler) applyEnableDowngrade(ctx context.Context, t *taking) error {
	s, p := t.s, t.d.plan
	if err := t.etcd.EnableDowngrade(ctx, p.DowngradeTo); err != nil {
		r.event(s.ec, corev1.EventTypeWarning, etcdfedv1.EventDowngradeRefused, "EnableDowngrade", "etcd refused the downgrade to %s: %v", p.DowngradeTo, err)
		return err
	}
	r.event(s.ec, corev1.EventTypeNormal, etcdfedv1.EventDowngradeEnabled, "EnableDowngrade", "Enabled etcd's downgrade to %s (cluster version was %s)", p.DowngradeTo, s.etcd.ClusterVersion)
	return nil
}

func (r *Reconciler) applyCancelDowngrade(ctx context.Context, t *taking) error {
	s := t.s
	if err := t.etcd.CancelDowngrade(ctx); err != nil {
		return err
	}
	r.event(s.ec, corev1.EventTypeNormal, etcdfedv1.EventDowngradeCancelled, "CancelDowngrade", "Cancelled etcd's downgrade to %s: spec.version is %s (cluster version was %s)", s.etcd.Downgrade.Target, s.ec.Spec.Version, s.etcd.ClusterVersion)
	return nil
}

// Defragment: the member's own client URLs, from etcd's member list.
func renderDefragment(s *snapshot, _ *etcdfedv1.EtcdClusterStatus, p planner.Decision) step {
	var out step
	if em, ok := listedID(s.etcd, p.MemberID); ok {
		out.memberURLs = em.ClientURLs
	}
	if len(out.memberURLs) == 0 {
		out.err = fmt.Errorf("%s has no client URL in etcd's member list", p.Member)
	}
	return out
}

func (r *Reconciler) applyCompleteCARotation(_ context.Context, t *taking) error {
	r.event(t.s.ec, corev1.EventTypeNormal, etcdfedv1.EventCARotationCompleted, "CompleteCARotation", "CA rotation complete: every member and consumer holds a certificate of %s and trusts it alone", pki.Describe(t.s.pki.ca.Cert))
	return nil
}

func (r *Reconciler) applyRefuseCARotation(_ context.Context, t *taking) error {
	r.event(t.s.ec, corev1.EventTypeWarning, etcdfedv1.EventCARotationRefused, "RotateCA", "CA rotation refused: %s", t.d.plan.Reason)
	return nil
}

// HoldCARotation: told once, when the hold begins.
func (r *Reconciler) applyHoldCARotation(_ context.Context, t *taking) error {
	if cr := t.s.ec.Status.CARotation; cr == nil || cr.HeldSince == nil {
		r.event(t.s.ec, corev1.EventTypeNormal, etcdfedv1.EventCARotationHeld, "HoldCARotation", "%s", t.d.plan.Reason)
	}
	return nil
}

// RestartMember: the member's object carries a new restart token (the
// hub's clock), and its spoke replaces the pod once, on the same volume
// (planner/rejoin.go).
func (r *Reconciler) applyRestartMember(ctx context.Context, t *taking) error {
	s, p := t.s, t.d.plan
	var obj *etcdfedv1.EtcdMember
	var cs *clusterSnapshot
	for _, m := range t.d.ledger.Members {
		if m.Name == p.Member {
			if cs = s.cluster(m.Cluster); cs != nil {
				obj = cs.members[m.Name]
			}
		}
	}
	if obj == nil || cs == nil || cs.client == nil {
		return fmt.Errorf("restart %s: its object is not in sight", p.Member)
	}
	token := r.now().UTC().Format(time.RFC3339Nano)
	patched := obj.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[etcdfedv1.AnnotationRestart] = token
	if err := cs.client.Patch(ctx, patched, client.MergeFrom(obj)); err != nil {
		return fmt.Errorf("ask the spoke of %s to restart %s: %w", cs.name, p.Member, err)
	}
	r.event(s.ec, corev1.EventTypeNormal, etcdfedv1.EventMemberRejoinRestart, "RestartMember", "%s", p.Reason)
	return nil
}
