package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func mustCA(t *testing.T, now time.Time) *CA {
	t.Helper()
	ca, err := NewCA("main-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func parse(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMemberCertificateVerifiesForBothUsages(t *testing.T) {
	now := time.Now()
	ca := mustCA(t, now)
	leaf, err := ca.IssueMember(MemberRequest{Member: "main-0", DNSNames: []string{"main-0.etcd.example.com"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	cert := parse(t, leaf.CertPEM)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: "main-0.etcd.example.com", Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("usage %v: %v", usage, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "main-1.etcd.example.com", Roots: ca.Pool()}); err == nil {
		t.Error("certificate verified for another member's name")
	}
}

// A real mutual-TLS handshake on loopback: a member serves, a client
// certificate from the same CA connects; a certificate from another CA is
// refused.
func TestMutualTLSHandshake(t *testing.T) {
	now := time.Now()
	ca := mustCA(t, now)
	srv, err := ca.IssueMember(MemberRequest{Member: "main-0", DNSNames: []string{"main-0.etcd.example.com"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.WriteString(c, "ok")
			}()
		}
	}()

	dial := func(client *Leaf) error {
		cfg, err := ClientTLS(ca.CertPEM, client)
		if err != nil {
			return err
		}
		cfg.ServerName = "main-0.etcd.example.com"
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		if err != nil {
			return err
		}
		if string(b) != "ok" {
			return errors.New("no answer")
		}
		return nil
	}
	good, err := ca.IssueClient("etcdfed-hub", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(good); err != nil {
		t.Fatalf("client with our CA's certificate: %v", err)
	}
	other := mustCA(t, now)
	bad, err := other.IssueClient("intruder", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(bad); err == nil {
		t.Fatal("client with another CA's certificate was accepted")
	}
}

func TestNeedsRenewal(t *testing.T) {
	now := time.Now()
	ca := mustCA(t, now)
	names := []string{"main-0.etcd.example.com"}
	fresh, err := ca.IssueMember(MemberRequest{Member: "main-0", DNSNames: names}, now)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := mustCA(t, now).IssueMember(MemberRequest{Member: "main-0", DNSNames: names}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cert []byte
		dns  []string
		at   time.Time
		want bool
	}{
		{"fresh", fresh.CertPEM, names, now, false},
		{"fresh, SANs not checked", fresh.CertPEM, nil, now, false},
		{"missing", nil, names, now, true},
		{"garbage", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), names, now, true},
		{"other CA", foreign.CertPEM, names, now, true},
		{"near expiry", fresh.CertPEM, names, now.Add(LeafValidity - RenewBefore + time.Hour), true},
		{"names changed", fresh.CertPEM, []string{"main-0.other.example.com"}, now, true},
	} {
		if got, why := ca.NeedsRenewal(tc.cert, tc.dns, tc.at); got != tc.want {
			t.Errorf("%s: NeedsRenewal = %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}

func TestLoadCARejectsLeafAndMismatchedKey(t *testing.T) {
	now := time.Now()
	ca := mustCA(t, now)
	leaf, err := ca.IssueClient("user", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(leaf.CertPEM, leaf.KeyPEM); !errors.Is(err, ErrInvalidCA) {
		t.Errorf("leaf accepted as CA: %v", err)
	}
	other := mustCA(t, now)
	if _, err := LoadCA(ca.CertPEM, other.KeyPEM); !errors.Is(err, ErrInvalidCA) {
		t.Errorf("mismatched key accepted: %v", err)
	}
	if _, err := LoadCA(ca.CertPEM, ca.KeyPEM); err != nil {
		t.Errorf("own CA rejected: %v", err)
	}
}

func TestIPSANs(t *testing.T) {
	now := time.Now()
	ca := mustCA(t, now)
	leaf, err := ca.IssueMember(MemberRequest{Member: "m", DNSNames: []string{"m.x"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := parse(t, leaf.CertPEM).IPAddresses; len(got) != 1 || !got[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("IP SANs = %v", got)
	}
}
