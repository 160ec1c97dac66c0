package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// Adoption of a running etcd cluster that etcdfed did not create
// (spec.adopt). Instead of a Bootstrap, the hub records the cluster as it
// finds it (ActFinishBootstrap: its cluster ID, and its members as the
// originals); the placement then wants spec.replicas members of its own,
// each joined by the ordinary Add (a learner, caught up, promoted), one at
// a time. Once every one of them is a ready voter and spec.adopt.retire
// is set, the originals are removed one at a time by Retire operations:
// followers first, the leader last, leadership handed to one of etcdfed's
// voters before.

// OpRetire removes one original member of an adopted cluster (Member is
// its etcd name, MemberID its ID): leadership moved to an etcdfed voter
// first when it leads, then its ID removed. It has no objects.
const OpRetire OpType = "Retire"

// ReasonAdoption is the reason of the Retire operations.
const ReasonAdoption = "Adoption"

// Adopt is the planner's view of spec.adopt and status.adoption.
type Adopt struct {
	// Wanted: spec.adopt is set; the cluster is never founded, only
	// found.
	Wanted bool
	// Endpoints are spec.adopt.endpoints, for messages.
	Endpoints []string
	// Originals are the IDs of the members the existing cluster had when
	// the hub first reached it (status.adoption.originals), nil before.
	Originals []uint64
	// Retire is spec.adopt.retire.
	Retire bool
}

// Original reports whether id is one of the adopted cluster's original
// members.
func (a Adopt) Original(id uint64) bool {
	return a.Wanted && id != 0 && slices.Contains(a.Originals, id)
}

// beginAdoption takes the place of beginBootstrap when spec.adopt is set:
// nothing is founded, ever. The running cluster is recorded once it
// answers with a quorate member list; until then the hub waits.
func beginAdoption(in Input) Decision {
	if !in.Etcd.Reachable {
		return wait(pollFast, "adopting: the existing cluster does not answer at %s (%s); nothing is founded or changed until it does",
			strings.Join(in.Adopt.Endpoints, ", "), orUnknown(in.Etcd.Error))
	}
	if len(in.Etcd.Members) == 0 {
		return wait(pollFast, "adopting: the existing cluster answered with an empty member list")
	}
	if d, held := versionHold(in); held {
		return d
	}
	var names []string
	for _, m := range in.Etcd.Members {
		names = append(names, describe(m))
	}
	return Decision{Action: ActFinishBootstrap, Reason: fmt.Sprintf("adopting the running etcd cluster %x with %d original member(s): %s",
		in.Etcd.ClusterID, len(in.Etcd.Members), strings.Join(names, ", "))}
}

// versionHold holds the adoption before anything is recorded while
// etcdfed's members, on spec.version, could not join the running cluster:
// an original (or etcd's cluster version) on a newer minor than
// spec.version (etcd refuses a member older than the cluster version), or
// on a version from which spec.version is not one step of etcd's upgrade
// rules (pkg/etcdversion.Step, as for a change of spec.version: the next
// minor only from a recent enough patch, one minor at a time), or on a
// release that would not survive a restart after the joins
// (etcdversion.PromotionReplay). It waits,
// Halted, naming each original with what it runs and the version to set;
// held is false when the versions fit. When no original reports its
// version it waits for one to.
func versionHold(in Input) (Decision, bool) {
	target, err := etcdversion.Parse(in.Version)
	if err != nil {
		return Decision{}, false // the apiserver's rules on spec.version judge it
	}
	var running []etcdversion.Version
	var upgrade etcdversion.Version // a patch the originals must run first
	var bad []string
	why := map[string]bool{}
	var whys []string
	note := func(what, rule string) {
		bad = append(bad, what)
		if !why[rule] {
			why[rule] = true
			whys = append(whys, rule)
		}
	}
	for _, em := range in.Etcd.Members {
		v, ok := etcdversion.ParseLoose(em.Version)
		if !ok {
			continue
		}
		running = append(running, v)
		if rule := joinRule(v, target); rule != "" {
			note(fmt.Sprintf("%s runs %s", describe(em), em.Version), rule)
		}
		if b := etcdversion.PromotionReplay; b.Affects(v) {
			upgrade = b.Fixed
			note(fmt.Sprintf("%s runs %s", describe(em), em.Version), b.Why)
		}
	}
	if cv, ok := etcdversion.ParseLoose(in.Etcd.ClusterVersion); ok && cv.Major == target.Major && cv.Minor > target.Minor {
		note("etcd's cluster version is "+in.Etcd.ClusterVersion, joinRule(cv, target))
	}
	if len(running) == 0 {
		return wait(pollFast, "adopting: no original member reported its etcd version yet (its status call); waiting to check it against spec.version %s before anything joins", in.Version), true
	}
	if len(bad) == 0 {
		return Decision{}, false
	}
	advice := versionAdvice(running)
	if upgrade != (etcdversion.Version{}) {
		newest, _ := etcdversion.Newest(upgrade)
		advice = fmt.Sprintf("upgrade the originals (outside etcdfed) to %s or later (%s is the newest %s etcdfed runs) first", upgrade, newest, upgrade.MinorString())
	}
	d := wait(pollSlow, "adopting held: etcdfed's members on spec.version %s cannot join the running cluster: %s (%s); %s. Nothing is recorded or joined until then",
		in.Version, strings.Join(bad, ", "), strings.Join(whys, "; "), advice)
	d.Halted = true
	return d, true
}

// joinRule is the rule a member on target breaks by joining a member on
// running, "" when it may join: the same minor version; one minor newer
// where etcd supports the upgrade from running.
func joinRule(running, target etcdversion.Version) string {
	switch {
	case running.Major == target.Major && running.Minor == target.Minor:
		return ""
	case running.Major == target.Major && running.Minor > target.Minor:
		return fmt.Sprintf("spec.version %s is an older minor version than %s, and etcd refuses a member older than its cluster version", target, running.MinorString())
	}
	if err := etcdversion.Step(running, target); err != nil {
		if se := (*etcdversion.StepError)(nil); errors.As(err, &se) {
			return se.Why
		}
		return strings.TrimPrefix(err.Error(), etcdversion.ErrUnsupported.Error()+": ")
	}
	return ""
}

// versionAdvice says what to set spec.version to: the newest patch
// etcdfed runs of the originals' newest minor, or else of their oldest,
// that every original accepts; or, when none fits, to upgrade the
// originals first.
func versionAdvice(running []etcdversion.Version) string {
	newest := slices.MaxFunc(running, etcdversion.Version.Compare)
	oldest := slices.MinFunc(running, etcdversion.Version.Compare)
	for _, from := range []etcdversion.Version{newest, oldest} {
		v, ok := etcdversion.Newest(from)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(running, func(r etcdversion.Version) bool { return joinRule(r, v) != "" }) {
			return fmt.Sprintf("set spec.version to %s (the newest %s etcdfed runs), which every original accepts; later change it one step at a time as usual", v, v.MinorString())
		}
	}
	if last := etcdversion.NewestLine(); newest.Compare(last.Newest) > 0 {
		return fmt.Sprintf("etcdfed runs etcd up to %s and cannot join originals on %s: adopt them with a newer etcdfed", last.Minor.MinorString(), newest)
	}
	on := oldest.String()
	if oldest != newest {
		on += " to " + newest.String()
	}
	return fmt.Sprintf("no version etcdfed runs can join originals on %s: upgrade the originals (outside etcdfed) to %s first, then set spec.version to it",
		on, etcdversion.Oldest().Newest)
}

// originalsLeft are the originals etcd still lists, in removal order:
// followers by ID, the leader last.
func originalsLeft(in Input) []ListEntry {
	var out []ListEntry
	for _, em := range in.Etcd.Members {
		if in.Adopt.Original(em.ID) {
			out = append(out, em)
		}
	}
	slices.SortFunc(out, func(a, b ListEntry) int {
		la, lb := a.ID == in.Etcd.LeaderID, b.ID == in.Etcd.LeaderID
		switch {
		case la != lb && la:
			return 1
		case la != lb:
			return -1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// managedReady says why etcdfed's own members cannot yet carry the ring
// alone ("" when they can): spec.replicas of them, each a started,
// healthy, ready voter in a member cluster the hub sees, no learner in
// etcd, and no eligible member cluster out of sight (nothing is decided
// on a partial view, rule 8).
func managedReady(in Input) string {
	if !in.Etcd.Reachable {
		return fmt.Sprintf("etcd does not answer (%s)", orUnknown(in.Etcd.Error))
	}
	if len(in.Unseen) > 0 {
		return "not every eligible member cluster is seen: " + strings.Join(in.Unseen, "; ")
	}
	if l, busy := otherLearner(in.Etcd, 0); busy {
		return fmt.Sprintf("learner %s is still joining", describe(l))
	}
	var voters int
	var not []string
	for _, m := range in.Members {
		em, listed := byID(in.Etcd, m.ID)
		switch {
		case !listed:
			not = append(not, m.Name+" has not joined")
		case em.IsLearner:
			not = append(not, m.Name+" is a learner")
		case !m.ClusterVisible || m.DomainFailed:
			not = append(not, fmt.Sprintf("%s's member cluster %s is out of sight", m.Name, m.Domain.Cluster))
		case !em.Started() || !em.Healthy || !m.Ready:
			not = append(not, m.Name+" is not a ready, healthy voter")
		default:
			voters++
		}
	}
	if len(not) > 0 {
		return strings.Join(not, "; ")
	}
	if voters < in.Replicas {
		return fmt.Sprintf("%d of %d etcdfed members are voters", voters, in.Replicas)
	}
	return ""
}

// retireStep begins the Retire of the next original, when the placement
// has nothing left to do, spec.adopt.retire is set and etcdfed's members
// carry the ring (managedReady). ok is false when there is nothing to
// retire; a wait explains why not yet.
func retireStep(in Input) (Decision, bool) {
	left := originalsLeft(in)
	if len(left) == 0 {
		return Decision{}, false
	}
	if !in.Adopt.Retire {
		if why := managedReady(in); why != "" {
			return Decision{}, false // still joining: the placement says so
		}
		return Decision{Action: ActNone, Reason: fmt.Sprintf("adopted: %d etcdfed members are voters beside %d original member(s); set spec.adopt.retire to remove the originals", in.Replicas, len(left))}, true
	}
	if why := managedReady(in); why != "" {
		return wait(pollFast, "not retiring original members yet: %s", why), true
	}
	em := left[0]
	if ok, q := keepsQuorum(in.Etcd, em.ID); !ok {
		return wait(pollSlow, "not retiring original member %s: %s", describe(em), q), true
	}
	op := Operation{Type: OpRetire, Member: em.Name, MemberID: em.ID, Reason: ReasonAdoption, Step: ActRemoveMember, StartedAt: in.Now}
	return Decision{Action: ActBegin, Operation: &op, Member: em.Name, MemberID: em.ID,
		Reason: fmt.Sprintf("retiring original member %s (%d of %d left), etcdfed's %d members being ready voters", describe(em), len(left), len(in.Adopt.Originals), in.Replicas)}, true
}

// continueRetire walks one Retire: gone already, done; otherwise the same
// checks as its beginning again (a member may have failed since), then
// leadership handed to an etcdfed voter if the original leads, then the
// removal, gated on quorum.
func continueRetire(in Input, op Operation) Decision {
	if !in.Etcd.Reachable {
		return waitStep(op, op.Step, pollFast, "etcd does not answer (%s)", orUnknown(in.Etcd.Error))
	}
	em, found := byID(in.Etcd, op.MemberID)
	if !found {
		return Decision{Action: ActFinish, Reason: fmt.Sprintf("original member %s [%x] retired", op.Member, op.MemberID)}
	}
	if why := managedReady(in); why != "" {
		return waitStep(op, op.Step, pollFast, "not retiring %s yet: %s", describe(em), why)
	}
	if in.Etcd.LeaderID == em.ID {
		to, ok := managedTransferee(in)
		if !ok {
			return waitStep(op, ActMoveLeader, pollFast, "%s leads and no etcdfed voter can take over", describe(em))
		}
		return step(op, ActMoveLeader, Decision{Member: op.Member, MemberID: em.ID, TransfereeID: to,
			Reason: fmt.Sprintf("moving leadership from original member %s to an etcdfed member before retiring it", describe(em))})
	}
	if ok, why := keepsQuorum(in.Etcd, em.ID); !ok {
		return waitStep(op, ActRemoveMember, pollSlow, "not retiring %s: %s", describe(em), why)
	}
	return step(op, ActRemoveMember, Decision{Member: op.Member, MemberID: em.ID, RequeueAfter: pollJoin,
		Reason: fmt.Sprintf("retiring original member %s: removing it from etcd", describe(em))})
}

// managedTransferee is the etcdfed voter, healthy and started, with the
// lowest ID: leadership leaves an original for one of etcdfed's members,
// never for another original about to be retired.
func managedTransferee(in Input) (uint64, bool) {
	var best uint64
	for _, m := range in.Members {
		em, ok := byID(in.Etcd, m.ID)
		if !ok || em.IsLearner || !em.Healthy || !em.Started() {
			continue
		}
		if best == 0 || em.ID < best {
			best = em.ID
		}
	}
	return best, best != 0
}

// AdoptionVersions is versionHold for a caller outside a pass (etcdfed
// adopt --check-etcd, before anything is written): reason is "" when
// etcdfed's members on version can join the cluster e; halted says it is
// a hold only a change ends, not a wait for the originals' versions.
func AdoptionVersions(version string, e Etcd) (reason string, halted bool) {
	d, held := versionHold(Input{Version: version, Etcd: e})
	if !held {
		return "", false
	}
	return d.Reason, d.Halted
}
