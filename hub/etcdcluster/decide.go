package etcdcluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// decision is everything one pass does, decided from the snapshot alone:
// no API server, no etcd, no DNS. apply carries it out; computeStatus
// turns it (with apply's result) into the status.
type decision struct {
	// ledger is the ledger (see ledger.go) after this pass's observations
	// and its step are recorded.
	ledger *etcdfedv1.EtcdClusterStatus
	// placement is what pkg/topology wants; placementErr why it could not
	// say (then no step is taken).
	placement    topology.Result
	placementErr error
	// plan is the planner's answer: the one step of the one operation.
	plan planner.Decision
	// features are the pass's features (features.go), built once from
	// the snapshot.
	features *features
	// quorum is the planner's verdict on the quorum, on the ledger as
	// this pass leaves it (a Recover from a backup begun places its seed
	// anew), for Available and status.quorumLoss.
	quorum quorumVerdict
	// ended is the operation this pass's step ends, for its event.
	ended *etcdfedv1.MembershipOperation
	// fleetWait: the plan waits for the fleet-wide limit (gateFleet).
	fleetWait bool
	// step is plan rendered into the objects and etcd calls it needs.
	step step

	// Upkeep, repeated every pass and no operation: it never restarts a
	// pod and never changes membership.
	//
	// pki: the CA and the hub's client certificate to (re)issue.
	pki pkiWork
	// crl is the revocation list of the members' Secrets (revocation.go).
	crl crlWork
	// certs are member certificates to issue or renew.
	certs []memberRef
	// dns is the record set every member cluster serves.
	dns dnsWork
	// updates are member objects whose change restarts nothing (labels,
	// bootstrap "new" switched to "existing").
	updates []memberWrite
	// sweep are members whose objects are left in a cluster that no
	// longer holds them (moved or removed while it was away), and etcd's
	// quorate member list of this pass does not list (sweepGuard).
	sweep []memberRef
	// retain are the swept objects rewritten first with the Retain
	// reclaim policy (their spoke then keeps their volumes), and what
	// each volume holds, for the event that names them.
	retain []retainedVolume
	// notAdopted names the clusters not eligible for the ring whose
	// objects a rebuild of the record left out (adoptLostMembers), for
	// Degraded.
	notAdopted []string
	// sweepKept says why objects left behind are kept (etcd still lists
	// them, or may), for Degraded.
	sweepKept []string
	// requestRefused is the message of a recovery request this pass
	// refused (dated in the future), for its event; "" for none.
	requestRefused string
	// spentCredentials are members whose copy of a restore store's
	// credentials is no longer needed: the restore ended (restore.go).
	spentCredentials []memberRef
}

// upkeepIdle: the decision's upkeep writes nothing, on s: no CA or
// certificate to issue, no member object to update or sweep, no spent
// store credentials to delete, every visible cluster that serves the
// ring's zone already serving the record set, and no other holding it.
func (d *decision) upkeepIdle(s *snapshot) bool {
	if d.pki != (pkiWork{}) || d.crl.stale || (d.crl.carry.pending() && s.pki.hubClient != nil) || len(d.certs) > 0 || len(d.updates) > 0 || len(d.sweep) > 0 || len(d.spentCredentials) > 0 {
		return false
	}
	if d.dns.set == nil {
		return true
	}
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		if !servesZone(s, d.dns.ledger, cs) {
			if len(cs.zones) > 0 {
				return false // a zone to delete
			}
			continue
		}
		want := desiredZone(s, cs, d.dns.records)
		have := cs.zones[want.Name]
		if have == nil || !maps.Equal(have.GetLabels(), want.GetLabels()) || !sameContent(have, want) {
			return false
		}
	}
	return true
}

// step is the planner's step, fully rendered: apply only carries it out.
type step struct {
	// writes are the member objects the step creates or changes.
	writes []memberWrite
	// deletes are the members whose objects the step deletes, and where.
	deletes []memberRef
	// peerURL is the learner's peer URL (AddLearner).
	peerURL string
	// leaderURLs reach the leader (MoveLeader, Promote).
	leaderURLs []string
	// memberURLs reach the member acted on (Defragment).
	memberURLs []string
	// err says why the step cannot be taken as decided (an input it needs
	// is missing); apply reports it as the step's failure.
	err error
}

// memberWrite is one member object to create or patch.
type memberWrite struct {
	cluster string
	want    *etcdfedv1.EtcdMember
	// cert: issue the member's certificate first; without it the object is
	// not written.
	cert bool
	// storeCredentials: copy the restore store's credentials next to the
	// member first; without them the object is not written.
	storeCredentials bool
}

// memberRef names a member in a member cluster, and object one of its
// EtcdMembers there ("" for its current one: clusterSnapshot.refObject).
type memberRef struct{ cluster, member, object string }

// pkiWork is the hub's own certificate material to write.
type pkiWork struct {
	createCA, issueHubClient bool
	// keepCA is the CA a ring taken over without its key runs on
	// (runningCA), to store as the keyless CA Secret.
	keepCA *pki.CA
}

// dnsWork is the record set to serve: set nil when nothing can be served
// yet, err when it cannot be built.
type dnsWork struct {
	set     *dnsprovider.RecordSet
	records []etcdfedv1.DNSRecord
	err     error
	// ledger is the ledger the set was built from: which clusters serve
	// the zone (servesZone).
	ledger *etcdfedv1.EtcdClusterStatus
}

// decide is the pass's one decision. Order: read the request annotations,
// hold for a ring to take over, bring the ledger up to date (every
// feature's observe), place, plan the one step from every feature's input
// and record it (every feature's record), render it, judge the quorum on
// the ledger as this pass leaves it, then the upkeep against that ledger
// (the hub's certificates, DNS records, member certificates and object
// updates, objects left behind and the volumes kept for them, spent store
// credentials).
func decide(s *snapshot) *decision {
	s.asks = readRequests(s.ec)
	d := &decision{ledger: s.ec.Status.DeepCopy(), features: newFeatures(s)}
	st := d.ledger
	// A running ring of this name found in the member clusters is taken
	// over, or the pass holds: nothing is founded, written or changed
	// (takeover.go).
	if holdForTakeOver(s, st, d) {
		d.quorum = d.features.recovery.assess(st)
		return d
	}
	d.features.observe(st, d)

	d.placement, d.placementErr = topology.Plan(placementInput(s, st))
	if d.placementErr == nil {
		d.plan = planner.Next(d.features.plannerInput(st, d.placement))
		if msg := takeOverMismatch(s, st); msg != "" {
			d.plan = planner.Decision{Action: planner.ActWait, Reason: msg, RequeueAfter: takeOverRetry}
		}
		d.plan, d.fleetWait = gateFleet(d.plan, s.ec.Namespace+"/"+s.ec.Name, s.fleetMax, s.fleetAdmit)
		if actions[d.plan.Action].ends {
			d.ended = st.Operation
		}
		d.features.record(st, d)
		d.step = renderStep(s, st, d.plan)
	}

	d.pki = pkiDue(s)
	d.crl = decideCRL(s)
	d.dns = wantedRecords(s, st)
	d.certs, d.updates = memberUpkeep(s, st, d.step)
	d.sweep, d.sweepKept = leftBehind(s, st)
	d.retain = retainVolumes(s, d.sweep)
	d.spentCredentials = spentStoreCredentials(s)
	d.quorum = d.features.recovery.assess(st)
	return d
}

// write adds a recorded member's object in its cluster, with the current
// spec and with bootstrap b when set (nil keeps the object's own for the
// same incarnation).
func (out *step) write(s *snapshot, st *etcdfedv1.EtcdClusterStatus, member string, b *etcdfedv1.BootstrapSpec) {
	m := statusMember(st, member)
	if m == nil {
		out.err = errors.Join(out.err, fmt.Errorf("%s is not a recorded member", member))
		return
	}
	cs := s.cluster(m.Cluster)
	if !cs.visible() {
		out.err = errors.Join(out.err, fmt.Errorf("member cluster %s is not visible", m.Cluster))
		return
	}
	want := desiredMember(s, st, m, heldObject(s, st, cs, m))
	if b != nil {
		want.Spec.Bootstrap = b
	}
	// The certificate first: a Roll onto a changed CA trust restarts the
	// pod on the Secret as it is then.
	out.writes = append(out.writes, memberWrite{cluster: cs.name, want: want, cert: certDue(s, cs, want)})
}

// pkiDue: the CA to create (none yet), and the hub's client certificate
// to issue (none, near expiry, issued for longer than pki.ClientValidity,
// or of another CA).
func pkiDue(s *snapshot) pkiWork {
	if !s.ec.Spec.TLS.Mode.Enabled() {
		return pkiWork{}
	}
	// A ring taken over keeps its CA: a new one would not be trusted by
	// its members (findTakeOver holds while it is missing, unless a
	// rotation was asked for: then the CA the members run on is stored
	// without its key, and the rotation replaces it).
	w := pkiWork{createCA: s.pki.ca == nil && s.ec.RingUID() == s.ec.UID}
	if s.pki.ca == nil && !w.createCA {
		if _, asked := caRotationRequest(s.requests()); asked {
			w.keepCA, _ = runningCA(memberCertSecrets(s))
		}
		return w
	}
	if s.pki.authority().Keyless() {
		// Nothing issues before the rotation's Reissuing: the hub reaches
		// etcd with a member's certificate meanwhile (borrowedLeaf).
		return w
	}
	switch hc := s.pki.hubClient; {
	case w.createCA || hc == nil || s.pki.hubClientLeaf() == nil:
		w.issueHubClient = true
	default:
		renew, _ := s.pki.ca.NeedsRenewal(hc.Data[pki.KeyCert], nil, s.now)
		// One issued for longer than ClientValidity (a year, before) is
		// replaced at once: the hub's user is etcd's root.
		life, _ := pki.Lifetime(hc.Data[pki.KeyCert])
		// One whose serial spec.tls.revokedCertificates lists is replaced
		// at once: the members' list refuses it (revocation.go).
		w.issueHubClient = renew || life > pki.ClientValidity+time.Hour || !pki.Equal(hc.Data[pki.KeyCA], s.pki.bundle()) || revoked(s.ec, hc.Data[pki.KeyCert])
	}
	return w
}

// retiredObjects are the EtcdMembers an ActDeleteObject deletes in
// p.From's cluster: the member's object there or, when a Move inside that
// cluster keeps the new incarnation's object beside it, the objects of the
// other incarnations (the new one stays). A cluster out of sight keeps
// them; the sweep deletes them when it is back.
func retiredObjects(s *snapshot, st *etcdfedv1.EtcdClusterStatus, p planner.Decision) []memberRef {
	cs := s.cluster(p.From.Cluster)
	if !cs.visible() || cs.members[p.Member] == nil {
		return nil
	}
	m := statusMember(st, p.Member)
	if m == nil || !movesInside(st, p.Member, cs.name) {
		return []memberRef{{cluster: cs.name, member: p.Member}}
	}
	var out []memberRef
	for _, o := range cs.objectsOf(p.Member) {
		if o.Spec.Incarnation != m.Incarnation {
			out = append(out, memberRef{cluster: cs.name, member: p.Member, object: o.Name})
		}
	}
	return out
}

// certDue: the certificate Secret of want (a member's EtcdMember as the
// hub would write it) in cs is missing, near expiry, without the DNS names
// of the incarnation (memberCertNames), or of another CA.
func certDue(s *snapshot, cs *clusterSnapshot, want *etcdfedv1.EtcdMember) bool {
	due, _ := certDueWhy(s, cs, want)
	return due
}

// certDueWhy is certDue with whether the only reason is the CA: the
// certificate is good but of another CA of the bundle, or ca.crt is not
// the bundle (a CA rotation). Such a certificate is left to the member's
// Roll while the member is to restart on the changed trust: the Roll
// writes it just before the restart, one member at a time.
func certDueWhy(s *snapshot, cs *clusterSnapshot, want *etcdfedv1.EtcdMember) (due, caOnly bool) {
	if !s.ec.Spec.TLS.Mode.Enabled() {
		return false, false
	}
	sec := cs.secrets[pki.MemberSecretName(want.Name)]
	if s.pki.ca == nil && s.ec.RingUID() != s.ec.UID {
		// A ring taken over: nothing is written before its CA is stored
		// (pkiDue), the members run on what they hold.
		return false, false
	}
	if s.pki.ca == nil || sec == nil {
		return true, false
	}
	renew, why := s.pki.ca.NeedsRenewal(sec.Data[pki.KeyCert], memberCertNames(s.ec, want.Spec.MemberName, want.Spec.DNSName), s.now)
	if !renew && revoked(s.ec, sec.Data[pki.KeyCert]) {
		// Revoked by its serial (spec.tls.revokedCertificates): the list
		// refuses it on the peer port as well, so the member gets a new
		// one in the same pass.
		renew, why = true, "revoked"
	}
	// A problem of the certificate itself (missing, expiring, wrong name,
	// of a CA the ring does not know) is fixed at once.
	ownProblem := renew && (why != pki.ReasonOtherCA || s.pki.authority().Issuer(sec.Data[pki.KeyCert]) == nil)
	return renew || !pki.Equal(sec.Data[pki.KeyCA], s.pki.bundle()), !ownProblem
}

// memberUpkeep keeps the recorded members' objects in line outside the
// step: certificates renewed, and changes that restart nothing written
// (labels; bootstrap "new" switched to "existing" once the cluster formed).
// A change that restarts the pod is a Roll's (the planner's), and a member
// the step writes is left to the step.
func memberUpkeep(s *snapshot, st *etcdfedv1.EtcdClusterStatus, stp step) (certs []memberRef, updates []memberWrite) {
	for i := range st.Members {
		m := &st.Members[i]
		cs := s.cluster(m.Cluster)
		if !cs.visible() {
			continue
		}
		existing := cs.members[m.Name]
		if existing == nil || existing.Spec.Incarnation != m.Incarnation {
			continue // the membership step creates it
		}
		want := desiredMember(s, st, m, existing)
		if due, caOnly := certDueWhy(s, cs, want); due && (!caOnly || !restarts(existing, want)) {
			certs = append(certs, memberRef{cluster: cs.name, member: m.Name})
		}
		if slices.ContainsFunc(stp.writes, func(w memberWrite) bool { return w.want.Spec.MemberName == m.Name }) {
			continue
		}
		if restarts(existing, want) || (maps.Equal(existing.Labels, want.Labels) && equality.Semantic.DeepEqual(existing.Spec, want.Spec)) {
			continue
		}
		updates = append(updates, memberWrite{cluster: cs.name, want: want})
	}
	return certs, updates
}

// leftBehind lists members whose objects are in a cluster that no longer
// holds them: an old incarnation left in a cluster that was unreachable
// when its member moved, or a member removed while its cluster was away.
// Only on a formed cluster etcd answers for, in this pass, with a quorate
// (linearizable) member list of the recorded cluster ID, and only objects
// whose member etcd does not list (sweepGuard): the ledger may be stale
// (the hub cluster's etcd restored from an old backup), and the object may
// be the last copy of a live voter. With an operation in flight, only
// stale incarnations (staleIncarnation) are swept: the others may be the
// operation's own (a Replace's old incarnation until it is removed). kept
// says why objects left behind are not swept.
func leftBehind(s *snapshot, st *etcdfedv1.EtcdClusterStatus) (out []memberRef, kept []string) {
	if st.ClusterID == "" || !s.etcd.Reachable || parseID(st.ClusterID) != s.etcd.ClusterID {
		return nil, nil
	}
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(ownedMembers(cs))) {
			m := statusMember(st, name)
			here := m != nil && m.Cluster == cs.name
			objs := cs.objectsOf(name)
			if len(objs) == 0 {
				objs = []*etcdfedv1.EtcdMember{nil} // its Secrets alone
			}
			for _, obj := range objs {
				// The member's current object in the cluster that holds it
				// stays; its other objects there (an old incarnation a Move
				// inside the cluster keeps, a new one given up) are left
				// behind like those in other clusters.
				if here && (obj == nil || obj == cs.members[name]) {
					continue
				}
				if st.Operation != nil && !staleIncarnation(s, st, obj, m) {
					continue
				}
				if why := sweepGuard(s, cs, name, obj); why != "" {
					kept = append(kept, why)
					continue
				}
				ref := memberRef{cluster: cs.name, member: name}
				if obj != nil && obj != cs.members[name] {
					ref.object = obj.Name
				}
				out = append(out, ref)
			}
		}
	}
	return out, kept
}

// sweepGuard says why member's object obj in cs, left behind by the
// ledger, must not be swept ("" when it may): etcd lists the ID the
// object's current incarnation runs as; or its ID is unknown and etcd
// lists a voter of its name that no other object is known to run (this
// may be its last copy).
func sweepGuard(s *snapshot, cs *clusterSnapshot, member string, obj *etcdfedv1.EtcdMember) string {
	if obj == nil {
		return "" // a certificate Secret alone runs nothing
	}
	if id := runsAs(obj); id != 0 {
		if _, ok := listedID(s.etcd, id); ok {
			return fmt.Sprintf("%s's object in %s (incarnation %d) is kept: etcd lists it as [%x], a live member the hub's record does not place there", member, cs.name, obj.Spec.Incarnation, id)
		}
		return ""
	}
	for _, em := range s.etcd.Members {
		if em.IsLearner || em.Name != member || runBy(s, em.ID) {
			continue
		}
		return fmt.Sprintf("%s's object in %s (incarnation %d) is kept: its spoke has not said which etcd member it runs, and etcd lists %s as [%x], which no other object is known to run: it may be that voter's last copy", member, cs.name, obj.Spec.Incarnation, member, em.ID)
	}
	return ""
}

// runsAs is the etcd ID obj's current incarnation reports, 0 when unknown.
func runsAs(obj *etcdfedv1.EtcdMember) uint64 {
	if obj.Status.Etcd == nil || obj.Status.Incarnation != obj.Spec.Incarnation {
		return 0
	}
	return parseID(obj.Status.Etcd.ID)
}

// runBy: an object in a visible cluster reports running as id.
func runBy(s *snapshot, id uint64) bool {
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		for _, o := range cs.allObjects() {
			if runsAs(o) == id {
				return true
			}
		}
	}
	return false
}

// retainedVolume is the volume of a swept object, kept whatever the
// reclaim policy: its object is rewritten with Retain and the label
// LabelKeepVolumes before it is deleted (want nil when it has both), so
// its spoke labels the volume kept, never to be deleted by a later
// incarnation's retirement either.
type retainedVolume struct {
	ref  memberRef
	want *etcdfedv1.EtcdMember
	// note names the volume and what it holds.
	note string
}

// retainVolumes renders, for each swept object, its volume kept: the sweep
// never deletes a volume by itself, whatever spec.storage.volumeReclaimPolicy
// says; the event names each volume and the revision it held, and an
// operator deletes it.
func retainVolumes(s *snapshot, sweep []memberRef) []retainedVolume {
	var out []retainedVolume
	for _, ref := range sweep {
		obj := s.cluster(ref.cluster).refObject(ref)
		if obj == nil {
			continue
		}
		rv := retainedVolume{ref: ref}
		if obj.Spec.Storage.VolumeReclaimPolicy != etcdfedv1.VolumeRetain || obj.Labels[etcdfedv1.LabelKeepVolumes] != "true" {
			// Retain for a spoke that predates the kept label; the label
			// keeps the volume also from a later incarnation's retirement.
			rv.want = obj.DeepCopy()
			rv.want.Spec.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeRetain
			rv.want.Labels = maps.Clone(obj.Labels)
			if rv.want.Labels == nil {
				rv.want.Labels = map[string]string{}
			}
			rv.want.Labels[etcdfedv1.LabelKeepVolumes] = "true"
		}
		claim := obj.Status.Volume.ClaimName
		if claim == "" {
			claim = fmt.Sprintf("%s-data-%d", obj.Name, obj.Spec.Incarnation)
		}
		held := "revision unknown"
		if v := obj.Status.Etcd; v != nil && obj.Status.Incarnation == obj.Spec.Incarnation {
			held = fmt.Sprintf("revision %d, raft index %d, as [%s]", v.Revision, v.RaftIndex, v.ID)
			if v.ObservedAt != nil {
				held += " at " + v.ObservedAt.UTC().Format(time.RFC3339)
			}
		}
		rv.note = fmt.Sprintf("%s incarnation %d in %s: PVC %s/%s (%s)", ref.member, obj.Spec.Incarnation, ref.cluster, obj.Namespace, claim, held)
		out = append(out, rv)
	}
	return out
}

// staleIncarnation says whether obj, a member's object outside the cluster
// the ledger places the member in, is an incarnation the ring is done
// with: older than the one recorded under its name (or the name is no
// longer recorded), and running as an etcd member ID that the ring's etcd
// no longer lists. No operation in flight needs such an object (a Replace
// removes its old ID before its old object stops mattering), and each
// pass it stays may keep it alive: after a recovery from a backup, the
// old incarnations in clusters that come back are a majority of the old
// etcd cluster and serve it again until their objects are deleted, and
// their pods hold the new members' peers' connections to their names (a
// learner added meanwhile never caught up: TestScenarioQuorumLossFromBackup,
// an Add in flight when the clusters returned waited for minutes).
func staleIncarnation(s *snapshot, st *etcdfedv1.EtcdClusterStatus, obj *etcdfedv1.EtcdMember, m *etcdfedv1.MemberStatus) bool {
	switch {
	case obj == nil, parseID(st.ClusterID) != s.etcd.ClusterID:
		return false
	case m != nil && obj.Spec.Incarnation >= m.Incarnation:
		return false
	case obj.Status.Etcd == nil || obj.Status.Etcd.ID == "" || obj.Status.Incarnation != obj.Spec.Incarnation:
		return false // which member it runs as is not known
	}
	_, listed := listedID(s.etcd, parseID(obj.Status.Etcd.ID))
	return !listed
}
