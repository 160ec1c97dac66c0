package multicluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/internal/resolverenv"
)

// newExternalCA generates a CA of the test's own, as an existing etcd
// cluster's (kubeadm's etcd/ca.crt and ca.key): an ECDSA key in SEC 1
// form, made with crypto/x509 alone, not by etcdfed's pki (which only
// loads it, as the hub does from the Secret, to issue the originals'
// certificates).
func newExternalCA(t testing.TB) *pki.CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca (outside etcdfed)"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// startExternalEtcd starts an etcd cluster outside etcdfed: real etcd
// processes (bin/etcd, dev/etcdtest) on loopback, TLS on both ports
// with the test's own CA, their resolver pointed at the ring's DNS
// servers (a cluster to be adopted must resolve the ring's names: its
// members dial the new members' peer URLs). skipSAN: peer connections
// come from addresses their certificates do not carry (loopback), as the
// ring's members are told with spec.tls.peerSkipClientSANVerification.
func startExternalEtcd(t testing.TB, members int, dnsServers []string, skipSAN bool) *etcdtest.Cluster {
	t.Helper()
	var extra []string
	if skipSAN {
		extra = append(extra, "--peer-skip-client-san-verification")
	}
	return etcdtest.Start(t, etcdtest.Options{Members: members, Name: "orig", CA: newExternalCA(t), ExtraArgs: extra,
		Env: []string{resolverenv.EnvVar + "=" + strings.Join(dnsServers, ",")}})
}

// externalClientConfig reaches x (and extra endpoints) with x's client
// certificate.
func externalClientConfig(t testing.TB, x *etcdtest.Cluster, extra ...string) EtcdClientConfig {
	t.Helper()
	cfg, err := pki.ClientTLS(x.CA.CertPEM, x.Client)
	if err != nil {
		t.Fatal(err)
	}
	return EtcdClientConfig{Endpoints: append(x.Endpoints(), extra...), TLS: cfg}
}

// AdoptSpecInput is an etcd cluster outside etcdfed and the ring that
// adopts it.
type AdoptSpecInput struct {
	T        testing.TB
	Topology *Topology
	// Namespace, Name and Domain of the EtcdCluster; Replicas its size.
	Namespace, Name, Domain string
	Replicas                int
	// Originals is the size of the cluster started outside etcdfed.
	Originals int
	// Keys written before the adoption, checked after it.
	Keys int
	// Etcdfed is the CLI, whose status is checked in the Joined phase
	// ("" skips it).
	Etcdfed string
	// AuthOn turns etcd authentication on in the cluster outside etcdfed
	// before the adoption (user root with the root role, as an
	// administrator does): the hub is given root's client certificate
	// (spec.adopt.clientSecretName) and spec.tls.auth is Enabled; the
	// workload and the test's clients are root.
	AuthOn bool
	// ThroughCommand creates the adoption with `etcdfed adopt
	// --check-etcd` (files for the CA and the client certificate, as an
	// administrator has them; the test reaches the originals as the hub
	// does) and retires the originals with `etcdfed adopt --retire`,
	// instead of writing the objects; Etcdfed is required.
	ThroughCommand bool
}

// AdoptSpec starts an etcd cluster outside etcdfed (its own CA, TLS,
// holding Keys keys and serving the recorded workload, whose client has
// the old endpoints and the ring's static names), adopts it into a ring of
// Replicas members (spec.adopt, retire off), waits until they are all
// voters (phase Joined), then sets retire and waits until every original
// is retired (phase Complete) and the members require the ring's peer
// name again. It checks: the same cluster ID, every key present, the
// originals gone from etcd's member list, failure tolerance never 0 at any
// sampled moment, and the workload linearizable, nothing acknowledged
// lost, every watch complete. It returns the ring, and reports the time per member joined and
// retired and the longest gap between acknowledged writes.
func AdoptSpec(ctx context.Context, in AdoptSpecInput) *ManagedEtcd {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	x := startExternalEtcd(t, in.Originals, in.Topology.DNSServers, !in.Topology.PeerSourceIsPodIP)
	if in.AuthOn {
		// From here x.Client is root's certificate: the workload's and
		// every client's of the test.
		if _, err := x.EnableAuth(ctx); err != nil {
			t.Fatal(err)
		}
	}
	oc, err := EtcdClient(externalClientConfig(t, x))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = oc.Close() }()
	var clusterID uint64
	for i := range in.Keys {
		resp, err := oc.Put(ctx, fmt.Sprintf("adopt/seed/%05d", i), fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		clusterID = resp.Header.ClusterId
	}
	list, err := oc.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var originalIDs []uint64
	for _, m := range list.Members {
		originalIDs = append(originalIDs, m.ID)
	}
	t.Logf("etcd cluster outside etcdfed: %d members, cluster ID %x, %d keys written", len(list.Members), clusterID, in.Keys)

	// The ring's static names, which clients move to; the workload's
	// client has both from the start (names that do not resolve yet are
	// dialled in vain until they do).
	var ringEndpoints []string
	for i := range in.Replicas {
		ringEndpoints = append(ringEndpoints, fmt.Sprintf("https://%s:%d", MemberHost(fmt.Sprintf("%s-%d", in.Name, i), in.Domain), etcdfedv1.DefaultClientPort))
	}
	cfg := externalClientConfig(t, x, ringEndpoints...)
	cfg.DNSServers = in.Topology.DNSServers
	m := &ManagedEtcd{Namespace: in.Namespace, Name: in.Name, Domain: in.Domain, Client: cfg}
	// No watcher per endpoint: the old endpoints end with their members.
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: cfg, Prefix: fmt.Sprintf("adopt-%d/", time.Now().UnixNano())})
	waitForWorkloadProgress(ctx, t, w)

	if err := ensureNamespace(ctx, hub, in.Namespace); err != nil {
		t.Fatal(err)
	}
	spec := etcdfedv1.EtcdClusterSpec{
		Replicas: int32(in.Replicas),
		Version:  "3.6.16",
		DNS:      etcdfedv1.DNSSpec{Domain: in.Domain, TTLSeconds: ptrTo[int32](5)},
		TLS: etcdfedv1.TLSSpec{CASecretName: in.Name + "-old-ca", Auth: etcdfedv1.AuthDisabled,
			PeerSkipClientSANVerification: !in.Topology.PeerSourceIsPodIP},
		FailurePolicy: etcdfedv1.FailurePolicy{MemberGracePeriod: &metav1.Duration{Duration: 2 * time.Minute}, ZoneGracePeriod: &metav1.Duration{Duration: 30 * time.Second}},
		Adopt:         &etcdfedv1.AdoptSpec{Endpoints: x.Endpoints()},
	}
	if in.AuthOn {
		spec.TLS.Auth = etcdfedv1.AuthEnabled
	}
	sampler := startToleranceSampler(ctx, t, hub, m, 200*time.Millisecond)
	start := time.Now()
	if err := createAdoption(ctx, t, in, m, x, spec); err != nil {
		sampler.finish()
		t.Fatalf("create the adopting EtcdCluster: %v", err)
	}
	t.Cleanup(func() {
		// A failed adoption's EtcdCluster goes without waiting, so that
		// the next scenario has the clusters to itself.
		if ec, err := m.Get(context.Background(), hub); err == nil && t.Failed() {
			_ = hub.Client.Delete(context.Background(), ec)
		}
	})
	if _, err := WaitForHubEvent(ctx, WaitForHubEventInput{Hub: hub, Etcd: m, Query: EventQuery{Reasons: []string{etcdfedv1.EventAdopted}, NoteHas: []string{hexID(clusterID)}}}); err != nil {
		sampler.finish()
		t.Fatal(err)
	}
	// The hub killed in the middle of a member's join resumes it.
	killHubDuring(ctx, t, in.Topology, m, etcdfedv1.AdoptionJoined, etcdfedv1.OperationAdd, "StartMember", "Promote")
	joined, err := waitAdoption(ctx, hub, m, etcdfedv1.AdoptionJoined, in.Replicas, 10*time.Minute)
	if err != nil {
		sampler.finish()
		t.Fatal(err)
	}
	joinTime := time.Since(start)
	if got := joined.Status.ClusterID; got != hexID(clusterID) {
		t.Errorf("status.clusterID %s, want the adopted cluster's %x", got, clusterID)
	}
	if err := poll(ctx, time.Minute, "Progressing saying that retirement waits for spec.adopt.retire", func(ctx context.Context) (string, error) {
		got, err := m.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionProgressing); c == nil || !strings.Contains(c.Message, "spec.adopt.retire") {
			return fmt.Sprintf("Progressing: %+v", c), nil
		}
		return "", nil
	}); err != nil {
		t.Error(err)
	}
	if in.Etcdfed != "" {
		out, err := exec.CommandContext(ctx, in.Etcdfed, "status", in.Name, "-n", in.Namespace, "--kubeconfig", hub.Kubeconfig).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Adoption: Joined: 0/"+fmt.Sprint(in.Originals)+" retired") || !strings.Contains(string(out), "adopt\":{\"retire\":true}") ||
			!strings.Contains(string(out), "etcdfed adopt "+in.Name+" -n "+in.Namespace+" --retire") {
			t.Errorf("etcdfed status in the Joined phase (%v) does not show the adoption and how to retire:\n%s", err, out)
		} else {
			t.Logf("etcdfed status, joined:\n%s", out)
		}
	}
	progress(ctx, t, w, 50, 30*time.Second)

	retireStart := time.Now()
	if err := retireOriginals(ctx, t, in, m); err != nil {
		sampler.finish()
		t.Fatal(err)
	}
	// And in the middle of the retirements.
	killHubDuring(ctx, t, in.Topology, m, etcdfedv1.AdoptionComplete, etcdfedv1.OperationRetire)
	done, err := waitAdoption(ctx, hub, m, etcdfedv1.AdoptionComplete, in.Replicas, 10*time.Minute)
	if err != nil {
		sampler.finish()
		t.Fatal(err)
	}
	retireTime := time.Since(retireStart)
	progress(ctx, t, w, 50, 30*time.Second)
	ops := sampler.finish()
	w.Stop()
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("adopted: %d etcdfed members joined in %.1fs, %d originals retired in %.1fs; longest gap between acknowledged writes %s (at %s); %d samples of etcd's member list, min failure tolerance %d, at most %d voters",
		in.Replicas, joinTime.Seconds(), in.Originals, retireTime.Seconds(), gap.Round(time.Millisecond), gapAt.Format("15:04:05.000"), sampler.samples, sampler.minTol, sampler.maxVoters)
	// The sampler sees the operations it happens to sample (a follower's
	// Retire may take less than its interval): for the timing only. The
	// hub's events count them.
	for _, k := range sampler.ops {
		t.Logf("  %s: %.1fs", k, ops[k].Seconds())
	}
	evs, err := ListHubEvents(ctx, hub, m, EventQuery{Reasons: []string{etcdfedv1.EventMemberPromoted, etcdfedv1.EventMemberRetired}})
	if err != nil {
		t.Fatal(err)
	}
	byReason := eventsByReason(evs)
	// A Retire is told at its end, by the hub that ends it: a hub killed
	// after telling it and before recording the end tells it again, in
	// the same words.
	retired := slices.Compact(slices.Sorted(slices.Values(byReason[etcdfedv1.EventMemberRetired])))
	if p, r := byReason[etcdfedv1.EventMemberPromoted], retired; len(p) != in.Replicas || len(r) != in.Originals {
		t.Errorf("events: %d promoted %q, %d retired %q; want %d and %d", len(p), p, len(r), r, in.Replicas, in.Originals)
	} else {
		t.Logf("retired: %q", r)
	}
	for _, z := range sampler.zero {
		t.Errorf("no failure tolerance at %s", z)
	}
	if sampler.maxVoters != in.Replicas+in.Originals {
		t.Errorf("at most %d voters sampled, want %d (every etcdfed member a voter before the first original is retired)", sampler.maxVoters, in.Replicas+in.Originals)
	}

	// The same cluster, every key, no original left; through the ring's
	// names only.
	rc, err := EtcdClient(EtcdClientConfig{Endpoints: done.Status.Endpoints, DNSServers: in.Topology.DNSServers, TLS: cfg.TLS})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	got, err := rc.Get(ctx, "adopt/seed/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != int64(in.Keys) || got.Header.ClusterId != clusterID {
		t.Errorf("after the adoption: %d seed keys in cluster %x, want %d in %x", got.Count, got.Header.ClusterId, in.Keys, clusterID)
	}
	after, err := rc.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, mem := range after.Members {
		if slices.Contains(originalIDs, mem.ID) {
			t.Errorf("original member %s [%x] still in etcd's member list", mem.Name, mem.ID)
		}
	}
	if len(after.Members) != in.Replicas {
		t.Errorf("%d members after the adoption, want %d", len(after.Members), in.Replicas)
	}
	if in.AuthOn {
		checkAdoptedAuth(ctx, t, rc)
	}
	checkWorkload(ctx, t, w)

	// The originals are gone, so the members require the ring's peer name
	// again (issue 26), one roll each.
	peerStart := time.Now()
	if err := waitRequirePeerName(ctx, in.Topology, m, in.Replicas, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("members require the ring's peer name %.1fs after the last original's retirement", time.Since(peerStart).Seconds())
	m.Client = EtcdClientConfig{Endpoints: done.Status.Endpoints, DNSServers: in.Topology.DNSServers, TLS: cfg.TLS}
	return m
}

// createAdoption writes the CA Secret, the root client certificate's
// Secret (AuthOn) and the adopting EtcdCluster of spec, or has `etcdfed
// adopt` write them from files (ThroughCommand; the spec's DNS TTL and
// failure policy, which the command does not set, patched in at once).
func createAdoption(ctx context.Context, t testing.TB, in AdoptSpecInput, m *ManagedEtcd, x *etcdtest.Cluster, spec etcdfedv1.EtcdClusterSpec) error {
	hub := in.Topology.Hub
	if in.ThroughCommand {
		dir := t.TempDir()
		files := map[string][]byte{"ca.crt": x.CA.CertPEM, "ca.key": x.CA.KeyPEM, "client.crt": x.Client.CertPEM, "client.key": x.Client.KeyPEM}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				return err
			}
		}
		args := []string{"adopt", in.Name, "-n", in.Namespace, "--kubeconfig", hub.Kubeconfig, "--endpoints", strings.Join(spec.Adopt.Endpoints, ","),
			"--ca-cert", filepath.Join(dir, "ca.crt"), "--ca-key", filepath.Join(dir, "ca.key"), "--etcd-version", spec.Version, "--domain", spec.DNS.Domain,
			"--replicas", fmt.Sprint(spec.Replicas), "--auth", string(spec.TLS.Auth), fmt.Sprintf("--peer-skip-client-san-verification=%t", spec.TLS.PeerSkipClientSANVerification),
			"--check-etcd"}
		if in.AuthOn {
			args = append(args, "--client-cert", filepath.Join(dir, "client.crt"), "--client-key", filepath.Join(dir, "client.key"))
		}
		out, err := exec.CommandContext(ctx, in.Etcdfed, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("etcdfed %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("etcdfed adopt:\n%s", out)
		return patchSpec(ctx, hub, m, func(s *etcdfedv1.EtcdClusterSpec) {
			s.DNS.TTLSeconds, s.FailurePolicy = spec.DNS.TTLSeconds, spec.FailurePolicy
		})
	}
	secrets := []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: spec.TLS.CASecretName}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: x.CA.CertPEM, corev1.TLSPrivateKeyKey: x.CA.KeyPEM}}}
	if in.AuthOn {
		spec.Adopt.ClientSecretName = in.Name + "-old-root"
		secrets = append(secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: spec.Adopt.ClientSecretName}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: x.Client.CertPEM, corev1.TLSPrivateKeyKey: x.Client.KeyPEM}})
	}
	for _, sec := range secrets {
		if err := hub.Client.Create(ctx, sec); err != nil {
			return err
		}
	}
	return hub.Client.Create(ctx, &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name}, Spec: spec})
}

// retireOriginals sets spec.adopt.retire, or has `etcdfed adopt --retire`
// set it (ThroughCommand).
func retireOriginals(ctx context.Context, t testing.TB, in AdoptSpecInput, m *ManagedEtcd) error {
	if !in.ThroughCommand {
		return patchSpec(ctx, in.Topology.Hub, m, func(s *etcdfedv1.EtcdClusterSpec) { s.Adopt.Retire = true })
	}
	out, err := exec.CommandContext(ctx, in.Etcdfed, "adopt", in.Name, "-n", in.Namespace, "--kubeconfig", in.Topology.Hub.Kubeconfig, "--retire").CombinedOutput()
	if err != nil {
		return fmt.Errorf("etcdfed adopt --retire: %w\n%s", err, out)
	}
	t.Logf("etcdfed adopt --retire:\n%s", out)
	return nil
}

// checkAdoptedAuth: authentication is still on after an adoption of a
// cluster that had it on, and the hub added its own user as root through
// root's certificate (spec.adopt.clientSecretName), so that its
// controllers beside the reconciler (consumers' access, backups) get in.
func checkAdoptedAuth(ctx context.Context, t testing.TB, c *clientv3.Client) {
	t.Helper()
	if err := poll(ctx, time.Minute, "etcd authentication on, the hub's user a root", func(ctx context.Context) (string, error) {
		as, err := c.AuthStatus(ctx)
		if err != nil {
			return err.Error(), nil
		}
		if !as.Enabled {
			return "", fmt.Errorf("etcd authentication is off after the adoption of a cluster that had it on (spec.tls.auth Enabled)")
		}
		u, err := c.UserGet(ctx, etcdfedv1.EtcdHubUser)
		if err != nil {
			return fmt.Sprintf("user %s: %v", etcdfedv1.EtcdHubUser, err), nil
		}
		if !slices.Contains(u.Roles, "root") {
			return fmt.Sprintf("user %s has roles %v", etcdfedv1.EtcdHubUser, u.Roles), nil
		}
		return "", nil
	}); err != nil {
		t.Error(err)
	}
}

// waitAdoption waits until status.adoption is in phase with replicas
// ready members and no operation in flight.
func waitAdoption(ctx context.Context, hub *Cluster, m *ManagedEtcd, phase etcdfedv1.AdoptionPhase, replicas int, timeout time.Duration) (*etcdfedv1.EtcdCluster, error) {
	var ec *etcdfedv1.EtcdCluster
	err := poll(ctx, timeout, fmt.Sprintf("adoption of %s in phase %s", m.Name, phase), func(ctx context.Context) (string, error) {
		got, err := m.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		a := got.Status.Adoption
		switch {
		case a == nil:
			return describeEtcdCluster(got, "no status.adoption"), nil
		case a.Phase != phase:
			return describeEtcdCluster(got, fmt.Sprintf("adoption %s: %s", a.Summary, a.Message)), nil
		case int(got.Status.ReadyMembers) != replicas || got.Status.Operation != nil:
			return describeEtcdCluster(got, fmt.Sprintf("adoption %s, %d ready members", a.Summary, got.Status.ReadyMembers)), nil
		}
		ec = got
		return "", nil
	})
	return ec, err
}

// waitRequirePeerName waits until every member's object requires the
// ring's peer name and the ring is ready.
func waitRequirePeerName(ctx context.Context, topo *Topology, m *ManagedEtcd, replicas int, timeout time.Duration) error {
	return poll(ctx, timeout, fmt.Sprintf("every member of %s requiring the peer name", m.Name), func(ctx context.Context) (string, error) {
		ec, err := m.Get(ctx, topo.Hub)
		if err != nil {
			return "", err
		}
		var not []string
		for _, st := range ec.Status.Members {
			c := memberClusterOrNil(topo, st.Cluster)
			if c == nil {
				return "", fmt.Errorf("member cluster %s unknown", st.Cluster)
			}
			obj := &etcdfedv1.EtcdMember{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: m.ObjectName(st.Name)}, obj); err != nil {
				return err.Error(), nil
			}
			if !obj.Spec.TLS.RequirePeerName {
				not = append(not, st.Name)
			}
		}
		if len(not) > 0 {
			return fmt.Sprintf("not yet: %v", not), nil
		}
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: m.Namespace, Name: m.Name, Replicas: replicas, Timeout: 2 * time.Second}); err != nil {
			return "not ready", nil
		}
		return "", nil
	})
}

func hexID(id uint64) string { return fmt.Sprintf("%x", id) }

// killHubDuring SIGKILLs the hub as soon as status.operation is of type
// typ (at one of steps, when given), and says which step it hit; the
// scenario then waits for the operation's end as usual (the restarted hub
// resumes it from status.operation and etcd's member list). Nothing when
// the topology cannot kill the hub, or the adoption reached phase until
// (or two minutes passed) before such an operation was seen.
func killHubDuring(ctx context.Context, t testing.TB, topo *Topology, m *ManagedEtcd, until etcdfedv1.AdoptionPhase, typ etcdfedv1.OperationType, steps ...string) {
	t.Helper()
	if topo.KillHub == nil {
		t.Logf("the topology cannot kill the hub: no kill during %s", typ)
		return
	}
	var at string
	err := poll(ctx, 2*time.Minute, fmt.Sprintf("an operation %s %v", typ, steps), func(ctx context.Context) (string, error) {
		ec, err := m.Get(ctx, topo.Hub)
		if err != nil {
			return "", err
		}
		op := ec.Status.Operation
		if a := ec.Status.Adoption; op == nil && a != nil && a.Phase == until {
			return "", nil // missed: every operation of the kind ended between two looks
		}
		if op == nil || op.Type != typ || (len(steps) > 0 && !slices.Contains(steps, op.Step)) {
			return "not yet", nil
		}
		at = fmt.Sprintf("%s %s at step %s", op.Type, op.Member, op.Step)
		return "", nil
	})
	if err != nil || at == "" {
		t.Logf("no hub kill: no operation %s %v seen (%v)", typ, steps, err)
		return
	}
	if err := topo.KillHub(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the hub during %s", at)
}
