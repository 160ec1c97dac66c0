package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// annotationBreakBeforeMake is etcdfedv1.AnnotationBreakBeforeMake (this
// package imports nothing of the API), for the message.
const annotationBreakBeforeMake = "etcdfed.dev/break-before-make"

// Polling intervals for steps that wait on the outside world.
const (
	// pollJoin is for the steps of a joining member that wait on its own
	// pipeline (the spoke exposing it, its learner starting, a promotion
	// taking effect): each is seconds away at most, every member of an
	// evacuation waits on them one after another, and events from the
	// spoke often come first. Only a ring with an Add in flight polls
	// this often.
	pollJoin = 500 * time.Millisecond
	pollFast = 2 * time.Second
	pollSlow = 10 * time.Second
)

// Next returns the one next step. A decision that takes no step comes
// back no later than the moment a failing member's grace period runs out
// (graceWake): a member whose pod cannot even be scheduled changes nothing
// that would wake the ring by itself.
func Next(in Input) Decision {
	return clusterVersionWake(in, graceWake(in, leaderStep(in, next(in))))
}

// clusterVersionWake brings a decision that takes no step back within
// pollFast while every member runs spec.version and etcd's cluster
// version is still of another minor: etcd's leader raises it (or, at the
// end of a downgrade, lowers it) seconds after the last member of a
// version change restarts, and nothing else wakes the ring to read it
// then. Without it status.clusterVersion stayed on the old minor after a
// roll, for up to resyncPeriod (five minutes), unless another event came.
func clusterVersionWake(in Input, d Decision) Decision {
	if d.Action != ActNone && d.Action != ActWait && d.Action != "" {
		return d
	}
	if !ClusterVersionSettling(in) {
		return d
	}
	if d.RequeueAfter <= 0 || pollFast < d.RequeueAfter {
		d.RequeueAfter = pollFast
	}
	return d
}

// ClusterVersionSettling says whether every member etcd lists runs
// spec.version while etcd's cluster version is of another minor (etcd has
// yet to move it after a version change).
func ClusterVersionSettling(in Input) bool {
	if in.Version == "" || in.Etcd.ClusterVersion == "" || !in.Etcd.Reachable {
		return false
	}
	c, changing := Versions(in)
	if changing || c.Total == 0 || c.Total != len(in.Etcd.Members) {
		return false
	}
	return minorOf(in.Etcd.ClusterVersion) != minorOf(in.Version)
}

// graceWake shortens the requeue of a decision that takes no step to the
// end of the earliest grace period still running (graceEnds).
func graceWake(in Input, d Decision) Decision {
	if d.Action != ActNone && d.Action != ActWait && d.Action != "" {
		return d
	}
	if after, ok := graceEnds(in); ok && (d.RequeueAfter <= 0 || after < d.RequeueAfter) {
		d.RequeueAfter = after
	}
	return d
}

// graceEnds is how long until the first unhealthy member in a visible
// cluster has been unhealthy for the member grace period, when one is
// still within it.
func graceEnds(in Input) (time.Duration, bool) {
	var first time.Duration
	found := false
	for _, m := range in.Members {
		em, listed := byID(in.Etcd, m.ID)
		if !listed || em.IsLearner || m.Ready || em.Healthy || !m.ClusterVisible || m.ReadyChangedAt.IsZero() {
			continue
		}
		left := unhealthySince(m, em).Add(in.MemberGrace).Sub(in.Now)
		if left <= 0 {
			continue
		}
		if !found || left < first {
			first, found = left, true
		}
	}
	if left, ok := rejoinEnds(in); ok && (!found || left < first) {
		first, found = left, true
	}
	return first, found
}

func next(in Input) Decision {
	if in.Operation != nil {
		return continueOp(in, *in.Operation)
	}
	if !in.Bootstrapped {
		if in.Adopt.Wanted {
			return beginAdoption(in)
		}
		return beginBootstrap(in)
	}
	if !in.Etcd.Reachable {
		if d, ok := beginRecovery(in); ok {
			return d
		}
		return wait(pollFast, "etcd does not answer (%s); no membership change without etcd's member list", orUnknown(in.Etcd.Error))
	}
	if d, ok := foreignMembers(in); ok {
		return d
	}
	if d, ok := restartRejoining(in); ok {
		return d
	}
	if d, ok := replaceFailed(in); ok {
		return d
	}
	// Membership first: a member to add, remove or move goes before a
	// rollout; a rollout goes on while the placement only waits for room.
	d := placementStep(in)
	if d.Action != ActNone && d.Action != ActWait {
		return d
	}
	// A NOSPACE alarm (writes refused) is recovered before a rollout; a
	// CA rotation's next step goes before the rollouts it causes; a
	// fragmented database is defragmented when nothing else is to do; a
	// node drain is granted only when nothing at all is to do; a held CA
	// rotation is said last.
	// An adopted cluster's original members are retired once the
	// placement is done (adopt.go); its wait, or the note that retirement
	// waits for spec.adopt.retire, is said only when nothing else is to do.
	rd, retiring := Decision{}, false
	if d.Action == ActNone {
		if rd, retiring = retireStep(in); retiring && rd.Action == ActBegin {
			return rd
		}
	}
	if nd, ok := noSpaceStep(in); ok {
		return nd
	}
	out := caHoldStep(in, disruptionStep(in, defragStep(in, caRotationStep(in, rollStep(in, d)))))
	if retiring && out.Action == ActNone {
		return rd
	}
	return out
}

// beginBootstrap records the founding placement, or adopts a cluster that
// already formed (the hub's status was lost).
func beginBootstrap(in Input) Decision {
	if in.Etcd.Reachable && len(in.Etcd.Members) > 0 {
		return Decision{Action: ActFinishBootstrap, Reason: "etcd already has members: adopting the formed cluster"}
	}
	// Members' objects with no operation recorded: the hub's record was
	// lost, or a rebuilt hub takes a running ring over. Their cluster
	// formed, or may have: it is adopted once etcd answers, never founded
	// again over them while it does not.
	var started []string
	for _, m := range in.Members {
		if m.Object != nil && m.Object.Bootstrap != "" {
			started = append(started, m.Name)
		}
	}
	if len(started) > 0 {
		return wait(pollFast, "the objects of %s exist with no operation recorded (the hub's record lost, or a running ring taken over): waiting for etcd to answer through them to adopt it, never founding a second cluster over them: %s", strings.Join(started, ", "), orUnknown(in.Etcd.Error))
	}
	if in.Restore.Wanted && !in.Restore.Verified {
		// No member before the snapshot is chosen and checked: all of them
		// restore the same one, and a bad one founds nothing.
		return wait(pollSlow, "waiting for the snapshot to restore from to be resolved and checked: %s", orUnknown(in.Restore.Message))
	}
	if len(in.Unseen) > 0 {
		return wait(pollFast, "waiting for every eligible member cluster before founding the cluster: %s", strings.Join(in.Unseen, "; "))
	}
	if len(in.Placement.Target) == 0 {
		return wait(pollSlow, "no failure domain can take a member yet: waiting for member clusters and their spokes")
	}
	if len(in.Placement.Target) < in.Replicas {
		return wait(pollSlow, "only %d of %d founding members can be placed: waiting for more member clusters or capacity", len(in.Placement.Target), in.Replicas)
	}
	op := &Operation{Type: OpBootstrap, Reason: "Bootstrap", Step: ActCreateObjects, StartedAt: in.Now}
	d := Decision{Action: ActBegin, Operation: op, Reason: fmt.Sprintf("bootstrapping %d members", len(in.Placement.Target))}
	inc := in.LastIncarnation
	for _, t := range in.Placement.Target {
		inc++
		d.Assign = append(d.Assign, Assignment{Member: t.Name, Domain: t.Domain, Incarnation: inc})
	}
	return d
}

func continueOp(in Input, op Operation) Decision {
	switch op.Type {
	case OpBootstrap:
		return continueBootstrap(in, op)
	case OpAdd:
		return continueAdd(in, op)
	case OpRemove:
		return continueRemove(in, op)
	case OpReplace:
		return continueReplace(in, op)
	case OpMove:
		return continueMove(in, op)
	case OpRoll:
		return continueRoll(in, op)
	case OpDefrag:
		return continueDefrag(in, op)
	case OpDisrupt:
		return continueDisrupt(in, op)
	case OpRecover:
		return continueRecover(in, op)
	case OpRotateCA:
		return continueRotateCA(in, op)
	case OpRetire:
		return continueRetire(in, op)
	case OpMoveLeader:
		return continueMoveLeader(in, op)
	}
	return Decision{Action: ActFinish, Reason: fmt.Sprintf("unknown operation %q dropped", op.Type)}
}

func continueBootstrap(in Input, op Operation) Decision {
	if in.Etcd.Reachable && len(in.Etcd.Members) > 0 {
		started := 0
		for _, m := range in.Etcd.Members {
			if m.Started() {
				started++
			}
		}
		if started >= len(in.Etcd.Members)/2+1 {
			return Decision{Action: ActFinishBootstrap, Reason: fmt.Sprintf("etcd formed with %d of %d founding members started", started, len(in.Etcd.Members))}
		}
	}
	var missing, unseen, noURL, notStarted, failing []string
	for _, m := range in.Members {
		if m.Object != nil && m.Object.Incarnation == m.Incarnation && m.Object.Failing != "" {
			failing = append(failing, fmt.Sprintf("%s in %s: %s", m.Name, m.Domain.Cluster, m.Object.Failing))
		}
		switch {
		case !m.ClusterVisible:
			// An object not seen is not an object missing: the hub does
			// not act on a partial view (it could write nothing there).
			unseen = append(unseen, fmt.Sprintf("%s (%s)", m.Name, m.Domain.Cluster))
		case m.Object == nil || m.Object.Incarnation != m.Incarnation:
			missing = append(missing, m.Name)
		case m.Object.PeerURL == "" || m.Object.StatusIncarnation != m.Incarnation:
			noURL = append(noURL, fmt.Sprintf("%s (%s)", m.Name, m.Domain.Cluster))
		case m.Object.Bootstrap == "":
			notStarted = append(notStarted, m.Name)
		}
	}
	switch {
	case len(missing) > 0:
		return step(op, ActCreateObjects, Decision{Members: missing, Reason: "creating founding members " + strings.Join(missing, ", ")})
	case len(unseen) > 0:
		return wait(pollFast, "waiting for the clusters of founding members %s to come back into sight", strings.Join(unseen, ", "))
	case len(noURL) > 0:
		return wait(pollFast, "waiting for spokes to expose %s", strings.Join(noURL, ", "))
	case len(notStarted) > 0:
		var all []string
		for _, m := range in.Members {
			all = append(all, m.Name)
		}
		return step(op, ActStartBootstrap, Decision{Members: all, Reason: "starting founding members with the full initial cluster"})
	}
	if len(failing) > 0 {
		// Said first: a restore that fails names its member and why.
		return waitStep(op, ActStartBootstrap, pollFast, "founding members cannot start: %s; waiting for etcd to form: %s", strings.Join(failing, "; "), orUnknown(in.Etcd.Error))
	}
	return waitStep(op, ActStartBootstrap, pollFast, "waiting for etcd to form: %s", orUnknown(in.Etcd.Error))
}

// continueAdd walks: object, exposure, learner, start, promote; a start
// that cannot happen where the member was placed is given up
// (giveUpStart).
func continueAdd(in Input, op Operation) Decision {
	m, ok := member(in, op.Member)
	if !ok {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("member %s is no longer assigned; add abandoned", op.Member)}
	}
	d, id, pending := join(in, op, m)
	if pending {
		return d
	}
	return Decision{Action: ActFinish, Member: m.Name, MemberID: id, Reason: fmt.Sprintf("%s joined as a voter", m.Name)}
}

// join walks the new incarnation of an Add, Replace or Move to a voter:
// object, exposure, learner, start, promote. pending is false once it is a
// voter, with its etcd ID.
func join(in Input, op Operation, m Member) (d Decision, id uint64, pending bool) {
	if !in.Etcd.Reachable {
		return waitStep(op, op.Step, pollFast, "etcd does not answer (%s)", orUnknown(in.Etcd.Error)), 0, true
	}
	if d, given := giveUpStart(in, op, m); given {
		return d, 0, true
	}
	if m.Object == nil || m.Object.Incarnation < m.Incarnation {
		if !m.ClusterVisible {
			// Not seeing the cluster says nothing of the object there: an
			// operation past creating it (a hub that just restarted and has
			// not engaged the cluster yet) keeps its recorded step.
			if op.Step != "" && op.Step != ActBegin && op.Step != ActCreateObjects {
				return waitStep(op, op.Step, pollSlow, "member cluster %s is not visible (yet); %s of %s goes on at step %s once it is", m.Domain.Cluster, op.Type, m.Name, op.Step), 0, true
			}
			return waitStep(op, ActCreateObjects, pollSlow, "member cluster %s is not visible; waiting to create %s there", m.Domain.Cluster, m.Name), 0, true
		}
		return step(op, ActCreateObjects, Decision{Members: []string{m.Name}, Domain: m.Domain, Reason: fmt.Sprintf("creating %s in %s", m.Name, m.Domain)}), 0, true
	}
	if m.Object.PeerURL == "" || m.Object.StatusIncarnation != m.Incarnation {
		return waitStep(op, ActAddLearner, pollJoin, "waiting for the spoke in %s to expose %s", m.Domain.Cluster, m.Name), 0, true
	}
	em, found := byPeerURL(in.Etcd, m.Object.PeerURL)
	if !found {
		if l, busy := otherLearner(in.Etcd, 0); busy {
			return waitStep(op, ActAddLearner, pollFast, "learner %s is still joining; one learner at a time", describe(l)), 0, true
		}
		return step(op, ActAddLearner, Decision{Member: m.Name, Reason: fmt.Sprintf("adding %s as a learner", m.Name)}), 0, true
	}
	op.NewMemberID = em.ID
	if m.Object.Bootstrap != "existing" {
		return step(op, ActStartMember, Decision{Member: m.Name, MemberID: em.ID, Reason: fmt.Sprintf("starting %s to join the cluster", m.Name)}), 0, true
	}
	if em.IsLearner {
		if !em.Started() {
			return waitStep(op, ActPromote, pollJoin, "waiting for learner %s to start", m.Name), 0, true
		}
		if (op.Type == OpMove || op.Type == OpAdd) && !em.Healthy {
			// A voter that does not answer yet would count as one down:
			// beside the old incarnation of a Move, or as the fourth voter
			// of three, which leaves a quorum of three and no failure
			// tolerated. A learner serves clients only once it has applied
			// the entry that publishes it, seconds after the member list
			// shows it started. (A Replace's old ID is gone already: its
			// promotion restores what the ring had, answering or not.)
			beside := "beside its old incarnation"
			if op.Type == OpAdd {
				beside = "as a voter that counts"
			}
			return waitStep(op, ActPromote, pollJoin, "waiting for learner %s to answer before it is promoted %s", m.Name, beside), 0, true
		}
		if in.Adopt.Wanted && !em.Healthy {
			// The same while an adopted cluster grows: each promotion
			// raises the quorum, and one of a voter that does not answer
			// yet costs a failure tolerated (TestScenarioAdopt sampled
			// none for a second after two quick promotions).
			return waitStep(op, ActPromote, pollJoin, "waiting for learner %s to answer before it is promoted into the adopted cluster", m.Name), 0, true
		}
		return step(op, ActPromote, Decision{Member: m.Name, MemberID: em.ID, RequeueAfter: pollJoin, Reason: fmt.Sprintf("promoting learner %s", m.Name)}), 0, true
	}
	return Decision{}, em.ID, false
}

// giveUpStart ends an Add (or the add half of a Replace) whose new
// incarnation has not joined as a voter and cannot start where it was
// placed: its failure domain was declared failed, no node of its zone
// has taken new pods for the member grace since the operation began, or
// its pod has been Pending for the member grace while another member runs
// the same spec (pending.go). A
// learner already in etcd is removed first (a learner does not vote: its
// removal never touches quorum); then the operation ends with the member
// in no etcd member list, and the placement places it again, away from
// that domain. Without this, the operation waited for a start that could
// not come and held every other membership change back.
func giveUpStart(in Input, op Operation, m Member) (Decision, bool) {
	em, found := byID(in.Etcd, op.NewMemberID)
	if !found && m.Object != nil && m.Object.PeerURL != "" && m.Object.StatusIncarnation == m.Incarnation {
		em, found = byPeerURL(in.Etcd, m.Object.PeerURL)
	}
	learnerID := op.NewMemberID
	if found {
		learnerID = em.ID
	}
	var why string
	switch other, wrong := startedAsAnother(m, learnerID); {
	case m.DomainFailed:
		why = fmt.Sprintf("%s was declared failed", m.Domain)
	case m.DomainClosed && !op.StartedAt.IsZero() && in.Now.Sub(op.StartedAt) >= in.MemberGrace:
		why = fmt.Sprintf("no node of %s has taken new pods for %s (the member grace) since the %s began", m.Domain, in.MemberGrace, op.Type)
	case notStarting(in, m, op.StartedAt) != "" && in.Automatic:
		why = notStarting(in, m, op.StartedAt) + " (pending.go)"
	case wrong:
		why = fmt.Sprintf("its etcd runs as [%x], not as the learner [%x] added for it (it read the cluster's members from a peer that had not yet seen [%x] removed, and took that ID for its peer URL): it can never join as the learner", other, learnerID, other)
	default:
		return Decision{}, false
	}
	if found && !em.IsLearner {
		return Decision{}, false // a voter already: the operation finishes as usual
	}
	if found {
		return step(op, ActRemoveMember, Decision{Member: m.Name, MemberID: em.ID,
			Reason: fmt.Sprintf("removing learner %s: its incarnation %d cannot start where it was placed: %s", describe(em), m.Incarnation, why)}), true
	}
	return Decision{Action: ActFinish, Member: m.Name, GaveUp: true,
		Reason: fmt.Sprintf("%s (incarnation %d) never started in %s: %s; it will be placed again elsewhere", m.Name, m.Incarnation, m.Domain, why)}, true
}

// startedAsAnother says whether the member's new incarnation, started to
// join ("existing"), reports its own etcd running under an ID other than
// learnerID (from a status read, or from its log when it does not answer:
// spoke/etcdlog's JoinedAsAnotherMember), and which. etcd joining an existing cluster takes the ID its
// peer URL has in the member list of the first peer that answers: a peer
// cut off from the leader when a Replace removed the old ID under the same
// URL still lists the old ID there, and the new process then runs as a
// removed member, refused by every peer, for good.
func startedAsAnother(m Member, learnerID uint64) (uint64, bool) {
	o := m.Object
	if o == nil || learnerID == 0 || o.StatusIncarnation != m.Incarnation || o.Bootstrap != "existing" ||
		o.Etcd == nil || o.Etcd.ID == 0 || o.Etcd.ID == learnerID {
		return 0, false
	}
	return o.Etcd.ID, true
}

func continueRemove(in Input, op Operation) Decision {
	if d, pending := removeFromEtcd(in, op); pending {
		return d
	}
	if op.From != nil {
		if d, pending := deleteObject(in, op, *op.From); pending {
			return d
		}
	}
	return Decision{Action: ActFinish, Member: op.Member, Reason: fmt.Sprintf("%s removed", op.Member)}
}

func continueReplace(in Input, op Operation) Decision {
	if d, pending := removeFromEtcd(in, op); pending {
		return d
	}
	if op.From != nil && op.To != nil && op.From.Cluster != op.To.Cluster {
		if d, pending := deleteObject(in, op, *op.From); pending {
			return d
		}
	}
	return continueAdd(in, op)
}

// continueMove walks a make-before-break move (rule 13): the new
// incarnation joins and is promoted beside the old one (join), then
// leadership leaves the old incarnation, its ID is removed (removeFromEtcd)
// and its object deleted. The ring has one voter more than replicas
// between the promotion and the removal, never one fewer. A new
// incarnation that cannot start where it was placed is given up and the
// member is handed back to its old incarnation, which never left.
func continueMove(in Input, op Operation) Decision {
	m, ok := member(in, op.Member)
	if !ok {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("member %s is no longer assigned; move abandoned", op.Member)}
	}
	if d, given := giveUpSilentVoter(in, op, m); given {
		return d
	}
	d, id, pending := join(in, op, m)
	if pending {
		if d.Action == ActFinish && d.GaveUp {
			return giveBack(op, d.Reason)
		}
		return d
	}
	op.NewMemberID = id
	if em, ok := byID(in.Etcd, id); ok && !em.Healthy {
		if _, oldListed := byID(in.Etcd, op.MemberID); oldListed {
			if FailedBeyondGrace(m.Ready, m.ReadyChangedAt, em.Healthy, in.Now, in.MemberGrace) {
				// Promoted, and silent for the member grace since: four
				// voters with one silent tolerate no failure. Its ID goes;
				// the old incarnation, which never left, stays.
				if ok, q := keepsQuorum(in.Etcd, em.ID); !ok {
					return waitStep(op, ActRemoveMember, pollSlow, "%s's new incarnation %s has not answered since %s (grace %s); not removing it: %s", m.Name, describe(em), m.ReadyChangedAt.UTC().Format(time.RFC3339), in.MemberGrace, q)
				}
				return step(op, ActRemoveMember, Decision{Member: m.Name, MemberID: em.ID,
					Reason: fmt.Sprintf("removing %s's new incarnation %s: promoted, it has not answered since %s (grace %s); the move is given up and its old incarnation %d stays", m.Name, describe(em), m.ReadyChangedAt.UTC().Format(time.RFC3339), in.MemberGrace, op.FromIncarnation)})
			}
			return waitStep(op, ActRemoveMember, pollJoin, "waiting for %s's new incarnation %s to answer before its old one is removed (it is given up if silent for %s after its promotion)", m.Name, describe(em), in.MemberGrace)
		}
	}
	if d, pending := removeFromEtcd(in, op); pending {
		return d
	}
	if op.From != nil {
		if d, pending := deleteObject(in, op, *op.From); pending {
			return d
		}
	}
	return Decision{Action: ActFinish, Member: m.Name, MemberID: id, Reason: fmt.Sprintf("%s moved make-before-break to %s", m.Name, m.Domain)}
}

// giveUpSilentVoter ends a Move whose new incarnation was removed from
// etcd after its promotion because it never answered (continueMove): its
// ID recorded, gone from etcd's list, and the old incarnation still
// listed. Only this step removes a Move's new ID; the member is handed
// back to its old incarnation.
func giveUpSilentVoter(in Input, op Operation, m Member) (Decision, bool) {
	if op.Step != ActRemoveMember || op.NewMemberID == 0 || !in.Etcd.Reachable {
		return Decision{}, false
	}
	if _, listed := byID(in.Etcd, op.NewMemberID); listed {
		return Decision{}, false
	}
	if _, oldListed := byID(in.Etcd, op.MemberID); !oldListed {
		return Decision{}, false
	}
	return giveBack(op, fmt.Sprintf("%s's new incarnation %d [%x] never answered after its promotion and was removed", m.Name, op.Incarnation, op.NewMemberID)), true
}

// giveBack ends a Move whose new incarnation could not start: the member
// is recorded again as its old incarnation, which still serves (its
// objects in the new domain are swept: the ledger no longer places it
// there).
func giveBack(op Operation, why string) Decision {
	d := Decision{Action: ActFinish, Member: op.Member, MemberID: op.MemberID, GaveUp: true,
		Reason: fmt.Sprintf("%s; the move is given up and %s stays in its old incarnation %d", why, op.Member, op.FromIncarnation)}
	if op.From != nil {
		d.Assign = []Assignment{{Member: op.Member, Domain: *op.From, Incarnation: op.FromIncarnation, ID: op.MemberID}}
	}
	return d
}

// makeBeforeBreak says whether a placement move of m to to can keep its
// old incarnation until the new one is a voter, and when not, why: the old
// incarnation must be alive (in etcd's list, started, answering, in a
// cluster the hub sees whose domain is not declared failed). A move inside
// one member cluster gives the new incarnation an object of its own there,
// beside the old one's, unless the old object is named after the member
// alone (written before the naming scheme: its Service would select the
// new pod too).
func makeBeforeBreak(in Input, m Member, to topology.Domain) (string, bool) {
	em, listed := byID(in.Etcd, m.ID)
	switch {
	case !listed:
		return fmt.Sprintf("%s's old incarnation is not in etcd's member list", m.Name), false
	case em.IsLearner:
		return fmt.Sprintf("%s's old incarnation is a learner", m.Name), false
	case m.DomainFailed:
		return fmt.Sprintf("%s's failure domain %s was declared failed", m.Name, m.Domain), false
	case !m.ClusterVisible:
		return fmt.Sprintf("%s's member cluster %s is out of sight", m.Name, m.Domain.Cluster), false
	case !em.Started() || !em.Healthy:
		return fmt.Sprintf("%s's old incarnation %s does not answer", m.Name, describe(em)), false
	case to.Cluster == m.Domain.Cluster && m.Object != nil && m.Object.NamedAfterMember:
		return fmt.Sprintf("%s moves inside member cluster %s, where its object is named after the member alone (written before the naming scheme): its Service would select the new incarnation's pod too", m.Name, to.Cluster), false
	case in.BreakBeforeMake:
		return fmt.Sprintf("the EtcdCluster asks for it (annotation %s)", annotationBreakBeforeMake), false
	}
	return "", true
}

// removeFromEtcd moves leadership away and removes op.MemberID, gated on
// quorum. pending is false once the ID is gone from the member list.
func removeFromEtcd(in Input, op Operation) (Decision, bool) {
	if op.MemberID == 0 {
		return Decision{}, false
	}
	if !in.Etcd.Reachable {
		return waitStep(op, op.Step, pollFast, "etcd does not answer (%s)", orUnknown(in.Etcd.Error)), true
	}
	em, found := byID(in.Etcd, op.MemberID)
	if !found {
		return Decision{}, false
	}
	handOff := ""
	if in.Etcd.LeaderID == em.ID {
		to, ok := transferee(in, em.ID)
		tried := onStep(in, op, ActMoveLeader)
		switch {
		case !ok:
			return waitStep(op, ActMoveLeader, pollFast, "%s leads and no other healthy voter can take over", describe(em)), true
		case tried < leaderHandOffLimit:
			return step(op, ActMoveLeader, Decision{Member: op.Member, MemberID: em.ID, TransfereeID: to, Reason: fmt.Sprintf("moving leadership away from %s before removing it", describe(em))}), true
		}
		// The hub's MoveLeader has not moved it (asked of the leader,
		// which the hub may not reach while its peers do): an operation
		// that waited for it would wait for ever, and hold its place
		// under the fleet limit. Another healthy voter can take over, so
		// the removal, gated on quorum below like any other, costs an
		// election (etcd: removing the leader is safe; the ring waits an
		// election timeout for the next one), not a write.
		handOff = handOffGivenUp(em, tried, "removing it as the leader, etcd elects another")
	}
	if ok, why := keepsQuorum(in.Etcd, em.ID); !ok {
		return waitStep(op, ActRemoveMember, pollSlow, "not removing %s: %s", describe(em), why), true
	}
	return step(op, ActRemoveMember, Decision{Member: op.Member, MemberID: em.ID, Reason: fmt.Sprintf("%sremoving %s from etcd", handOff, describe(em))}), true
}

// handOffGivenUp begins the reason of a step taken on a leader that a
// minute of MoveLeader did not move (leaderHandOffLimit); how says what
// the step does instead.
func handOffGivenUp(em ListEntry, tried time.Duration, how string) string {
	return fmt.Sprintf("leadership did not move away from %s in %s of trying (the hub's MoveLeader, asked of the leader, did not succeed); %s; ", describe(em), tried.Truncate(time.Second), how)
}

// onStep is how long op has been on step a: zero when it is on another
// step, or when the hub has not recorded when a began (a step decided in
// this pass, or recorded by a hub older than Operation.StepStartedAt).
func onStep(in Input, op Operation, a Action) time.Duration {
	if op.Step != a || op.StepStartedAt.IsZero() {
		return 0
	}
	return in.Now.Sub(op.StepStartedAt)
}

// deleteObject deletes the member's object in from's cluster when that
// cluster is visible and still holds one: of a Move inside the member's
// cluster, the old incarnation's beside the new one's (Superseded). A
// cluster the hub cannot see keeps its object: the reconciler sweeps it
// when the cluster returns.
func deleteObject(in Input, op Operation, from topology.Domain) (Decision, bool) {
	m, ok := member(in, op.Member)
	if !ok {
		return Decision{}, false
	}
	held := m.Object != nil
	if op.Type == OpMove {
		held = m.Superseded
	}
	here := m.Domain.Cluster == from.Cluster && held && m.ClusterVisible
	if here || slices.Contains(m.StaleIn, from.Cluster) {
		return step(op, ActDeleteObject, Decision{Member: op.Member, From: from, Reason: fmt.Sprintf("deleting %s's object in %s (its volume is kept)", op.Member, from.Cluster)}), true
	}
	return Decision{}, false
}

// foreignMembers stops on etcd members that no record accounts for: a
// human's change, or a record lost. The hub does not guess.
func foreignMembers(in Input) (Decision, bool) {
	known := map[uint64]bool{}
	urls := map[string]bool{}
	for _, m := range in.Members {
		if m.ID != 0 {
			known[m.ID] = true
		}
		if m.Object != nil && m.Object.PeerURL != "" {
			urls[m.Object.PeerURL] = true
		}
	}
	var foreign []string
	for _, em := range in.Etcd.Members {
		if known[em.ID] || in.Adopt.Original(em.ID) {
			continue
		}
		if slices.ContainsFunc(em.PeerURLs, func(u string) bool { return urls[u] }) {
			continue // the record will pick its ID up
		}
		foreign = append(foreign, describe(em))
	}
	if len(foreign) == 0 {
		return Decision{}, false
	}
	// A record without an ID whose object the hub cannot read now may be
	// any of them: its ID is bound by its object's peer URL once its
	// cluster is in sight again. Nothing to ask of a human yet.
	var unbound, unseen []string
	for _, m := range in.Members {
		if m.ID == 0 && (!m.ClusterVisible || m.Object == nil || m.Object.PeerURL == "") {
			unbound = append(unbound, m.Name)
			if !m.ClusterVisible && !slices.Contains(unseen, m.Domain.Cluster) {
				unseen = append(unseen, m.Domain.Cluster)
			}
		}
	}
	if len(unbound) > 0 {
		where := "their spokes to report their peer URLs"
		if len(unseen) > 0 {
			where = "member cluster(s) " + strings.Join(unseen, ", ") + " to come back into sight"
		}
		return wait(pollFast, "etcd lists %s, not matched yet to the records of %s (no etcd ID recorded): waiting for %s (a member whose cluster is gone for good is removed with etcdctl member remove)", strings.Join(foreign, ", "), strings.Join(unbound, ", "), where), true
	}
	return wait(pollSlow, "etcd has members etcdfed does not manage: %s; remove them with etcdctl or fix the EtcdCluster's status", strings.Join(foreign, ", ")), true
}

// FailedBeyondGrace: a member not ready (as recorded, since readyChangedAt)
// and unhealthy in etcd has been so for at least grace.
func FailedBeyondGrace(ready bool, readyChangedAt time.Time, healthy bool, now time.Time, grace time.Duration) bool {
	return !ready && !healthy && !readyChangedAt.IsZero() && now.Sub(readyChangedAt) >= grace
}

// replaceFailed replaces, in its own domain, a voter that has been unhealthy
// longer than the grace period in a cluster the hub can see (a member in a
// cluster the hub cannot see is unknown, not failed). One in a zone where
// no node takes new pods is left to the placement, which moves it to
// another zone (DomainClosed).
func replaceFailed(in Input) (Decision, bool) {
	if !in.Automatic {
		return Decision{}, false
	}
	for _, m := range in.Members {
		em, found := byID(in.Etcd, m.ID)
		if !found || em.IsLearner {
			continue
		}
		lost := m.Object != nil && m.Object.VolumeLost && m.ClusterVisible
		since := unhealthySince(m, em)
		failed := m.ClusterVisible && !m.DomainFailed && !m.DomainClosed && FailedBeyondGrace(m.Ready, since, em.Healthy, in.Now, in.MemberGrace)
		if !lost && !failed {
			continue
		}
		if !lost && NotStarting(in, m) != "" {
			continue // its cluster does not start it: the placement moves it out (pending.go)
		}
		why := fmt.Sprintf("%s has been unhealthy since %s (grace %s): %s", m.Name, since.UTC().Format(time.RFC3339), in.MemberGrace, unhealthyEvidence(m, em))
		if lost {
			why = fmt.Sprintf("%s lost its data volume", m.Name)
		}
		if ok, q := keepsQuorum(in.Etcd, em.ID); !ok {
			return wait(pollSlow, "%s; not replacing it: %s", why, q), true
		}
		d := m.Domain
		return begin(in, Operation{Type: OpReplace, Member: m.Name, MemberID: em.ID, From: &d, To: &d, Reason: "Replace"}, why), true
	}
	return Decision{}, false
}

// placementStep starts the first step pkg/topology plans.
func placementStep(in Input) Decision {
	if len(in.Placement.Steps) == 0 {
		if in.Placement.Unplaced > 0 {
			return wait(pollSlow, "%d of %d members cannot be placed: no schedulable failure domain has room", in.Placement.Unplaced, in.Replicas)
		}
		return Decision{Action: ActNone, Reason: "membership matches the placement"}
	}
	s := in.Placement.Steps[0]
	switch s.Action {
	case topology.Add:
		to := s.To
		return begin(in, Operation{Type: OpAdd, Member: s.Member, To: &to, Reason: string(s.Reason)}, s.String())
	case topology.Remove:
		m, _ := member(in, s.Member)
		from := s.From
		return begin(in, Operation{Type: OpRemove, Member: s.Member, MemberID: m.ID, From: &from, Reason: string(s.Reason)}, s.String())
	case topology.Move:
		m, _ := member(in, s.Member)
		from, to := s.From, s.To
		op := Operation{Type: OpReplace, Member: s.Member, MemberID: m.ID, From: &from, To: &to, Reason: string(s.Reason)}
		why, mbb := makeBeforeBreak(in, m, to)
		if !mbb {
			return begin(in, op, fmt.Sprintf("%s, break before make: %s", s, why))
		}
		if in.MovesPaused {
			return wait(pollSlow, "moves are paused (spec.topology.pauseMoves): %s waits, %d move(s) planned", s, countMoves(in.Placement.Steps))
		}
		op.Type, op.FromIncarnation = OpMove, m.Incarnation
		return begin(in, op, fmt.Sprintf("%s, make before break", s))
	}
	return wait(pollSlow, "unknown placement step %s", s)
}

// begin records a new operation; Add and Replace take the next incarnation.
func begin(in Input, op Operation, why string) Decision {
	op.StartedAt = in.Now
	d := Decision{Action: ActBegin, Operation: &op, Member: op.Member, MemberID: op.MemberID, Reason: why}
	switch op.Type {
	case OpAdd, OpReplace, OpMove:
		op.Incarnation = in.LastIncarnation + 1
		op.Step = ActCreateObjects
		d.Domain = *op.To
		d.Assign = []Assignment{{Member: op.Member, Domain: *op.To, Incarnation: op.Incarnation, OwnName: op.Type == OpMove}}
	case OpRemove:
		op.Step = ActRemoveMember
	case OpRoll:
		op.Step = ActUpdateObject
	case OpMoveLeader:
		op.Step = ActTransferLeadership
	}
	return d
}

// countMoves is the number of Move steps of a placement.
func countMoves(steps []topology.Step) int {
	n := 0
	for _, s := range steps {
		if s.Action == topology.Move {
			n++
		}
	}
	return n
}

func step(op Operation, a Action, d Decision) Decision {
	op.Step = a
	d.Action = a
	d.Operation = &op
	return d
}

func waitStep(op Operation, a Action, after time.Duration, format string, args ...any) Decision {
	d := wait(after, format, args...)
	op.Step = a
	d.Operation = &op
	return d
}

func wait(after time.Duration, format string, args ...any) Decision {
	return Decision{Action: ActWait, RequeueAfter: after, Reason: fmt.Sprintf(format, args...)}
}

// keepsQuorum reports whether removing id leaves enough healthy voters.
func keepsQuorum(e Etcd, id uint64) (bool, string) {
	voters, healthy := 0, 0
	removingVoter := false
	for _, m := range e.Members {
		if m.IsLearner {
			continue
		}
		if m.ID == id {
			removingVoter = true
			continue
		}
		voters++
		if m.Healthy {
			healthy++
		}
	}
	if !removingVoter {
		return true, ""
	}
	quorum := voters/2 + 1
	if healthy < quorum {
		return false, fmt.Sprintf("%d healthy of the %d voters left, quorum is %d", healthy, voters, quorum)
	}
	return true, ""
}

func otherLearner(e Etcd, except uint64) (ListEntry, bool) {
	for _, m := range e.Members {
		if m.IsLearner && m.ID != except {
			return m, true
		}
	}
	return ListEntry{}, false
}

func byPeerURL(e Etcd, url string) (ListEntry, bool) {
	for _, m := range e.Members {
		if slices.Contains(m.PeerURLs, url) {
			return m, true
		}
	}
	return ListEntry{}, false
}

func byID(e Etcd, id uint64) (ListEntry, bool) {
	if id == 0 {
		return ListEntry{}, false
	}
	for _, m := range e.Members {
		if m.ID == id {
			return m, true
		}
	}
	return ListEntry{}, false
}

func member(in Input, name string) (Member, bool) {
	for _, m := range in.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

func describe(m ListEntry) string {
	name := m.Name
	if name == "" {
		name = "(not started)"
	}
	return fmt.Sprintf("%s [%x]", name, m.ID)
}

func orUnknown(s string) string {
	if s == "" {
		return "no error reported"
	}
	return s
}
