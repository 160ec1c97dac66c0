package pki_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestRotationOnRealEtcd walks a CA rotation on a real three-member etcd
// cluster the way the hub does: each of the three authority changes, then
// every member restarted one at a time on the bundle and a certificate of
// the issuing CA (its files written just before the restart). After every
// restart every member must answer with a leader through a client of the
// issuing CA trusting the bundle, and a write must go through; at the end
// a client of the old CA is refused.
func TestRotationOnRealEtcd(t *testing.T) {
	now := time.Now()
	old, err := pki.NewCA("old", now)
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, CA: old, Name: "rot"})
	next, err := pki.NewCA("new", now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := &pki.Authority{Signer: old}
	steps := []struct {
		name string
		do   func(*pki.Authority) (*pki.Authority, error)
	}{
		{"AddCA", func(a *pki.Authority) (*pki.Authority, error) { return a.BeginRotation(next), nil }},
		{"SwitchCA", func(a *pki.Authority) (*pki.Authority, error) { return a.SwitchSigner() }},
		{"DropCA", func(a *pki.Authority) (*pki.Authority, error) { return a.DropPrevious(), nil }},
	}
	writes := 0
	var took []string
	for _, s := range steps {
		start := time.Now()
		if a, err = s.do(a); err != nil {
			t.Fatal(err)
		}
		for _, m := range c.Members {
			leaf, err := a.Signer.IssueMember(pki.MemberRequest{Member: m.Name, DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, now)
			if err != nil {
				t.Fatal(err)
			}
			c.WriteTLS(m, a.Bundle(), leaf)
			c.Restart(m)
			if err := healthy(ctx, c, a); err != nil {
				t.Fatalf("%s, after restarting %s: %v", s.name, m.Name, err)
			}
			writes++
		}
		took = append(took, fmt.Sprintf("%s %.1fs", s.name, time.Since(start).Seconds()))
	}
	stale, err := old.IssueClient("stale", now)
	if err != nil {
		t.Fatal(err)
	}
	cl := client(t, c, next.CertPEM, stale)
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := cl.Put(sctx, "stale", "x"); err == nil {
		t.Fatal("a client with a certificate of the old CA wrote after the rotation")
	}
	t.Logf("%d restarts, every one with the ring healthy and writable after it; per step, its three restarts: %v", writes, took)
}

// healthy: every member answers a status call with a leader, and a write
// goes through, with a client of a's issuing CA trusting a's bundle.
func healthy(ctx context.Context, c *etcdtest.Cluster, a *pki.Authority) error {
	leaf, err := a.Signer.IssueClient("check", time.Now())
	if err != nil {
		return err
	}
	cl := client(nil, c, a.Bundle(), leaf)
	defer func() { _ = cl.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := func() error {
			for _, m := range c.Members {
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				st, err := cl.Status(sctx, m.ClientURL)
				cancel()
				if err != nil {
					return fmt.Errorf("%s: %w", m.Name, err)
				}
				if st.Leader == 0 {
					return fmt.Errorf("%s: no leader", m.Name)
				}
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := cl.Put(pctx, "rotation", time.Now().String())
			return err
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func client(t *testing.T, c *etcdtest.Cluster, caPEM []byte, leaf *pki.Leaf) *clientv3.Client {
	cfg, err := pki.ClientTLS(caPEM, leaf)
	if err != nil {
		panic(err)
	}
	cfg.MinVersion = tls.VersionTLS12
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	if t != nil {
		t.Cleanup(func() { _ = cl.Close() })
	}
	return cl
}
