package etcdsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

func newSim(t *testing.T, o RingOptions) (*Server, *Ring) {
	t.Helper()
	s := NewServer()
	t.Cleanup(s.Close)
	r, err := s.NewRing(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

func simClient(t *testing.T, tlsCfg *tls.Config, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, rpctypes.Error(want)) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

// TestMembershipLifecycle walks the hub's membership steps through
// clientv3: a learner added, refused promotion until started and in sync,
// promoted, a voter removed, leadership moved.
func TestMembershipLifecycle(t *testing.T) {
	_, r := newSim(t, RingOptions{Size: 3, Seed: 1, CatchUp: -1, HealthInterval: -1})
	cl := simClient(t, nil, r.Endpoints()...)
	ctx := ctxT(t, 30*time.Second)

	list, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 3 || list.Header.ClusterId != r.ClusterID() {
		t.Fatalf("member list %v", list)
	}
	add, err := cl.MemberAddAsLearner(ctx, []string{"http://new.etcdsim.invalid:2380"})
	if err != nil {
		t.Fatal(err)
	}
	id := add.Member.ID
	if !add.Member.IsLearner || add.Member.Name != "" || len(add.Members) != 4 {
		t.Fatalf("add answered %v", add)
	}
	_, err = cl.MemberAddAsLearner(ctx, []string{"http://other.etcdsim.invalid:2380"})
	wantErr(t, err, rpctypes.ErrGRPCTooManyLearners)
	// The same peer URL in the same second: etcd derives the member ID
	// from both, and checks IDs before peer URLs and the learner count.
	_, err = cl.MemberAddAsLearner(ctx, []string{"http://new.etcdsim.invalid:2380"})
	if !errors.Is(err, rpctypes.Error(rpctypes.ErrGRPCMemberExist)) {
		wantErr(t, err, rpctypes.ErrGRPCPeerURLExist) // the second changed
	}
	_, err = cl.MemberPromote(ctx, id)
	wantErr(t, err, rpctypes.ErrGRPCLearnerNotReady)

	mi, err := r.StartMember(id, StartOptions{Name: "new"})
	if err != nil {
		t.Fatal(err)
	}
	if mi.Name != "new" || len(mi.ClientURLs) != 1 {
		t.Fatalf("started %+v", mi)
	}
	_, err = cl.MemberPromote(ctx, id)
	wantErr(t, err, rpctypes.ErrGRPCLearnerNotReady) // started, not caught up
	// A learner serves Status and nothing that needs the leader.
	lc := simClient(t, nil, mi.ClientURLs...)
	st, err := lc.Status(ctx, mi.ClientURLs[0])
	if err != nil || !st.IsLearner {
		t.Fatalf("learner status %v, %v", st, err)
	}
	_, err = lc.MemberList(ctx)
	wantErr(t, err, rpctypes.ErrGRPCNotSupportedForLearner)

	if err := r.CatchUp(id); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.MemberPromote(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = cl.MemberPromote(ctx, id)
	wantErr(t, err, rpctypes.ErrGRPCMemberNotLearner)

	// Leadership: only the leader moves it, never to a learner or a
	// stranger.
	leader := r.Leader()
	var leaderURL, followerURL string
	for _, m := range r.Members() {
		if m.ID == leader {
			leaderURL = m.ClientURLs[0]
		} else if followerURL == "" {
			followerURL = m.ClientURLs[0]
		}
	}
	_, err = simClient(t, nil, followerURL).MoveLeader(ctx, id)
	wantErr(t, err, rpctypes.ErrGRPCNotLeader)
	lcl := simClient(t, nil, leaderURL)
	_, err = lcl.MoveLeader(ctx, 12345)
	wantErr(t, err, rpctypes.ErrGRPCBadLeaderTransferee)
	term := r.Term()
	if _, err := lcl.MoveLeader(ctx, id); err != nil {
		t.Fatal(err)
	}
	if r.Leader() != id || r.Term() != term+1 {
		t.Fatalf("leader %x term %d after move to %x from term %d", r.Leader(), r.Term(), id, term)
	}

	fcl := simClient(t, nil, followerURL)
	if _, err := fcl.MemberRemove(ctx, leader); err != nil {
		t.Fatal(err)
	}
	_, err = fcl.MemberRemove(ctx, leader)
	wantErr(t, err, rpctypes.ErrGRPCMemberNotFound)
	if n := len(r.Members()); n != 3 {
		t.Fatalf("%d members after remove", n)
	}
}

// TestStrictReconfigCheck: etcd refuses a change that leaves fewer
// started voters than a quorum, and a voter added but never started
// counts as not started.
func TestStrictReconfigCheck(t *testing.T) {
	_, r := newSim(t, RingOptions{Size: 1, Seed: 2, HealthInterval: -1})
	cl := simClient(t, nil, r.Endpoints()...)
	ctx := ctxT(t, 30*time.Second)
	// 1 started of 2: allowed (etcd's restore case), then the ring has no
	// quorum until the new voter starts.
	add, err := cl.MemberAdd(ctx, []string{"http://b.etcdsim.invalid:2380"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Leader() != 0 {
		t.Fatal("a 2-voter ring with one voter up has a leader")
	}
	short := ctxT(t, 500*time.Millisecond)
	if _, err := cl.MemberList(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("member list without quorum: %v", err)
	}
	if _, err := r.StartMember(add.Member.ID, StartOptions{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	if r.Leader() == 0 {
		t.Fatal("no leader once both voters run")
	}
	// 2 started of 3 (with the new one): allowed; 2 of 4: refused.
	if _, err := cl.MemberAdd(ctx, []string{"http://c.etcdsim.invalid:2380"}); err != nil {
		t.Fatal(err)
	}
	if r.Leader() == 0 {
		t.Fatal("no leader with 2 of 3 voters up")
	}
	_, err = cl.MemberAdd(ctx, []string{"http://d.etcdsim.invalid:2380"})
	wantErr(t, err, rpctypes.ErrGRPCMemberNotEnoughStarted)
	// A learner needs no started quorum, but the answering member must
	// reach a quorum of the voters counting the new member as down.
	_, err = cl.MemberAddAsLearner(ctx, []string{"http://d.etcdsim.invalid:2380"})
	wantErr(t, err, rpctypes.ErrGRPCUnhealthy)
}

// TestQuorumLoss: with two of three voters stopped, calls that need a
// quorum time out ("etcdserver: request timed out"), Status says "no
// leader", a stopped member refuses connections, and all comes back.
func TestQuorumLoss(t *testing.T) {
	_, r := newSim(t, RingOptions{Size: 3, Seed: 3, RequestTimeout: 300 * time.Millisecond, HealthInterval: -1})
	ms := r.Members()
	cl := simClient(t, nil, ms[0].ClientURLs[0])
	ctx := ctxT(t, 30*time.Second)
	for _, m := range ms[1:] {
		if err := r.StopMember(m.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := net.DialTimeout("tcp", ms[1].ListenAddr, time.Second); err == nil {
		t.Fatal("a stopped member accepts connections")
	}
	// clientv3 retries a read that timed out until its deadline.
	if _, err := cl.MemberList(ctxT(t, time.Second)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("member list without quorum: %v", err)
	}
	st, err := cl.Status(ctx, ms[0].ClientURLs[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != 0 || len(st.Errors) != 1 || st.Errors[0] != "etcdserver: no leader" {
		t.Fatalf("status without quorum %+v", st)
	}
	_, err = cl.MemberAddAsLearner(ctx, []string{"http://x.etcdsim.invalid:2380"})
	wantErr(t, err, rpctypes.ErrGRPCUnhealthy)
	if _, err := r.StartMember(ms[1].ID, StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.MemberList(ctx); err != nil {
		t.Fatalf("member list with quorum back: %v", err)
	}
	// A partition that leaves the answering member alone.
	if err := r.Partition([]uint64{ms[0].ID}); err != nil {
		t.Fatal(err)
	}
	// Raft takes no proposal without a leader: etcd's own request
	// deadline expires (codes.DeadlineExceeded), and clientv3 tries again
	// until the caller's deadline.
	if _, err = cl.Put(ctxT(t, time.Second), "k", "v"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put without a leader: %v", err)
	}
	cc, err := grpc.NewClient(ms[0].ListenAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	if _, err := pb.NewKVClient(cc).Put(ctx, &pb.PutRequest{Key: []byte("k")}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("put without a leader, one attempt: %v", err)
	}
	if err := r.Partition(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
}

// TestPausedMemberHangs: a paused member takes connections and answers
// nothing until resumed.
func TestPausedMemberHangs(t *testing.T) {
	_, r := newSim(t, RingOptions{Size: 3, Seed: 4})
	m := r.Members()[2]
	cl := simClient(t, nil, m.ClientURLs[0])
	if err := r.PauseMember(m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Status(ctxT(t, 300*time.Millisecond), m.ClientURLs[0]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("status of a paused member: %v", err)
	}
	if err := r.ResumeMember(m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Status(ctxT(t, 5*time.Second), m.ClientURLs[0]); err != nil {
		t.Fatal(err)
	}
}

// TestTLSAndAuth: members behind TLS from a hub/pki CA, /version over
// HTTPS, and authentication as the hub turns it on: afterwards the root
// certificate may do everything and another user nothing admin.
func TestTLSAndAuth(t *testing.T) {
	ca, err := pki.NewCA("etcdsim-test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueMember(pki.MemberRequest{Member: "sim", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	srvTLS := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	_, r := newSim(t, RingOptions{Size: 3, Seed: 5, TLS: srvTLS, HealthInterval: -1})
	client := func(cn string) (*clientv3.Client, *tls.Config) {
		l, err := ca.IssueClient(cn, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pki.ClientTLS(ca.CertPEM, l)
		if err != nil {
			t.Fatal(err)
		}
		return simClient(t, cfg, r.Endpoints()...), cfg
	}
	root, rootTLS := client("root")
	other, _ := client("someone")
	ctx := ctxT(t, 30*time.Second)
	if !strings.HasPrefix(r.Endpoints()[0], "https://") {
		t.Fatalf("endpoints %v", r.Endpoints())
	}
	_, err = root.AuthEnable(ctx)
	wantErr(t, err, rpctypes.ErrGRPCRootUserNotExist)
	if _, err := root.UserAddWithOptions(ctx, "root", "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		t.Fatal(err)
	}
	_, err = root.AuthEnable(ctx)
	wantErr(t, err, rpctypes.ErrGRPCRootRoleNotExist)
	if _, err := root.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	as, err := root.AuthStatus(ctx)
	if err != nil || !as.Enabled {
		t.Fatalf("auth status %v, %v", as, err)
	}
	if _, err := root.MemberList(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = other.MemberAddAsLearner(ctx, []string{"http://x.etcdsim.invalid:2380"})
	wantErr(t, err, rpctypes.ErrGRPCUserNotFound)
	_, err = other.Put(ctx, "k", "v")
	wantErr(t, err, rpctypes.ErrGRPCPermissionDenied)
	if _, err := root.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}

	tr := &http.Transport{TLSClientConfig: rootTLS.Clone()}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(r.Endpoints()[0] + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"etcdcluster":"3.6.0"`) {
		t.Fatalf("/version: %s %s", resp.Status, body)
	}
}

// TestAlarms: a raised NOSPACE alarm is listed, appears in every status'
// errors, refuses writes, and goes when disarmed.
func TestAlarms(t *testing.T) {
	_, r := newSim(t, RingOptions{Size: 3, Seed: 6})
	cl := simClient(t, nil, r.Endpoints()...)
	ctx := ctxT(t, 30*time.Second)
	id := r.Members()[1].ID
	if err := r.RaiseAlarm(id, pb.AlarmType_NOSPACE); err != nil {
		t.Fatal(err)
	}
	al, err := cl.AlarmList(ctx)
	if err != nil || len(al.Alarms) != 1 || al.Alarms[0].MemberID != id {
		t.Fatalf("alarms %v, %v", al, err)
	}
	st, err := cl.Status(ctx, r.Endpoints()[0])
	if err != nil || len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "alarm:NOSPACE") {
		t.Fatalf("status %v, %v", st, err)
	}
	_, err = cl.Put(ctx, "k", "v")
	wantErr(t, err, rpctypes.ErrGRPCNoSpace)
	if _, err := cl.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: id, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
}

// TestJustStartedRefusesChanges: as etcd, a ring counts a peer active
// only once connected for HealthInterval, so a ring just created (or a
// member just restarted) refuses membership changes for that long.
func TestJustStartedRefusesChanges(t *testing.T) {
	_, r := newSim(t, RingOptions{Size: 3, Seed: 7, HealthInterval: 300 * time.Millisecond})
	cl := simClient(t, nil, r.Endpoints()[0])
	ctx := ctxT(t, 30*time.Second)
	_, err := cl.MemberAddAsLearner(ctx, []string{"http://x.etcdsim.invalid:2380"})
	wantErr(t, err, rpctypes.ErrGRPCUnhealthy)
	waitUntil(t, func() bool {
		_, err := cl.MemberAddAsLearner(ctx, []string{"http://x.etcdsim.invalid:2380"})
		return err == nil
	})
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestForceNewCluster: after losing two of three voters for good, the
// survivor restarted as --force-new-cluster leads alone with the same
// cluster ID and keys, and the lost members' IDs stay removed.
func TestForceNewCluster(t *testing.T) {
	s, r := newSim(t, RingOptions{Size: 3, Seed: 8, HealthInterval: -1})
	ms := r.Members()
	ctx := ctxT(t, 30*time.Second)
	if _, err := simClient(t, nil, ms[0].ClientURLs[0]).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[1:] {
		if err := r.StopMember(m.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.ForceNewCluster(ms[0].ID); err != nil {
		t.Fatal(err)
	}
	// The survivor comes back at its address: a client that knew it
	// reconnects.
	cl := simClient(t, nil, ms[0].ClientURLs[0])
	list, err := cl.MemberList(ctx)
	if err != nil || len(list.Members) != 1 || list.Header.ClusterId != r.ClusterID() {
		t.Fatalf("member list after forcing %v, %v", list, err)
	}
	get, err := cl.Get(ctx, "k")
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("get after forcing %v, %v", get, err)
	}
	_, err = cl.MemberRemove(ctx, ms[1].ID)
	wantErr(t, err, rpctypes.ErrGRPCMemberNotFound)
	if _, ok := r.MemberByPeerURL(ms[0].PeerURLs[0]); !ok {
		t.Fatal("the survivor is not found by its peer URL")
	}
	r.Close()
	if n := len(s.rings); n != 0 {
		t.Fatalf("%d rings left in the server after Close", n)
	}
}

// TestFixedAddressesAndTxn: members on given loopback addresses with
// advertised client URLs of the caller's choosing (a DNS name), a
// restart at the same address, and a transaction as a workload makes it.
func TestFixedAddressesAndTxn(t *testing.T) {
	addrs := []string{"127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))}
	var specs []MemberSpec
	for i, a := range addrs {
		specs = append(specs, MemberSpec{Name: fmt.Sprintf("m%d", i), ListenAddr: a, ClientURL: fmt.Sprintf("http://m%d.ring.example:2379", i), PeerURL: fmt.Sprintf("http://m%d.ring.example:2380", i)})
	}
	_, r := newSim(t, RingOptions{Members: specs, Seed: 9})
	ctx := ctxT(t, 30*time.Second)
	cl := simClient(t, nil, "http://"+addrs[1])
	list, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Members {
		if !strings.HasSuffix(m.ClientURLs[0], ".ring.example:2379") {
			t.Fatalf("advertised %v", m.ClientURLs)
		}
	}
	id := r.Members()[1].ID
	if err := r.StopMember(id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.StartMember(id, StartOptions{}); err != nil {
		t.Fatal(err)
	}
	// A read (clientv3 retries it) while the client finds its connection
	// gone and dials again.
	if _, err := cl.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	put, err := cl.Put(ctx, "k", "v1")
	if err != nil {
		t.Fatal(err)
	}
	txn, err := cl.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("k"), "=", put.Header.Revision)).
		Then(clientv3.OpPut("k", "v2")).Else(clientv3.OpGet("k")).Commit()
	if err != nil || !txn.Succeeded || txn.Header.Revision != put.Header.Revision+1 {
		t.Fatalf("txn %v, %v", txn, err)
	}
	txn, err = cl.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("k"), "=", put.Header.Revision)).
		Then(clientv3.OpPut("k", "v3")).Else(clientv3.OpGet("k")).Commit()
	if err != nil || txn.Succeeded || txn.Header.Revision != put.Header.Revision+1 ||
		string(txn.Responses[0].GetResponseRange().Kvs[0].Value) != "v2" {
		t.Fatalf("failed txn %v, %v", txn, err)
	}
}

// TestMemberRunsItsVersion: a member restarted on another release reports
// it (Status, /version's etcdserver) while the others report theirs, and
// keeps it across a restart that names none; the cluster version stays.
func TestMemberRunsItsVersion(t *testing.T) {
	_, r := newSim(t, RingOptions{Size: 3, Seed: 5, Version: "3.6.15", HealthInterval: -1})
	ms := r.Members()
	ctx := ctxT(t, 30*time.Second)
	cl := simClient(t, nil, ms[0].ClientURLs[0])
	serverVersion := func(url string) (status, served string) {
		t.Helper()
		st, err := cl.Status(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(url + "/version")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var v map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		if v["etcdcluster"] != DefaultClusterVersion {
			t.Errorf("%s: cluster version %q", url, v["etcdcluster"])
		}
		return st.Version, v["etcdserver"]
	}
	restart := func(id uint64, o StartOptions) MemberInfo {
		t.Helper()
		if err := r.StopMember(id); err != nil {
			t.Fatal(err)
		}
		mi, err := r.StartMember(id, o)
		if err != nil {
			t.Fatal(err)
		}
		return mi
	}
	m1 := restart(ms[1].ID, StartOptions{Version: "3.6.16"})
	for _, c := range []struct {
		url, want string
	}{{ms[0].ClientURLs[0], "3.6.15"}, {m1.ClientURLs[0], "3.6.16"}, {ms[2].ClientURLs[0], "3.6.15"}} {
		if st, h := serverVersion(c.url); st != c.want || h != c.want {
			t.Errorf("%s: Status version %q, /version etcdserver %q; want %s", c.url, st, h, c.want)
		}
	}
	m1 = restart(ms[1].ID, StartOptions{})
	if st, h := serverVersion(m1.ClientURLs[0]); st != "3.6.16" || h != "3.6.16" {
		t.Errorf("restarted naming no version: Status %q, /version %q; want the 3.6.16 it ran", st, h)
	}
}
