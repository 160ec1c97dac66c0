package pki_test

import (
	"context"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// TestRevocationListOnRealEtcd: what stops a stolen root certificate
// without a CA rotation. A real etcd runs with --client-crl-file; a list
// from RevocationList naming the stolen certificate's serial, written in
// place while etcd runs, refuses that certificate's next connection while
// another root certificate of the same CA and common name keeps working.
// A connection the stolen certificate opened before stays open: etcd
// checks the list at the handshake only.
func TestRevocationListOnRealEtcd(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("crl", now)
	if err != nil {
		t.Fatal(err)
	}
	crl := filepath.Join(t.TempDir(), "ca.crl")
	write := func(serials ...*big.Int) {
		t.Helper()
		b, err := ca.RevocationList(serials, int64(len(serials)+1), time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		tmp := crl + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, crl); err != nil {
			t.Fatal(err)
		}
	}
	write() // etcd refuses every client while the file is missing
	c := etcdtest.Start(t, etcdtest.Options{Members: 1, CA: ca, Name: "crl", ExtraArgs: []string{"--client-crl-file=" + crl}})

	connect := func(leaf *pki.Leaf) *clientv3.Client {
		t.Helper()
		tc, err := pki.ClientTLS(ca.CertPEM, leaf)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: tc, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	put := func(cl *clientv3.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := cl.Put(ctx, "k", "v")
		return err
	}
	stolen, err := ca.IssueClient("root", now)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := ca.IssueClient("root", now)
	if err != nil {
		t.Fatal(err)
	}
	open := connect(stolen)
	if err := put(open); err != nil {
		t.Fatalf("before revocation: %v", err)
	}
	serial, ok := pki.Serial(stolen.CertPEM)
	if !ok {
		t.Fatal("no serial")
	}
	write(serial)
	if err := put(connect(stolen)); err == nil {
		t.Error("a revoked certificate's new connection was served")
	}
	if err := put(connect(kept)); err != nil {
		t.Errorf("another certificate of the same CA and name after the revocation: %v", err)
	}
	if err := put(open); err != nil {
		t.Errorf("the revoked certificate's connection opened before: %v (expected to stay open: etcd checks at the handshake)", err)
	}
}
