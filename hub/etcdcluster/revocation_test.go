package etcdcluster

import (
	"bytes"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// signAndWrite does what apply does with the pass's list: signs it when
// decideCRL asked, and writes it into every member Secret. It returns the
// list.
func signAndWrite(t *testing.T, s *snapshot, d *decision) []byte {
	t.Helper()
	list := d.crl.list
	if d.crl.sign {
		var serials []*big.Int
		for _, x := range d.crl.want {
			n, err := pki.ParseSerial(x)
			if err != nil {
				t.Fatal(err)
			}
			serials = append(serials, n)
		}
		var err error
		if list, err = d.crl.signer.RevocationList(serials, d.crl.number, s.now, pki.RevocationListValidity); err != nil {
			t.Fatal(err)
		}
	}
	for _, sec := range memberCertSecrets(s) {
		sec.Data[etcdfedv1.RevocationListKey] = list
	}
	return list
}

// TestRevocationRollsOnce: a ring that ran before revocation lists (no
// list in the members' Secrets, no --client-crl-file) gets a list signed
// by its CA into every Secret first, with no restart; then the planner
// rolls each member once onto the flag, one at a time, the leader last;
// status.revocation says how many members run with the list. A serial
// added to spec.tls.revokedCertificates afterwards is a new list (number
// 2) in every Secret and restarts nothing; the same list is not signed
// again on the next pass.
func TestRevocationRollsOnce(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	for _, cs := range s.clusters {
		for _, obj := range cs.members {
			obj.Spec.TLS.RevocationList = false
		}
		for _, sec := range cs.secrets {
			delete(sec.Data, etcdfedv1.RevocationListKey)
		}
	}
	leader := "main-0"
	d := decide(s)
	if !d.crl.sign || d.crl.signer != ca || d.crl.number != 1 || len(d.crl.want) != 0 {
		t.Fatalf("first pass: crl work %+v; want an empty list #1 signed by the ring's CA", d.crl)
	}
	if d.upkeepIdle(s) {
		t.Error("a pass that writes the list into the Secrets counts as idle")
	}
	if d.plan.Action != planner.ActNone {
		t.Fatalf("first pass: %s before any Secret holds a list (etcd would refuse every client while the file is missing)", d.plan.Action)
	}
	st := computeStatus(s, d, applyResult{}, "")
	if st.Revocation == nil || st.Revocation.MembersCurrent != 0 || st.Revocation.MembersTotal != 3 {
		t.Errorf("status.revocation %+v before any list; want 0 of 3", st.Revocation)
	}
	list := signAndWrite(t, s, d)
	s.ec.Status = st

	var order []string
	restarting := ""
	for pass := 0; pass < 100; pass++ {
		s.now = s.now.Add(time.Second)
		d := decide(s)
		if d.crl.sign {
			t.Fatalf("pass %d: the list signed again (%+v) though every Secret holds it", pass, d.crl)
		}
		st := computeStatus(s, d, applyResult{crl: d.crl.list}, "")
		s.ec.Status = st
		if restarting != "" {
			podRestarted(s, &st, restarting)
			restarting = ""
		}
		switch d.plan.Action {
		case planner.ActNone:
			if len(order) != 3 || order[2] != leader {
				t.Fatalf("rolled %v; want every member once, the leader %s last", order, leader)
			}
			for _, cs := range s.clusters {
				for _, obj := range cs.members {
					if !obj.Spec.TLS.RevocationList {
						t.Errorf("%s runs without the revocation list", obj.Name)
					}
				}
			}
			d := decide(s)
			st := computeStatus(s, d, applyResult{crl: d.crl.list}, "")
			if rs := st.Revocation; rs == nil || rs.MembersCurrent != 3 || rs.ListNumber != 1 || rs.Revoked != 0 || rs.Message != "" {
				t.Errorf("status.revocation after the roll: %+v; want 3 of 3 on list #1", rs)
			}
			addSerial(t, s, list)
			return
		case planner.ActMoveLeader:
			s.etcd.LeaderID = d.plan.TransfereeID
		case planner.ActUpdateObject:
			if len(d.step.writes) != 1 {
				t.Fatalf("pass %d: %d objects written at once", pass, len(d.step.writes))
			}
			w := d.step.writes[0]
			if m := statusMember(&st, w.want.Spec.MemberName); parseID(m.ID) == s.etcd.LeaderID {
				t.Fatalf("pass %d: %s restarted while it leads", pass, m.Name)
			}
			if !w.want.Spec.TLS.RevocationList {
				t.Fatalf("pass %d: %s rolled without the revocation list", pass, w.want.Spec.MemberName)
			}
			if slices.Contains(order, w.want.Spec.MemberName) {
				t.Fatalf("pass %d: %s rolled twice (%v)", pass, w.want.Spec.MemberName, order)
			}
			obj := s.cluster(w.cluster).members[w.want.Spec.MemberName]
			obj.Spec = w.want.Spec
			obj.Generation++
			meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{Type: etcdfedv1.ConditionPodReady, Status: metav1.ConditionFalse, Reason: "PodReplaced"})
			for i := range s.etcd.Members {
				if s.etcd.Members[i].Name == w.want.Spec.MemberName {
					s.etcd.Members[i].Healthy = false
				}
			}
			order = append(order, w.want.Spec.MemberName)
			restarting = w.want.Spec.MemberName
		case planner.ActWait, planner.ActBegin, planner.ActFinish:
		default:
			t.Fatalf("pass %d: unexpected step %s (%s)", pass, d.plan.Action, d.plan.Reason)
		}
	}
	t.Fatalf("the roll did not end: rolled %v", order)
}

// addSerial: a serial added to the spec of a ring on the flag is a new
// list in every Secret (number one up), and no member restarts.
func addSerial(t *testing.T, s *snapshot, before []byte) {
	t.Helper()
	s.ec.Spec.TLS.RevokedCertificates = []string{"5c1f"}
	d := decide(s)
	if !d.crl.sign || d.crl.number != 2 || strings.Join(d.crl.want, ",") != "5c1f" {
		t.Fatalf("a serial added: crl work %+v; want list #2 revoking 5c1f", d.crl)
	}
	if d.plan.Action != planner.ActNone || len(d.updates) != 0 {
		t.Fatalf("a serial added: %s, %d updates; want no restart", d.plan.Action, len(d.updates))
	}
	list := signAndWrite(t, s, d)
	if bytes.Equal(list, before) {
		t.Fatal("the same list after a serial was added")
	}
	d = decide(s)
	st := computeStatus(s, d, applyResult{crl: d.crl.list}, "")
	if rs := st.Revocation; d.crl.sign || d.crl.stale || rs.ListNumber != 2 || rs.Revoked != 1 || rs.MembersCurrent != 3 {
		t.Errorf("after list #2 was written: crl work %+v, status.revocation %+v; want nothing to do, 1 serial revoked, 3 of 3 current", d.crl, rs)
	}
}

// TestNewMemberStartsOnTheList: a member created on a ring with a list
// starts with the flag (its Secret is written with the list first); one
// that already runs is restarted onto it only once its Secret holds one;
// and the flag is never cleared.
func TestNewMemberStartsOnTheList(t *testing.T) {
	s := ring()
	withTLS(t, s)
	cs := s.cluster("member-1")
	m := &s.ec.Status.Members[0]
	if !desiredMember(s, &s.ec.Status, m, nil).Spec.TLS.RevocationList {
		t.Error("a new member of a ring whose CA signs lists starts without the flag")
	}
	obj := cs.members[m.Name]
	obj.Spec.TLS.RevocationList = false
	sec := cs.secrets[pki.MemberSecretName(obj.Name)]
	list := sec.Data[etcdfedv1.RevocationListKey]
	delete(sec.Data, etcdfedv1.RevocationListKey)
	if desiredMember(s, &s.ec.Status, m, obj).Spec.TLS.RevocationList {
		t.Error("a running member asked onto the flag before its Secret holds a list")
	}
	sec.Data[etcdfedv1.RevocationListKey] = list
	if !desiredMember(s, &s.ec.Status, m, obj).Spec.TLS.RevocationList {
		t.Error("a running member whose Secret holds the list is not rolled onto the flag")
	}
	obj.Spec.TLS.RevocationList = true
	delete(sec.Data, etcdfedv1.RevocationListKey)
	if !desiredMember(s, &s.ec.Status, m, obj).Spec.TLS.RevocationList {
		t.Error("the flag was cleared")
	}
	// A CA that cannot sign lists: no new member starts on a flag whose
	// file it would not get.
	s.pki.ca = &pki.CA{Cert: s.pki.ca.Cert, CertPEM: s.pki.ca.CertPEM}
	s.pki.auth = nil
	for _, cs := range s.clusters {
		for _, sec := range cs.secrets {
			delete(sec.Data, etcdfedv1.RevocationListKey)
		}
	}
	if desiredMember(s, &s.ec.Status, m, nil).Spec.TLS.RevocationList {
		t.Error("a new member starts on the flag with no list to give it")
	}
	d := decide(s)
	st := computeStatus(s, d, applyResult{}, "")
	if rs := st.Revocation; rs == nil || !strings.Contains(rs.Message, "cannot sign revocation lists") {
		t.Errorf("status.revocation %+v; want the CA that cannot sign named", rs)
	}
}

// TestHubCertificateRevokedIsReplaced: the hub's own client certificate,
// once its serial is listed, is reissued in the same pass (the members'
// list would refuse the hub's next connection).
func TestHubCertificateRevokedIsReplaced(t *testing.T) {
	s := ring()
	withTLS(t, s)
	if d := decide(s); d.pki.issueHubClient {
		t.Fatal("a fresh hub certificate reissued")
	}
	n, _ := pki.Serial(s.pki.hubClient.Data[pki.KeyCert])
	s.ec.Spec.TLS.RevokedCertificates = []string{pki.FormatSerial(n)}
	if d := decide(s); !d.pki.issueHubClient {
		t.Error("the hub keeps a client certificate whose serial is revoked")
	}
}

// TestStatusCountsTheHubsSupersededCertificates: a client certificate the
// hub replaced is listed, and status.revocation says how many of the
// revoked serials are the hub's own (before, they counted only in
// revoked, beside the spec's serials).
func TestStatusCountsTheHubsSupersededCertificates(t *testing.T) {
	s := ring()
	ca := withTLS(t, s)
	old, err := ca.IssueClient(etcdfedv1.EtcdHubUser, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	s.pki.hubClient.Data[pki.KeySuperseded] = old.CertPEM
	s.ec.Spec.TLS.RevokedCertificates = []string{"5c1f"}
	signAndWrite(t, s, decide(s))
	d := decide(s)
	st := computeStatus(s, d, applyResult{crl: d.crl.list}, "")
	if rs := st.Revocation; rs == nil || rs.Revoked != 2 || rs.SupersededHub != 1 || rs.SupersededPeers != 0 {
		t.Errorf("status.revocation %+v; want 2 revoked, 1 of them the hub's own, no member certificate", rs)
	}
}
