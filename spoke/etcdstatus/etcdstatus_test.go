package etcdstatus_test

import (
	"context"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/internal/testcerts"
	"github.com/etcdfed/etcdfed/spoke/internal/testetcd"
)

// TestReadOverTLSWithServerName reads a real etcd's status at its IP while
// checking its certificate against the member's DNS name, which is the
// certificate's only SAN, with the member's own certificate as client
// certificate.
func TestReadOverTLSWithServerName(t *testing.T) {
	const dnsName = "main-0.etcd.test"
	pair := testcerts.NewCA(t).Issue(t, "main-0", []string{dnsName})
	ip := testetcd.FreeLoopbackIP(t)
	testetcd.Start(t, ip, "main-0", dnsName, &pair)

	r := &etcdstatus.Reader{Timeout: time.Second}
	defer r.Close()
	target := etcdstatus.Target{Endpoint: "https://" + ip + ":2379", ServerName: dnsName, CA: pair.CA, Cert: pair.Cert, Key: pair.Key, Version: "1"}
	v, err := r.Read(context.Background(), "ns/main-0", target)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if v.ID == "" || v.LeaderID != v.ID || v.IsLearner || v.RaftTerm < 1 || v.RaftIndex < 1 || v.DBSize <= 0 || v.Version == "" || v.ObservedAt == nil {
		t.Errorf("view of a one-member cluster = %+v; want itself as leader, a voter, positive term, index and size, a version", v)
	}
	t.Logf("view: id=%s leader=%s term=%d index=%d db=%d version=%s", v.ID, v.LeaderID, v.RaftTerm, v.RaftIndex, v.DBSize, v.Version)

	// Another name than the certificate's SAN fails verification.
	wrong := target
	wrong.ServerName, wrong.Version = "main-1.etcd.test", "2"
	if _, err := r.Read(context.Background(), "ns/main-0", wrong); err == nil {
		t.Error("Read with a server name the certificate lacks succeeded; want a verification error")
	}
	// Without a client certificate the server refuses (client-cert-auth).
	other := testcerts.NewCA(t).Issue(t, "intruder", []string{dnsName})
	foreign := target
	foreign.Cert, foreign.Key, foreign.Version = other.Cert, other.Key, "3"
	if _, err := r.Read(context.Background(), "ns/main-0", foreign); err == nil {
		t.Error("Read with a client certificate of another CA succeeded; want refusal")
	}
}

func TestReadPlainHTTP(t *testing.T) {
	ip := testetcd.FreeLoopbackIP(t)
	testetcd.Start(t, ip, "main-1", "main-1.etcd.test", nil)
	r := &etcdstatus.Reader{}
	defer r.Close()
	v, err := r.Read(context.Background(), "ns/main-1", etcdstatus.Target{Endpoint: "http://" + ip + ":2379"})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if v.ID == "" || v.LeaderID == "" {
		t.Errorf("view = %+v; want an ID and a leader", v)
	}
}

func TestTLSConfigRejectsGarbage(t *testing.T) {
	if _, err := etcdstatus.TLSConfig([]byte("x"), nil, nil, "a"); err == nil {
		t.Error("TLSConfig accepted a CA without PEM")
	}
	pair := testcerts.NewCA(t).Issue(t, "a", []string{"a"})
	if _, err := etcdstatus.TLSConfig(pair.CA, pair.Cert, []byte("nope"), "a"); err == nil {
		t.Error("TLSConfig accepted a broken key")
	}
}
