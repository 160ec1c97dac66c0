package multicluster

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/faultproxy"
)

// Failure scenarios (issue "Failures and drills"): each damages one
// member, zone or path under a recorded workload and requires that the hub
// does what membership rules 5 to 10 say, and no more.

// SetFailurePolicy changes spec.failurePolicy's grace periods (zero keeps
// the current value).
func SetFailurePolicy(ctx context.Context, hub *Cluster, m *ManagedEtcd, memberGrace, zoneGrace time.Duration) error {
	ec, err := m.Get(ctx, hub)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	if memberGrace > 0 {
		ec.Spec.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: memberGrace}
	}
	if zoneGrace > 0 {
		ec.Spec.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: zoneGrace}
	}
	return hub.Client.Patch(ctx, ec, client.MergeFrom(before))
}

func memberOf(ec *etcdfedv1.EtcdCluster, name string) (etcdfedv1.MemberStatus, bool) {
	for _, m := range ec.Status.Members {
		if m.Name == name {
			return m, true
		}
	}
	return etcdfedv1.MemberStatus{}, false
}

func clusterNamed(topo *Topology, name string) *Cluster {
	for _, c := range topo.Members {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// incarnations is name -> "cluster/incarnation/ID" of every member.
func incarnations(ec *etcdfedv1.EtcdCluster) map[string]string {
	out := map[string]string{}
	for _, m := range ec.Status.Members {
		out[m.Name] = fmt.Sprintf("%s/%d/%s", m.Cluster, m.Incarnation, m.ID)
	}
	return out
}

// WaitForReplacedInput names a member that must come back as a new
// incarnation.
type WaitForReplacedInput struct {
	Hub  *Cluster
	Etcd *ManagedEtcd
	// Old is the member as it was before it failed.
	Old etcdfedv1.MemberStatus
	// Replicas the ring has once it is done.
	Replicas int
	// InCluster, when set, is where the new incarnation must be; NotIn,
	// when set, where it must not be.
	InCluster, NotIn string
	Timeout          time.Duration
}

// WaitForReplaced waits until the member is a ready voter again under the
// same name with a higher incarnation and another etcd ID, the ring ready
// with Replicas members and no operation in flight.
func WaitForReplaced(ctx context.Context, in WaitForReplacedInput) (etcdfedv1.MemberStatus, error) {
	var got etcdfedv1.MemberStatus
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: in.Hub, Etcd: in.Etcd, What: in.Old.Name + " replaced by a new incarnation", Timeout: orDefault(in.Timeout, 5*time.Minute), Until: func(ec *etcdfedv1.EtcdCluster) string {
		m, ok := memberOf(ec, in.Old.Name)
		switch {
		case !ok:
			return describeEtcdCluster(ec, in.Old.Name+" not in status")
		case m.Incarnation <= in.Old.Incarnation || m.ID == "" || m.ID == in.Old.ID:
			return describeEtcdCluster(ec, fmt.Sprintf("%s incarnation %d ID %s", m.Name, m.Incarnation, m.ID))
		case in.InCluster != "" && m.Cluster != in.InCluster, in.NotIn != "" && m.Cluster == in.NotIn:
			return describeEtcdCluster(ec, fmt.Sprintf("%s in %s", m.Name, m.Cluster))
		case !m.Ready || int(ec.Status.ReadyMembers) != in.Replicas || len(ec.Status.Members) != in.Replicas || ec.Status.Operation != nil:
			return describeEtcdCluster(ec, fmt.Sprintf("%d of %d ready", ec.Status.ReadyMembers, len(ec.Status.Members)))
		}
		got = m
		return ""
	}})
	return got, err
}

// checkRecordFollows requires that the member's record resolves to its
// current address on every ring DNS server but those of the clusters in
// down (killed: their spokes serve nothing).
func checkRecordFollows(ctx context.Context, t testing.TB, topo *Topology, m *ManagedEtcd, ms etcdfedv1.MemberStatus, down ...string) {
	t.Helper()
	servers := topo.DNSServers
	if len(down) > 0 && topo.DNSServerOf != nil {
		servers = nil
		for _, c := range topo.Members {
			if !slices.Contains(down, c.Name) {
				servers = append(servers, topo.DNSServerOf[c.Name])
			}
		}
	}
	if err := WaitForRecordResolves(ctx, WaitForRecordResolvesInput{Servers: servers, Name: MemberHost(ms.Name, m.Domain), Address: ms.Address}); err != nil {
		t.Fatalf("DNS does not follow %s: %v", ms.Name, err)
	}
}

// startScenarioWorkload starts the recorded workload (one watcher per
// endpoint too) and waits for its first writes.
func startScenarioWorkload(ctx context.Context, t testing.TB, m *ManagedEtcd, prefix string) *Workload {
	t.Helper()
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: m.Client, Prefix: fmt.Sprintf("%s-%d/", prefix, time.Now().UnixNano()), WatchEachEndpoint: true})
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.WaitForProgress(pctx, 50); err != nil {
		t.Fatal(err)
	}
	return w
}

// progress waits for n more acknowledged writes.
func progress(ctx context.Context, t testing.TB, w *Workload, n int64, within time.Duration) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := w.WaitForProgress(pctx, n); err != nil {
		t.Fatal(err)
	}
}

// VolumeLostSpecInput names the member whose volume is deleted.
type VolumeLostSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	Member   string
}

// VolumeLostSpec deletes a member's PVC (and its pod, which holds the
// claim until it goes, as a lost disk takes its pod with it) under a
// recorded workload. The spoke must report the volume lost and not
// recreate it; the hub must replace the member under the same name with a
// new incarnation (new etcd ID, new PVC) in the same healthy failure
// domain, its DNS record must follow, and the hub must say so with a
// MemberReplaced event.
func VolumeLostSpec(ctx context.Context, in VolumeLostSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	old, ok := memberOf(ec, in.Member)
	cl := clusterNamed(in.Topology, old.Cluster)
	if !ok || cl == nil {
		t.Fatalf("member %s (cluster %q) not found", in.Member, old.Cluster)
	}
	em := &etcdfedv1.EtcdMember{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: in.Etcd.ObjectName(in.Member)}, em); err != nil {
		t.Fatal(err)
	}
	claim := em.Status.Volume.ClaimName
	if claim == "" {
		t.Fatalf("EtcdMember %s reports no volume", in.Member)
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "volume-lost")

	start := time.Now()
	pvcs := cl.Clientset.CoreV1().PersistentVolumeClaims(etcdfedv1.DefaultRingNamespace)
	if err := pvcs.Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Delete(ctx, in.Etcd.ObjectName(in.Member), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	t.Logf("deleted PVC %s (UID %s) and pod %s in %s", claim, em.Status.Volume.UID, in.Member, cl.Name)
	got, err := WaitForReplaced(ctx, WaitForReplacedInput{Hub: hub, Etcd: in.Etcd, Old: old, Replicas: len(ec.Status.Members), InCluster: old.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s replaced %.1fs after its volume was deleted: incarnation %d -> %d, ID %s -> %s, in %s/%s", in.Member, time.Since(start).Seconds(),
		old.Incarnation, got.Incarnation, old.ID, got.ID, got.Cluster, got.Zone)
	checkRecordFollows(ctx, t, in.Topology, in.Etcd, got)
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: in.Etcd.ObjectName(in.Member)}, em); err != nil {
		t.Fatal(err)
	}
	if em.Status.Volume.ClaimName == claim || em.Spec.Incarnation != got.Incarnation {
		t.Errorf("the new incarnation runs on claim %s (incarnation %d), want a new claim for incarnation %d", em.Status.Volume.ClaimName, em.Spec.Incarnation, got.Incarnation)
	}
	note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventMemberReplaced, in.Member, "volume")
	if err != nil {
		t.Error(err)
	}
	t.Logf("event %s: %s", etcdfedv1.EventMemberReplaced, note)
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	checkWorkload(ctx, t, w)
}

// ZoneDrainedSpecInput names the member whose zone is drained.
type ZoneDrainedSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	Member   string
	// MemberGrace is set in the spec before the zone is drained.
	MemberGrace time.Duration
}

// ZoneDrainedSpec cordons every node of the (single-zone) member cluster
// of Member and deletes Member's pod, as a drain of the whole zone does,
// under a recorded workload. The new pod cannot be scheduled: the spoke
// must report the zone unschedulable, Degraded must say so, and once the
// member has been unhealthy for MemberGrace the hub must move it, under
// its name with a new incarnation, to another cluster (Evacuating with
// the evidence, MemberReplaced), not replace it in place; DNS follows.
// Uncordoned, the zone takes a member back until the ring is tolerant.
func ZoneDrainedSpec(ctx context.Context, in ZoneDrainedSpecInput) {
	t := in.T
	t.Helper()
	d := drainZone(ctx, in, "zone-drained")
	hub, old := d.hub, d.old
	if err := d.cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Delete(ctx, in.Etcd.ObjectName(in.Member), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	t.Logf("cordoned the node(s) of %s and deleted pod %s", d.cl.Name, in.Member)
	waitForClosedZone(ctx, t, hub, in.Etcd, old, d.start)
	got, err := WaitForReplaced(ctx, WaitForReplacedInput{Hub: hub, Etcd: in.Etcd, Old: old, Replicas: d.replicas, NotIn: old.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s moved %.1fs after the cordon (grace %s): incarnation %d -> %d, ID %s -> %s, now in %s/%s", in.Member, time.Since(d.start).Seconds(), in.MemberGrace,
		old.Incarnation, got.Incarnation, old.ID, got.ID, got.Cluster, got.Zone)
	checkRecordFollows(ctx, t, in.Topology, in.Etcd, got)
	note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventEvacuating, in.Member, "takes new pods")
	if err != nil {
		t.Error(err)
	}
	t.Logf("event %s: %s", etcdfedv1.EventEvacuating, note)
	if _, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventMemberReplaced, in.Member); err != nil {
		t.Error(err)
	}
	d.heal(ctx, t, in)
}

// drainedZone is the member cluster of a scenario's member, every node
// cordoned, under a recorded workload (ZoneDrainedSpec, StartGivenUpSpec).
type drainedZone struct {
	hub, cl    *Cluster
	old        etcdfedv1.MemberStatus
	replicas   int
	w          *Workload
	cordon     func(on bool)
	uncordoned bool
	// start is when the nodes were cordoned.
	start time.Time
}

// drainZone sets the member grace, starts the recorded workload and
// cordons every node of in.Member's cluster (uncordoned at cleanup unless
// heal did it).
func drainZone(ctx context.Context, in ZoneDrainedSpecInput, prefix string) *drainedZone {
	t := in.T
	t.Helper()
	d := &drainedZone{hub: in.Topology.Hub}
	if err := SetFailurePolicy(ctx, d.hub, in.Etcd, in.MemberGrace, 0); err != nil {
		t.Fatal(err)
	}
	ec, err := in.Etcd.Get(ctx, d.hub)
	if err != nil {
		t.Fatal(err)
	}
	var ok bool
	d.old, ok = memberOf(ec, in.Member)
	d.cl = clusterNamed(in.Topology, d.old.Cluster)
	if !ok || d.cl == nil {
		t.Fatalf("member %s (cluster %q) not found", in.Member, d.old.Cluster)
	}
	d.replicas = len(ec.Status.Members)
	d.w = startScenarioWorkload(ctx, t, in.Etcd, prefix)

	d.start = time.Now()
	d.cordon = cordonCluster(ctx, t, d.cl)
	d.cordon(true)
	t.Cleanup(func() {
		if !d.uncordoned {
			d.cordon(false)
		}
	})
	return d
}

// heal waits for 50 more writes, uncordons the nodes, waits for the ring to
// be tolerant again with as many members as before, and checks the
// workload.
func (d *drainedZone) heal(ctx context.Context, t testing.TB, in ZoneDrainedSpecInput) {
	t.Helper()
	progress(ctx, t, d.w, 50, 30*time.Second)
	start := time.Now()
	d.uncordoned = true
	d.cordon(false)
	back, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: d.hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: d.replicas, Tolerant: true, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("uncordoned: tolerant again after %.1fs, placement %s", time.Since(start).Seconds(), back.Status.ZoneSummary)
	progress(ctx, t, d.w, 50, 30*time.Second)
	d.w.Stop()
	checkWorkload(ctx, t, d.w)
}

// cordonCluster returns a function that cordons (true) or uncordons
// (false) every node of cl.
func cordonCluster(ctx context.Context, t testing.TB, cl *Cluster) func(on bool) {
	t.Helper()
	nodes, err := cl.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return func(on bool) {
		t.Helper()
		for _, n := range nodes.Items {
			patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
			if _, err := cl.Clientset.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// waitForClosedZone waits for Degraded to say that no node of old's zone
// takes new pods, and logs how long after start it did.
func waitForClosedZone(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, old etcdfedv1.MemberStatus, start time.Time) {
	t.Helper()
	zone := fmt.Sprintf("%s/%s", old.Cluster, old.Zone)
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: m, What: "Degraded saying no node of " + zone + " takes new pods", Timeout: time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionDegraded)
		if c == nil || !strings.Contains(c.Message, "no node of "+zone+" takes new pods") {
			return fmt.Sprintf("Degraded %v", c)
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Degraded said the zone takes no new pods %.1fs after the cordon", time.Since(start).Seconds())
}

// StartGivenUpSpec loses a member's volume while its (single-zone)
// cluster is drained, under a recorded workload: every node cordoned, then
// the member's PVC and pod deleted. The hub replaces a member that lost
// its volume in place, so the new incarnation is placed where no pod can
// start. Once the zone has been closed for MemberGrace since the
// replacement began, the hub must give that start up (MemberStartGivenUp,
// its learner removed if it had one) and place the member, under its
// name, in another cluster, where it becomes a ready voter; nothing else
// may wait behind it for ever. Uncordoned, the ring is tolerant again.
func StartGivenUpSpec(ctx context.Context, in ZoneDrainedSpecInput) {
	t := in.T
	t.Helper()
	d := drainZone(ctx, in, "start-given-up")
	hub, old, cl := d.hub, d.old, d.cl
	waitForClosedZone(ctx, t, hub, in.Etcd, old, d.start)
	em := &etcdfedv1.EtcdMember{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: in.Etcd.ObjectName(in.Member)}, em); err != nil {
		t.Fatal(err)
	}
	if err := cl.Clientset.CoreV1().PersistentVolumeClaims(etcdfedv1.DefaultRingNamespace).Delete(ctx, em.Status.Volume.ClaimName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Delete(ctx, in.Etcd.ObjectName(in.Member), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	lost := time.Now()
	t.Logf("cordoned the node(s) of %s, then deleted PVC %s and pod %s", cl.Name, em.Status.Volume.ClaimName, in.Member)
	note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventMemberStartGivenUp, in.Member, "has taken new pods")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("event %s %.1fs after the volume was lost (grace %s): %s", etcdfedv1.EventMemberStartGivenUp, time.Since(lost).Seconds(), in.MemberGrace, note)
	got, err := WaitForReplaced(ctx, WaitForReplacedInput{Hub: hub, Etcd: in.Etcd, Old: old, Replicas: d.replicas, NotIn: old.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s a ready voter again %.1fs after the volume was lost: incarnation %d -> %d, ID %s -> %s, now in %s/%s", in.Member, time.Since(lost).Seconds(),
		old.Incarnation, got.Incarnation, old.ID, got.ID, got.Cluster, got.Zone)
	checkRecordFollows(ctx, t, in.Topology, in.Etcd, got)
	d.heal(ctx, t, in)
}

// CrashLoopSpecInput names the member made to crash-loop.
type CrashLoopSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	Member   string
	// MemberGrace is set in the spec before the member is broken.
	MemberGrace time.Duration
}

// CrashLoopSpec breaks a member so that etcd exits at every start (its
// bbolt database file replaced by garbage, the running process keeping the
// old file until its pod is deleted), under a recorded workload. The pod
// must crash-loop; once that has lasted memberGracePeriod the hub must
// replace the member under the same name with a new incarnation in the
// same failure domain, DNS must follow, and a MemberReplaced event must
// say since when the member was unhealthy.
func CrashLoopSpec(ctx context.Context, in CrashLoopSpecInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	if topo.VolumeDir == nil {
		t.Skip("CrashLoopSpec: the topology cannot reach member volumes")
	}
	hub := topo.Hub
	if err := SetFailurePolicy(ctx, hub, in.Etcd, in.MemberGrace, 0); err != nil {
		t.Fatal(err)
	}
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	old, ok := memberOf(ec, in.Member)
	cl := clusterNamed(topo, old.Cluster)
	if !ok || cl == nil {
		t.Fatalf("member %s (cluster %q) not found", in.Member, old.Cluster)
	}
	em := &etcdfedv1.EtcdMember{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: in.Etcd.ObjectName(in.Member)}, em); err != nil {
		t.Fatal(err)
	}
	pvc, err := cl.Clientset.CoreV1().PersistentVolumeClaims(etcdfedv1.DefaultRingNamespace).Get(ctx, em.Status.Volume.ClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := topo.VolumeDir(cl.Name, pvc.Spec.VolumeName)
	db, err := findFile(dir, filepath.Join("member", "snap", "db"))
	if err != nil {
		t.Fatalf("etcd database of %s in %s: %v", in.Member, dir, err)
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "crash-loop")

	// A new file renamed over the database: the running etcd keeps its
	// open (old) file; every later start opens the garbage.
	garbage := db + ".garbage"
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a bbolt database\n", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(garbage, db); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pods := cl.Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace)
	if err := pods.Delete(ctx, in.Etcd.ObjectName(in.Member), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("replaced %s's database with garbage and deleted its pod", in.Member)
	restarts, err := WaitForRestarts(ctx, WaitForPodInput{Cluster: cl, Namespace: etcdfedv1.DefaultRingNamespace, Name: in.Etcd.ObjectName(in.Member), Timeout: 2 * time.Minute}, "etcd", 2)
	if err != nil {
		// The hub may already have replaced it (a fast grace): that is
		// judged below; only an etcd that keeps running is a setup failure.
		t.Logf("crash loop not observed: %v", err)
	} else {
		t.Logf("%s crash-looping %.1fs after its pod was deleted (%d restarts)", in.Member, time.Since(start).Seconds(), restarts)
	}
	got, err := WaitForReplaced(ctx, WaitForReplacedInput{Hub: hub, Etcd: in.Etcd, Old: old, Replicas: len(ec.Status.Members), InCluster: old.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%s replaced %.1fs after it started crash-looping (grace %s): incarnation %d -> %d, ID %s -> %s", in.Member, took.Seconds(), in.MemberGrace,
		old.Incarnation, got.Incarnation, old.ID, got.ID)
	if took < in.MemberGrace {
		t.Errorf("replaced after %s, before its grace of %s", took, in.MemberGrace)
	}
	checkRecordFollows(ctx, t, topo, in.Etcd, got)
	note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventMemberReplaced, in.Member, "unhealthy since")
	if err != nil {
		t.Error(err)
	}
	t.Logf("event %s: %s", etcdfedv1.EventMemberReplaced, note)
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	checkWorkload(ctx, t, w)
}

// findFile finds the file whose path ends in suffix under dir.
func findFile(dir, suffix string) (string, error) {
	var found string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, string(filepath.Separator)+suffix) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if err == nil && found == "" {
		err = fmt.Errorf("no %s", suffix)
	}
	return found, err
}

// ZoneKilledAndReturnedSpecInput kills the member cluster holding most
// members.
type ZoneKilledAndReturnedSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// WantZones is the placement before the kill and after the return.
	WantZones string
}

// moveLeaderInto moves etcd's leadership, unless it is there already, to
// the member of ec named first among those placed in cluster, and waits
// until the EtcdCluster's status names the new leader. It returns the
// EtcdCluster as last read.
func moveLeaderInto(ctx context.Context, t testing.TB, topo *Topology, m *ManagedEtcd, ec *etcdfedv1.EtcdCluster, cluster string) *etcdfedv1.EtcdCluster {
	t.Helper()
	target := ""
	for _, mem := range ec.Status.Members {
		if mem.Cluster != cluster {
			continue
		}
		if mem.Name == ec.Status.Leader {
			return ec
		}
		if target == "" || mem.Name < target {
			target = mem.Name
		}
	}
	if target == "" {
		t.Fatalf("no member in %s: %s", cluster, ec.Status.ZoneSummary)
	}
	cfg := m.Client
	cfg.Endpoints = slices.DeleteFunc(slices.Clone(cfg.Endpoints), func(ep string) bool { return !strings.Contains(ep, "//"+ec.Status.Leader+".") })
	c, err := EtcdClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := c.MemberList(rctx)
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	for _, mem := range list.Members {
		if mem.Name == target {
			id = mem.ID
		}
	}
	if _, err := c.MoveLeader(rctx, id); err != nil {
		t.Fatalf("move leadership from %s to %s: %v", ec.Status.Leader, target, err)
	}
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: topo.Hub, Etcd: m, What: "the hub to report " + target + " leading", Timeout: time.Minute, Until: func(got *etcdfedv1.EtcdCluster) string {
		if got.Status.Leader != target {
			return "leader " + got.Status.Leader
		}
		ec = got
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leadership moved to %s in %s", target, cluster)
	return ec
}

// ZoneKilledAndReturnedSpec kills the (single-zone) member cluster
// holding the most members, with etcd's leader moved there first (the
// worst single failure: the leader and a second voter lost at once),
// under a recorded workload. The hub must declare
// it failed (ZoneFailed), evacuate it after the zone grace (Evacuating,
// then a MemberReplaced per member, each moved to another cluster under
// its name), and once the cluster returns (ZoneReturned) move members
// back one at a time until the placement is WantZones and tolerant again.
func ZoneKilledAndReturnedSpec(ctx context.Context, in ZoneKilledAndReturnedSpecInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	if topo.FailZone == nil {
		t.Skip("ZoneKilledAndReturnedSpec: the topology cannot fail zones")
	}
	hub := topo.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	replicas := len(ec.Status.Members)
	count := map[string]int{}
	for _, m := range ec.Status.Members {
		count[m.Cluster]++
	}
	victim := ""
	for c, n := range count {
		if victim == "" || n > count[victim] || (n == count[victim] && c < victim) {
			victim = c
		}
	}
	var moved []etcdfedv1.MemberStatus
	for _, m := range ec.Status.Members {
		if m.Cluster == victim {
			moved = append(moved, m)
		}
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "zone-returned")
	ec = moveLeaderInto(ctx, t, topo, in.Etcd, ec, victim)

	start := time.Now()
	if err := topo.FailZone(ctx, victim, "kill"); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = topo.RestoreZone(context.Background(), victim)
		}
	})
	t.Logf("killed %s with %d of %d members, the leader %s among them", victim, len(moved), replicas, ec.Status.Leader)
	progress(ctx, t, w, 100, time.Minute)
	note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventZoneFailed, victim)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ZoneFailed %.1fs after the kill: %s", time.Since(start).Seconds(), note)
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "every member moved out of " + victim, Timeout: 6 * time.Minute, Until: func(ec *etcdfedv1.EtcdCluster) string {
		return evacuated(ec, victim, replicas, func(m etcdfedv1.MemberStatus) bool { return m.Cluster == victim })
	}})
	if err != nil {
		t.Fatal(err)
	}
	ec, _ = in.Etcd.Get(ctx, hub)
	t.Logf("%s evacuated %.1fs after the kill: placement %s", victim, time.Since(start).Seconds(), ec.Status.ZoneSummary)
	for _, old := range moved {
		m, _ := memberOf(ec, old.Name)
		if m.Incarnation <= old.Incarnation || m.ID == old.ID {
			t.Errorf("%s moved without a new incarnation: %+v (was %+v)", old.Name, m, old)
		}
		checkRecordFollows(ctx, t, topo, in.Etcd, m, victim)
		if _, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventMemberReplaced, old.Name, victim); err != nil {
			t.Error(err)
		}
	}
	if note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventEvacuating, victim); err != nil {
		t.Error(err)
	} else {
		t.Logf("event %s: %s", etcdfedv1.EventEvacuating, note)
	}
	progress(ctx, t, w, 50, 30*time.Second)

	start = time.Now()
	restored = true
	if err := topo.RestoreZone(ctx, victim); err != nil {
		t.Fatal(err)
	}
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: replicas, Tolerant: true, Timeout: 6 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s returned: tolerant again after %.1fs, placement %s", victim, time.Since(start).Seconds(), got.Status.ZoneSummary)
	if z := ZoneCounts(got); z != in.WantZones {
		t.Errorf("placement after the return %s, want %s", z, in.WantZones)
	}
	back := 0
	for _, m := range got.Status.Members {
		if m.Cluster == victim {
			back++
			checkRecordFollows(ctx, t, topo, in.Etcd, m)
		}
	}
	if back == 0 {
		t.Errorf("no member moved back to %s", victim)
	}
	if note, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventZoneReturned, victim); err != nil {
		t.Error(err)
	} else {
		t.Logf("event %s: %s", etcdfedv1.EventZoneReturned, note)
	}
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	t.Logf("longest gap between acknowledged writes: %s", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}

// nothingMoves samples the EtcdCluster and etcd's member list until ctx
// ends and returns the first change of membership it saw ("" for none):
// an operation in flight, or a member's cluster, incarnation or ID
// changed.
func nothingMoves(ctx context.Context, hub *Cluster, m *ManagedEtcd, want map[string]string, ids map[string]string) string {
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ec, err := m.Get(gctx, hub)
		cancel()
		if err == nil {
			if op := ec.Status.Operation; op != nil {
				return fmt.Sprintf("operation %s %s (%s) at %s", op.Type, op.Member, op.Reason, time.Now().Format(time.TimeOnly))
			}
			if got := incarnations(ec); fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Sprintf("members %v, were %v", got, want)
			}
		}
		if ids != nil {
			if got, err := memberIDs(ctx, m.Client); err == nil && fmt.Sprint(got) != fmt.Sprint(ids) {
				return fmt.Sprintf("etcd members %v, were %v", got, ids)
			}
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	return ""
}

// HubPartitionSpecInput cuts the hub off from one member cluster.
type HubPartitionSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	Cluster  string
	// Hold is how long the cut lasts: longer than both grace periods.
	Hold time.Duration
}

// HubPartitionSpec cuts the hub's path to one member cluster's apiserver
// (a proxy that stops answering), while that cluster's spoke, the other
// spokes and the etcd peers still reach it, for longer than both grace
// periods, under a recorded workload. By rule 8 the cluster is unknown to
// the hub, not failed: Degraded names it, but no operation starts, no
// member changes incarnation and etcd's member list stays the same. Once
// the path is back the hub says the cluster is back and the ring is ready.
func HubPartitionSpec(ctx context.Context, in HubPartitionSpecInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	if topo.HubMetricsURL == "" {
		t.Skip("HubPartitionSpec: the topology does not expose the hub's metrics")
	}
	hub := topo.Hub
	proxy, restore, err := RouteHubThrough(ctx, topo, in.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	restored := false
	defer func() {
		if !restored {
			_ = restore(ctx)
		}
	}()
	sleepCtx(ctx, 3*time.Second) // the hub notices the new registration
	if err := WaitForHubEngaged(ctx, topo.HubMetricsURL, in.Cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(mustMembers(t, ctx, hub, in.Etcd))}); err != nil {
		t.Fatal(err)
	}
	_, want, ids := ringBefore(ctx, t, hub, in.Etcd)
	w := startScenarioWorkload(ctx, t, in.Etcd, "hub-partition")

	proxy.SetMode(faultproxy.BlackHole)
	start := time.Now()
	t.Logf("the hub's path to %s cut (black hole) for %s", in.Cluster, in.Hold)
	hctx, cancel := context.WithTimeout(ctx, in.Hold)
	named := WatchForCondition(hctx, WaitForConditionInput{Hub: hub, Etcd: in.Etcd, Type: etcdfedv1.ConditionDegraded, Status: metav1.ConditionTrue, MessageHas: []string{in.Cluster}, Timeout: in.Hold})
	moved := nothingMoves(hctx, hub, in.Etcd, want, ids)
	cancel()
	seen := <-named
	wasNamed := seen.Condition != nil
	if wasNamed {
		t.Logf("Degraded after %.1fs: %s", seen.At.Sub(start).Seconds(), seen.Condition.Message)
	}
	progress(ctx, t, w, 50, 30*time.Second)
	proxy.SetMode(faultproxy.Forward)
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	restored = true
	if moved != "" {
		t.Fatalf("the hub moved a member while cut off from %s only: %s", in.Cluster, moved)
	}
	if !wasNamed {
		t.Errorf("Degraded never named %s while the hub could not reach it", in.Cluster)
	}
	if n, err := HubEventNotes(ctx, hub, in.Etcd, EventQuery{Reasons: []string{etcdfedv1.EventZoneFailed}}); err != nil || len(n) > 0 {
		t.Errorf("ZoneFailed told for a cluster cut off from the hub only: %v %v", n, err)
	}
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(want), Tolerant: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(incarnations(got)) != fmt.Sprint(want) {
		t.Errorf("members changed: %v, were %v", incarnations(got), want)
	}
	t.Logf("nothing moved in %s cut off from %s; ready again, members unchanged", in.Hold, in.Cluster)
	w.Stop()
	checkWorkload(ctx, t, w)
}

func mustMembers(t testing.TB, ctx context.Context, hub *Cluster, m *ManagedEtcd) []etcdfedv1.MemberStatus {
	t.Helper()
	ec, err := m.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	return ec.Status.Members
}

// HubDownZoneKillSpecInput stops the hub and kills a member's cluster.
type HubDownZoneKillSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	Member   string
	// Hold is how long the hub stays stopped after the kill: longer than
	// the zone grace.
	Hold time.Duration
}

// HubDownZoneKillSpec stops the hub, then kills the member cluster of
// Member, under a recorded workload. With no hub the data plane must go
// on: writes are acknowledged, every surviving spoke's DNS server answers
// every member's name with its address (real queries, sampled through the
// hold), and nothing moves (etcd's member list and the EtcdMember objects
// stay as they were) past the zone grace. Once the hub is started it must
// evacuate the failed cluster, and after the cluster returns the ring is
// tolerant again.
func HubDownZoneKillSpec(ctx context.Context, in HubDownZoneKillSpecInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	if topo.StopHub == nil || topo.FailZone == nil || topo.DNSServerOf == nil {
		t.Skip("HubDownZoneKillSpec: the topology cannot stop the hub, fail zones or name each cluster's DNS server")
	}
	hub := topo.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	replicas := len(ec.Status.Members)
	victim, ok := memberOf(ec, in.Member)
	if !ok {
		t.Fatalf("no member %s", in.Member)
	}
	ids, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	objects := func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		for _, c := range topo.Members {
			if c.Name == victim.Cluster {
				continue
			}
			var list etcdfedv1.EtcdMemberList
			if err := c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
				return nil, err
			}
			for _, o := range list.Items {
				out[c.Name+"/"+o.Name] = fmt.Sprintf("%d/%s", o.Spec.Incarnation, o.UID)
			}
		}
		return out, nil
	}
	objsBefore, err := objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "hub-down")

	if err := topo.StopHub(ctx); err != nil {
		t.Fatal(err)
	}
	hubStopped := true
	defer func() {
		if hubStopped {
			_ = topo.StartHub(ctx)
		}
	}()
	// Stopped on purpose, the hub handed its leader Lease over: its
	// successor does not wait the lease out.
	if topo.HubNamespace != "" {
		lease := &coordinationv1.Lease{}
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: topo.HubNamespace, Name: "etcdfed-hub"}, lease); err != nil {
			t.Errorf("the hub's leader Lease: %v", err)
		} else if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
			t.Errorf("the stopped hub still holds its leader Lease (holder %q): a hub started now waits for it to expire", *h)
		}
	}
	start := time.Now()
	if err := topo.FailZone(ctx, victim.Cluster, "kill"); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = topo.RestoreZone(context.Background(), victim.Cluster)
		}
	})
	t.Logf("hub stopped, then %s (holding %s) killed", victim.Cluster, in.Member)
	if err := WaitForEndpointUnreachable(ctx, managedMemberClient(in.Etcd, in.Member), time.Minute); err != nil {
		t.Fatal(err)
	}
	progress(ctx, t, w, 100, time.Minute)

	var servers []string
	for _, c := range topo.Members {
		if c.Name != victim.Cluster {
			servers = append(servers, topo.DNSServerOf[c.Name])
		}
	}
	queries, dnsFailures := 0, []string{}
	if err := HoldFor(ctx, in.Hold-time.Since(start), time.Second, func(ctx context.Context) error {
		for _, srv := range servers {
			for _, m := range ec.Status.Members {
				qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				got, err := lookup(qctx, srv, dns.Fqdn(MemberHost(m.Name, in.Etcd.Domain)), dns.TypeA)
				cancel()
				queries++
				if err != nil || len(got) != 1 || got[0].String() != m.Address {
					dnsFailures = append(dnsFailures, fmt.Sprintf("%s asked %s: %v %v", srv, m.Name, got, err))
				}
			}
		}
		if ids2, err := memberIDs(ctx, in.Etcd.Client); err == nil && fmt.Sprint(ids2) != fmt.Sprint(ids) {
			return fmt.Errorf("etcd's member list changed with the hub stopped: %v, was %v", ids2, ids)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	objsAfter, err := objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(objsAfter) != fmt.Sprint(objsBefore) {
		t.Errorf("EtcdMember objects changed with the hub stopped: %v, were %v", objsAfter, objsBefore)
	}
	t.Logf("hub stopped for %.1fs after the kill: %d DNS queries to %v, %d failed; %d writes acknowledged so far; nothing moved",
		time.Since(start).Seconds(), queries, servers, len(dnsFailures), w.Acked())
	if len(dnsFailures) > 0 {
		t.Errorf("DNS did not answer with the hub stopped: %d of %d queries, first: %s", len(dnsFailures), queries, dnsFailures[0])
	}
	progress(ctx, t, w, 50, 30*time.Second)

	hubStart := time.Now()
	if err := topo.StartHub(ctx); err != nil {
		t.Fatal(err)
	}
	hubStopped = false
	got, err := WaitForReplaced(ctx, WaitForReplacedInput{Hub: hub, Etcd: in.Etcd, Old: victim, Replicas: replicas, NotIn: victim.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the started hub moved %s out of %s in %.1fs: now in %s/%s", in.Member, victim.Cluster, time.Since(hubStart).Seconds(), got.Cluster, got.Zone)
	checkRecordFollows(ctx, t, topo, in.Etcd, got, victim.Cluster)

	restored = true
	if err := topo.RestoreZone(ctx, victim.Cluster); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: replicas, Tolerant: true, Timeout: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	progress(ctx, t, w, 50, 30*time.Second)
	w.Stop()
	t.Logf("longest gap between acknowledged writes: %s", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}

// managedMemberClient is a config for one member's endpoint only.
func managedMemberClient(m *ManagedEtcd, name string) EtcdClientConfig {
	c := m.Client
	c.Endpoints = nil
	for _, ep := range m.Client.Endpoints {
		if strings.Contains(ep, "//"+name+".") {
			c.Endpoints = append(c.Endpoints, ep)
		}
	}
	return c
}
