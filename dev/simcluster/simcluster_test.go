package simcluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/spoke/member"
)

const ringNS = "etcdfed-system"

// TestSimulatedSpokeRunsMembers drives a simulated member cluster (a real
// apiserver, the simulated spoke) as the hub drives a real one: three
// founding EtcdMembers with TLS Secrets form a ring whose members report
// what the real spoke reports of ready voters; a spec change restarts a
// member, onto the release spec.version names, which it then reports; a
// renewed certificate is served on new connections with no restart; a
// fourth, added by the
// hub's own etcd client as a learner and written with bootstrap
// "existing", runs as that learner until promoted; a deleted EtcdMember's
// process stops and its finalizer goes; a lost cluster's members all stop.
func TestSimulatedSpokeRunsMembers(t *testing.T) {
	testenv.SkipIfShort(t, "one kube-apiserver (envtest)")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cs, err := testenv.Start(ctx, testenv.Options{}, "sim")
	if err != nil {
		t.Fatal(err)
	}
	api := cs[0]
	t.Cleanup(func() { _ = api.Stop() })
	c := api.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ringNS}}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}

	// A block of its own, outside every local environment's slot
	// (127.1-250.0.0/16).
	zone := netip.MustParsePrefix(fmt.Sprintf("127.252.%d.0/24", time.Now().UnixNano()%250))
	// The hub's client below dials the members' addresses: the top hosts
	// of the block (given out from 254 down) are in every certificate.
	var ips []net.IP
	for h := 254; h > 254-8; h-- {
		ips = append(ips, net.IP(hostIn(zone, byte(h)).AsSlice()))
	}
	ca, err := pki.NewCA("simcluster-test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hubLeaf, err := ca.IssueClient("root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hubTLS, err := pki.ClientTLS(ca.CertPEM, hubLeaf)
	if err != nil {
		t.Fatal(err)
	}
	const domain = "ring.simcluster.test"
	issue := func(name string) *pki.Leaf {
		leaf, err := ca.IssueMember(pki.MemberRequest{Member: name, DNSNames: []string{name + "." + domain}, IPs: ips}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	secret := func(name string) string {
		leaf := issue(name)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ringNS, Name: name + "-tls"},
			Data: map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s.Name
	}
	ref := etcdfedv1.ClusterReference{Name: "ring", Namespace: "apps", UID: "5e3c1a52-0000-4000-8000-000000000001"}
	newMember := func(name string, b *etcdfedv1.BootstrapSpec) *etcdfedv1.EtcdMember {
		return &etcdfedv1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Namespace: ringNS, Name: name, Labels: map[string]string{etcdfedv1.LabelClusterUID: ref.UID}},
			Spec: etcdfedv1.EtcdMemberSpec{Cluster: ref, MemberName: name, Incarnation: 1, Image: "registry.k8s.io/etcd:3.6.15",
				Version: "3.6.15", DNSName: name + "." + domain, Zone: "zone-a", Bootstrap: b,
				TLS: etcdfedv1.MemberTLS{SecretName: secret(name)}},
		}
	}

	fleet := NewFleet()
	t.Cleanup(fleet.Close)
	sc, err := Start(ctx, fleet, Config{Name: "member-sim", REST: api.Config, DNSListen: "127.0.0.1:0",
		Zones: []Zone{{Name: "zone-a", CIDR: zone}}, StatusInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Stop)

	names := []string{"m0", "m1", "m2"}
	var initial []string
	for _, n := range names {
		initial = append(initial, n+"=https://"+n+"."+domain+":2380")
	}
	for _, n := range names {
		b := &etcdfedv1.BootstrapSpec{InitialCluster: strings.Join(initial, ","), InitialClusterState: etcdfedv1.InitialClusterNew, Token: "ring-1"}
		if err := c.Create(ctx, newMember(n, b)); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *etcdfedv1.EtcdMember {
		m := &etcdfedv1.EtcdMember{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ringNS, Name: name}, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// updateSpec changes a member's spec as the hub does: on the latest
	// copy, again on a conflict, as the spoke writes its status meanwhile.
	updateSpec := func(name string, change func(*etcdfedv1.EtcdMember)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			m := get(name)
			change(m)
			return c.Update(ctx, m)
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not within the test's time", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ready := func(name string) bool {
		m := get(name)
		return meta.IsStatusConditionTrue(m.Status.Conditions, etcdfedv1.ConditionPodReady) && m.Status.Etcd != nil && m.Status.Etcd.Peers != nil
	}
	for _, n := range names {
		// Ready, and its view written again once the last founding
		// member started (a peer found is news).
		waitFor(n+" ready with two active peers", func() bool { return ready(n) && len(get(n).Status.Etcd.Peers.Active) == 2 })
	}
	r := fleet.Ring(ref.UID)
	if r == nil || r.Leader() == 0 {
		t.Fatal("no simulated ring with a leader")
	}
	for _, n := range names {
		m := get(n)
		if !strings.Contains(strings.Join(m.Finalizers, ","), finalizer) {
			t.Errorf("%s: finalizers %v", n, m.Finalizers)
		}
		for _, cond := range []string{etcdfedv1.ConditionStorageReady, etcdfedv1.ConditionExposed, etcdfedv1.ConditionMemberHealthy, etcdfedv1.ConditionPeerConnections} {
			if !meta.IsStatusConditionTrue(m.Status.Conditions, cond) {
				t.Errorf("%s: %s %+v", n, cond, meta.FindStatusCondition(m.Status.Conditions, cond))
			}
		}
		v := m.Status.Etcd
		if v.IsLearner || v.LeaderID == "" || len(v.Peers.Active) != 2 || v.Version == "" {
			t.Errorf("%s: etcd view %+v", n, v)
		}
		if m.Status.NodeName != "node-a" || m.Status.Zone != "zone-a" || !zone.Contains(netip.MustParseAddr(m.Status.Address)) ||
			m.Status.ClientURL != "https://"+n+"."+domain+":2379" || m.Status.PeerURL != "https://"+n+"."+domain+":2380" || m.Status.Incarnation != 1 {
			t.Errorf("%s: status %+v", n, m.Status)
		}
	}

	// A Roll's spec change: the member restarts (its connections close)
	// and reports the new generation ready.
	watch := simClientConn(t, get("m0").Status.Address, hubTLS)
	updateSpec("m0", func(m *etcdfedv1.EtcdMember) { m.Spec.PodTemplate.Annotations = map[string]string{"roll": "1"} })
	waitFor("m0's process restarted on the new spec", func() bool { return watch.closed() })
	waitFor("m0 ready on the new spec", func() bool {
		m := get("m0")
		return m.Status.ObservedGeneration == m.Generation && ready("m0")
	})

	// A Roll onto another release: the member restarts on it and reports
	// it in its etcd view; the others still run theirs.
	updateSpec("m1", func(m *etcdfedv1.EtcdMember) {
		m.Spec.Version, m.Spec.Image = "3.6.16", "registry.k8s.io/etcd:3.6.16"
	})
	waitFor("m1 ready on 3.6.16", func() bool {
		m := get("m1")
		return m.Status.ObservedGeneration == m.Generation && ready("m1") && m.Status.Etcd.Version == "3.6.16"
	})
	if v := get("m2").Status.Etcd.Version; v != "3.6.15" {
		t.Errorf("m2, not rolled, reports version %q, want 3.6.15", v)
	}

	// A renewed certificate (the same CA): served on the next connection,
	// with no restart, as etcd reads its certificate at each handshake.
	m2 := get("m2")
	watch2 := simClientConn(t, m2.Status.Address, hubTLS)
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ringNS, Name: m2.Spec.TLS.SecretName}, sec); err != nil {
		t.Fatal(err)
	}
	renewed := issue("m2")
	sec.Data["tls.crt"], sec.Data["tls.key"] = renewed.CertPEM, renewed.KeyPEM
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(renewed.CertPEM)
	want, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("m2 serves its renewed certificate", func() bool {
		conn, err := tls.Dial("tcp", net.JoinHostPort(m2.Status.Address, "2379"), hubTLS)
		if err != nil {
			return false
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(want.SerialNumber) == 0
	})
	if watch2.closed() {
		t.Error("m2's process restarted for a renewed certificate")
	}

	// The hub's client adds a learner, as for a replacement.
	var eps []string
	for _, n := range names {
		eps = append(eps, "https://"+net.JoinHostPort(get(n).Status.Address, "2379"))
	}
	hub, err := etcdops.New(etcdops.Config{Endpoints: eps, TLS: hubTLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Close() })
	var id uint64
	waitFor("learner added (the ring's members just started refuse for etcd's 5 s)", func() bool {
		id, err = hub.AddLearner(ctx, "https://m3."+domain+":2380")
		if err != nil {
			t.Log(err)
			time.Sleep(time.Second)
		}
		return err == nil
	})
	if err := c.Create(ctx, newMember("m3", &etcdfedv1.BootstrapSpec{InitialCluster: strings.Join(append(initial, "m3=https://m3."+domain+":2380"), ","),
		InitialClusterState: etcdfedv1.InitialClusterExisting, Token: "ring-1"})); err != nil {
		t.Fatal(err)
	}
	waitFor("m3 runs as a learner", func() bool {
		m := get("m3")
		c := meta.FindStatusCondition(m.Status.Conditions, etcdfedv1.ConditionPodReady)
		return c != nil && c.Reason == member.ReasonLearner && m.Status.Etcd != nil && m.Status.Etcd.IsLearner && m.Status.Etcd.ID == fmt.Sprintf("%x", id)
	})
	leader := ""
	for _, n := range names {
		if v := get(n).Status.Etcd; v.ID == v.LeaderID {
			leader = "https://" + net.JoinHostPort(get(n).Status.Address, "2379")
		}
	}
	if err := hub.Promote(ctx, []string{leader}, id); err != nil {
		t.Fatal(err)
	}
	waitFor("m3 ready as a voter", func() bool { return ready("m3") && !get("m3").Status.Etcd.IsLearner })

	// Deleted: the process stops, the finalizer goes.
	if err := hub.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, get("m3")); err != nil {
		t.Fatal(err)
	}
	waitFor("m3 gone", func() bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: ringNS, Name: "m3"}, &etcdfedv1.EtcdMember{})
		return apierrors.IsNotFound(err)
	})
	if sc.Hosted() != 3 {
		t.Fatalf("%d members run after m3 was deleted", sc.Hosted())
	}

	// The cluster lost: every member stops.
	sc.Lose()
	for _, mi := range r.Members() {
		if mi.Running {
			t.Fatalf("member %s runs after its cluster was lost", mi.Name)
		}
	}
}

// connWatch is a raw connection to a member's client port: it closes when
// the member's process stops.
type connWatch struct{ done chan struct{} }

func (w *connWatch) closed() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func simClientConn(t *testing.T, addr string, cfg *tls.Config) *connWatch {
	t.Helper()
	conn, err := tls.Dial("tcp", net.JoinHostPort(addr, "2379"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// One request on a connection kept alive: the connection then lives
	// as long as the member's process.
	if _, err := conn.Write([]byte("GET /version HTTP/1.1\r\nHost: member\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	w := &connWatch{done: make(chan struct{})}
	go func() {
		buf := make([]byte, 1)
		_, _ = br.Read(buf)
		close(w.done)
	}()
	return w
}
