package multicluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	clientv3 "go.etcd.io/etcd/client/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

// HubLostSpecInput is the input of HubLostSpec.
type HubLostSpecInput struct {
	T        testing.TB
	Topology *Topology
	// Etcdfed is the etcdfed CLI; Kubeconfig the hub cluster's and
	// MemberKubeconfig each member cluster's (admin) kubeconfig.
	Etcdfed          string
	HubKubeconfig    string
	MemberKubeconfig func(cluster string) string
	// DestroyHub takes the hub cluster away for good; NewHub starts an
	// empty one in its place; StartHub starts the hub process in it.
	DestroyHub func() error
	NewHub     func(ctx context.Context) error
	StartHub   func() error
	// Ring is the running ring to lose the hub under; S3 and Bucket the
	// store its backups go to (outside the hub cluster).
	Ring   EtcdClusterSpecInput
	S3     *s3test.Server
	Bucket string
}

// memberLife is what must not change of a member across the take-over:
// its object's generation (the spec the spoke acts on), its pod, its etcd
// ID and its container's restarts.
type memberLife struct {
	cluster, object, podUID, etcdID string
	generation                      int64
	restarts                        int32
}

// HubLostSpec loses the hub cluster of a running ring for good, under the
// recorded workload, and rebuilds it with the documented commands
// (docs/disaster-recovery.md): before the loss a backup of the ring and
// `etcdfed hub export`; after it, a new empty hub cluster, `etcdfed hub
// import` of the export, `etcdfed hub install`, `etcdfed cluster join` of
// the same member clusters, and the same EtcdCluster manifest applied
// again. The new hub must take the running ring over (status.takeOver
// Complete, events TakeOverFound and TakenOver, its own client
// certificate reissued) with no member restarted or renamed: every
// EtcdMember's generation, pod, container restarts and etcd ID as before,
// etcd's member list and raft term as before (no election, so no write
// gap from the take-over), the workload linearizable with nothing lost.
// Then the new hub repairs: a member cluster killed is evacuated (its
// member replaced elsewhere). Last, the backup taken before the loss is
// refused without the snapshot key, naming it, and restores into a new
// ring with the imported key.
func HubLostSpec(ctx context.Context, in HubLostSpecInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	hub := topo.Hub
	must := fatalOnError(t)
	ns := in.Ring.Namespace
	store := storeWithCredentials(ctx, t, hub, in.S3, in.Bucket, ns)
	in.Ring.T, in.Ring.Topology = t, topo
	userSpec := in.Ring.Spec
	in.Ring.Spec = func(s *etcdfedv1.EtcdClusterSpec) {
		if userSpec != nil {
			userSpec(s)
		}
		// A consumer whose Secret lives in the hub cluster: lost with it,
		// reissued by the new hub.
		s.Clients = []etcdfedv1.ClientSpec{{Name: "app"}}
	}
	ring := EtcdClusterSpec(ctx, in.Ring)
	// A key the backup must hold, then backups on (yearly: the first at
	// once, no other during the test), as the manifest says from now on.
	cl, err := EtcdClient(ring.Client)
	must(err)
	defer cl.Close()
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = cl.Put(pctx, "hub-lost/before-backup", "kept")
	pcancel()
	must(err)
	snap := backupOnce(ctx, t, hub, ring, store, nil)
	old, err := ring.Get(ctx, hub)
	must(err)
	t.Logf("backup before the loss at revision %d: %s", snap.Revision, snap.Location)
	appSecret := ring.Name + "-app-etcd-client"
	appBefore, err := WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: hub, Namespace: ns, Name: appSecret})
	must(err)
	// The manifest, as a GitOps repository holds it.
	manifest := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name}, Spec: *old.Spec.DeepCopy()}

	// The escrow, exported before the loss to a key the operator holds.
	dir := t.TempDir()
	id, err := age.GenerateX25519Identity()
	must(err)
	idFile, export := filepath.Join(dir, "hub-escrow.key"), filepath.Join(dir, "hub-escrow.age")
	must(os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600))
	out := runCLI(ctx, t, in.Etcdfed, "hub", "export", "--kubeconfig", in.HubKubeconfig, "--recipient", id.Recipient().String(), "-o", export)
	t.Logf("etcdfed hub export:\n%s", out)
	if !strings.Contains(out, backupstore.KeySecretName(ring.Name)) || !strings.Contains(out, ring.Name+"-ca") {
		t.Fatalf("the export does not list the ring's CA and snapshot key:\n%s", out)
	}

	w := startScenarioWorkload(ctx, t, ring, "hub-lost")
	before := membersLife(ctx, t, topo, old)
	term, ids := raftTerm(ctx, t, cl), etcdIDs(ctx, t, cl)

	// The old hub's current client certificate, as a copy of the lost hub
	// cluster's Secrets holds it: root on the ring before the loss.
	oldHubClient := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pki.HubClientSecretName(old)}, oldHubClient))
	oldHubLeaf := &pki.Leaf{CertPEM: oldHubClient.Data[pki.KeyCert], KeyPEM: oldHubClient.Data[pki.KeyKey]}
	for _, e := range ring.Client.Endpoints {
		if err := readWith(ctx, ring.Client, oldHubClient.Data[pki.KeyCA], oldHubLeaf, e); err != nil {
			t.Fatalf("the old hub's client certificate at %s before the loss: %v", e, err)
		}
	}

	// The old hub's tokens in the member clusters, as a copy of the lost
	// hub cluster's registration Secrets holds them: they authenticate
	// until the new hub's joins take the member clusters over.
	oldTokens := map[string]string{}
	for _, m := range topo.Members {
		reg := &corev1.Secret{}
		must(hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: m.Name}, reg))
		oldTokens[m.Name] = string(reg.Data[registry.TokenKey])
		if !tokenAuthenticates(ctx, t, m, oldTokens[m.Name]) {
			t.Fatalf("the old hub's token for %s does not authenticate before the loss", m.Name)
		}
	}

	// The loss, for good: the ring keeps serving without any hub.
	lostAt := time.Now()
	must(in.DestroyHub())
	t.Logf("hub cluster destroyed (apiserver, its etcd and data, the hub): ring %s under load without a hub", ring.Name)
	progress(ctx, t, w, 100, time.Minute)

	// The rebuild, with the documented commands.
	rebuildAt := time.Now()
	must(in.NewHub(ctx))
	t.Logf("etcdfed hub import:\n%s", runCLI(ctx, t, in.Etcdfed, "hub", "import", "--kubeconfig", in.HubKubeconfig, "-i", export, "--identity", idFile))
	runCLI(ctx, t, in.Etcdfed, "hub", "install", "--kubeconfig", in.HubKubeconfig, "--hub", "external")
	must(in.StartHub())
	for _, m := range topo.Members {
		runCLI(ctx, t, in.Etcdfed, "cluster", "join", m.Name, "--kubeconfig", in.HubKubeconfig, "--kubeconfig-member", in.MemberKubeconfig(m.Name), "--spoke", "external", "--take-over")
	}
	// The take-over ended the old hub's credential chains: a copy of its
	// tokens no longer reaches the member clusters (the apiserver caches
	// a token's authentication for up to 10 s).
	for _, m := range topo.Members {
		must(poll(ctx, time.Minute, "the old hub's token for "+m.Name+" refused", func(context.Context) (string, error) {
			if tokenAuthenticates(ctx, t, m, oldTokens[m.Name]) {
				return "still authenticates", nil
			}
			return "", nil
		}))
	}
	t.Logf("the old hub's tokens refused by all %d member clusters %.1fs after the rebuild began", len(topo.Members), time.Since(rebuildAt).Seconds())
	// What the manifests hold besides the ring: the store's credentials.
	storeWithCredentials(ctx, t, hub, in.S3, in.Bucket, ns)
	appliedAt := time.Now()
	must(hub.Client.Create(ctx, manifest.DeepCopy()))
	t.Logf("rebuilt: new hub cluster, import, install and %d joins in %.1fs; the manifest applied", len(topo.Members), appliedAt.Sub(rebuildAt).Seconds())

	var taken *etcdfedv1.EtcdCluster
	must(WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: ring, What: "the running ring taken over", Timeout: 3 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		to := ec.Status.TakeOver
		switch {
		case to == nil:
			return describeEtcdCluster(ec, "no status.takeOver")
		case to.Phase != etcdfedv1.TakeOverComplete:
			return describeEtcdCluster(ec, fmt.Sprintf("takeOver %s: %s", to.Phase, to.Message))
		case !meta.IsStatusConditionTrue(ec.Status.Conditions, etcdfedv1.ConditionAvailable) || int(ec.Status.ReadyMembers) != in.Ring.Replicas:
			return describeEtcdCluster(ec, "not available with every member ready")
		}
		taken = ec
		return ""
	}}))
	tookOver := time.Since(appliedAt)
	t.Logf("TAKE-OVER: ring %s taken over %.1fs after the manifest was applied (%.1fs after the rebuild began, %.1fs after the loss): %s; members %v; reissued %q",
		ring.Name, tookOver.Seconds(), time.Since(rebuildAt).Seconds(), time.Since(lostAt).Seconds(), taken.Status.TakeOver.Message, taken.Status.TakeOver.Members, taken.Status.TakeOver.Reissued)
	to := taken.Status.TakeOver
	if to.RingUID != string(old.UID) || taken.UID == old.UID {
		t.Errorf("takeOver.ringUID %s, want the founding EtcdCluster's UID %s (the new one is %s)", to.RingUID, old.UID, taken.UID)
	}
	if taken.Status.ClusterID != old.Status.ClusterID || to.ClusterID != old.Status.ClusterID {
		t.Errorf("cluster ID %s (takeOver %s), want the ring's %s", taken.Status.ClusterID, to.ClusterID, old.Status.ClusterID)
	}
	if !slices.ContainsFunc(to.Reissued, func(s string) bool { return strings.Contains(s, "client certificate") }) {
		t.Errorf("takeOver.reissued %q does not name the hub's client certificate", to.Reissued)
	}
	for _, reason := range []string{etcdfedv1.EventTakeOverFound, etcdfedv1.EventTakenOver} {
		note, err := waitForHubEventNote(ctx, hub, ring, reason)
		if err != nil {
			t.Error(err)
			continue
		}
		t.Logf("event %s: %s", reason, note)
	}
	if !slices.ContainsFunc(to.Reissued, func(s string) bool { return strings.Contains(s, "spec.clients app") }) {
		t.Errorf("takeOver.reissued %q does not name the consumer app", to.Reissued)
	}
	// The consumer's Secret, lost with the hub cluster, reissued from the
	// imported CA; etcd's user was never lost: it reads and writes.
	appAfter, err := WaitForClientSecret(ctx, WaitForClientSecretInput{Cluster: hub, Namespace: ns, Name: appSecret, Until: func(data map[string][]byte) string {
		if string(data[etcdfedv1.ClientSecretKeyCert]) == string(appBefore.Data[etcdfedv1.ClientSecretKeyCert]) {
			return "the old certificate"
		}
		return ""
	}})
	must(err)
	app := consumerClient(t, appAfter.Data, topo.DNSServers)
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = app.Put(actx, "hub-lost/app", "after the take-over")
	acancel()
	must(err)
	t.Logf("consumer app: its Secret reissued by the new hub, and it writes with it")
	// The old hub's current certificate is refused by every member once
	// the new hub's first list reaches it (it listed every hub client
	// certificate the members' Secrets recorded but its own), while the
	// new hub's is served: a copy of the lost cluster's Secrets is root
	// no more.
	takenAt := time.Now()
	newHubClient := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pki.HubClientSecretName(taken)}, newHubClient))
	newHubLeaf := &pki.Leaf{CertPEM: newHubClient.Data[pki.KeyCert], KeyPEM: newHubClient.Data[pki.KeyKey]}
	for _, e := range ring.Client.Endpoints {
		must(poll(ctx, 3*time.Minute, "the old hub's client certificate refused at "+e+" while the new hub's is served", func(ctx context.Context) (string, error) {
			if err := readWith(ctx, ring.Client, newHubClient.Data[pki.KeyCA], newHubLeaf, e); err != nil {
				return fmt.Sprintf("the new hub's certificate: %v", err), nil
			}
			if err := readWith(ctx, ring.Client, oldHubClient.Data[pki.KeyCA], oldHubLeaf, e); err == nil {
				return "the old hub's certificate is served", nil
			}
			return "", nil
		}))
	}
	if ec, err := ring.Get(ctx, hub); err == nil && ec.Status.Revocation != nil {
		t.Logf("the old hub's current client certificate refused by every member %.1fs after the take-over; status.revocation %+v", time.Since(takenAt).Seconds(), *ec.Status.Revocation)
	}
	// Nothing of the ring changed: members, pods, IDs, the raft term.
	progress(ctx, t, w, 100, time.Minute)
	after := membersLife(ctx, t, topo, taken)
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			t.Errorf("%s: gone after the take-over", name)
		case a != b:
			t.Errorf("%s changed by the take-over: before %+v, after %+v", name, b, a)
		}
	}
	if got := etcdIDs(ctx, t, cl); !slices.Equal(got, ids) {
		t.Errorf("etcd member IDs %v after the take-over, were %v", got, ids)
	}
	if got := raftTerm(ctx, t, cl); got != term {
		t.Errorf("raft term %d after the take-over, was %d: an election happened", got, term)
	}
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("0 member restarts, %d etcd IDs unchanged, raft term %d unchanged; longest gap between acknowledged writes so far %s (at %s; the loss at %s, the manifest at %s)",
		len(ids), term, gap.Round(time.Millisecond), gapAt.Format("15:04:05.000"), lostAt.Format("15:04:05.000"), appliedAt.Format("15:04:05.000"))

	// The new hub repairs: a member cluster (not the leader's) killed is
	// evacuated, its member replaced elsewhere.
	var victim etcdfedv1.MemberStatus
	for _, m := range taken.Status.Members {
		if m.Name != taken.Status.Leader {
			victim = m
			break
		}
	}
	killAt := time.Now()
	must(topo.FailZone(ctx, victim.Cluster, "kill"))
	restored := false
	defer func() {
		if !restored {
			_ = topo.RestoreZone(context.Background(), victim.Cluster)
		}
	}()
	got, err := WaitForReplaced(ctx, WaitForReplacedInput{Hub: hub, Etcd: ring, Old: victim, Replicas: in.Ring.Replicas, NotIn: victim.Cluster, Timeout: 6 * time.Minute})
	must(err)
	t.Logf("after the take-over, %s killed: %s replaced in %s %.1fs later", victim.Cluster, victim.Name, got.Cluster, time.Since(killAt).Seconds())
	progress(ctx, t, w, 50, time.Minute)
	restored = true
	must(topo.RestoreZone(ctx, victim.Cluster))
	w.Stop()
	checkWorkload(ctx, t, w)

	// The backup from before the loss: refused without the snapshot key,
	// naming it; restored with the imported one.
	keyName := backupstore.KeySecretName(ring.Name)
	key := &corev1.Secret{}
	must(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: keyName}, key))
	saved := key.DeepCopy()
	must(hub.Client.Delete(ctx, key))
	// The snapshot from before the loss by its key: the new hub took
	// the ring's first backup again after the take-over (its record was
	// lost with the hub cluster), which "latest" would name.
	object := strings.TrimPrefix(snap.Location, "s3://"+in.Bucket+"/hub/")
	source := &etcdfedv1.SnapshotSource{Store: store, Object: object, SourceCluster: ns + "/" + ring.Name}
	nokey := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nokey"},
		Spec: etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: manifest.Spec.Version, DNS: etcdfedv1.DNSSpec{Domain: "nokey.etcd.test"},
			TLS: manifest.Spec.TLS, Bootstrap: &etcdfedv1.ClusterBootstrap{FromSnapshot: source}}}
	must(hub.Client.Create(ctx, nokey))
	refused, err := WaitForSnapshotRefused(ctx, hub, &ManagedEtcd{Namespace: ns, Name: nokey.Name}, etcdfedv1.SnapshotReasonUnauthenticated, 2*time.Minute)
	must(err)
	if !strings.Contains(refused.Message, keyName) {
		t.Errorf("the refusal does not name the missing key %s: %s", keyName, refused.Message)
	}
	t.Logf("without the snapshot key: %s", refused.Message)
	must(hub.Client.Delete(ctx, nokey))
	saved.ResourceVersion, saved.UID = "", types.UID("")
	must(hub.Client.Create(ctx, saved))
	restoreAt := time.Now()
	back := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: ns, Name: "restored", Domain: "restored.etcd.test", Replicas: 3, Version: in.Ring.Version, NotTolerant: true,
		Spec: func(s *etcdfedv1.EtcdClusterSpec) { s.Bootstrap = &etcdfedv1.ClusterBootstrap{FromSnapshot: source} }})
	rb, err := back.Get(ctx, hub)
	must(err)
	if r := rb.Status.Restore; r == nil || r.Revision != snap.Revision || r.SourceClusterID != old.Status.ClusterID {
		t.Errorf("status.restore %+v, want the backup at revision %d of cluster %s", rb.Status.Restore, snap.Revision, old.Status.ClusterID)
	}
	rcl, err := EtcdClient(back.Client)
	must(err)
	defer rcl.Close()
	gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
	kept, err := rcl.Get(gctx, "hub-lost/before-backup")
	gcancel()
	must(err)
	if len(kept.Kvs) != 1 || string(kept.Kvs[0].Value) != "kept" {
		t.Errorf("the restored ring does not hold the key written before the backup: %v", kept.Kvs)
	}
	t.Logf("the backup from before the loss restored into %s %.1fs after its creation (revision %d, the key written before it there)", back.Name, time.Since(restoreAt).Seconds(), snap.Revision)
	DeleteEtcdClusterSpec(ctx, t, topo, back)
}

// readWith reads through a new connection to endpoint with leaf (a new
// TLS handshake each time), trusting caPEM.
func readWith(ctx context.Context, cfg EtcdClientConfig, caPEM []byte, leaf *pki.Leaf, endpoint string) error {
	tlsCfg, err := pki.ClientTLS(caPEM, leaf)
	if err != nil {
		return err
	}
	cfg = cfg.Endpoint(endpoint)
	cfg.TLS, cfg.DialTimeout = tlsCfg, 3*time.Second
	c, err := EtcdClient(cfg)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = c.Get(rctx, "hub-lost/probe", clientv3.WithCountOnly())
	return err
}

// runCLI runs the etcdfed CLI and returns its output; a failure ends the
// test.
func runCLI(ctx context.Context, t testing.TB, bin string, args ...string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("etcdfed %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// membersLife reads every member's object and pod.
func membersLife(ctx context.Context, t testing.TB, topo *Topology, ec *etcdfedv1.EtcdCluster) map[string]memberLife {
	t.Helper()
	out := map[string]memberLife{}
	for _, m := range ec.Status.Members {
		c := clusterNamed(topo, m.Cluster)
		obj := &etcdfedv1.EtcdMember{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: m.Object}, obj); err != nil {
			t.Fatalf("EtcdMember %s in %s: %v", m.Object, m.Cluster, err)
		}
		l := memberLife{cluster: m.Cluster, object: obj.Name, generation: obj.Generation}
		if obj.Status.Etcd != nil {
			l.etcdID = obj.Status.Etcd.ID
		}
		pod := &corev1.Pod{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: obj.Status.PodName}, pod); err != nil {
			t.Fatalf("pod %s of %s in %s: %v", obj.Status.PodName, m.Name, m.Cluster, err)
		}
		l.podUID = string(pod.UID)
		for _, cs := range pod.Status.ContainerStatuses {
			l.restarts += cs.RestartCount
		}
		out[m.Name] = l
	}
	return out
}

// raftTerm is the raft term of the first endpoint that answers.
func raftTerm(ctx context.Context, t testing.TB, cl *clientv3.Client) uint64 {
	t.Helper()
	for _, ep := range cl.Endpoints() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cl.Status(sctx, ep)
		cancel()
		if err == nil {
			return st.RaftTerm
		}
	}
	t.Fatal("no endpoint answered a status request")
	return 0
}

// etcdIDs are etcd's member IDs, sorted.
func etcdIDs(ctx context.Context, t testing.TB, cl *clientv3.Client) []uint64 {
	t.Helper()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cl.MemberList(lctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, m := range resp.Members {
		out = append(out, m.ID)
	}
	slices.Sort(out)
	return out
}

// tokenAuthenticates asks member cluster m's apiserver whether token
// authenticates (TokenReview).
func tokenAuthenticates(ctx context.Context, t testing.TB, m *Cluster, token string) bool {
	t.Helper()
	tr, err := m.Clientset.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview in %s: %v", m.Name, err)
	}
	return tr.Status.Authenticated
}
