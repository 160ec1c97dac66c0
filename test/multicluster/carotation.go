package multicluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/workload"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// CARotationSpecInput configures CARotationSpec.
type CARotationSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Timeout bounds the whole rotation; default 20m.
	Timeout time.Duration
	// KubeAPIServer, when set, is bin/kube-apiserver: the member-cluster
	// consumer is declared caReload: AtStart and a kube-apiserver is
	// started from its Secret (mounted as the kubelet would) before the
	// rotation; the rotation must hold after Trusting, naming it; the
	// apiserver is restarted during the hold, the hold answered as
	// `etcdfed rotate-ca --continue` does, and the apiserver must serve a
	// write and a read once a second throughout, failing only within one
	// election of a member restart or during its own restart.
	KubeAPIServer string
	// Etcdfed, when set, is the etcdfed CLI: the hold is answered with
	// `etcdfed rotate-ca NAME --continue` (refused once before the hold),
	// else by writing the annotation as it does.
	Etcdfed string
}

// CARotationSpec rotates the ring's CA under the recorded workload, the
// way `etcdfed rotate-ca` asks for it (the annotation). The workload is a
// consumer of spec.clients: its credentials are the hub-cluster Secret the
// hub keeps for it, re-read whenever the Secret changes (a consumer that
// reloads its files); a second consumer's Secret is in a member cluster.
// It requires: the phases Trusting, Reissuing, Dropping and Completed in
// order, every member restarted in each phase and never two at once, no
// member reporting an untrusted peer certificate, the consumer never
// refusing a member's certificate; at the end every member serves a
// certificate of the new CA, every member's, the hub's and the consumers'
// Secrets hold certificates of the new CA and trust it alone, and a client
// with a certificate of the old CA is refused (the same client was served
// before the rotation). The history must be linearizable, with no
// acknowledged write lost and every watcher complete, and every failed
// request must fall within one election timeout of a member stop, start
// or leader change (ElectionWatch); the longest write gap is reported.
// It returns where the member-cluster consumer's Secret is.
func CARotationSpec(ctx context.Context, in CARotationSpecInput) ConsumerSecret {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	if in.Timeout == 0 {
		in.Timeout = 20 * time.Minute
	}
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	oldAuth, err := pki.ReadAuthority(ctx, hub.Client, ec)
	if err != nil {
		t.Fatal(err)
	}
	old := oldAuth.Signer

	// Right after the ring forms (FinishBootstrap) the hub writes the
	// cluster ID and initialClusterState existing into every member's
	// spec.bootstrap at once (no restart, but a new generation each): let
	// the spokes observe it before sampling, so that it is not taken for
	// members restarting together. The restart watch sees every member's
	// pod ready here first, so that a member briefly not ready when the
	// sampling starts is known for a pod that was ready.
	restarts := newRestartWatch()
	if err := WaitForClusterIDObserved(ctx, in.Topology, ec, restarts, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	// Two consumers: the workload's in the hub cluster, one in a member
	// cluster (in the EtcdCluster's own namespace there: a spec reaches no
	// other without the hub's policy).
	remote := in.Topology.Members[len(in.Topology.Members)-1]
	remoteNS := ec.Namespace
	if err := ensureNamespace(ctx, remote, remoteNS); err != nil {
		t.Fatal(err)
	}
	if err := grantHubSecrets(ctx, remote, remoteNS); err != nil {
		t.Fatal(err)
	}
	remoteSpec := etcdfedv1.ClientSpec{Name: "remote", Cluster: remote.Name, Namespace: remoteNS}
	if in.KubeAPIServer != "" {
		remoteSpec.CAReload = etcdfedv1.CAReloadAtStart
	}
	if err := setClients(ctx, hub, in.Etcd, []etcdfedv1.ClientSpec{{Name: "workload"}, remoteSpec}); err != nil {
		t.Fatal(err)
	}
	workloadSecret := client.ObjectKey{Namespace: ec.Namespace, Name: ec.Name + "-workload-etcd-client"}
	remoteSecret := client.ObjectKey{Namespace: remoteNS, Name: ec.Name + "-remote-etcd-client"}
	for _, s := range []struct {
		c   *Cluster
		key client.ObjectKey
	}{{hub, workloadSecret}, {remote, remoteSecret}} {
		if _, err := WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: s.c, Namespace: s.key.Namespace, Name: s.key.Name}); err != nil {
			t.Fatal(err)
		}
	}
	creds := startCredentialReloader(ctx, t, hub, workloadSecret)
	cfg := in.Etcd.Client
	cfg.TLS = creds.tlsConfig()

	// The control: a client with a certificate of the (still current) CA
	// is served by every member; the same client is refused at the end.
	// It carries the ring's peer name, as member certificates do: the peer
	// ports accept no other (a consumer's client certificate is refused
	// there whatever its CA).
	stale, err := controlCert(old, ec)
	if err != nil {
		t.Fatal(err)
	}
	targets := tlsTargets(ctx, t, in, ec)
	for _, tg := range targets {
		if err := tryTLS(ctx, in.Topology.DNSServers, tg, old.Pool(), stale); err != nil {
			t.Fatalf("before the rotation, a certificate of the current CA is refused by %s: %v", tg, err)
		}
	}

	elections := StartElectionWatch(ctx, t, cfg, ec)
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: cfg, Prefix: "carot/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	failedBefore := w.Failed()

	// The kube-apiserver consumer: started from its Secret before the
	// rotation, probed with a write and a read every second.
	var kas *ConsumerAPIServer
	var kasProbe *apiserverProber
	if in.KubeAPIServer != "" {
		sec, err := WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: remote, Namespace: remoteSecret.Namespace, Name: remoteSecret.Name})
		if err != nil {
			t.Fatal(err)
		}
		kas = StartConsumerAPIServer(ctx, StartConsumerAPIServerInput{T: t, Binary: in.KubeAPIServer, Data: sec.Data,
			Mount: &ConsumerSecret{Cluster: remote, Key: remoteSecret}, DNSServers: in.Topology.DNSServers, Prefix: "/carot-consumer"})
		if err := kas.WriteRead(ctx, "before-the-rotation", "1"); err != nil {
			t.Fatalf("the consumer kube-apiserver before the rotation: %v", err)
		}
		kasProbe = startAPIServerProber(ctx, kas)
	}

	sampler := startRotationSampler(ctx, in, restarts)
	start := time.Now()
	req := etcdfedv1.CARotationRequest{RequestedAt: start.UTC().Truncate(time.Second)}
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[etcdfedv1.AnnotationRotateCA] = req.String()
	if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	var hold caHoldSeen
	if kas != nil {
		hold = holdAndContinue(ctx, t, in, req, kas)
	}
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "the CA rotation completes", Timeout: in.Timeout, Until: func(got *etcdfedv1.EtcdCluster) string {
		cr := got.Status.CARotation
		switch {
		case cr == nil || cr.RequestedAt == nil || cr.RequestedAt.Time.Before(req.RequestedAt):
			return "not taken yet"
		case cr.Phase == etcdfedv1.CARotationRefused:
			return fmt.Sprintf("refused: %s", cr.Message)
		case cr.Phase != etcdfedv1.CARotationCompleted:
			return fmt.Sprintf("phase %s, %d of %d members: %s", cr.Phase, cr.MembersDone, cr.MembersTotal, cr.Message)
		}
		return ""
	}})
	took := time.Since(start)
	samples := sampler.stop()
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := w.WaitForProgress(pctx, 20); err != nil {
		t.Fatal(err)
	}
	cancel()

	// What the samples saw: the phases in order, each member restarted in
	// each phase, never two at once, no member distrusting a peer.
	var phases []string
	phaseAt := map[string]time.Time{}
	rolled := map[string][]string{}
	for _, s := range samples {
		if s.phase != "" && (len(phases) == 0 || phases[len(phases)-1] != s.phase) {
			phases = append(phases, s.phase)
			phaseAt[s.phase] = s.at
		}
		if s.rolling != "" && !slices.Contains(rolled[s.phase], s.rolling) {
			rolled[s.phase] = append(rolled[s.phase], s.rolling)
		}
		for _, c := range s.changes {
			t.Logf("%s: %s", s.at.Format(time.RFC3339Nano), c)
		}
		if len(s.blips) > 0 {
			t.Logf("%s: not ready in a pod that was ready (not a restart): %v", s.at.Format(time.RFC3339Nano), s.blips)
		}
		if len(s.unsettled) > 1 {
			t.Errorf("%s: %v restarting at once", s.at.Format(time.RFC3339Nano), s.unsettled)
		}
		for _, u := range s.untrusted {
			t.Errorf("%s: %s", s.at.Format(time.RFC3339Nano), u)
		}
	}
	if len(phases) > 0 && phases[len(phases)-1] != string(etcdfedv1.CARotationCompleted) {
		// Completed between the last sample and the poll that saw it.
		phases = append(phases, string(etcdfedv1.CARotationCompleted))
		phaseAt[string(etcdfedv1.CARotationCompleted)] = start.Add(took)
	}
	want := []string{string(etcdfedv1.CARotationTrusting), string(etcdfedv1.CARotationReissuing), string(etcdfedv1.CARotationDropping), string(etcdfedv1.CARotationCompleted)}
	if !slices.Equal(phases, want) {
		t.Errorf("phases seen %v, want %v", phases, want)
	}
	var perPhase []string
	for i, p := range want[:3] {
		if len(rolled[p]) != len(ec.Status.Members) {
			t.Errorf("phase %s restarted %v, want every one of the %d members", p, rolled[p], len(ec.Status.Members))
		}
		took := phaseAt[want[i+1]].Sub(phaseAt[p])
		line := fmt.Sprintf("%s %.1fs (%v)", p, took.Seconds(), rolled[p])
		if p == string(etcdfedv1.CARotationTrusting) && !hold.heldAt.IsZero() {
			line = fmt.Sprintf("%s %.1fs of restarts then held %.1fs (%v)", p, (took - hold.held).Seconds(), hold.held.Seconds(), rolled[p])
		}
		perPhase = append(perPhase, line)
	}
	if n := creds.verifyFailures.Load(); n > 0 {
		t.Errorf("the consumer refused a member's certificate %d time(s): %v", n, creds.lastErr.Load())
	}

	// The end state: the new CA alone, everywhere.
	got, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := pki.ReadAuthority(ctx, hub.Client, got)
	if err != nil {
		t.Fatal(err)
	}
	if auth.Rotating() || auth.Signer.Cert.Equal(old.Cert) {
		t.Fatalf("the CA Secret still holds the old CA (rotating %v)", auth.Rotating())
	}
	newCA := auth.Signer
	chainsToNew := func(what string, data map[string][]byte) {
		t.Helper()
		if !pki.Equal(data[pki.KeyCA], newCA.CertPEM) {
			t.Errorf("%s: ca.crt is not the new CA alone", what)
		}
		if pki.IssuerIn(newCA.CertPEM, data[pki.KeyCert]) == nil {
			t.Errorf("%s: tls.crt does not chain to the new CA", what)
		}
	}
	for _, m := range got.Status.Members {
		sec := &corev1.Secret{}
		if err := memberCluster(t, in.Topology, m.Cluster).Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: pki.MemberSecretName(etcdfedv1.MemberObjectName(got.Namespace, got.Name, m.Name))}, sec); err != nil {
			t.Fatal(err)
		}
		chainsToNew(m.Name+"'s Secret", sec.Data)
	}
	for _, s := range []struct {
		c   *Cluster
		key client.ObjectKey
	}{{hub, client.ObjectKey{Namespace: got.Namespace, Name: pki.HubClientSecretName(got)}}, {hub, workloadSecret}, {remote, remoteSecret}} {
		sec := &corev1.Secret{}
		if err := s.c.Client.Get(ctx, s.key, sec); err != nil {
			t.Fatal(err)
		}
		chainsToNew(fmt.Sprintf("Secret %s in %s", s.key, s.c.Name), sec.Data)
	}
	control, err := controlCert(newCA, ec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		// Served: the member's certificate is verified against the new CA
		// alone, and a client of the new CA is served.
		if err := tryTLS(ctx, in.Topology.DNSServers, tg, newCA.Pool(), control); err != nil {
			t.Errorf("%s: a client of the new CA, trusting the new CA alone: %v", tg, err)
		}
		switch err := tryTLS(ctx, in.Topology.DNSServers, tg, newCA.Pool(), stale); {
		case err == nil:
			t.Errorf("%s served a client whose certificate is of the old CA", tg)
		case strings.Contains(err.Error(), "certificate required"):
			t.Errorf("%s: the old CA's certificate was not presented (%v)", tg, err)
		default:
			t.Logf("%s refuses a certificate of the old CA: %v", tg, err)
		}
	}
	if kas != nil {
		// After the rotation: the apiserver, restarted once during the
		// hold, still writes and reads through the ring on the new CA.
		if err := kas.WriteRead(ctx, "after-the-rotation", "1"); err != nil {
			t.Errorf("the consumer kube-apiserver after the rotation: %v", err)
		}
		probes, failures := kasProbe.stop()
		restart := workload.Disruption{Kind: "consumer kube-apiserver restarted", Endpoint: kas.URL, From: hold.restartStopped, To: hold.restartReady}
		t.Logf("consumer kube-apiserver: %d write+read probes through it during the rotation; %s", probes,
			elections.Check(t, "write+read through the consumer kube-apiserver", failures, restart))
	}
	failed := w.Failed() - failedBefore
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("CA rotated in %.1fs: %s; client requests failed meanwhile: %d; longest gap between acknowledged writes %s (from %s); %s",
		took.Seconds(), strings.Join(perPhase, ", "), failed, gap.Round(time.Millisecond), gapAt.Format("15:04:05.000"), elections.FailuresWithinElections(t, w))
	checkWorkload(ctx, t, w)
	return ConsumerSecret{Cluster: remote, Key: remoteSecret}
}

// controlCert is a certificate of ca that a member's client port and peer
// port both accept: client and server use, with the ring's peer name.
func controlCert(ca *pki.CA, ec *etcdfedv1.EtcdCluster) (*pki.Leaf, error) {
	return ca.IssueMember(pki.MemberRequest{Member: "ca-rotation-control", DNSNames: []string{pki.PeerName(ec.Spec.DNS.Domain)}}, time.Now())
}

// tlsTarget is one TLS port of a member.
type tlsTarget struct {
	member, host, port string
}

func (t tlsTarget) String() string { return t.member + " " + net.JoinHostPort(t.host, t.port) }

// tlsTargets lists every member's client port, and its peer port when the
// ring skips the peer SAN check (otherwise a test client's source address
// is refused whatever its CA).
func tlsTargets(ctx context.Context, t testing.TB, in CARotationSpecInput, ec *etcdfedv1.EtcdCluster) []tlsTarget {
	t.Helper()
	var out []tlsTarget
	for _, m := range ec.Status.Members {
		obj := &etcdfedv1.EtcdMember{}
		if err := memberCluster(t, in.Topology, m.Cluster).Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.MemberObjectName(ec.Namespace, ec.Name, m.Name)}, obj); err != nil {
			t.Fatal(err)
		}
		urls := []string{obj.Status.ClientURL}
		if ec.Spec.TLS.PeerSkipClientSANVerification {
			urls = append(urls, obj.Status.PeerURL)
		}
		for _, raw := range urls {
			u, err := url.Parse(raw)
			if err != nil || u.Port() == "" {
				t.Fatalf("%s: URL %q: %v", m.Name, raw, err)
			}
			out = append(out, tlsTarget{member: m.Name, host: u.Hostname(), port: u.Port()})
		}
	}
	return out
}

// tryTLS connects to tg trusting roots and presenting leaf, asks for
// /version and reads the answer: nil when served. With TLS 1.3 a server
// refuses a client certificate after the handshake, so the answer is
// read.
func tryTLS(ctx context.Context, dnsServers []string, tg tlsTarget, roots *x509.CertPool, leaf *pki.Leaf) error {
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return err
	}
	// Presented whatever CAs the server names as acceptable (with
	// Certificates, Go sends none that no named CA issued, and the refusal
	// would be of a client without a certificate).
	cfg := &tls.Config{RootCAs: roots, ServerName: tg.host, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 3 * time.Second, Resolver: Resolver(dnsServers)}, Config: cfg}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", net.JoinHostPort(tg.host, tg.port))
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /version HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tg.host); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 200") {
		return fmt.Errorf("answer %q", strings.TrimSpace(line))
	}
	return nil
}

// credentialReloader keeps a consumer's credentials as its Secret holds
// them, re-read every 200ms: the CA bundle it verifies members against
// and the certificate it presents, both taken at each new handshake.
type credentialReloader struct {
	mu             sync.Mutex
	pool           *x509.CertPool
	cert           *tls.Certificate
	verifyFailures atomic.Int64
	lastErr        atomic.Value
}

// WaitForClusterIDObserved waits until every member of ec (its status)
// has the cluster ID and initialClusterState existing in its EtcdMember's
// spec.bootstrap and the restart watch has seen its pod ready on that
// generation (timeout: 2 minutes when zero).
func WaitForClusterIDObserved(ctx context.Context, topo *Topology, ec *etcdfedv1.EtcdCluster, restarts *restartWatch, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, 2*time.Minute), "every member's cluster ID observed and its pod ready", func(ctx context.Context) (string, error) {
		for _, m := range ec.Status.Members {
			c := memberClusterOrNil(topo, m.Cluster)
			if c == nil {
				return "no cluster " + m.Cluster, nil
			}
			obj := &etcdfedv1.EtcdMember{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.MemberObjectName(ec.Namespace, ec.Name, m.Name)}, obj); err != nil {
				return err.Error(), nil
			}
			if obj.Spec.Bootstrap == nil || obj.Spec.Bootstrap.ClusterID == "" || obj.Spec.Bootstrap.InitialClusterState != etcdfedv1.InitialClusterExisting {
				return m.Name + ": cluster ID not in its spec yet", nil
			}
			if why, _ := restarts.observe(ctx, c, obj); why != "" {
				return m.Name + ": " + why, nil
			}
		}
		return "", nil
	})
}

func startCredentialReloader(ctx context.Context, t testing.TB, c *Cluster, key client.ObjectKey) *credentialReloader {
	t.Helper()
	r := &credentialReloader{}
	load := func(ctx context.Context) error {
		sec := &corev1.Secret{}
		if err := c.Client.Get(ctx, key, sec); err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(sec.Data[etcdfedv1.ClientSecretKeyCA]) {
			return errors.New("no CA in ca.crt")
		}
		pair, err := tls.X509KeyPair(sec.Data[etcdfedv1.ClientSecretKeyCert], sec.Data[etcdfedv1.ClientSecretKeyKey])
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.pool, r.cert = pool, &pair
		r.mu.Unlock()
		return nil
	}
	if err := load(ctx); err != nil {
		t.Fatalf("consumer Secret %s: %v", key, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() {
		for rctx.Err() == nil {
			select {
			case <-rctx.Done():
			case <-time.After(200 * time.Millisecond):
				_ = load(rctx) // a read that fails keeps the last credentials
			}
		}
	}()
	return r
}

func (r *credentialReloader) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified in VerifyConnection against the bundle as the Secret
		// holds it now: the standard verification would keep the pool of
		// the moment the config was made.
		InsecureSkipVerify: true, //nolint:gosec // see VerifyConnection
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			r.mu.Lock()
			pool := r.pool
			r.mu.Unlock()
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no server certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: cs.ServerName})
			if err != nil {
				r.verifyFailures.Add(1)
				r.lastErr.Store(err.Error())
			}
			return err
		},
	}
}

// rotationSample is what one look at the ring showed during a rotation.
type rotationSample struct {
	at    time.Time
	phase string
	// rolling is the member a Roll of reason CARotation restarts.
	rolling string
	// unsettled are members whose pod is not ready on their latest spec.
	unsettled []string
	// untrusted are members reporting a peer certificate they do not
	// trust (EtcdMember PeerConnections, reason PeerCertificateUntrusted).
	untrusted []string
	// changes are the spec changes of members whose generation moved
	// since the sample before.
	changes []string
	// blips are members briefly not ready in a pod that was ready (etcd's
	// /readyz during a leader election): logged, not restarts.
	blips []string
}

type rotationSampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	samples []rotationSample
}

// startRotationSampler looks at the EtcdCluster and the members' objects
// every 250ms until stopped.
func startRotationSampler(ctx context.Context, in CARotationSpecInput, restarts *restartWatch) *rotationSampler {
	sctx, cancel := context.WithCancel(ctx)
	s := &rotationSampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		seen := map[string]*etcdfedv1.EtcdMember{}
		for sctx.Err() == nil {
			var smp rotationSample
			smp.at = time.Now()
			if ec, err := in.Etcd.Get(sctx, in.Topology.Hub); err == nil {
				if cr := ec.Status.CARotation; cr != nil {
					smp.phase = string(cr.Phase)
				}
				if op := ec.Status.Operation; op != nil && op.Type == etcdfedv1.OperationRoll && op.Reason == etcdfedv1.ReasonCARotation {
					smp.rolling = op.Member
				}
				for _, m := range ec.Status.Members {
					c := memberClusterOrNil(in.Topology, m.Cluster)
					if c == nil {
						continue
					}
					obj := &etcdfedv1.EtcdMember{}
					if err := c.Client.Get(sctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.MemberObjectName(ec.Namespace, ec.Name, m.Name)}, obj); err != nil {
						continue
					}
					if prev := seen[m.Name]; prev != nil && prev.Generation != obj.Generation {
						smp.changes = append(smp.changes, fmt.Sprintf("%s generation %d -> %d: %s", m.Name, prev.Generation, obj.Generation, cmp.Diff(prev.Spec, obj.Spec)))
					}
					seen[m.Name] = obj
					why, blip := restarts.observe(sctx, c, obj)
					switch {
					case why == "":
					case blip:
						smp.blips = append(smp.blips, m.Name+" ("+why+")")
					default:
						smp.unsettled = append(smp.unsettled, m.Name+" ("+why+")")
					}
					if pc := meta.FindStatusCondition(obj.Status.Conditions, etcdfedv1.ConditionPeerConnections); pc != nil && pc.Reason == etcdfedv1.ReasonPeerCertificateUntrusted {
						smp.untrusted = append(smp.untrusted, fmt.Sprintf("%s: %s", m.Name, pc.Message))
					}
				}
			}
			s.samples = append(s.samples, smp)
			select {
			case <-sctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *rotationSampler) stop() []rotationSample {
	s.cancel()
	<-s.done
	return s.samples
}

func memberClusterOrNil(topo *Topology, name string) *Cluster {
	for _, c := range topo.Members {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ConsumerSecret locates a consumer's Secret.
type ConsumerSecret struct {
	Cluster *Cluster
	Key     client.ObjectKey
}

// caHoldSeen is what holdAndContinue saw of the hold.
type caHoldSeen struct {
	heldAt                       time.Time
	held                         time.Duration
	restartStopped, restartReady time.Time
}

// holdAndContinue waits for the rotation to hold after Trusting (a consumer
// reads its CA only at start), checks that the status, Progressing and an
// event say so, kills the hub (when the topology can) and requires the
// restarted hub to hold on, restarts the kube-apiserver consumer as its
// operator would, checks that it serves, and answers the hold with
// `etcdfed rotate-ca --continue` (in.Etcdfed; refused once before the
// hold) or by writing what it writes (the request's continueHold set to
// heldSince).
func holdAndContinue(ctx context.Context, t testing.TB, in CARotationSpecInput, req etcdfedv1.CARotationRequest, kas *ConsumerAPIServer) caHoldSeen {
	t.Helper()
	hub := in.Topology.Hub
	if in.Etcdfed != "" {
		// Before the hold, an answer is refused: a consumer restarted now
		// might not read both CAs.
		out, err := exec.CommandContext(ctx, in.Etcdfed, "rotate-ca", in.Etcd.Name, "-n", in.Etcd.Namespace, "--continue", "--kubeconfig", hub.Kubeconfig).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not rotating its CA") && !strings.Contains(string(out), "does not hold yet") {
			t.Errorf("etcdfed rotate-ca --continue before the hold: %v: %s; want it refused", err, out)
		} else {
			t.Logf("etcdfed rotate-ca --continue before the hold, refused: %s", strings.TrimSpace(string(out)))
		}
	}
	var ec *etcdfedv1.EtcdCluster
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "the CA rotation holds after Trusting", Timeout: in.Timeout, Until: func(got *etcdfedv1.EtcdCluster) string {
		ec = got
		cr := ec.Status.CARotation
		switch {
		case cr == nil || cr.RequestedAt == nil || cr.RequestedAt.Time.Before(req.RequestedAt):
			return "not taken yet"
		case cr.Phase != etcdfedv1.CARotationTrusting:
			return fmt.Sprintf("phase %s without a hold after Trusting (heldSince %v): %s", cr.Phase, cr.HeldSince, cr.Message)
		case cr.HeldSince == nil:
			return fmt.Sprintf("phase %s, %d of %d members: %s", cr.Phase, cr.MembersDone, cr.MembersTotal, cr.Message)
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	seen := caHoldSeen{heldAt: time.Now()}
	cr := ec.Status.CARotation
	if !cr.HoldAfterTrusting || cr.MembersDone != cr.MembersTotal {
		t.Errorf("held with holdAfterTrusting %v, %d of %d members done; want true and all", cr.HoldAfterTrusting, cr.MembersDone, cr.MembersTotal)
	}
	prog := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing)
	wantCmd := fmt.Sprintf("etcdfed rotate-ca %s -n %s --continue", ec.Name, ec.Namespace)
	for _, want := range []string{"held after Trusting", "restart remote (", "caReload: AtStart", wantCmd} {
		if prog == nil || prog.Reason != etcdfedv1.ReasonCARotation || !strings.Contains(prog.Message, want) {
			t.Errorf("Progressing %+v; want reason %s saying %q", prog, etcdfedv1.ReasonCARotation, want)
		}
	}
	if prog != nil {
		t.Logf("held: Progressing=%s %s: %s", prog.Status, prog.Reason, prog.Message)
	}
	if _, err := WaitForHubEvent(ctx, WaitForHubEventInput{Hub: hub, Etcd: in.Etcd, Timeout: 30 * time.Second, Query: EventQuery{Reasons: []string{"CARotationHeld"}}}); err != nil {
		t.Error(err)
	}
	// A hub restarted during the hold holds on: the new process reports
	// the same heldSince (its metric, empty until its first pass) and the
	// status keeps it.
	if in.Topology.KillHub != nil && in.Topology.HubMetricsURL != "" {
		killed := time.Now()
		if err := in.Topology.KillHub(ctx); err != nil {
			t.Fatal(err)
		}
		if err := WaitForHubMetric(ctx, WaitForHubMetricInput{URL: in.Topology.HubMetricsURL, What: "the restarted hub holds the rotation since the same time",
			Metric: "etcdfed_cluster_ca_rotation_held_since_timestamp_seconds", Labels: []string{"namespace", ec.Namespace, "name", ec.Name},
			Want: float64(ec.Status.CARotation.HeldSince.Unix()), Timeout: 2 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		t.Logf("hub killed during the hold: the restarted hub held on (same heldSince) %.1fs later", time.Since(killed).Seconds())
	}
	// The consumer's operator restarts it; its Secret holds both CAs now.
	seen.restartStopped, seen.restartReady, err = kas.Restart(ctx)
	if err != nil {
		t.Fatalf("restart the consumer kube-apiserver during the hold: %v", err)
	}
	t.Logf("consumer kube-apiserver restarted during the hold: ready again after %.1fs", seen.restartReady.Sub(seen.restartStopped).Seconds())
	if err := kas.WriteRead(ctx, "during-the-hold", "1"); err != nil {
		t.Fatalf("the consumer kube-apiserver restarted during the hold: %v", err)
	}
	// Held all along: nothing moves on without the answer.
	if ec, err = in.Etcd.Get(ctx, hub); err != nil {
		t.Fatal(err)
	}
	if cr := ec.Status.CARotation; cr.Phase != etcdfedv1.CARotationTrusting || cr.HeldSince == nil || cr.ContinuedAt != nil {
		t.Fatalf("the rotation moved on without an answer: %+v", cr)
	}
	held := ec.Status.CARotation.HeldSince.UTC()
	if in.Etcdfed != "" {
		out, err := exec.CommandContext(ctx, in.Etcdfed, "rotate-ca", ec.Name, "-n", ec.Namespace, "--continue", "--kubeconfig", hub.Kubeconfig).CombinedOutput()
		if err != nil {
			t.Fatalf("etcdfed rotate-ca --continue: %v: %s", err, out)
		}
		t.Logf("etcdfed rotate-ca --continue: %s", strings.TrimSpace(string(out)))
	} else {
		before := ec.DeepCopy()
		answer := etcdfedv1.CARotationRequest{RequestedAt: ec.Status.CARotation.RequestedAt.UTC(), ContinueHold: &held}
		ec.Annotations[etcdfedv1.AnnotationRotateCA] = answer.String()
		if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	seen.held = time.Since(seen.heldAt)
	t.Logf("answered the hold (held since %s) after %.1fs", held.Format(time.RFC3339), seen.held.Seconds())
	// The hub says it took the answer, naming the hold it answered.
	note, err := waitForHubEventNote(ctx, hub, in.Etcd, "CARotationContinued", held.Format(time.RFC3339))
	if err != nil {
		t.Error(err)
	} else {
		t.Logf("event CARotationContinued: %s", note)
	}
	return seen
}

// apiserverProber writes and reads through a consumer apiserver once a
// second, recording each failure.
type apiserverProber struct {
	cancel   context.CancelFunc
	done     chan struct{}
	probes   int
	failures []workload.Failure
}

func startAPIServerProber(ctx context.Context, kas *ConsumerAPIServer) *apiserverProber {
	pctx, cancel := context.WithCancel(ctx)
	p := &apiserverProber{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; pctx.Err() == nil; i++ {
			call := time.Now()
			rctx, rcancel := context.WithTimeout(pctx, 10*time.Second)
			err := kas.WriteRead(rctx, "probe", fmt.Sprint(i))
			rcancel()
			if pctx.Err() != nil {
				return
			}
			p.probes++
			if err != nil {
				p.failures = append(p.failures, workload.Failure{Op: "write+read", Key: "configmaps/default/probe", Call: call, Return: time.Now(), Err: err.Error()})
			}
			select {
			case <-pctx.Done():
			case <-time.After(time.Until(call.Add(time.Second))):
			}
		}
	}()
	return p
}

func (p *apiserverProber) stop() (int, []workload.Failure) {
	p.cancel()
	<-p.done
	return p.probes, p.failures
}
