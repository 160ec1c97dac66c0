package etcdtest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/hub/pki"
)

// GetAs asks for path (etcd's /health, /version) at addr over TLS on a new
// connection, presenting leaf and trusting ca: nil when it is served with
// 200. A new connection each time, so that what etcd checks at the
// handshake (its client CA, its revocation list, the peer port's rules)
// is checked again. With TLS 1.3 a server refuses a client certificate
// after the handshake, so a refusal may show on the first read.
func GetAs(ca *pki.CA, leaf *pki.Leaf, addr, path string) error {
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return err
	}
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// ReplaceFile writes data to path as a Secret's update reaches a pod's
// volume: a whole new file renamed over the old, so that etcd, which reads
// a revocation list on every handshake, never reads half of one.
func ReplaceFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}
