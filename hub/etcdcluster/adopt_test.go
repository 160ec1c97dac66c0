package etcdcluster

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/planner"
)

func adoptingEC(retire bool) *etcdfedv1.EtcdCluster {
	ec := &etcdfedv1.EtcdCluster{}
	ec.Spec.Replicas = 3
	ec.Spec.Adopt = &etcdfedv1.AdoptSpec{Endpoints: []string{"https://127.0.0.1:2379", "https://127.0.0.2:2379/", "https://127.0.0.3:2379"}, Retire: retire}
	return ec
}

func origEntry(name string, id uint64, n string) planner.ListEntry {
	return planner.ListEntry{ID: id, Name: name, ClientURLs: []string{"https://127.0.0." + n + ":2379"}, PeerURLs: []string{"https://127.0.0." + n + ":2380"}, Healthy: true}
}

// The originals are recorded once, when the running cluster is found;
// each is marked retired when a quorate member list of the same cluster
// no longer has it; the phase follows.
func TestRecordAdoption(t *testing.T) {
	now := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	origs := []planner.ListEntry{origEntry("orig-0", 0x10, "1"), origEntry("orig-1", 0x11, "2"), origEntry("orig-2", 0x12, "3")}
	managed := []planner.ListEntry{{ID: 0x20, Name: "main-0"}, {ID: 0x21, Name: "main-1"}, {ID: 0x22, Name: "main-2"}}
	ledgerMembers := []etcdfedv1.MemberStatus{{Name: "main-0", ID: "20"}, {Name: "main-1", ID: "21"}, {Name: "main-2", ID: "22"}}

	// Found: every member etcd lists is an original.
	s := &snapshot{ec: adoptingEC(false), now: now, etcd: planner.Etcd{Reachable: true, ClusterID: 0xc1, Members: origs}}
	st := &etcdfedv1.EtcdClusterStatus{}
	recordAdoption(s, st, planner.Decision{Action: planner.ActFinishBootstrap, Reason: "adopting"})
	if a := st.Adoption; a == nil || len(a.Originals) != 3 || a.Originals[1].ID != "11" || a.Originals[1].Name != "orig-1" || a.Phase != etcdfedv1.AdoptionConnecting {
		t.Fatalf("after the find: %+v", st.Adoption)
	}
	st.ClusterID = "c1"

	// Joining: two of three of etcdfed's members are voters, one a learner.
	s.etcd.Members = append(slices.Clone(origs), managed...)
	s.etcd.Members[5].IsLearner = true
	st.Members = ledgerMembers
	recordAdoption(s, st, planner.Decision{Action: planner.ActPromote, Reason: "promoting learner main-2"})
	if a := st.Adoption; len(a.Originals) != 3 || a.Phase != etcdfedv1.AdoptionJoining || a.Summary != "Joining: 0/3 retired, 2/3 joined" || a.Message != "promoting learner main-2" {
		t.Fatalf("joining: %+v", a)
	}

	// Joined, retire not asked.
	s.etcd.Members[5].IsLearner = false
	recordAdoption(s, st, planner.Decision{Action: planner.ActNone, Reason: "set spec.adopt.retire"})
	if a := st.Adoption; a.Phase != etcdfedv1.AdoptionJoined {
		t.Fatalf("joined: %+v", a)
	}

	// Another cluster answering (a wrong endpoint) retires nothing.
	s.ec = adoptingEC(true)
	s.etcd = planner.Etcd{Reachable: true, ClusterID: 0xbad, Members: managed}
	recordAdoption(s, st, planner.Decision{})
	if a := st.Adoption; slices.ContainsFunc(a.Originals, func(o etcdfedv1.AdoptedMember) bool { return o.Retired != nil }) {
		t.Fatalf("originals retired on another cluster's member list: %+v", a)
	}
	// Silent etcd retires nothing either.
	s.etcd = planner.Etcd{Error: "timeout"}
	recordAdoption(s, st, planner.Decision{})
	if a := st.Adoption; slices.ContainsFunc(a.Originals, func(o etcdfedv1.AdoptedMember) bool { return o.Retired != nil }) {
		t.Fatalf("originals retired while etcd was silent: %+v", a)
	}

	// orig-0 removed: retired, its endpoint no longer dialled.
	s.etcd = planner.Etcd{Reachable: true, ClusterID: 0xc1, Members: append(slices.Clone(origs[1:]), managed...)}
	recordAdoption(s, st, planner.Decision{})
	if a := st.Adoption; a.Phase != etcdfedv1.AdoptionRetiring || a.Originals[0].Retired == nil || a.Originals[1].Retired != nil {
		t.Fatalf("retiring: %+v", a)
	}
	if got, want := adoptEndpoints(s.ec, st), []string{"https://127.0.0.2:2379/", "https://127.0.0.3:2379"}; !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
	if !originalsLeft(s.ec, st) {
		t.Errorf("originals left reported none")
	}

	// All gone: complete, no endpoint of the originals, peers may require
	// the peer name again.
	s.etcd.Members = managed
	recordAdoption(s, st, planner.Decision{})
	if a := st.Adoption; a.Phase != etcdfedv1.AdoptionComplete || a.Summary != "Complete: 3/3 retired, 3/3 joined" {
		t.Fatalf("complete: %+v", a)
	}
	if got := adoptEndpoints(s.ec, st); len(got) != 0 {
		t.Errorf("endpoints after the adoption %v, want none", got)
	}
	if originalsLeft(s.ec, st) {
		t.Errorf("originals left after every one retired")
	}
}

// Before the originals are recorded every adopt endpoint is dialled, and
// no adoption means none.
func TestAdoptEndpoints(t *testing.T) {
	ec := adoptingEC(false)
	if got := adoptEndpoints(ec, &etcdfedv1.EtcdClusterStatus{}); len(got) != 3 {
		t.Errorf("before the find: %v", got)
	}
	if got := adoptEndpoints(&etcdfedv1.EtcdCluster{}, &etcdfedv1.EtcdClusterStatus{}); got != nil {
		t.Errorf("no adoption: %v", got)
	}
	// Found, with no original recorded (the status rebuilt after the last
	// retirement): nothing left to dial.
	if got := adoptEndpoints(ec, &etcdfedv1.EtcdClusterStatus{ClusterID: "c1", Adoption: &etcdfedv1.AdoptionStatus{}}); got != nil {
		t.Errorf("found with no originals: %v", got)
	}
	retired := metav1.Now()
	st := &etcdfedv1.EtcdClusterStatus{ClusterID: "c1", Adoption: &etcdfedv1.AdoptionStatus{Originals: []etcdfedv1.AdoptedMember{
		{ID: "10", ClientURLs: []string{"https://127.0.0.2:2379"}, Retired: &retired}, {ID: "11", ClientURLs: []string{"https://127.0.0.1:2379"}},
	}}}
	if got, want := adoptEndpoints(ec, st), []string{"https://127.0.0.1:2379", "https://127.0.0.3:2379"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v (a trailing slash is the same URL)", got, want)
	}
}

// adoptingRing is ring() before anything was found: spec.adopt naming
// endpoint, TLS on, no member, no object.
func adoptingRing(t *testing.T, endpoint string) *snapshot {
	t.Helper()
	s := ring()
	withTLS(t, s)
	s.ec.Spec.Adopt = &etcdfedv1.AdoptSpec{Endpoints: []string{endpoint}}
	s.ec.Status = etcdfedv1.EtcdClusterStatus{}
	for _, cs := range s.clusters {
		clear(cs.members)
	}
	s.etcd = planner.Etcd{}
	return s
}

// listener is a TCP server on loopback that answers every connection
// with text and counts them.
func listener(t *testing.T, text string) (addr string, conns *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	conns = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			_, _ = c.Write([]byte(text))
			_ = c.Close()
		}
	}()
	return l.Addr().String(), conns
}

// TestAdoptEndpointsDialPolicy (issue 37, low: spec fields that make the
// hub dial any host, with the error text in status). spec.adopt.endpoints
// names any host its author likes. A loopback endpoint, on a hub that does
// not allow loopback addresses, is never dialled (the same policy as
// member reports: link-local addresses such as the cloud metadata
// service's, unspecified, multicast are refused likewise, after name
// resolution); and when the hub may dial it, what the host answered, and
// where the name led, stays out of the status: the adoption's message
// says what kind of failure it was (etcdErrorSummary). Before, the hub
// connected to any address.
func TestAdoptEndpointsDialPolicy(t *testing.T) {
	addr, conns := listener(t, "HTTP/1.1 401 Unauthorized\r\nWww-Authenticate: internal-realm\r\n\r\n")
	endpoint := "https://" + addr
	ctx := context.Background()

	r := &Reconciler{AllowLoopbackAddresses: false}
	s := adoptingRing(t, endpoint)
	r.observeEtcd(ctx, s)
	r.etcd.drop(s.ec.UID)
	if n := conns.Load(); n != 0 {
		t.Errorf("the hub connected %d time(s) to a loopback endpoint it does not allow", n)
	}
	if s.etcd.Reachable {
		t.Fatalf("reachable through a refused endpoint")
	}

	r = &Reconciler{AllowLoopbackAddresses: true}
	s = adoptingRing(t, endpoint)
	r.observeEtcd(ctx, s)
	r.etcd.drop(s.ec.UID)
	if conns.Load() == 0 {
		t.Fatalf("with loopback allowed, the endpoint was not dialled (%s)", s.etcd.Error)
	}
	d := decide(s)
	st := computeStatus(s, d, applyResult{}, "")
	for _, c := range st.Conditions {
		for _, leak := range []string{"tls:", "first record", "internal-realm", "transport", "dial tcp"} {
			if strings.Contains(c.Message, leak) {
				t.Errorf("%s says %q, quoting the dial's own text (%q)", c.Type, c.Message, leak)
			}
		}
	}
	if c := condition(st, etcdfedv1.ConditionProgressing); !strings.Contains(c.Message, "adopting: the existing cluster does not answer") {
		t.Errorf("Progressing %s: %s; want the adoption waiting, with the failure's kind", c.Reason, c.Message)
	}
}

// The kinds etcdErrorSummary tells apart; none quotes the text it got.
func TestEtcdErrorSummary(t *testing.T) {
	for raw, want := range map[string]string{
		"":                    "",
		"no answer within 2s": "no answer within 2s",
		`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 10.1.2.3:2379: connect: connection refused"`: "connection refused",
		`dial tcp: lookup db.internal on 10.0.0.10:53: no such host`:                                                                                          "does not resolve",
		`transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority`:                        "TLS handshake failed",
		`rpc error: code = Unimplemented desc = unknown service etcdserverpb.Cluster (internal billing API v2)`:                                               "did not answer as etcd",
		etcdops.ErrDialRefused.Error() + ": 169.254.169.254:2379: a link-local address":                                                                       "dial policy",
	} {
		got := etcdErrorSummary(raw)
		if !strings.Contains(got, want) || (raw != want && (strings.Contains(got, "10.") || strings.Contains(got, "internal") || strings.Contains(got, "169.254"))) {
			t.Errorf("summary of %q: %q, want the kind %q and none of its text", raw, got, want)
		}
	}
}
