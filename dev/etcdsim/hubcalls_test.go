package etcdsim

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdfed/etcdfed/hub/clients"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestHubClientOnSimulatedRing drives the hub's own etcd client
// (hub/etcdops) against a simulated ring over TLS, as the hub drives a
// ring: observe, add a learner, promote it once started, move leadership,
// remove a voter, alarms, defragment, compact, and authentication turned
// on as hub/clients plans it.
func TestHubClientOnSimulatedRing(t *testing.T) {
	ca, err := pki.NewCA("etcdsim-hub", time.Now())
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
	_, r := newSim(t, RingOptions{Size: 3, Seed: 10, HealthInterval: -1, CatchUp: -1,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	hubLeaf, err := ca.IssueClient("root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hubTLS, err := pki.ClientTLS(ca.CertPEM, hubLeaf)
	if err != nil {
		t.Fatal(err)
	}
	c, err := etcdops.New(etcdops.Config{Endpoints: r.Endpoints(), TLS: hubTLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t, time.Minute)

	obs := c.Observe(ctx)
	if !obs.Reachable || obs.ClusterID != r.ClusterID() || obs.LeaderID != r.Leader() || !obs.AlarmsKnown || obs.ClusterVersion != DefaultClusterVersion || len(obs.Members) != 3 {
		t.Fatalf("observation %+v", obs)
	}
	for _, m := range obs.Members {
		if !m.Healthy || m.Version != DefaultVersion || m.RaftIndex == 0 || m.DBSizeQuota != DefaultQuotaBytes || !m.Started() {
			t.Fatalf("observed member %+v", m)
		}
	}

	id, err := c.AddLearner(ctx, "https://new.etcdsim.invalid:2380")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddLearner(ctx, "https://other.etcdsim.invalid:2380"); !errors.Is(err, etcdops.ErrTooManyLearners) {
		t.Fatalf("second learner: %v", err)
	}
	leaderURLs := func() []string {
		for _, m := range r.Members() {
			if m.ID == r.Leader() {
				return m.ClientURLs
			}
		}
		t.Fatal("no leader")
		return nil
	}
	if err := c.Promote(ctx, leaderURLs(), id); !errors.Is(err, etcdops.ErrLearnerNotReady) {
		t.Fatalf("promote before start: %v", err)
	}
	obs = c.Observe(ctx)
	for _, m := range obs.Members {
		if m.ID == id && (m.Started() || !m.IsLearner || len(m.ClientURLs) != 0) {
			t.Fatalf("an added learner not started observed as %+v", m)
		}
	}
	if _, err := r.StartMember(id, StartOptions{Name: "new"}); err != nil {
		t.Fatal(err)
	}
	if err := r.CatchUp(id); err != nil {
		t.Fatal(err)
	}
	if err := c.Promote(ctx, leaderURLs(), id); err != nil {
		t.Fatal(err)
	}
	if err := c.MoveLeader(ctx, leaderURLs(), id); err != nil {
		t.Fatal(err)
	}
	if r.Leader() != id {
		t.Fatalf("leader %x after moving it to %x", r.Leader(), id)
	}
	victim := r.Members()[0].ID
	if err := c.Remove(ctx, victim); err != nil && !errors.Is(err, etcdops.ErrAnswererStopped) {
		t.Fatal(err)
	}
	// The removed member stopped and its connections broke: a call that
	// was on one fails as with etcd (Unavailable, or "server stopped"
	// from the member applying its own removal); the hub tries again at
	// its next pass, and removing a member already gone is success.
	waitUntil(t, func() bool {
		err := c.Remove(ctx, victim)
		if err != nil && status.Code(errors.Unwrap(err)) != codes.Unavailable && !errors.Is(err, etcdops.ErrAnswererStopped) {
			t.Fatalf("removing a member already gone: %v", err)
		}
		return err == nil
	})
	if obs = c.Observe(ctx); !obs.Reachable || len(obs.Members) != 3 {
		t.Fatalf("observation after the removal %+v", obs)
	}

	if err := r.RaiseAlarm(id, pb.AlarmType_NOSPACE); err != nil {
		t.Fatal(err)
	}
	if obs = c.Observe(ctx); len(obs.Alarms) != 1 || obs.Alarms[0].Type != "NOSPACE" {
		t.Fatalf("alarms observed %+v", obs.Alarms)
	}
	for _, m := range obs.Members {
		if !m.Healthy {
			t.Fatalf("an alarm alone made %x unhealthy", m.ID)
		}
	}
	if err := c.DisarmNoSpace(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Defragment(ctx, leaderURLs()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompactCurrent(ctx); err != nil {
		t.Fatal(err)
	}

	// Authentication as hub/clients turns it on, then nothing left to do.
	for range 2 {
		have, err := c.ReadAuth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plan := clients.PlanAccess(nil, nil, have, true)
		if have.Enabled && len(plan.Changes) == 0 {
			return
		}
		for _, ch := range plan.Changes {
			if err := c.ApplyAuth(ctx, ch); err != nil {
				t.Fatalf("%s: %v", ch, err)
			}
		}
	}
	t.Fatal("authentication still not in line after applying the plan")
}
