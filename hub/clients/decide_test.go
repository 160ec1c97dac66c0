package clients

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/pki"
)

const testEndpoints = "https://main-0.etcd.test:2379"

var testNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ringFor is an EtcdCluster "main" with TLS on, formed, and the given
// consumers.
func ringFor(clients ...etcdfedv1.ClientSpec) *etcdfedv1.EtcdCluster {
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "main", UID: "uid", Generation: 3}}
	ec.Spec.Clients = clients
	ec.Status.ClusterID = "c1"
	ec.Status.Endpoints = []string{testEndpoints}
	return ec
}

// ourSecret is a consumer's Secret as the hub writes it for ec, holding
// leaf.
func ourSecret(ec *etcdfedv1.EtcdCluster, t Target, ca *pki.CA, leaf *pki.Leaf) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.SecretName, UID: "secret-uid", Labels: wantLabels(ec, t, nil), OwnerReferences: ownerRefs(ec, t, nil)},
		Data:       Data(ca.CertPEM, leaf, testEndpoints),
	}
}

func withOwner(sec *corev1.Secret, uid string) *corev1.Secret {
	sec = sec.DeepCopy()
	if uid == "" {
		delete(sec.Labels, etcdfedv1.LabelClusterUID)
	} else {
		sec.Labels[etcdfedv1.LabelClusterUID] = uid
	}
	return sec
}

func mustCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("ring", testNow)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustLeaf(t *testing.T, ca *pki.CA, cn string, lifetime time.Duration) *pki.Leaf {
	t.Helper()
	l, err := ca.IssueClientFor(cn, lifetime, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A removed consumer's Secret is deleted only when it is the hub's for
// this ring and in a member cluster; one the hub cannot read is kept in
// status and retried.
func TestDecideRemovals(t *testing.T) {
	ca := mustCA(t)
	ec := ringFor()
	gone := Target{Name: "old", Cluster: "member-1", Namespace: "ns", SecretName: "main-old-etcd-client"}
	ours := ourSecret(ec, gone, ca, mustLeaf(t, ca, "old", pki.LeafValidity))
	taken := ringFor()
	taken.Status.TakeOver = &etcdfedv1.TakeOverStatus{RingUID: "ring-uid"}
	for _, tc := range []struct {
		name string
		ec   *etcdfedv1.EtcdCluster
		v    secretView
		want removalAction
	}{
		{"ours in a member cluster: deleted", ec, secretView{t: gone, cur: ours}, removalDelete},
		{"another ring's: left alone", ec, secretView{t: gone, cur: withOwner(ours, "uid-2")}, removalKeep},
		{"without the owner label (a human's): left alone", ec, secretView{t: gone, cur: withOwner(ours, "")}, removalKeep},
		{"already gone: nothing to do", ec, secretView{t: gone}, removalKeep},
		{"not read: kept and retried", ec, secretView{t: gone, err: errors.New("member cluster \"member-1\" is not connected")}, removalFailed},
		{"in the hub cluster: left for a human", ec, secretView{t: Target{Name: "old", Namespace: "ns", SecretName: "main-old-etcd-client"}}, removalLeave},
		{"taken-over ring: written under its own UID, still ours", taken, secretView{t: gone, cur: ours}, removalDelete},
		{"taken-over ring: written under the ring's UID, ours", taken, secretView{t: gone, cur: withOwner(ours, "ring-uid")}, removalDelete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapshot{ec: tc.ec, now: testNow, removed: []removedView{{status: etcdfedv1.ClientStatus{Name: "old"}, secretView: tc.v}}}
			d := decide(s)
			if len(d.removed) != 1 || d.removed[0].action != tc.want {
				t.Fatalf("removal %+v, want action %d", d.removed, tc.want)
			}
		})
	}
}

// etcd's authentication is planned only when TLS is on and etcd was read;
// spec.tls.auth: Disabled turns it off.
func TestDecideAccess(t *testing.T) {
	on := etcdops.AuthState{Enabled: true, Users: map[string][]string{etcdfedv1.EtcdRootUser: {etcdops.RootRole}, etcdfedv1.EtcdHubUser: {etcdops.RootRole}}, Roles: map[string][]etcdops.Permission{etcdops.RootRole: nil}}
	for _, tc := range []struct {
		name string
		mode etcdfedv1.TLSMode
		auth etcdfedv1.AuthMode
		view authView
		want []string // nil: no plan
	}{
		{"TLS off: etcd's users not touched", etcdfedv1.TLSDisabled, "", authView{have: on}, nil},
		{"etcd not read: no plan", etcdfedv1.TLSEnabled, "", authView{waiting: "etcd's users and roles not checked: refused"}, nil},
		{"auth disabled: turned off", etcdfedv1.TLSEnabled, etcdfedv1.AuthDisabled, authView{have: on}, []string{"Disable"}},
		{"auth on and in line: nothing", etcdfedv1.TLSEnabled, "", authView{have: on}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := ringFor()
			ec.Spec.TLS.Mode, ec.Spec.TLS.Auth = tc.mode, tc.auth
			d := decide(&snapshot{ec: ec, now: testNow, auth: tc.view})
			if tc.want == nil {
				if d.access != nil {
					t.Fatalf("access planned: %v", changes(*d.access))
				}
				return
			}
			if d.access == nil {
				t.Fatal("access not planned")
			}
			if got := changes(*d.access); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("changes %q, want %q", got, tc.want)
			}
		})
	}
}

// What each consumer's Secret needs: nothing is written where the place
// is refused, the Secret could not be read or is not the hub's, or the CA
// cannot issue; a current Secret is rewritten only when its labels or
// owners drifted.
func TestDecideConsumers(t *testing.T) {
	ca := mustCA(t)
	keyless := &pki.CA{Cert: ca.Cert, CertPEM: ca.CertPEM}
	spec := etcdfedv1.ClientSpec{Name: "app"}
	ec := ringFor(spec)
	tgt := TargetOf(ec, spec)
	cur := ourSecret(ec, tgt, ca, mustLeaf(t, ca, "app", tgt.Lifetime))
	drifted := cur.DeepCopy()
	delete(drifted.Labels, etcdfedv1.LabelClient)
	for _, tc := range []struct {
		name     string
		signer   *pki.CA
		v        secretView
		action   Action
		write    bool
		failWith string // "" : no failure
	}{
		{"refused place: nothing read or written", ca, secretView{t: tgt, refused: "namespace x is not the EtcdCluster's own"}, "", false, "refused: namespace x"},
		{"unreadable: nothing written", ca, secretView{t: tgt, err: errors.New("read Secret: timeout")}, "", false, "read Secret: timeout"},
		{"absent: issued", ca, secretView{t: tgt}, ActIssue, true, ""},
		{"absent, CA without its key: waits", keyless, secretView{t: tgt}, ActIssue, false, "waiting for a CA that issues"},
		{"another ring's: refused, never overwritten", ca, secretView{t: tgt, cur: withOwner(cur, "uid-2")}, ActRefuse, false, "the hub did not write it"},
		{"current: nothing written", ca, secretView{t: tgt, cur: cur}, ActNone, false, ""},
		{"current, a label drifted: rewritten", ca, secretView{t: tgt, cur: drifted}, ActNone, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapshot{ec: ec, now: testNow, ca: &pki.Authority{Signer: tc.signer}, endpoints: testEndpoints, consumers: []secretView{tc.v}}
			d := decide(s)
			if len(d.consumers) != 1 {
				t.Fatalf("%d consumer steps, want 1", len(d.consumers))
			}
			c := d.consumers[0]
			if c.plan.Action != tc.action || c.write != tc.write {
				t.Fatalf("action %q write %v (fail %q), want %q write %v", c.plan.Action, c.write, c.fail, tc.action, tc.write)
			}
			if tc.failWith == "" && c.fail != "" || !strings.Contains(c.fail, tc.failWith) {
				t.Fatalf("fail %q, want it to say %q", c.fail, tc.failWith)
			}
		})
	}
	t.Run("waiting for the CA: no consumer step", func(t *testing.T) {
		d := decide(&snapshot{ec: ec, now: testNow, waiting: "waiting for the ring's CA", consumers: []secretView{{t: tgt}}})
		if len(d.consumers) != 0 {
			t.Fatalf("steps %+v while waiting", d.consumers)
		}
	})
}

// The next pass: the earliest renewal of the consumers' certificates,
// sooner after a failure or a wait, Resync without TLS, rotationPoll
// during a CA rotation; and ClientsReady says what it is from.
func TestComputeStatus(t *testing.T) {
	ca := mustCA(t)
	long, short := 90*24*time.Hour, 9*24*time.Hour
	a := etcdfedv1.ClientSpec{Name: "a", CertificateLifetime: &metav1.Duration{Duration: long}}
	b := etcdfedv1.ClientSpec{Name: "b", CertificateLifetime: &metav1.Duration{Duration: short}}
	ec := ringFor(a, b)
	ec.Spec.TLS.Auth = etcdfedv1.AuthDisabled
	ta, tb := TargetOf(ec, a), TargetOf(ec, b)
	la, lb := mustLeaf(t, ca, "a", long), mustLeaf(t, ca, "b", short)
	sa, sb := ourSecret(ec, ta, ca, la), ourSecret(ec, tb, ca, lb)
	// A minute before b's renewal; a's is weeks later.
	renewB := RenewAt(lb.CertPEM)
	now := renewB.Add(-time.Minute)
	if !renewB.Before(RenewAt(la.CertPEM).Add(-Resync)) {
		t.Fatal("fixture: b must renew first")
	}
	authOff := authView{have: etcdops.AuthState{}}
	both := []secretView{{t: ta, cur: sa}, {t: tb, cur: sb}}
	refusedB := []secretView{{t: ta, cur: sa}, {t: tb, refused: "namespace"}}
	for _, tc := range []struct {
		name      string
		edit      func(ec *etcdfedv1.EtcdCluster)
		s         snapshot
		applyErr  error // on consumer a's write
		wantNext  time.Time
		wantCond  metav1.ConditionStatus
		wantReady []bool
	}{
		{"all current: the earliest renewal", nil, snapshot{auth: authOff, consumers: both}, nil, renewB, metav1.ConditionTrue, []bool{true, true}},
		{"a failed write: retried soon", nil, snapshot{auth: authOff, consumers: both}, errors.New("update Secret: conflict"), now.Add(retryAfter), metav1.ConditionFalse, []bool{false, true}},
		{"a refused place: retried soon", nil, snapshot{auth: authOff, consumers: refusedB}, nil, now.Add(retryAfter), metav1.ConditionFalse, []bool{true, false}},
		{"waiting for the CA: soon, statuses kept", nil, snapshot{auth: authOff, waiting: "waiting for the ring's CA"}, nil, now.Add(retryAfter), metav1.ConditionUnknown, []bool{false, false}},
		{"during a CA rotation: polled", func(ec *etcdfedv1.EtcdCluster) {
			ec.Status.CARotation = &etcdfedv1.CARotationStatus{Phase: etcdfedv1.CARotationReissuing}
		}, snapshot{auth: authOff, consumers: both}, nil, now.Add(rotationPoll), metav1.ConditionTrue, []bool{true, true}},
		{"TLS off: Resync, nothing written", func(ec *etcdfedv1.EtcdCluster) { ec.Spec.TLS.Mode = etcdfedv1.TLSDisabled }, snapshot{}, nil, now.Add(Resync), metav1.ConditionFalse, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := ec.DeepCopy()
			if tc.edit != nil {
				tc.edit(ec)
			}
			s := tc.s
			s.ec, s.now, s.ca, s.endpoints = ec, now, &pki.Authority{Signer: ca}, testEndpoints
			d := decide(&s)
			var ap applied
			for i, c := range d.consumers {
				w := written{data: c.data}
				if c.fail != "" {
					w.data = nil
				}
				if i == 0 && tc.applyErr != nil {
					w = written{err: tc.applyErr}
				}
				ap.consumers = append(ap.consumers, w)
			}
			out := computeStatus(&s, d, ap)
			if !out.next.Equal(tc.wantNext) {
				t.Errorf("next pass at %s, want %s", out.next, tc.wantNext)
			}
			if out.cond == nil || out.cond.Status != tc.wantCond {
				t.Errorf("ClientsReady %+v, want %s", out.cond, tc.wantCond)
			}
			var ready []bool
			for _, st := range out.clients {
				ready = append(ready, st.Ready)
			}
			if !slices.Equal(ready, tc.wantReady) {
				t.Errorf("ready %v, want %v", ready, tc.wantReady)
			}
		})
	}
}

// A removed consumer whose Secret could not be deleted stays in
// status.clients and fails ClientsReady; one whose Secret is gone leaves
// status.clients.
func TestComputeStatusRemovals(t *testing.T) {
	ec := ringFor()
	gone := Target{Name: "old", Cluster: "member-1", Namespace: "ns", SecretName: "main-old-etcd-client"}
	st := etcdfedv1.ClientStatus{Name: "old", Cluster: "member-1", Namespace: "ns", SecretName: "main-old-etcd-client"}
	for _, tc := range []struct {
		name     string
		action   removalAction
		applyErr error
		kept     bool
	}{
		{"deleted", removalDelete, nil, false},
		{"delete failed", removalDelete, errors.New("delete Secret: forbidden"), true},
		{"not read", removalFailed, nil, true},
		{"not ours", removalKeep, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapshot{ec: ec, now: testNow, auth: authView{have: etcdops.AuthState{}}}
			d := &decision{removed: []removal{{removedView: removedView{status: st, secretView: secretView{t: gone, err: errors.New("timeout")}}, action: tc.action}}, access: &AccessPlan{}}
			out := computeStatus(s, d, applied{removed: []error{tc.applyErr}})
			if kept := len(out.clients) == 1; kept != tc.kept {
				t.Fatalf("status.clients %+v, want kept %v", out.clients, tc.kept)
			}
			if failed := out.cond != nil && out.cond.Reason == etcdfedv1.ClientReasonFailed; failed != tc.kept {
				t.Fatalf("ClientsReady %+v, want failed %v", out.cond, tc.kept)
			}
			if soon := out.next.Equal(testNow.Add(retryAfter)); soon != tc.kept {
				t.Fatalf("next pass at %s, want soon %v", out.next, tc.kept)
			}
		})
	}
}
