package etcdcluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// unformed makes s a ring before etcd formed: the founding members'
// objects exist and are exposed, none has bootstrap yet, and the Bootstrap
// operation is at CreateObjects.
func unformed(s *snapshot) {
	s.ec.Status.ClusterID = ""
	for i := range s.ec.Status.Members {
		s.ec.Status.Members[i].ID = ""
	}
	s.ec.Status.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationBootstrap, Step: string(planner.ActCreateObjects), StartedAt: metav1.NewTime(now)}
	for _, cs := range s.clusters {
		for _, o := range cs.members {
			o.Spec.Bootstrap = nil
		}
	}
	s.etcd = planner.Etcd{Error: "no member started"}
}

// founding is ring() before etcd formed, founded from a snapshot in an S3
// store with credentials: the three objects exist and are exposed, none
// has bootstrap yet.
func founding(verified bool) *snapshot {
	s := ring()
	s.ec.Spec.Bootstrap = &etcdfedv1.ClusterBootstrap{FromSnapshot: &etcdfedv1.SnapshotSource{
		Store:  etcdfedv1.BackupStore{URL: "s3://backups/hub", CredentialsSecretName: "s3"},
		Object: etcdfedv1.SnapshotLatest, SourceCluster: "team-a/old",
	}}
	unformed(s)
	s.restore = restoreSnapshot{creds: map[string][]byte{etcdfedv1.BackupSecretAWSAccessKeyID: []byte("id"), etcdfedv1.BackupSecretAWSSecretAccessKey: []byte("secret")}}
	if verified {
		s.ec.Status.Restore = &etcdfedv1.RestoreStatus{Object: "team-a/old/2222222222222222/20261123T120000.000Z-rev99.db", SHA256: strings.Repeat("cd", 32),
			Revision: 99, RevisionBump: etcdfedv1.DefaultRestoreRevisionBump}
	}
	return s
}

// Every founding member of a restored cluster gets the same object and
// sha256 the hub checked, the full initial cluster and this EtcdCluster's
// token, and a copy of the store's credentials next to it, written before
// its object; without status.restore nothing is started.
func TestStartBootstrapFromSnapshot(t *testing.T) {
	s := founding(true)
	d := decide(s)
	if d.plan.Action != planner.ActStartBootstrap || d.step.err != nil {
		t.Fatalf("plan %s (%s), step error %v; want StartBootstrap", d.plan.Action, d.plan.Reason, d.step.err)
	}
	if len(d.step.writes) != 3 {
		t.Fatalf("%d writes, want 3", len(d.step.writes))
	}
	for _, w := range d.step.writes {
		b := w.want.Spec.Bootstrap
		if b == nil || b.Restore == nil {
			t.Fatalf("%s: bootstrap %+v without restore", w.want.Spec.MemberName, b)
		}
		r := b.Restore
		if r.Object != s.ec.Status.Restore.Object || r.SHA256 != s.ec.Status.Restore.SHA256 || r.RevisionBump != etcdfedv1.DefaultRestoreRevisionBump {
			t.Errorf("%s restores %+v, want status.restore %+v", w.want.Spec.MemberName, r, s.ec.Status.Restore)
		}
		if r.Store.URL != "s3://backups/hub" || r.Store.CredentialsSecretName != StoreCredentialsSecretName(w.want.Name) || !w.storeCredentials {
			t.Errorf("%s: store %+v, credentials copied %v", w.want.Spec.MemberName, r.Store, w.storeCredentials)
		}
		if b.InitialClusterState != etcdfedv1.InitialClusterNew || b.Token != string(s.ec.UID) || strings.Count(b.InitialCluster, "=") != 3 {
			t.Errorf("%s: bootstrap %s %s %s", w.want.Spec.MemberName, b.InitialClusterState, b.Token, b.InitialCluster)
		}
		sec := storeCredentialsSecret(s, s.cluster(w.cluster), w.want.Spec.MemberName)
		if string(sec.Data[etcdfedv1.BackupSecretAWSSecretAccessKey]) != "secret" || sec.Labels[etcdfedv1.LabelMember] != w.want.Spec.MemberName ||
			sec.Labels[etcdfedv1.LabelClusterUID] != string(s.ec.UID) {
			t.Errorf("credentials copy %+v", sec)
		}
	}

	// Once formed, the objects keep their restore (it never restarts them).
	formed := founding(true)
	formed.ec.Status.ClusterID = "c1"
	for _, w := range d.step.writes {
		formed.cluster(w.cluster).members[w.want.Spec.MemberName] = w.want
	}
	for _, m := range formed.ec.Status.Members {
		want := desiredMember(formed, &formed.ec.Status, &m, formed.cluster(m.Cluster).members[m.Name])
		if want.Spec.Bootstrap.Restore == nil || want.Spec.Bootstrap.InitialClusterState != etcdfedv1.InitialClusterExisting || want.Spec.Bootstrap.ClusterID != "c1" {
			t.Errorf("%s after forming: bootstrap %+v", m.Name, want.Spec.Bootstrap)
		}
	}

	unverified := founding(false)
	unverified.ec.Status.Operation = nil
	unverified.ec.Status.Conditions = []metav1.Condition{{Type: etcdfedv1.ConditionSnapshotVerified, Status: metav1.ConditionFalse, Reason: etcdfedv1.SnapshotReasonInvalid, Message: "sha256 mismatch"}}
	d = decide(unverified)
	if d.plan.Action != planner.ActWait || len(d.step.writes) != 0 || !strings.Contains(d.plan.Reason, "SnapshotInvalid: sha256 mismatch") {
		t.Errorf("unverified snapshot: plan %s (%s), %d writes; want a wait naming the refusal", d.plan.Action, d.plan.Reason, len(d.step.writes))
	}

	noCreds := founding(true)
	noCreds.restore = restoreSnapshot{err: errors.New("store credentials Secret default/s3: not found")}
	d = decide(noCreds)
	if d.step.err == nil || !strings.Contains(d.step.err.Error(), "not found") || len(d.step.writes) != 0 {
		t.Errorf("credentials unreadable: step error %v, %d writes", d.step.err, len(d.step.writes))
	}
}

// The copies of the store's credentials go once the restore ended: a
// member that reports an etcd ID for its incarnation drops
// spec.bootstrap.restore (restarting nothing), and its Secret is deleted
// in the pass after its object no longer names it; a member that has not
// run yet keeps both (it may still have to restore).
func TestStoreCredentialsRemovedOnceRestored(t *testing.T) {
	s := founding(true)
	d := decide(s)
	if len(d.step.writes) != 3 {
		t.Fatalf("%d writes, want 3", len(d.step.writes))
	}
	formed := founding(true)
	formed.ec.Status.ClusterID = "c1"
	formed.ec.Status.Operation = nil
	for _, w := range d.step.writes {
		cs := formed.cluster(w.cluster)
		cs.members[w.want.Spec.MemberName] = w.want
		cs.secrets[StoreCredentialsSecretName(w.want.Name)] = storeCredentialsSecret(formed, cs, w.want.Spec.MemberName)
	}
	ran, notYet := formed.ec.Status.Members[0], formed.ec.Status.Members[1]
	obj := formed.cluster(ran.Cluster).members[ran.Name]
	obj.Status.Incarnation = obj.Spec.Incarnation
	obj.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: "a1"}
	if got := spentStoreCredentials(formed); len(got) != 0 {
		t.Fatalf("credentials spent while every object still restores: %v", got)
	}
	if want := desiredMember(formed, &formed.ec.Status, &ran, obj); want.Spec.Bootstrap.Restore != nil {
		t.Errorf("%s ran on its restored data and still restores: %+v", ran.Name, want.Spec.Bootstrap.Restore)
	} else {
		obj.Spec.Bootstrap = want.Spec.Bootstrap // the pass's write
	}
	other := formed.cluster(notYet.Cluster).members[notYet.Name]
	if want := desiredMember(formed, &formed.ec.Status, &notYet, other); want.Spec.Bootstrap.Restore == nil {
		t.Errorf("%s never ran and lost its restore", notYet.Name)
	}
	got := spentStoreCredentials(formed)
	if len(got) != 1 || got[0].member != ran.Name || got[0].cluster != ran.Cluster {
		t.Fatalf("spent credentials %v, want only %s's", got, ran.Name)
	}
}

// recoveringFromBackup is ring() after it lost its quorum, with a Recover
// from the latest backup in flight into main-0 (incarnation 4, exposed,
// not started), the snapshot checked after the request.
func recoveringFromBackup() *snapshot {
	s := ring()
	at := now.Add(-time.Minute)
	s.ec.Annotations = map[string]string{etcdfedv1.AnnotationRecover: etcdfedv1.RecoveryRequest{FromBackup: "latest", RequestedAt: at, UID: "req-b"}.String()}
	s.ec.Spec.Backup = &etcdfedv1.BackupSpec{Schedule: "@hourly", Store: etcdfedv1.BackupStore{URL: "file:///backups"}}
	s.ec.Status.Restore = &etcdfedv1.RestoreStatus{Object: "default/main/c1/20261122T110000.000Z-rev50.db", SHA256: strings.Repeat("ef", 32), Revision: 50,
		RevisionBump: etcdfedv1.DefaultRestoreRevisionBump, VerifiedAt: metav1.NewTime(at.Add(time.Second))}
	s.ec.Status.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRecover, Member: "main-0", Incarnation: 4, Reason: planner.ReasonFromBackup,
		Step: string(planner.ActCreateObjects), StartedAt: metav1.NewTime(at.Add(2 * time.Second))}
	s.ec.Status.LastIncarnation = 4
	m := statusMember(&s.ec.Status, "main-0")
	m.Incarnation, m.ID = 4, ""
	obj := s.cluster(m.Cluster).members["main-0"]
	obj.Spec.Incarnation, obj.Status.Incarnation, obj.Spec.Bootstrap = 4, 4, nil
	s.etcd = planner.Etcd{Error: "context deadline exceeded"}
	return s
}

// A recovery from a backup starts the seed alone as a new cluster with a
// token of its own, restored from status.restore out of spec.backup's
// store; once it answers alone, the new cluster ID and the seed's new ID
// are recorded and the others are forgotten, to be added back.
func TestRecoveryFromBackupSteps(t *testing.T) {
	s := recoveringFromBackup()
	d := decide(s)
	if d.plan.Action != planner.ActStartBootstrap || d.step.err != nil || len(d.step.writes) != 1 {
		t.Fatalf("plan %s (%s), error %v, %d writes; want the seed started", d.plan.Action, d.plan.Reason, d.step.err, len(d.step.writes))
	}
	b := d.step.writes[0].want.Spec.Bootstrap
	if b.InitialCluster != "main-0="+memberURL(s.ec, "main-0", etcdfedv1.DefaultPeerPort) || b.InitialClusterState != etcdfedv1.InitialClusterNew {
		t.Errorf("seed bootstrap %s %s, want main-0 alone, new", b.InitialCluster, b.InitialClusterState)
	}
	if b.Token == string(s.ec.UID) || !strings.HasPrefix(b.Token, string(s.ec.UID)+"-recover-") {
		t.Errorf("token %q: a restored cluster needs a token of its own", b.Token)
	}
	if b.Restore == nil || b.Restore.Store.URL != "file:///backups" || b.Restore.SHA256 != s.ec.Status.Restore.SHA256 {
		t.Errorf("seed restores %+v", b.Restore)
	}

	s = recoveringFromBackup()
	s.ec.Status.Operation.Step = string(planner.ActStartBootstrap)
	seed := s.cluster(statusMember(&s.ec.Status, "main-0").Cluster).members["main-0"]
	seed.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=x", InitialClusterState: etcdfedv1.InitialClusterNew, Token: "t"}
	peer := memberURL(s.ec, "main-0", etcdfedv1.DefaultPeerPort)
	s.etcd = planner.Etcd{Reachable: true, LeaderID: 0x77, ClusterID: 0xdd, Members: []planner.ListEntry{{ID: 0x77, Name: "main-0", PeerURLs: []string{peer}, Healthy: true}}}
	// While it restores, the seed is not fenced to the old cluster's ID.
	if want := desiredMember(s, &s.ec.Status, statusMember(&s.ec.Status, "main-0"), seed); want.Spec.Bootstrap.ClusterID != "" {
		t.Errorf("the restoring seed is fenced to cluster %q, the old one", want.Spec.Bootstrap.ClusterID)
	}
	// A ring founded from a snapshot recovers from a backup with the
	// snapshot checked for the request, not the founding one.
	founded := recoveringFromBackup()
	founded.ec.Spec.Bootstrap = &etcdfedv1.ClusterBootstrap{FromSnapshot: &etcdfedv1.SnapshotSource{Store: etcdfedv1.BackupStore{URL: "file:///old"}, Object: "x.db"}}
	founded.ec.Status.Restore.VerifiedAt = metav1.NewTime(now.Add(-time.Hour))
	if r := restoreInput(founded.ec, readRequests(founded.ec), &founded.ec.Status); !r.Wanted || r.Verified {
		t.Errorf("founded from a snapshot, recovering from a backup: %+v, want the request's snapshot awaited", r)
	}
	if st := restoreStore(founded.ec, readRequests(founded.ec)); st == nil || st.URL != "file:///backups" {
		t.Errorf("restore store %+v, want spec.backup's", st)
	}
	d = decide(s)
	if d.plan.Action != planner.ActFinish {
		t.Fatalf("plan %s (%s), want Finish", d.plan.Action, d.plan.Reason)
	}
	if d.ledger.ClusterID != "dd" || d.ledger.Operation != nil {
		t.Errorf("ledger cluster ID %q, operation %+v; want the new cluster dd, no operation", d.ledger.ClusterID, d.ledger.Operation)
	}
	if len(d.ledger.Members) != 1 || d.ledger.Members[0].Name != "main-0" || d.ledger.Members[0].ID != "77" {
		t.Errorf("ledger members %+v, want main-0 [77] alone (the others are added back)", d.ledger.Members)
	}
	if want := desiredMember(s, d.ledger, &d.ledger.Members[0], seed); want.Spec.Bootstrap.ClusterID != "dd" {
		t.Errorf("after the recovery the seed is fenced to %q, want the new cluster dd", want.Spec.Bootstrap.ClusterID)
	}
}

// The seed of a recovery from a backup under the Delete reclaim policy:
// its object, rewritten in place to the new incarnation, keeps every
// earlier incarnation's volume (spec.storage.keepVolumesBefore, which its
// spoke honours: TestRecoverySeedKeepsItsVolume in spoke/member), still
// after the recovery; the begin event names the volume kept. Other
// members' objects are not marked.
func TestRecoverySeedVolumeKept(t *testing.T) {
	s := recoveringFromBackup()
	s.ec.Spec.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeDelete
	m := statusMember(&s.ec.Status, "main-0")
	seed := s.cluster(m.Cluster).members["main-0"]
	seed.Spec.Incarnation, seed.Status.Incarnation = 1, 1
	seed.Status.Volume.ClaimName = seed.Name + "-data-1"
	d := decide(s)
	if d.plan.Action != planner.ActCreateObjects || d.step.err != nil || len(d.step.writes) != 1 {
		t.Fatalf("plan %s (%s), error %v, %d writes; want the seed's new incarnation written", d.plan.Action, d.plan.Reason, d.step.err, len(d.step.writes))
	}
	want := d.step.writes[0].want
	if want.Spec.Incarnation != 4 || want.Spec.Storage.KeepVolumesBefore != 4 || want.Spec.Storage.VolumeReclaimPolicy != etcdfedv1.VolumeDelete {
		t.Errorf("seed written as incarnation %d, storage %+v; want incarnation 4 keeping the volumes of 1-3 under the Delete policy", want.Spec.Incarnation, want.Spec.Storage)
	}
	if other := desiredMember(s, &s.ec.Status, statusMember(&s.ec.Status, "main-1"), s.cluster(statusMember(&s.ec.Status, "main-1").Cluster).members["main-1"]); other.Spec.Storage.KeepVolumesBefore != 0 {
		t.Errorf("main-1 keeps volumes before %d; only the seed's are kept", other.Spec.Storage.KeepVolumesBefore)
	}
	// After the recovery: still kept.
	seed.Spec = want.Spec
	s.ec.Status.Operation = nil
	if got := desiredMember(s, &s.ec.Status, m, seed); got.Spec.Storage.KeepVolumesBefore != 4 {
		t.Errorf("after the recovery the seed keeps volumes before %d, want 4", got.Spec.Storage.KeepVolumesBefore)
	}

	s = recoveringFromBackup()
	seed = s.cluster(m.Cluster).members["main-0"]
	seed.Status.Volume.ClaimName, seed.Status.Incarnation = seed.Name+"-data-3", 3
	events, _ := beginEvents(s, &planner.Operation{Type: planner.OpRecover, Reason: planner.ReasonFromBackup, Member: "main-0", Incarnation: 4, To: &topology.Domain{Cluster: m.Cluster, Zone: m.Zone}}, "why")
	if len(events) != 1 || events[0].reason != etcdfedv1.EventVolumesRetained || events[0].typ != corev1.EventTypeWarning ||
		!strings.Contains(events[0].message, seed.Name+"-data-3") || !strings.Contains(events[0].message, "newer than the backup") {
		t.Errorf("begin events %+v; want VolumesRetained naming %s-data-3", events, seed.Name)
	}
}
