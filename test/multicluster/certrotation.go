package multicluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// MemberCertRotationSpecInput configures MemberCertRotationSpec.
type MemberCertRotationSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
}

// MemberCertRotationSpec rotates every member's certificate, one member
// at a time, under the recorded workload, the way renewal before expiry
// happens: the member's Secret is given a certificate of the ring's CA
// that expires within pki.RenewBefore, the hub renews it (a fresh
// certificate valid for pki.LeafValidity), and etcd serves the renewed
// certificate on new connections (it reads its certificate files at each
// handshake; the Secret volume follows the Secret). It requires: the hub
// renewed every member's certificate, every member served it, no pod was
// restarted, and no client request failed beyond one election
// (ElectionWatch: with no restart, only a leader change excuses one). The
// history must be
// linearizable, with no acknowledged write lost and every watcher
// complete.
func MemberCertRotationSpec(ctx context.Context, in MemberCertRotationSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ReadCA(ctx, hub.Client, ec)
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]types.UID{}
	for _, m := range ec.Status.Members {
		p, err := memberCluster(t, in.Topology, m.Cluster).Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, in.Etcd.ObjectName(m.Name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[m.Name] = p.UID
	}
	elections := StartElectionWatch(ctx, t, in.Etcd.Client, ec)
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "certs/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	failedBefore := w.Failed()

	for _, m := range ec.Status.Members {
		secrets := memberCluster(t, in.Topology, m.Cluster).Clientset.CoreV1().Secrets(etcdfedv1.DefaultRingNamespace)
		name := pki.MemberSecretName(in.Etcd.ObjectName(m.Name))
		sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		original := certSerial(t, sec.Data[pki.KeyCert])
		// Issued long ago, as the hub issues them (the member's name and
		// the ring's peer name, which peer ports require): it expires
		// within RenewBefore.
		expiring, err := ca.IssueMember(pki.MemberRequest{Member: m.Name, DNSNames: []string{MemberHost(m.Name, in.Etcd.Domain), pki.PeerName(in.Etcd.Domain)}}, time.Now().Add(-pki.LeafValidity+pki.RenewBefore/3))
		if err != nil {
			t.Fatal(err)
		}
		sec.Data[pki.KeyCert], sec.Data[pki.KeyKey] = expiring.CertPEM, expiring.KeyPEM
		if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		placed := time.Now()
		expiringSerial := certSerial(t, expiring.CertPEM)
		renewed, err := WaitForCertRenewed(ctx, t, secrets, name, m.Name+"'s", []string{original, expiringSerial}, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		renewedAt := time.Now()
		if err := WaitForServedSerial(ctx, in, m.Name, renewed, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: expiring certificate placed; the hub renewed it %.1fs later; etcd served the renewed one %.1fs after that", m.Name, renewedAt.Sub(placed).Seconds(), time.Since(renewedAt).Seconds())
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := w.WaitForProgress(pctx, 20); err != nil {
		t.Fatal(err)
	}
	cancel()
	for _, m := range ec.Status.Members {
		p, err := memberCluster(t, in.Topology, m.Cluster).Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, in.Etcd.ObjectName(m.Name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.UID != pods[m.Name] {
			t.Errorf("%s's pod was replaced by the rotation", m.Name)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				t.Errorf("%s's container %s restarted %d time(s)", m.Name, cs.Name, cs.RestartCount)
			}
		}
	}
	failed := w.Failed() - failedBefore
	t.Logf("every member's certificate rotated; client requests failed meanwhile: %d; longest gap between acknowledged writes %s; %s",
		failed, w.MaxWriteGap().Round(time.Millisecond), elections.FailuresWithinElections(t, w))
	checkWorkload(ctx, t, w)
}

func certSerial(t testing.TB, certPEM []byte) string {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatalf("no PEM certificate in %q", certPEM)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.Text(16)
}

// servedSerial is the serial of the certificate a member serves on a new
// client connection.
// WaitForCertRenewed waits until the certificate in the Secret name
// (whose it is, for the message) has a serial other than old's, and
// returns it (timeout: 2 minutes when zero).
func WaitForCertRenewed(ctx context.Context, t testing.TB, secrets typedcorev1.SecretInterface, name, whose string, old []string, timeout time.Duration) (string, error) {
	var renewed string
	err := poll(ctx, orDefault(timeout, 2*time.Minute), "the hub renews "+whose+" expiring certificate", func(ctx context.Context) (string, error) {
		sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		s := certSerial(t, sec.Data[pki.KeyCert])
		if slices.Contains(old, s) {
			return "serial " + s, nil
		}
		renewed = s
		return "", nil
	})
	return renewed, err
}

// WaitForServedSerial waits until the member serves the certificate with
// the serial (timeout: 2 minutes when zero).
func WaitForServedSerial(ctx context.Context, in MemberCertRotationSpecInput, member, serial string, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, 2*time.Minute), member+" serves its renewed certificate", func(ctx context.Context) (string, error) {
		s, err := servedSerial(ctx, in, member)
		if err != nil {
			return err.Error(), nil
		}
		if s != serial {
			return "serves " + s + ", renewed " + serial, nil
		}
		return "", nil
	})
}

func servedSerial(ctx context.Context, in MemberCertRotationSpecInput, member string) (string, error) {
	cfg := in.Etcd.Client.TLS.Clone()
	host := MemberHost(member, in.Etcd.Domain)
	port := "2379"
	for _, e := range in.Etcd.Client.Endpoints {
		if u, err := url.Parse(e); err == nil && u.Hostname() == host && u.Port() != "" {
			port = u.Port()
		}
	}
	cfg.ServerName = host
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 3 * time.Second, Resolver: Resolver(in.Topology.DNSServers)}, Config: cfg}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", host, err)
	}
	defer func() { _ = conn.Close() }()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return "", fmt.Errorf("%s served no certificate", host)
	}
	return certs[0].SerialNumber.Text(16), nil
}
