package etcdtest

import (
	"context"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/hub/pki"
)

// StartMember runs a single member from an existing data directory (for
// example one restored from a snapshot) with the given name and URLs and
// waits until it answers.
func StartMember(t testing.TB, name, dataDir, peerURL, clientURL string) *Cluster {
	t.Helper()
	return StartMemberOn(t, "", name, dataDir, peerURL, clientURL)
}

// StartMemberOn is StartMember with the etcd binary of bin/ to run
// (Options.Binary).
func StartMemberOn(t testing.TB, binary, name, dataDir, peerURL, clientURL string) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	m := &Member{Name: name, DataDir: dataDir, PeerURL: peerURL, ClientURL: clientURL, AdvertisedClientURL: clientURL, dir: t.TempDir(), binary: binary}
	m.args = []string{
		"--name=" + name, "--data-dir=" + dataDir,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--log-level=error",
	}
	c.Members = []*Member{m}
	c.startMember(m)
	if err := c.WaitHealthy(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	return c
}

// StartMemberAs is StartMember with client and peer TLS from ca (URLs
// https://), and a client certificate of commonName for NewClient: the
// etcd user a data directory restored from a ring with authentication on
// needs (root).
func StartMemberAs(t testing.TB, name, dataDir, peerURL, clientURL string, ca *pki.CA, commonName string) *Cluster {
	t.Helper()
	leaf, err := ca.IssueClient(commonName, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, CA: ca, Client: leaf}
	m := &Member{Name: name, DataDir: dataDir, PeerURL: peerURL, ClientURL: clientURL, AdvertisedClientURL: clientURL, dir: t.TempDir()}
	m.args = append([]string{
		"--name=" + name, "--data-dir=" + dataDir,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--log-level=error",
	}, c.tlsArgs(t, m)...)
	c.Members = []*Member{m}
	c.startMember(m)
	if err := c.WaitHealthy(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	return c
}
