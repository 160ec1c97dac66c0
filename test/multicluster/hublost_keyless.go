package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// HubLostWithoutEscrowSpec loses the hub cluster of a running TLS ring for
// good, under the recorded workload, and rebuilds it WITHOUT the escrow:
// the ring's CA key is gone with the hub. The new hub must hold the
// take-over (nothing founded, nothing written) saying how to go on;
// `etcdfed rotate-ca` then lets it take the ring over on the CA its
// members trust, stored without its key (event TakeOverKeyless), and
// rotate the ring onto a new CA: no member replaced (etcd IDs as before),
// every member's certificate, the hub's and the consumer's of the new CA
// at the end, the old CA trusted nowhere, and the workload (a consumer
// whose Secret lived in the lost hub cluster, its credentials followed as
// a reloading client does) linearizable with nothing lost.
func HubLostWithoutEscrowSpec(ctx context.Context, in HubLostSpecInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	hub := topo.Hub
	must := fatalOnError(t)
	ns := in.Ring.Namespace
	in.Ring.T, in.Ring.Topology = t, topo
	must(ensureNamespace(ctx, hub, ns))
	in.Ring.Spec = func(s *etcdfedv1.EtcdClusterSpec) { s.Clients = []etcdfedv1.ClientSpec{{Name: "workload"}} }
	ring := EtcdClusterSpec(ctx, in.Ring)
	old, err := ring.Get(ctx, hub)
	must(err)
	if !old.Spec.TLS.Mode.Enabled() {
		t.Fatalf("ring %s runs without TLS: there is no CA to lose", ring.Name)
	}
	oldCA := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pki.CASecretName(old)}, oldCA))
	oldAuth, err := pki.LoadAuthority(oldCA.Data)
	must(err)
	manifest := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name}, Spec: *old.Spec.DeepCopy()}
	workloadSecret := client.ObjectKey{Namespace: ns, Name: ring.Name + "-workload-etcd-client"}
	_, err = WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: hub, Namespace: ns, Name: workloadSecret.Name})
	must(err)
	creds := startCredentialReloader(ctx, t, hub, workloadSecret)
	cfg := ring.Client
	cfg.TLS = creds.tlsConfig()
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: cfg, Prefix: "hub-lost-keyless/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	// The test's own client follows the workload consumer's Secret too: a
	// certificate of the old CA is refused once it is dropped.
	cl, err := EtcdClient(cfg)
	must(err)
	defer cl.Close()
	ids := etcdIDs(ctx, t, cl)

	lostAt := time.Now()
	must(in.DestroyHub())
	t.Logf("hub cluster destroyed with the ring's CA key; no escrow: ring %s under load without a hub", ring.Name)
	progress(ctx, t, w, 100, time.Minute)
	must(in.NewHub(ctx))
	runCLI(ctx, t, in.Etcdfed, "hub", "install", "--kubeconfig", in.HubKubeconfig, "--hub", "external")
	must(in.StartHub())
	for _, m := range topo.Members {
		runCLI(ctx, t, in.Etcdfed, "cluster", "join", m.Name, "--kubeconfig", in.HubKubeconfig, "--kubeconfig-member", in.MemberKubeconfig(m.Name), "--spoke", "external", "--take-over")
	}
	// What the manifests hold besides the ring: its namespace.
	must(ensureNamespace(ctx, hub, ns))
	appliedAt := time.Now()
	must(hub.Client.Create(ctx, manifest.DeepCopy()))

	// Held: nothing founded over the running ring, the way on named.
	var held string
	must(WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: ring, What: "the take-over held for the CA's key", Timeout: 3 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		if to := ec.Status.TakeOver; to != nil && to.Phase == etcdfedv1.TakeOverHeld && strings.Contains(to.Message, "etcdfed rotate-ca") {
			held = to.Message
			return ""
		}
		return describeEtcdCluster(ec, "not held for the CA's key")
	}}))
	t.Logf("held %.1fs after the manifest: %s", time.Since(appliedAt).Seconds(), held)
	// Held for some passes: still nothing founded (no cluster ID, no CA).
	time.Sleep(5 * time.Second)
	ec, err := ring.Get(ctx, hub)
	must(err)
	if ec.Status.ClusterID != "" || len(ec.Status.Members) > 0 {
		t.Fatalf("the held take-over recorded a ring: cluster ID %q, members %v", ec.Status.ClusterID, ec.Status.Members)
	}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pki.CASecretName(old)}, &corev1.Secret{}); err == nil {
		t.Fatal("the held take-over created a CA Secret")
	}

	askedAt := time.Now()
	t.Logf("etcdfed rotate-ca:\n%s", runCLI(ctx, t, in.Etcdfed, "rotate-ca", ring.Name, "-n", ns, "--kubeconfig", in.HubKubeconfig))
	var took, rotated time.Duration
	var done *etcdfedv1.EtcdCluster
	must(WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: ring, What: "taken over and rotated onto a new CA", Timeout: 15 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		to, cr := ec.Status.TakeOver, ec.Status.CARotation
		switch {
		case to == nil || to.Phase != etcdfedv1.TakeOverComplete:
			return describeEtcdCluster(ec, "not taken over")
		case took == 0:
			took = time.Since(askedAt)
		}
		switch {
		case cr == nil || cr.Phase != etcdfedv1.CARotationCompleted:
			return describeEtcdCluster(ec, fmt.Sprintf("CA rotation %+v", cr))
		case !meta.IsStatusConditionTrue(ec.Status.Conditions, etcdfedv1.ConditionAvailable) || int(ec.Status.ReadyMembers) != in.Ring.Replicas:
			return describeEtcdCluster(ec, "not available with every member ready")
		}
		rotated, done = time.Since(askedAt), ec
		return ""
	}}))
	t.Logf("TAKE-OVER WITHOUT THE CA KEY: taken over %.1fs after rotate-ca, rotated onto %s %.1fs after it (%.1fs after the loss); reissued %q",
		took.Seconds(), done.Status.CARotation.NewCA, rotated.Seconds(), time.Since(lostAt).Seconds(), done.Status.TakeOver.Reissued)
	if done.Status.ClusterID != old.Status.ClusterID {
		t.Errorf("cluster ID %s, want the ring's %s", done.Status.ClusterID, old.Status.ClusterID)
	}
	if got := etcdIDs(ctx, t, cl); !slices.Equal(got, ids) {
		t.Errorf("etcd member IDs %v after the take-over and rotation, were %v: a member was replaced", got, ids)
	}
	note, err := waitForHubEventNote(ctx, hub, ring, etcdfedv1.EventTakeOverKeyless)
	must(err)
	t.Logf("event %s: %s", etcdfedv1.EventTakeOverKeyless, note)

	// The new CA everywhere, the old one trusted nowhere.
	caSec := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pki.CASecretName(old)}, caSec))
	auth, err := pki.LoadAuthority(caSec.Data)
	must(err)
	if auth.Keyless() || auth.Rotating() || auth.Signer.Cert.Equal(oldAuth.Signer.Cert) {
		t.Errorf("CA Secret after the rotation: keyless %v, rotating %v, still the old CA %v", auth.Keyless(), auth.Rotating(), auth.Signer.Cert.Equal(oldAuth.Signer.Cert))
	}
	check := func(where string, data map[string][]byte) {
		if pki.IssuerIn(auth.Signer.CertPEM, data[pki.KeyCert]) == nil {
			t.Errorf("%s: certificate not of the new CA", where)
		}
		if pki.IssuerIn(data[pki.KeyCA], oldAuth.Signer.CertPEM) != nil || strings.Contains(string(data[pki.KeyCA]), strings.TrimSpace(string(oldAuth.Signer.CertPEM))) {
			t.Errorf("%s: ca.crt still holds the old CA", where)
		}
	}
	for _, m := range done.Status.Members {
		c := memberClusterOrNil(topo, m.Cluster)
		if c == nil {
			t.Errorf("%s: no cluster %s", m.Name, m.Cluster)
			continue
		}
		sec := &corev1.Secret{}
		must(c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: pki.MemberSecretName(etcdfedv1.MemberObjectName(ns, ring.Name, m.Name))}, sec))
		check(m.Name+"@"+m.Cluster, sec.Data)
	}
	hc := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pki.HubClientSecretName(old)}, hc))
	check("the hub's client certificate", hc.Data)
	wl := &corev1.Secret{}
	must(hub.Client.Get(ctx, workloadSecret, wl))
	check("the workload's consumer Secret", wl.Data)

	progress(ctx, t, w, 100, time.Minute)
	w.Stop()
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("longest gap between acknowledged writes %s at %s (the loss at %s, rotate-ca at %s)", gap.Round(time.Millisecond), gapAt.Format("15:04:05.000"), lostAt.Format("15:04:05.000"), askedAt.Format("15:04:05.000"))
	checkWorkload(ctx, t, w)
}
