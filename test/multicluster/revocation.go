package multicluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// RevocationSpecInput configures RevocationSpec.
type RevocationSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Etcdfed is the CLI binary (client-cert, client-cert revoke).
	Etcdfed string
	// UpgradeHub restarts the hub on the build under test; the ring was
	// created by a hub from before revocation lists.
	UpgradeHub func(ctx context.Context) error
}

// RevocationSpec: a ring created by a hub from before revocation lists
// (no list in the members' Secrets, etcd without --client-crl-file) is
// rolled onto them once the hub is upgraded: every member restarted
// exactly once, one at a time, until status.revocation says every member
// runs with the list. Then a root certificate `etcdfed client-cert`
// issued, which reads and writes, is revoked with `etcdfed client-cert
// revoke --serial` (the serial client-cert printed): every member refuses
// its next connection, while another root certificate of the same CA
// keeps working and a connection the revoked certificate opened before
// stays open (etcd checks at the handshake). All under the recorded
// workload: linearizable, nothing acknowledged lost, every watch
// complete. Before, a root certificate could not be revoked short of a CA
// rotation: it kept connecting.
func RevocationSpec(ctx context.Context, in RevocationSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	must := fatalOnError(t)
	ec, err := in.Etcd.Get(ctx, hub)
	must(err)
	objects := func() map[string]*etcdfedv1.EtcdMember {
		out := map[string]*etcdfedv1.EtcdMember{}
		for _, m := range ec.Status.Members {
			obj := &etcdfedv1.EtcdMember{}
			must(memberCluster(t, in.Topology, m.Cluster).Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: in.Etcd.ObjectName(m.Name)}, obj))
			out[m.Name] = obj
		}
		return out
	}
	for name, obj := range objects() {
		if obj.Spec.TLS.RevocationList {
			t.Fatalf("%s runs with a revocation list before the hub was upgraded: the ring is not one from before", name)
		}
	}
	// pods are the members' pods' UIDs; a pod between its deletion and
	// the spoke's new one (a roll) is left out.
	pods := func() map[string]types.UID {
		out := map[string]types.UID{}
		for _, m := range ec.Status.Members {
			p, err := memberCluster(t, in.Topology, m.Cluster).Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, in.Etcd.ObjectName(m.Name), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			must(err)
			out[m.Name] = p.UID
		}
		return out
	}
	before := pods()
	elections := StartElectionWatch(ctx, t, in.Etcd.Client, ec)
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "revocation/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)

	// 1. The hub upgraded: the one roll onto the list.
	upgraded := time.Now()
	must(in.UpgradeHub(ctx))
	replaced := map[string]int{}
	must(poll(ctx, 10*time.Minute, "every member restarted onto the revocation list", func(ctx context.Context) (string, error) {
		now := pods()
		for name, uid := range now {
			if uid != before[name] {
				replaced[name]++
				before[name] = uid
			}
		}
		for name, obj := range objects() {
			if !obj.Spec.TLS.RevocationList || !obj.Spec.TLS.PeerRevocationList || obj.Status.ObservedGeneration != obj.Generation {
				return name + " not yet on the list (client and peer ports)", nil
			}
		}
		got, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		if rs := got.Status.Revocation; rs == nil || rs.MembersCurrent != rs.MembersTotal || rs.MembersTotal != int32(len(ec.Status.Members)) || got.Status.Operation != nil {
			return fmt.Sprintf("status.revocation %+v, operation %v", rs, got.Status.Operation), nil
		}
		return "", nil
	}))
	for name, n := range replaced {
		if n > 1 {
			t.Errorf("%s's pod was replaced %d times by the roll onto the list; want once", name, n)
		}
	}
	t.Logf("hub upgraded: every member runs with the revocation list %.1fs later (%d pods replaced)", time.Since(upgraded).Seconds(), len(replaced))

	// 2. A root certificate issued by `etcdfed client-cert`, revoked by
	// the serial it printed.
	dir := t.TempDir()
	base := []string{"--kubeconfig", hub.Kubeconfig, "-n", in.Etcd.Namespace}
	out := runCLI(ctx, t, in.Etcdfed, append([]string{"client-cert", in.Etcd.Name, "--out", filepath.Join(dir, "stolen")}, base...)...)
	m := regexp.MustCompile(`(?m)^# serial ([0-9a-f]+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("etcdfed client-cert printed no serial:\n%s", out)
	}
	serial := m[1]
	stolen := readLeaf(t, filepath.Join(dir, "stolen"))
	if got := certSerial(t, stolen.CertPEM); got != serial {
		t.Fatalf("client-cert printed serial %s; its certificate's is %s", serial, got)
	}
	runCLI(ctx, t, in.Etcdfed, append([]string{"client-cert", in.Etcd.Name, "--out", filepath.Join(dir, "kept")}, base...)...)
	kept := readLeaf(t, filepath.Join(dir, "kept"))
	caPEM, err := os.ReadFile(filepath.Join(dir, "stolen", pki.FileCA))
	must(err)
	endpoints := in.Etcd.Client.Endpoints
	for _, e := range endpoints {
		if err := putWith(ctx, in, caPEM, stolen, e); err != nil {
			t.Fatalf("the root certificate before its revocation, at %s: %v", e, err)
		}
	}
	// A connection opened before the revocation, kept open.
	open := connectWith(t, in, caPEM, stolen, endpoints[0])
	if err := putOn(ctx, open); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	runCLI(ctx, t, in.Etcdfed, append([]string{"client-cert", "revoke", in.Etcd.Name, "--serial", strings.ToUpper(serial)}, base...)...)
	must(poll(ctx, 2*time.Minute, "every member runs with the list that revokes "+serial, func(ctx context.Context) (string, error) {
		got, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		// At least the one revoked: the hub's own client certificates it
		// replaced are listed too, until they expire.
		if rs := got.Status.Revocation; rs == nil || rs.Revoked < 1 || rs.MembersCurrent != rs.MembersTotal {
			return fmt.Sprintf("status.revocation %+v", rs), nil
		}
		return "", nil
	}))
	listedAt := time.Now()
	for _, e := range endpoints {
		must(poll(ctx, 2*time.Minute, "a new connection of the revoked certificate refused at "+e, func(ctx context.Context) (string, error) {
			if err := putWith(ctx, in, caPEM, stolen, e); err == nil {
				return "served", nil
			}
			return "", nil
		}))
		if err := putWith(ctx, in, caPEM, kept, e); err != nil {
			t.Errorf("another root certificate of the same CA at %s after the revocation: %v", e, err)
		}
	}
	t.Logf("revoked %s: every member ran with the list %.1fs after `client-cert revoke`, and refused the certificate %.1fs after that (the Secret volume's refresh)",
		serial, listedAt.Sub(revokedAt).Seconds(), time.Since(listedAt).Seconds())
	if err := putOn(ctx, open); err != nil {
		t.Errorf("the revoked certificate's connection opened before: %v (expected to stay open: etcd checks at the handshake)", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	must(w.WaitForProgress(pctx, 20))
	cancel()
	t.Logf("client requests failed: %d; longest gap between acknowledged writes %s; %s",
		w.Failed(), w.MaxWriteGap().Round(time.Millisecond), elections.FailuresWithinElections(t, w))
	checkWorkload(ctx, t, w)
}

func readLeaf(t testing.TB, dir string) *pki.Leaf {
	t.Helper()
	c, err := os.ReadFile(filepath.Join(dir, pki.FileClientCert))
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(filepath.Join(dir, pki.FileClientKey))
	if err != nil {
		t.Fatal(err)
	}
	return &pki.Leaf{CertPEM: c, KeyPEM: k}
}

// connectWith is a client of one endpoint with leaf, kept open.
func connectWith(t testing.TB, in RevocationSpecInput, caPEM []byte, leaf *pki.Leaf, endpoint string) *clientv3.Client {
	t.Helper()
	cfg, err := pki.ClientTLS(caPEM, leaf)
	if err != nil {
		t.Fatal(err)
	}
	c, err := EtcdClient(EtcdClientConfig{Endpoints: []string{endpoint}, DNSServers: in.Topology.DNSServers, TLS: cfg, DialTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func putOn(ctx context.Context, c *clientv3.Client) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Put(pctx, "revocation-probe", time.Now().String())
	return err
}

// putWith writes through a new connection to endpoint with leaf: a new
// TLS handshake each time.
func putWith(ctx context.Context, in RevocationSpecInput, caPEM []byte, leaf *pki.Leaf, endpoint string) error {
	cfg, err := pki.ClientTLS(caPEM, leaf)
	if err != nil {
		return err
	}
	c, err := EtcdClient(EtcdClientConfig{Endpoints: []string{endpoint}, DNSServers: in.Topology.DNSServers, TLS: cfg, DialTimeout: 3 * time.Second})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	return putOn(ctx, c)
}

// buildHubBefore builds the hub of the commit before the first that added
// marker to file (how the scenario gets a hub from before a feature):
// the tree of that commit (git archive) built into path.
func buildHubBefore(path, file, marker string) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	out, err := exec.Command("git", "-C", root, "log", "--reverse", "--format=%H", "-S", marker, "--", file).Output()
	if err != nil {
		return fmt.Errorf("find the commit that added %q to %s: %w", marker, file, err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if first == "" {
		return fmt.Errorf("no commit added %q to %s", marker, file)
	}
	src, err := os.MkdirTemp("", "multicluster-oldhub-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(src) }()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s^ | tar -x -C %q", root, first, src))
	if b, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("extract the tree before %s: %w\n%s", first, err, b)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", path, "-ldflags", "-X github.com/etcdfed/etcdfed/internal/version.Version=before-"+first[:12], "./cmd/hub")
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the hub before %s: %w\n%s", first, err, b)
	}
	return nil
}
