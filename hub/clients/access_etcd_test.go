package clients

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// etcdFrom is an etcd client built from a consumer Secret's data alone.
func etcdFrom(t *testing.T, data map[string][]byte) *clientv3.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[etcdfedv1.ClientSecretKeyCA]) {
		t.Fatal("no CA in the Secret")
	}
	pair, err := tls.X509KeyPair(data[etcdfedv1.ClientSecretKeyCert], data[etcdfedv1.ClientSecretKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(string(data[etcdfedv1.ClientSecretKeyEndpoints]), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func denied(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserNotFound) ||
		(err != nil && strings.Contains(err.Error(), "permission denied"))
}

// TestConsumerRoles, against a real hub apiserver and a real etcd with
// TLS: on a ring that ran without authentication (as an older hub left
// it), the hub turns etcd authentication on with a user and role per
// consumer while the declared consumers and a root certificate write, and
// none of their writes fails. A ReadOnly consumer reads and cannot write; a ReadWrite one
// with a keyPrefix writes under it and nowhere else; a Root one writes
// anywhere; a certificate of the ring's CA that no spec.clients entry
// declares (every certificate was root on the data before) reads and
// writes nothing; the hub itself stays root. Removing the read-only
// consumer deletes its user at once: its certificate, still valid, reads
// nothing any more.
func TestConsumerRoles(t *testing.T) {
	cls := testenv.StartT(t, "hub")
	hub := cls[0].Client
	ctx := context.Background()
	now := time.Now()
	ca, err := pki.NewCA("ring", now)
	if err != nil {
		t.Fatal(err)
	}
	e := etcdtest.Start(t, etcdtest.Options{Members: 1, CA: ca, Name: "roles"})
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"}}
	// A ring as an older hub ran it: consumers' Secrets, no etcd
	// authentication (spec.tls.auth Disabled for the first pass).
	ec.Spec = etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "main.etcd.test"},
		TLS: etcdfedv1.TLSSpec{Auth: etcdfedv1.AuthDisabled},
		Clients: []etcdfedv1.ClientSpec{
			{Name: "reader", Role: etcdfedv1.ClientRoleReadOnly},
			{Name: "writer", Role: etcdfedv1.ClientRoleReadWrite, KeyPrefix: "/app/"},
			{Name: "admin", Role: etcdfedv1.ClientRoleRoot},
		}}
	hubLeaf := ringOver(t, hub, ec, e, ca)
	r := &Reconciler{Client: hub, Reader: hub}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "main"}}
	pass := func() *etcdfedv1.EtcdCluster { t.Helper(); return reconcilePass(t, r, hub, req, false) }
	got := pass()
	secret := func(name string) map[string][]byte {
		sec := &corev1.Secret{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "main-" + name + "-etcd-client"}, sec); err != nil {
			t.Fatal(err)
		}
		return sec.Data
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	readerData := secret("reader")
	reader, writer, admin := etcdFrom(t, readerData), etcdFrom(t, secret("writer")), etcdFrom(t, secret("admin"))

	// Turning authentication on under the declared consumers' writes (and
	// a root certificate's, as `etcdfed client-cert` gives) loses none.
	root, err := ca.IssueClient(etcdfedv1.EtcdRootUser, now)
	if err != nil {
		t.Fatal(err)
	}
	rootCli := etcdFrom(t, Data(ca.CertPEM, root, strings.Join(e.Endpoints(), ",")))
	var writes, failures atomic.Int64
	var lastErr atomic.Value
	stopWrites := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := 0; ; i++ {
			select {
			case <-stopWrites:
				return
			default:
			}
			for _, w := range []struct {
				c   *clientv3.Client
				key string
			}{{writer, "/app/w"}, {admin, "/admin/w"}, {rootCli, "/root/w"}} {
				if _, err := w.c.Put(cctx, fmt.Sprintf("%s%d", w.key, i), "v"); err != nil {
					failures.Add(1)
					lastErr.Store(err.Error())
				} else {
					writes.Add(1)
				}
			}
		}
	}()
	for writes.Load() < 30 {
		time.Sleep(10 * time.Millisecond)
	}
	before := got.DeepCopy()
	got.Spec.TLS.Auth = ""
	if err := hub.Patch(ctx, got, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	got = pass()
	at := writes.Load()
	for writes.Load() < at+30 {
		time.Sleep(10 * time.Millisecond)
	}
	close(stopWrites)
	<-wrote
	if failures.Load() > 0 {
		t.Errorf("turning authentication on failed %d of %d writes of declared consumers and root: %v", failures.Load(), writes.Load()+failures.Load(), lastErr.Load())
	}
	t.Logf("authentication turned on under %d writes of declared consumers and root, none failed", writes.Load())
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionClientsReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("ClientsReady %+v", c)
	}
	if _, err := admin.Put(cctx, "/seed", "v"); err != nil {
		t.Fatalf("Root consumer: put: %v", err)
	}
	if _, err := reader.Get(cctx, "/seed"); err != nil {
		t.Fatalf("ReadOnly consumer: get: %v", err)
	}
	if _, err := reader.Put(cctx, "/seed", "overwritten"); !denied(err) {
		t.Fatalf("ReadOnly consumer: put = %v, want permission denied", err)
	}
	if _, err := writer.Put(cctx, "/app/k", "v"); err != nil {
		t.Fatalf("ReadWrite consumer under its prefix: %v", err)
	}
	if _, err := writer.Put(cctx, "/other/k", "v"); !denied(err) {
		t.Fatalf("ReadWrite consumer outside its prefix: %v, want permission denied", err)
	}
	stray, err := ca.IssueClient("stray", now)
	if err != nil {
		t.Fatal(err)
	}
	strayCli := etcdFrom(t, Data(ca.CertPEM, stray, strings.Join(e.Endpoints(), ",")))
	if _, err := strayCli.Get(cctx, "/seed"); !denied(err) {
		t.Fatalf("an undeclared certificate of the CA: get = %v, want permission denied", err)
	}
	hubCli := etcdFrom(t, Data(ca.CertPEM, hubLeaf, strings.Join(e.Endpoints(), ",")))
	if _, err := hubCli.MemberList(cctx); err != nil {
		t.Fatalf("the hub: member list: %v", err)
	}
	if _, err := hubCli.UserList(cctx); err != nil {
		t.Fatalf("the hub is not root: %v", err)
	}

	// Revocation: the entry goes, the user with it.
	before = got.DeepCopy()
	got.Spec.Clients = got.Spec.Clients[1:]
	if err := hub.Patch(ctx, got, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	pass()
	if _, err := reader.Get(cctx, "/seed"); !denied(err) {
		t.Fatalf("a removed consumer's certificate still reads: %v", err)
	}
	if _, err := writer.Put(cctx, "/app/k2", "v"); err != nil {
		t.Fatalf("the remaining consumer lost its access: %v", err)
	}
}

// TestAdoptedRingWithAuthOn, against a real hub apiserver and a real etcd
// with its own CA and authentication already on (root only), as an
// adopted cluster is (spec.adopt with clientSecretName, root's client
// certificate): the hub's certificate (etcdfed-hub) is no user there, so
// the hub reaches etcd's users through the adopted cluster's root
// certificate, adds its own user as root and a consumer's user and role,
// keeps authentication on, and ClientsReady is True. It was stuck at
// "etcd's users and roles not checked: permission denied" (the hub
// dialled with its own certificate alone).
func TestAdoptedRingWithAuthOn(t *testing.T) {
	hub := testenv.StartT(t, "hub")[0].Client
	ctx := context.Background()
	now := time.Now()
	ca, err := pki.NewCA("existing etcd CA", now)
	if err != nil {
		t.Fatal(err)
	}
	e := etcdtest.Start(t, etcdtest.Options{Members: 1, CA: ca, Name: "orig"})
	root, err := e.EnableAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "etcd"}}); err != nil {
		t.Fatal(err)
	}
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "etcd", Name: "main"}}
	ec.Spec = etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "main.etcd.test"},
		TLS:     etcdfedv1.TLSSpec{CASecretName: "old-ca", Auth: etcdfedv1.AuthEnabled},
		Adopt:   &etcdfedv1.AdoptSpec{Endpoints: e.Endpoints(), ClientSecretName: "old-root"},
		Clients: []etcdfedv1.ClientSpec{{Name: "app", Role: etcdfedv1.ClientRoleReadWrite, KeyPrefix: "/app/"}}}
	hubLeaf := ringOver(t, hub, ec, e, ca, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "etcd", Name: "old-root"},
		Data: map[string][]byte{pki.KeyCert: root.CertPEM, pki.KeyKey: root.KeyPEM}})
	r := &Reconciler{Client: hub, Reader: hub}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "etcd", Name: "main"}}
	got := reconcilePass(t, r, hub, req, false)
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionClientsReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("ClientsReady %+v", c)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	hubCli := etcdFrom(t, Data(ca.CertPEM, hubLeaf, strings.Join(e.Endpoints(), ",")))
	if _, err := hubCli.UserList(cctx); err != nil {
		t.Fatalf("the hub's own certificate is not root: %v", err)
	}
	sec := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: "etcd", Name: "main-app-etcd-client"}, sec); err != nil {
		t.Fatal(err)
	}
	app := etcdFrom(t, sec.Data)
	if _, err := app.Put(cctx, "/app/k", "v"); err != nil {
		t.Fatalf("the consumer under its prefix: %v", err)
	}
	if _, err := app.Put(cctx, "/other/k", "v"); !denied(err) {
		t.Fatalf("the consumer outside its prefix: %v, want permission denied", err)
	}
	as, err := e.NewClient().AuthStatus(cctx)
	if err != nil || !as.Enabled {
		t.Fatalf("authentication after the pass: %+v, %v", as, err)
	}
}

// ringOver creates ec as a ring formed over the etcd e (status.endpoints
// e's, a cluster ID) with what the EtcdCluster reconciler keeps: the CA
// Secret and the hub's own client certificate, which it returns; and the
// extra Secrets.
func ringOver(t *testing.T, hub client.Client, ec *etcdfedv1.EtcdCluster, e *etcdtest.Cluster, ca *pki.CA, extra ...*corev1.Secret) *pki.Leaf {
	t.Helper()
	ctx := context.Background()
	if err := hub.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	ec.Status.Endpoints = e.Endpoints()
	ec.Status.ClusterID = "1"
	if err := hub.Status().Update(ctx, ec); err != nil {
		t.Fatal(err)
	}
	hubLeaf, err := ca.IssueClient(etcdfedv1.EtcdHubUser, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range append([]*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: pki.CASecretName(ec)}, Data: (&pki.Authority{Signer: ca}).Data()},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: pki.HubClientSecretName(ec)}, Data: map[string][]byte{pki.KeyCA: ca.CertPEM, pki.KeyCert: hubLeaf.CertPEM, pki.KeyKey: hubLeaf.KeyPEM}},
	}, extra...) {
		if err := hub.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	return hubLeaf
}

// memberClient is an etcd client with a member's certificate (its common
// name the member's name), as the member's preStop hook dials its etcd.
func memberClient(t *testing.T, ca *pki.CA, name string, endpoint string) *clientv3.Client {
	t.Helper()
	leaf, err := ca.IssueMember(pki.MemberRequest{Member: name, DNSNames: []string{"localhost"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return etcdFrom(t, Data(ca.CertPEM, leaf, endpoint))
}

// TestMemberMovesLeadershipWithAuthOn, against a real hub apiserver and a
// real 3-member etcd with TLS: once the hub turned authentication on, the
// leading member's own certificate moves leadership off it (MoveLeader,
// what its preStop hook does before etcd's SIGTERM), which etcd allows
// root alone; before, the hook was refused ("user name not found") and
// etcd's own shutdown moved leadership only after it stopped serving
// clients. A member removed from the ring loses its user at once.
func TestMemberMovesLeadershipWithAuthOn(t *testing.T) {
	hub := testenv.StartT(t, "hub")[0].Client
	ctx := context.Background()
	ca, err := pki.NewCA("ring", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := etcdtest.Start(t, etcdtest.Options{Members: 3, CA: ca, Name: "main"})
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "main"}}
	ec.Spec = etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "main.etcd.test"}}
	hubLeaf := ringOver(t, hub, ec, e, ca)
	setMembers := func(names ...string) {
		t.Helper()
		ec.Status.Members = nil
		for _, n := range names {
			ec.Status.Members = append(ec.Status.Members, etcdfedv1.MemberStatus{Name: n})
		}
		if err := hub.Status().Update(ctx, ec); err != nil {
			t.Fatal(err)
		}
	}
	setMembers("main-0", "main-1", "main-2")
	r := &Reconciler{Client: hub, Reader: hub}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "main"}}
	got := reconcilePass(t, r, hub, req, false)
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionClientsReady); c != nil && c.Status == metav1.ConditionFalse {
		t.Fatalf("ClientsReady %+v", c)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if as, err := etcdFrom(t, Data(ca.CertPEM, hubLeaf, strings.Join(e.Endpoints(), ","))).AuthStatus(cctx); err != nil || !as.Enabled {
		t.Fatalf("authentication after the pass: %+v, %v", as, err)
	}
	for range 2 {
		leader, err := e.Leader(cctx)
		if err != nil {
			t.Fatal(err)
		}
		self := memberClient(t, ca, leader.Name, leader.ClientURL)
		var to *etcdtest.Member
		for _, m := range e.Members {
			if m != leader {
				to = m
				break
			}
		}
		st, err := self.Status(cctx, to.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := self.MoveLeader(cctx, st.Header.MemberId); err != nil {
			t.Fatalf("%s's own certificate: move leadership to %s: %v", leader.Name, to.Name, err)
		}
		if now, err := e.Leader(cctx); err != nil || now != to {
			t.Fatalf("leader after the move: %v, %v; want %s", now, err, to.Name)
		}
		t.Logf("%s's own certificate moved leadership to %s", leader.Name, to.Name)
	}
	// A member's certificate is root, a stray one of the CA nothing.
	if _, err := memberClient(t, ca, "main-1", e.Endpoints()[0]).Put(cctx, "/k", "v"); err != nil {
		t.Fatalf("a member's certificate: put: %v", err)
	}
	if _, err := memberClient(t, ca, "stray", e.Endpoints()[0]).Get(cctx, "/k"); !denied(err) {
		t.Fatalf("a stray member certificate: get = %v, want denied", err)
	}

	// main-2 leaves the ring: its certificate, still valid, is refused.
	got.Status.Members = nil
	ec = got
	setMembers("main-0", "main-1")
	reconcilePass(t, r, hub, req, false)
	leader, err := e.Leader(cctx)
	if err != nil {
		t.Fatal(err)
	}
	gone := memberClient(t, ca, "main-2", leader.ClientURL)
	st, err := gone.Status(cctx, e.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.MoveLeader(cctx, st.Header.MemberId); !denied(err) {
		t.Fatalf("a removed member's certificate: MoveLeader = %v, want denied", err)
	}
}
