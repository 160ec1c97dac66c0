package multicluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// ManagedEtcd is an etcd cluster the hub runs for an EtcdCluster.
type ManagedEtcd struct {
	Namespace, Name, Domain string
	// Client reaches every member by its DNS name, with a client
	// certificate from the EtcdCluster's CA.
	Client EtcdClientConfig
}

// ObjectName is the name of member's EtcdMember in its member cluster, which
// also names its pod, Service, disruption budget, PVCs ("<name>-data-N")
// and certificate Secret ("<name>-tls"): etcdfedv1.MemberObjectName.
func (m *ManagedEtcd) ObjectName(member string) string {
	return etcdfedv1.MemberObjectName(m.Namespace, m.Name, member)
}

// Get reads the EtcdCluster.
func (m *ManagedEtcd) Get(ctx context.Context, hub *Cluster) (*etcdfedv1.EtcdCluster, error) {
	ec := &etcdfedv1.EtcdCluster{}
	err := hub.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, ec)
	return ec, err
}

// ClientCert issues a client certificate from an EtcdCluster's CA, as
// `etcdfed client-cert` does (etcd's root user: with etcd authentication
// on, an undeclared common name reads nothing), and returns the CA
// certificate with it.
func ClientCert(ctx context.Context, hub *Cluster, ec *etcdfedv1.EtcdCluster) ([]byte, *pki.Leaf, error) {
	ca, err := pki.ReadCA(ctx, hub.Client, ec)
	if err != nil {
		return nil, nil, err
	}
	leaf, err := ca.IssueClient(etcdfedv1.EtcdRootUser, time.Now())
	if err != nil {
		return nil, nil, err
	}
	return ca.CertPEM, leaf, nil
}

// ClientTLS is ClientCert as a TLS client configuration.
func ClientTLS(ctx context.Context, hub *Cluster, ec *etcdfedv1.EtcdCluster) (*tls.Config, error) {
	caPEM, leaf, err := ClientCert(ctx, hub, ec)
	if err != nil {
		return nil, err
	}
	return pki.ClientTLS(caPEM, leaf)
}

// WaitForEtcdClusterInput names an EtcdCluster and what it must reach.
type WaitForEtcdClusterInput struct {
	Hub             *Cluster
	Namespace, Name string
	// Replicas ready voters, with no operation in flight.
	Replicas int
	// Tolerant also requires FailureTolerant=True.
	Tolerant bool
	Timeout  time.Duration
}

// WaitForEtcdClusterReady waits until the EtcdCluster is Available with
// Replicas ready voting members, AllMembersReady, no operation in flight,
// and (if asked) FailureTolerant.
func WaitForEtcdClusterReady(ctx context.Context, in WaitForEtcdClusterInput) (*etcdfedv1.EtcdCluster, error) {
	var ec *etcdfedv1.EtcdCluster
	err := poll(ctx, orDefault(in.Timeout, 3*time.Minute), fmt.Sprintf("EtcdCluster %s/%s ready with %d members", in.Namespace, in.Name, in.Replicas), func(ctx context.Context) (string, error) {
		ec = &etcdfedv1.EtcdCluster{}
		if err := in.Hub.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: in.Name}, ec); err != nil {
			return "", err
		}
		st := ec.Status
		var missing []string
		for _, c := range []string{etcdfedv1.ConditionAvailable, etcdfedv1.ConditionAllMembersReady} {
			if !meta.IsStatusConditionTrue(st.Conditions, c) {
				missing = append(missing, c)
			}
		}
		if in.Tolerant && !meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionFailureTolerant) {
			missing = append(missing, etcdfedv1.ConditionFailureTolerant)
		}
		switch {
		case len(missing) > 0:
			return describeEtcdCluster(ec, "not "+strings.Join(missing, ", ")), nil
		case int(st.ReadyMembers) != in.Replicas || len(st.Members) != in.Replicas:
			return describeEtcdCluster(ec, fmt.Sprintf("%d ready of %d members", st.ReadyMembers, len(st.Members))), nil
		case st.Operation != nil:
			return describeEtcdCluster(ec, "operation in flight"), nil
		}
		return "", nil
	})
	return ec, err
}

func describeEtcdCluster(ec *etcdfedv1.EtcdCluster, head string) string {
	parts := []string{head}
	for _, c := range ec.Status.Conditions {
		if c.Status != metav1.ConditionTrue || c.Type == etcdfedv1.ConditionDegraded {
			parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	if op := ec.Status.Operation; op != nil {
		parts = append(parts, fmt.Sprintf("operation %s %s step %s: %s", op.Type, op.Member, op.Step, op.Message))
	}
	return strings.Join(parts, "; ")
}

// ZoneCounts counts the members of each zone, sorted descending ("2/2/1").
func ZoneCounts(ec *etcdfedv1.EtcdCluster) string {
	count := map[string]int{}
	for _, m := range ec.Status.Members {
		count[m.Cluster+"/"+m.Zone]++
	}
	var n []int
	for _, c := range count {
		n = append(n, c)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(n)))
	s := make([]string, len(n))
	for i, c := range n {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, "/")
}

// EtcdClusterSpecInput describes an EtcdCluster to create.
type EtcdClusterSpecInput struct {
	T         testing.TB
	Topology  *Topology
	Namespace string
	Name      string
	Domain    string
	Replicas  int
	// WantZones is the expected placement, e.g. "2/2/1".
	WantZones string
	// Version is spec.version; default 3.6.16 (bin/etcd). The suite was
	// built around 3.6: its restore checks run bin/etcd on a ring's
	// snapshot and the lifecycle test rolls rings to the 3.6.16 image, so
	// the policy's default (3.7.3) is not the suite's yet; the scenarios
	// that name 3.7 (TestScenarioUpgrade, TestScenarioDowngrade37) and
	// `etcdfed dev up` run it.
	Version string
	// Spec, when set, edits the spec before the EtcdCluster is created.
	Spec func(*etcdfedv1.EtcdClusterSpec)
	// Labels of the EtcdCluster (a hub shard's selector chooses by them).
	Labels map[string]string
	// NotTolerant: the placement cannot survive a zone's loss (a ring on
	// two single-zone clusters); FailureTolerant is not waited for.
	NotTolerant bool
}

// EtcdClusterSpec creates an EtcdCluster through the hub and waits until
// it is Available, all members ready, failure tolerant, placed as
// WantZones, and every member's record resolves to its address on every
// ring DNS server. It measures the time to Available.
func EtcdClusterSpec(ctx context.Context, in EtcdClusterSpecInput) *ManagedEtcd {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	if err := ensureNamespace(ctx, hub, in.Namespace); err != nil {
		t.Fatal(err)
	}
	if in.Version == "" {
		in.Version = "3.6.16"
	}
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name, Labels: in.Labels},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: int32(in.Replicas),
			Version:  in.Version,
			DNS:      etcdfedv1.DNSSpec{Domain: in.Domain, TTLSeconds: ptrTo[int32](5)},
			TLS:      etcdfedv1.TLSSpec{PeerSkipClientSANVerification: !in.Topology.PeerSourceIsPodIP},
			FailurePolicy: etcdfedv1.FailurePolicy{
				MemberGracePeriod: &metav1.Duration{Duration: 2 * time.Minute},
				ZoneGracePeriod:   &metav1.Duration{Duration: 30 * time.Second},
			},
		},
	}
	if in.Spec != nil {
		in.Spec(&ec.Spec)
	}
	start := time.Now()
	if err := hub.Client.Create(ctx, ec); err != nil {
		t.Fatalf("create EtcdCluster: %v", err)
	}
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Namespace, Name: in.Name, Replicas: in.Replicas, Tolerant: !in.NotTolerant})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EtcdCluster %s: %d members ready and failure tolerant %.1fs after creation; placement %s", in.Name, in.Replicas, time.Since(start).Seconds(), got.Status.ZoneSummary)
	if in.WantZones != "" {
		if z := ZoneCounts(got); z != in.WantZones {
			t.Fatalf("placement %s, want %s (%s)", z, in.WantZones, got.Status.ZoneSummary)
		}
	}
	for _, m := range got.Status.Members {
		if err := WaitForRecordResolves(ctx, WaitForRecordResolvesInput{Servers: in.Topology.DNSServers, Name: MemberHost(m.Name, in.Domain), Address: m.Address}); err != nil {
			t.Fatal(err)
		}
	}
	tlsCfg, err := ClientTLS(ctx, hub, got)
	if err != nil {
		t.Fatal(err)
	}
	return &ManagedEtcd{Namespace: in.Namespace, Name: in.Name, Domain: in.Domain,
		Client: EtcdClientConfig{Endpoints: got.Status.Endpoints, DNSServers: in.Topology.DNSServers, TLS: tlsCfg}}
}

// SetReplicas changes spec.replicas.
func SetReplicas(ctx context.Context, hub *Cluster, m *ManagedEtcd, n int) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	ec.Spec.Replicas = int32(n)
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}

// LearnerWatch samples etcd's member list and records the most learners
// seen at once and how many samples saw one.
type LearnerWatch struct {
	Max, SamplesWithLearner, Samples atomic.Int64
	stop                             context.CancelFunc
	done                             chan struct{}
}

// WatchLearners samples every 50 ms until Stop.
func WatchLearners(ctx context.Context, c *clientv3.Client) *LearnerWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &LearnerWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			lctx, lcancel := context.WithTimeout(ctx, time.Second)
			resp, err := c.MemberList(lctx, clientv3.WithSerializable())
			lcancel()
			if err == nil {
				n := int64(0)
				for _, m := range resp.Members {
					if m.IsLearner {
						n++
					}
				}
				w.Samples.Add(1)
				if n > 0 {
					w.SamplesWithLearner.Add(1)
				}
				for {
					old := w.Max.Load()
					if n <= old || w.Max.CompareAndSwap(old, n) {
						break
					}
				}
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}()
	return w
}

// Stop ends the sampling.
func (w *LearnerWatch) Stop() { w.stop(); <-w.done }

// ScaleUnderLoadSpecInput scales an EtcdCluster through several sizes.
type ScaleUnderLoadSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	Sizes    []int
}

// ScaleUnderLoadSpec changes replicas through Sizes while a recorded
// workload runs. It requires that etcd never held more than one learner,
// that a learner was observed during scale-ups, and that the history is
// linearizable with no acknowledged write lost and the watches complete
// and in order.
func ScaleUnderLoadSpec(ctx context.Context, in ScaleUnderLoadSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	// No watcher per endpoint: scaling down may remove a member whose
	// endpoint the workload was given.
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "scale/"})
	watcher, err := EtcdClient(in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	learners := WatchLearners(ctx, watcher)
	defer learners.Stop()
	waitForWorkloadProgress(ctx, t, w)
	scaledUp := false
	prev := -1
	var ec *etcdfedv1.EtcdCluster
	for _, n := range in.Sizes {
		if prev >= 0 && n > prev {
			scaledUp = true
		}
		prev = n
		start := time.Now()
		if err := SetReplicas(ctx, hub, in.Etcd, n); err != nil {
			t.Fatal(err)
		}
		ec, err = WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: n, Tolerant: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("scaled to %d in %.1fs, placement %s, %d writes acknowledged so far", n, time.Since(start).Seconds(), ec.Status.ZoneSummary, w.Acked())
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := w.WaitForProgress(pctx, 20); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	learners.Stop()
	w.Stop()
	t.Logf("learners: at most %d at once, seen in %d of %d member-list samples; longest gap between acknowledged writes %s",
		learners.Max.Load(), learners.SamplesWithLearner.Load(), learners.Samples.Load(), w.MaxWriteGap().Round(time.Millisecond))
	if learners.Max.Load() > 1 {
		t.Errorf("etcd held %d learners at once; the hub adds one at a time", learners.Max.Load())
	}
	if scaledUp && learners.SamplesWithLearner.Load() == 0 {
		t.Errorf("no learner observed during scale-up: members were not added as learners (or sampling missed them)")
	}
	checkWorkload(ctx, t, w)
	// The members left need not be the ones the ring began with (a scale
	// down removes whichever members placement gives up, main-1 as well as
	// main-4): what follows reaches the ring through its endpoints now, so
	// that a watcher per endpoint watches members that answer.
	if ec != nil && len(ec.Status.Endpoints) > 0 {
		if !slices.Equal(in.Etcd.Client.Endpoints, ec.Status.Endpoints) {
			t.Logf("the ring's endpoints are now %v (were %v)", ec.Status.Endpoints, in.Etcd.Client.Endpoints)
		}
		in.Etcd.Client.Endpoints = slices.Clone(ec.Status.Endpoints)
	}
}

// memberIDs returns name -> hex ID from etcd's member list.
func memberIDs(ctx context.Context, cfg EtcdClientConfig) (map[string]string, error) {
	c, err := EtcdClient(cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.MemberList(lctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range resp.Members {
		out[m.Name] = fmt.Sprintf("%x", m.ID)
	}
	return out, nil
}

// PodDeletedSpecInput names a member whose pod is deleted.
type PodDeletedSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	Member   string
}

// PodDeletedSpec deletes a member's pod in its member cluster. The spoke
// must recreate it on the same volume: the member comes back with the same
// etcd ID, the member list is unchanged, and the hub makes no membership
// change (no new incarnation).
func PodDeletedSpec(ctx context.Context, in PodDeletedSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	before, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	var ms etcdfedv1.MemberStatus
	for _, m := range ec.Status.Members {
		if m.Name == in.Member {
			ms = m
		}
	}
	var cl *Cluster
	for _, c := range in.Topology.Members {
		if c.Name == ms.Cluster {
			cl = c
		}
	}
	if cl == nil {
		t.Fatalf("member %s: cluster %q not in the topology", in.Member, ms.Cluster)
	}
	podName := in.Etcd.ObjectName(in.Member)
	pod, err := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Delete(ctx, podName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = WaitForPodReplaced(ctx, WaitForPodInput{Cluster: cl, Namespace: etcdfedv1.DefaultRingNamespace, Name: podName}, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	after, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(ec.Status.Members)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod of %s recreated and the cluster ready again %.1fs after the deletion", in.Member, time.Since(start).Seconds())
	ids, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids) != fmt.Sprint(before) {
		t.Errorf("member list changed: before %v, after %v", before, ids)
	}
	if after.Status.LastIncarnation != ec.Status.LastIncarnation {
		t.Errorf("the hub made a new incarnation (%d -> %d) for a deleted pod", ec.Status.LastIncarnation, after.Status.LastIncarnation)
	}
	for _, m := range after.Status.Members {
		if m.Name == in.Member && (m.ID != ms.ID || m.Incarnation != ms.Incarnation) {
			t.Errorf("%s: ID %s incarnation %d, want %s and %d", m.Name, m.ID, m.Incarnation, ms.ID, ms.Incarnation)
		}
	}
}

// HubRestartSpecInput scales an EtcdCluster up and kills the hub mid-way.
type HubRestartSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	To       int
}

// HubRestartSpec raises replicas, kills the hub as soon as an added member
// is a learner in etcd (the operation is recorded, the learner added, not
// yet promoted), and requires that the restarted hub finishes with the
// right membership: To voters, each name once, no learner, every member
// ready.
func HubRestartSpec(ctx context.Context, in HubRestartSpecInput) {
	t := in.T
	t.Helper()
	if in.Topology.KillHub == nil {
		t.Skip("HubRestartSpec: the topology cannot kill the hub")
	}
	hub := in.Topology.Hub
	c, err := EtcdClient(in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := SetReplicas(ctx, hub, in.Etcd, in.To); err != nil {
		t.Fatal(err)
	}
	err = WaitForLearner(ctx, c, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Topology.KillHub(ctx); err != nil {
		t.Fatal(err)
	}
	step := "-"
	if ec.Status.Operation != nil {
		step = string(ec.Status.Operation.Type) + " " + ec.Status.Operation.Member + " at " + ec.Status.Operation.Step
	}
	t.Logf("killed the hub with a learner in etcd (operation: %s)", step)
	start := time.Now()
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: in.To, Tolerant: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted hub finished the scale-up %.1fs after the kill; placement %s", time.Since(start).Seconds(), got.Status.ZoneSummary)
	resp, err := c.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range resp.Members {
		if m.IsLearner {
			t.Errorf("member %s [%x] is still a learner", m.Name, m.ID)
		}
		names = append(names, m.Name)
	}
	sort.Strings(names)
	if len(names) != in.To || len(slices.Compact(slices.Clone(names))) != in.To {
		t.Errorf("etcd members %v, want %d distinct", names, in.To)
	}
}

// DeleteEtcdClusterSpec deletes the EtcdCluster and waits until the hub
// removed its finalizer and its EtcdMember objects are gone from every
// member cluster.
func DeleteEtcdClusterSpec(ctx context.Context, t testing.TB, topo *Topology, m *ManagedEtcd) {
	t.Helper()
	ec, err := m.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.Hub.Client.Delete(ctx, ec); err != nil {
		t.Fatal(err)
	}
	err = WaitForRingGone(ctx, topo, m, ec.UID, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// DiscoverySRVSpecInput runs etcdctl against an EtcdCluster's domain.
type DiscoverySRVSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Etcdctl is the etcdctl binary (built from go.etcd.io/etcd/etcdctl at
	// the pinned version).
	Etcdctl string
}

// DiscoverySRVSpec runs `etcdctl --discovery-srv <domain>` with a client
// certificate: it must find every member through the SRV records, list
// them, and write and read a key. etcdctl resolves through the ring's DNS
// (ETCDFED_DNS_SERVERS, honoured by our etcdctl build).
func DiscoverySRVSpec(ctx context.Context, in DiscoverySRVSpecInput) {
	t := in.T
	t.Helper()
	ec, err := in.Etcd.Get(ctx, in.Topology.Hub)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, leaf, err := ClientCert(ctx, in.Topology.Hub, ec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": caPEM, "client.crt": leaf.CertPEM, "client.key": leaf.KeyPEM}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		base := []string{"--discovery-srv", strings.TrimSuffix(in.Etcd.Domain, "."),
			"--cacert", filepath.Join(dir, "ca.crt"), "--cert", filepath.Join(dir, "client.crt"), "--key", filepath.Join(dir, "client.key")}
		cmd := exec.CommandContext(cctx, in.Etcdctl, append(base, args...)...)
		cmd.Env = append(os.Environ(), "ETCDFED_DNS_SERVERS="+strings.Join(in.Topology.DNSServers, ","))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("etcdctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	list := run("member", "list", "-w", "simple")
	for _, m := range ec.Status.Members {
		if !strings.Contains(list, ", "+m.Name+", ") {
			t.Errorf("etcdctl --discovery-srv member list lacks %s:\n%s", m.Name, list)
		}
	}
	run("put", "discovery-srv", "works")
	if got := run("get", "discovery-srv", "--print-value-only"); strings.TrimSpace(got) != "works" {
		t.Errorf("get through --discovery-srv: %q", got)
	}
	t.Logf("etcdctl --discovery-srv %s found %d members:\n%s", in.Etcd.Domain, len(ec.Status.Members), strings.TrimSpace(list))
}

// CordonZoneSpecInput cordons the zone of one member.
type CordonZoneSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	Member   string
}

// CordonZoneSpec cordons the zone of Member while a recorded workload runs:
// the hub must move the member to another cluster (a Move under the same
// name, make before break: a new incarnation elsewhere joins and is
// promoted, then the old ID is removed) and report
// the placement no longer tolerant; after the cordon is lifted it must move
// a member back until the placement is tolerant again. The history must be
// linearizable with no acknowledged write lost and the watches complete
// and in order.
func CordonZoneSpec(ctx context.Context, in CordonZoneSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	var zone string
	for _, m := range ec.Status.Members {
		if m.Name == in.Member {
			zone = m.Zone
		}
	}
	if zone == "" && len(ec.Status.Members) > 0 {
		// An earlier scale down may have removed the member named.
		t.Logf("member %s is not in the ring (%s); cordoning the zone of %s", in.Member, ec.Status.ZoneSummary, ec.Status.Members[0].Name)
		zone = ec.Status.Members[0].Zone
	}
	if zone == "" {
		t.Fatalf("member %s has no zone", in.Member)
	}
	replicas := len(ec.Status.Members)
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "cordon/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	setCordon := func(zones []string) {
		t.Helper()
		ec, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			t.Fatal(err)
		}
		before := ec.DeepCopy()
		ec.Spec.Topology.CordonedZones = zones
		if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	setCordon([]string{zone})
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "no member left in cordoned zone " + zone, Timeout: 3 * time.Minute, Until: func(got *etcdfedv1.EtcdCluster) string {
		if why := evacuated(got, "zone "+zone, replicas, func(m etcdfedv1.MemberStatus) bool { return m.Zone == zone }); why != "" {
			return why
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, etcdfedv1.ConditionFailureTolerant) {
			return "FailureTolerant still True with a zone cordoned"
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := in.Etcd.Get(ctx, hub)
	c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionFailureTolerant)
	t.Logf("zone %s evacuated in %.1fs: placement %s; FailureTolerant=%s: %s", zone, time.Since(start).Seconds(), got.Status.ZoneSummary, c.Status, c.Message)

	start = time.Now()
	setCordon(nil)
	got, err = WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: replicas, Tolerant: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cordon lifted: tolerant again after %.1fs, placement %s", time.Since(start).Seconds(), got.Status.ZoneSummary)
	w.Stop()
	t.Logf("longest gap between acknowledged writes: %s", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}
