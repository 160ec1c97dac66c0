package multicluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
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
	"github.com/etcdfed/etcdfed/internal/testenv"
)

// externalCA is a CA of the test's own, as an existing etcd cluster's
// (kubeadm's etcd/ca.crt and ca.key): nothing of etcdfed's pki made it.
type externalCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newExternalCA() (*externalCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca (outside etcdfed)"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &externalCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}, nil
}

// issue signs a certificate for server and client use (etcd's peer
// certificates are both) with the given SANs.
func (ca *externalCA) issue(cn string, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: ips, DNSNames: dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// clientTLS is a client configuration with a certificate of the CA.
func (ca *externalCA) clientTLS(cn string) (*tls.Config, error) {
	certPEM, keyPEM, err := ca.issue(cn, nil, nil)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// externalEtcd is an etcd cluster started outside etcdfed: real etcd
// processes (bin/etcd) on loopback, TLS on both ports with the test's own
// CA, their resolver pointed at the ring's DNS servers (as a cluster that
// is to be adopted must resolve the ring's names: its members dial the
// new members' peer URLs).
type externalEtcd struct {
	ca        *externalCA
	names     []string
	clientURL []string
	peerURL   []string
	cmds      []*exec.Cmd
	exited    []chan struct{}
}

type externalEtcdInput struct {
	T          testing.TB
	Members    int
	DNSServers []string
	// SkipClientSANVerification: peer connections come from addresses
	// their certificates do not carry (loopback), as the ring's members
	// are told with spec.tls.peerSkipClientSANVerification.
	SkipClientSANVerification bool
}

// startExternalEtcd starts the cluster and waits until it answers; its
// processes are killed when the test ends (by pid).
func startExternalEtcd(ctx context.Context, in externalEtcdInput) *externalEtcd {
	t := in.T
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := newExternalCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	x := &externalEtcd{ca: ca}
	for i := range in.Members {
		x.names = append(x.names, fmt.Sprintf("orig-%d", i))
		x.clientURL = append(x.clientURL, "https://"+freeLoopbackPort(t))
		x.peerURL = append(x.peerURL, "https://"+freeLoopbackPort(t))
	}
	var initial []string
	for i, n := range x.names {
		initial = append(initial, n+"="+x.peerURL[i])
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, n := range x.names {
		md := filepath.Join(dir, n)
		if err := os.MkdirAll(md, 0o700); err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM, err := ca.issue(n, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile := filepath.Join(md, "tls.crt"), filepath.Join(md, "tls.key")
		if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{
			"--name", n, "--data-dir", filepath.Join(md, "data"),
			"--listen-client-urls", x.clientURL[i], "--advertise-client-urls", x.clientURL[i],
			"--listen-peer-urls", x.peerURL[i], "--initial-advertise-peer-urls", x.peerURL[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new", "--initial-cluster-token", "outside-etcdfed",
			"--cert-file", certFile, "--key-file", keyFile, "--client-cert-auth", "--trusted-ca-file", caFile,
			"--peer-cert-file", certFile, "--peer-key-file", keyFile, "--peer-client-cert-auth", "--peer-trusted-ca-file", caFile,
		}
		if in.SkipClientSANVerification {
			args = append(args, "--peer-skip-client-san-verification")
		}
		cmd := exec.Command(filepath.Join(bin, "etcd"), args...)
		cmd.Env = append(os.Environ(), "ETCDFED_DNS_SERVERS="+strings.Join(in.DNSServers, ","))
		logf, err := os.Create(filepath.Join(dir, n+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := testenv.StartProcess(cmd); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
		x.cmds = append(x.cmds, cmd)
		x.exited = append(x.exited, exited)
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
			if t.Failed() {
				if b, err := os.ReadFile(logf.Name()); err == nil {
					t.Logf("log of %s (outside etcdfed), last lines:\n%s", n, tail(string(b), 15))
				}
			}
		})
	}
	c := x.client(t)
	defer func() { _ = c.Close() }()
	if err := poll(ctx, time.Minute, "the etcd cluster outside etcdfed answers", func(ctx context.Context) (string, error) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := c.Put(sctx, "adopt/ready", "1"); err != nil {
			return err.Error(), nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	return x
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freeLoopbackPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func (x *externalEtcd) clientConfig(t testing.TB, extra ...string) EtcdClientConfig {
	t.Helper()
	cfg, err := x.ca.clientTLS(etcdfedv1.EtcdRootUser)
	if err != nil {
		t.Fatal(err)
	}
	return EtcdClientConfig{Endpoints: append(slices.Clone(x.clientURL), extra...), TLS: cfg}
}

func (x *externalEtcd) client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := EtcdClient(x.clientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
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
	x := startExternalEtcd(ctx, externalEtcdInput{T: t, Members: in.Originals, DNSServers: in.Topology.DNSServers, SkipClientSANVerification: !in.Topology.PeerSourceIsPodIP})
	oc := x.client(t)
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
	cfg := x.clientConfig(t, ringEndpoints...)
	cfg.DNSServers = in.Topology.DNSServers
	m := &ManagedEtcd{Namespace: in.Namespace, Name: in.Name, Domain: in.Domain, Client: cfg}
	// No watcher per endpoint: the old endpoints end with their members.
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: cfg, Prefix: fmt.Sprintf("adopt-%d/", time.Now().UnixNano())})
	waitForWorkloadProgress(ctx, t, w)

	if err := ensureNamespace(ctx, hub, in.Namespace); err != nil {
		t.Fatal(err)
	}
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name + "-old-ca"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: x.ca.certPEM, corev1.TLSPrivateKeyKey: x.ca.keyPEM}}
	if err := hub.Client.Create(ctx, caSecret); err != nil {
		t.Fatal(err)
	}
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: int32(in.Replicas),
			Version:  "3.6.16",
			DNS:      etcdfedv1.DNSSpec{Domain: in.Domain, TTLSeconds: ptrTo[int32](5)},
			TLS: etcdfedv1.TLSSpec{CASecretName: caSecret.Name, Auth: etcdfedv1.AuthDisabled,
				PeerSkipClientSANVerification: !in.Topology.PeerSourceIsPodIP},
			FailurePolicy: etcdfedv1.FailurePolicy{MemberGracePeriod: &metav1.Duration{Duration: 2 * time.Minute}, ZoneGracePeriod: &metav1.Duration{Duration: 30 * time.Second}},
			Adopt:         &etcdfedv1.AdoptSpec{Endpoints: x.clientURL},
		},
	}
	sampler := startToleranceSampler(ctx, t, hub, m, 200*time.Millisecond)
	start := time.Now()
	if err := hub.Client.Create(ctx, ec); err != nil {
		sampler.finish()
		t.Fatalf("create the adopting EtcdCluster: %v", err)
	}
	if tt, ok := t.(*testing.T); ok {
		deleteIfFailed(tt, in.Topology, m)
	}
	if _, err := WaitForHubEvent(ctx, WaitForHubEventInput{Hub: hub, Etcd: m, Query: EventQuery{Reasons: []string{etcdfedv1.EventAdopted}, NoteHas: []string{hexID(clusterID)}}}); err != nil {
		sampler.finish()
		t.Fatal(err)
	}
	// The hub killed in the middle of a member's join resumes it.
	killHubDuring(ctx, t, in.Topology, m, etcdfedv1.OperationAdd, "StartMember", "Promote")
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
	progress(ctx, t, w, 50, 30*time.Second)

	retireStart := time.Now()
	if err := patchSpec(ctx, hub, m, func(s *etcdfedv1.EtcdClusterSpec) { s.Adopt.Retire = true }); err != nil {
		sampler.finish()
		t.Fatal(err)
	}
	// And in the middle of the retirements.
	killHubDuring(ctx, t, in.Topology, m, etcdfedv1.OperationRetire)
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
	var adds, retires int
	for _, k := range sampler.ops {
		t.Logf("  %s: %.1fs", k, ops[k].Seconds())
		switch {
		case strings.HasPrefix(k, string(etcdfedv1.OperationAdd)+" "):
			adds++
		case strings.HasPrefix(k, string(etcdfedv1.OperationRetire)+" "):
			retires++
		}
	}
	if adds != in.Replicas || retires != in.Originals {
		t.Errorf("operations seen %v: want %d Add and %d Retire", sampler.ops, in.Replicas, in.Originals)
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
// the topology cannot kill the hub or the operation was not seen within
// two minutes.
func killHubDuring(ctx context.Context, t testing.TB, topo *Topology, m *ManagedEtcd, typ etcdfedv1.OperationType, steps ...string) {
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
		if op == nil || op.Type != typ || (len(steps) > 0 && !slices.Contains(steps, op.Step)) {
			return "not yet", nil
		}
		at = fmt.Sprintf("%s %s at step %s", op.Type, op.Member, op.Step)
		return "", nil
	})
	if err != nil {
		t.Logf("no hub kill: %v", err)
		return
	}
	if err := topo.KillHub(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the hub during %s", at)
}
