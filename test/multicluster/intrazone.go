package multicluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// MoveInsideClusterSpecInput is a formed ring, in a topology of
// multi-zone member clusters, with a cluster that holds one member and a
// free zone.
type MoveInsideClusterSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
}

// MoveInsideClusterSpec moves a member between two zones of one member
// cluster, and back, under the recorded workload (issue 30: every move of
// a live member make before break): the member's zone cordoned
// (spec.topology.cordonedZones "<cluster>/<zone>") makes it a Move to the
// cluster's free zone, its new incarnation an EtcdMember of its own name
// beside the old one's (etcdfedv1.IncarnationObjectName); then the new
// zone cordoned instead moves it back, the third incarnation under the
// scheme's name again. Failure tolerance, sampled from etcd's own member
// list and every voter's status call, is never 0, four voters are seen
// during each move, no Replace runs; linearizable, nothing acknowledged
// lost, every watch complete; the old objects and pods are gone, the
// new ones run.
func MoveInsideClusterSpec(ctx context.Context, in MoveInsideClusterSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	replicas := len(ec.Status.Members)
	perCluster := map[string][]etcdfedv1.MemberStatus{}
	for _, m := range ec.Status.Members {
		perCluster[m.Cluster] = append(perCluster[m.Cluster], m)
	}
	var mover etcdfedv1.MemberStatus
	var free string
	for _, c := range slices.Sorted(maps.Keys(perCluster)) {
		ms := perCluster[c]
		if len(ms) != 1 || ms[0].Zone == "" {
			continue
		}
		zones, err := spokeZones(ctx, memberCluster(t, in.Topology, c))
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zones {
			if z != ms[0].Zone {
				mover, free = ms[0], z
			}
		}
		if free != "" {
			break
		}
	}
	if free == "" {
		t.Fatalf("no member cluster holds one member and a free zone: %s", ec.Status.ZoneSummary)
	}
	cluster, from := mover.Cluster, mover.Zone
	mc := memberCluster(t, in.Topology, cluster)
	t.Logf("moving %s (incarnation %d) inside %s: %s -> %s and back; placement %s", mover.Name, mover.Incarnation, cluster, from, free, ec.Status.ZoneSummary)

	w := startScenarioWorkload(ctx, t, in.Etcd, "intrazone")
	sampler := startToleranceSampler(ctx, t, hub, in.Etcd, 200*time.Millisecond)
	defer func() {
		_ = patchSpec(context.Background(), hub, in.Etcd, func(s *etcdfedv1.EtcdClusterSpec) { s.Topology.CordonedZones = nil })
	}()
	names := map[int64]string{}
	prev := mover
	for i, hop := range []struct{ cordon, to string }{{from, free}, {free, from}} {
		start := time.Now()
		if err := patchSpec(ctx, hub, in.Etcd, func(s *etcdfedv1.EtcdClusterSpec) { s.Topology.CordonedZones = []string{cluster + "/" + hop.cordon} }); err != nil {
			t.Fatal(err)
		}
		got, err := waitMemberIn(ctx, hub, in.Etcd, replicas, mover.Name, cluster, hop.to, 5*time.Minute)
		if err != nil {
			sampler.finish()
			t.Fatal(err)
		}
		now := statusMemberOf(got, mover.Name)
		t.Logf("move %d: %s in %s/%s as incarnation %d (dnsName %q) after %.1fs", i+1, now.Name, now.Cluster, now.Zone, now.Incarnation, now.DNSName, time.Since(start).Seconds())
		if now.Incarnation <= prev.Incarnation || now.DNSName == "" {
			t.Errorf("move %d: %s is incarnation %d under %q; want a new incarnation under its own name", i+1, now.Name, now.Incarnation, now.DNSName)
		}
		// The object names: the new incarnation's beside the old one's,
		// then the scheme's again; the old object and its pod gone.
		want := etcdfedv1.IncarnationObjectName(in.Etcd.Namespace, in.Etcd.Name, mover.Name, now.Incarnation)
		if i == 1 {
			want = in.Etcd.ObjectName(mover.Name)
		}
		names[now.Incarnation] = want
		if err := waitObjectsOfMember(ctx, mc, in.Etcd, mover.Name, want, now.Incarnation); err != nil {
			t.Error(err)
		}
		checkRecordFollows(ctx, t, in.Topology, in.Etcd, now)
		prev = now
	}
	progress(ctx, t, w, 50, 30*time.Second)
	ops := sampler.finish()
	w.Stop()
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("%s moved inside %s twice; longest gap between acknowledged writes %s (at %s); %d samples of etcd's member list, min failure tolerance %d, at most %d voters, member list unanswered %d times, changed during a sample %d times; objects %v",
		mover.Name, cluster, gap.Round(time.Millisecond), gapAt.Format("15:04:05.000"), sampler.samples, sampler.minTol, sampler.maxVoters, sampler.listFailed, sampler.raced, names)
	moves := 0
	for _, k := range sampler.ops {
		t.Logf("  %s: %.1fs", k, ops[k].Seconds())
		if strings.HasPrefix(k, string(etcdfedv1.OperationMove)+" "+mover.Name+" ") {
			moves++
		} else {
			t.Errorf("operation %s: a move inside one member cluster must be a make-before-break Move", k)
		}
	}
	if moves == 0 {
		t.Errorf("no Move of %s seen (operations %v)", mover.Name, sampler.ops)
	}
	sampler.checkMadeBeforeBreak(t, replicas)
	if _, err := waitForHubEventNote(ctx, hub, in.Etcd, etcdfedv1.EventMemberReplaced, mover.Name, "moved make before break"); err != nil {
		t.Error(err)
	}
	checkWorkload(ctx, t, w)
}

// spokeZones are the zones a member cluster's spoke reports.
func spokeZones(ctx context.Context, c *Cluster) ([]string, error) {
	sp := &etcdfedv1.EtcdSpoke{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.SpokeObjectName}, sp); err != nil {
		return nil, err
	}
	return sp.Status.Zones, nil
}

// waitMemberIn waits until the ring is ready with replicas members and
// no operation in flight, member in cluster/zone.
func waitMemberIn(ctx context.Context, hub *Cluster, m *ManagedEtcd, replicas int, member, cluster, zone string, timeout time.Duration) (*etcdfedv1.EtcdCluster, error) {
	var ec *etcdfedv1.EtcdCluster
	err := poll(ctx, timeout, fmt.Sprintf("%s of %s in %s/%s", member, m.Name, cluster, zone), func(pctx context.Context) (string, error) {
		got, err := WaitForEtcdClusterReady(pctx, WaitForEtcdClusterInput{Hub: hub, Namespace: m.Namespace, Name: m.Name, Replicas: replicas, Timeout: 2 * time.Second})
		if err != nil {
			return "not ready", nil
		}
		if got.Status.Operation != nil {
			return "operation " + string(got.Status.Operation.Type) + " in flight", nil
		}
		if s := statusMemberOf(got, member); s.Cluster != cluster || s.Zone != zone {
			return fmt.Sprintf("%s in %s/%s", member, s.Cluster, s.Zone), nil
		}
		ec = got
		return "", nil
	})
	return ec, err
}

func statusMemberOf(ec *etcdfedv1.EtcdCluster, member string) etcdfedv1.MemberStatus {
	for _, m := range ec.Status.Members {
		if m.Name == member {
			return m
		}
	}
	return etcdfedv1.MemberStatus{}
}

// waitObjectsOfMember waits until c holds one EtcdMember of member, named
// name, of incarnation inc, and its pod of that name runs that
// incarnation; no other pod of the member is left.
func waitObjectsOfMember(ctx context.Context, c *Cluster, m *ManagedEtcd, member, name string, inc int64) error {
	return poll(ctx, 2*time.Minute, fmt.Sprintf("%s's only object in %s named %s (incarnation %d)", member, c.Name, name, inc), func(ctx context.Context) (string, error) {
		list := &etcdfedv1.EtcdMemberList{}
		if err := c.Client.List(ctx, list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelMember: member, etcdfedv1.LabelClusterName: m.Name}); err != nil {
			return "", err
		}
		var seen []string
		for _, o := range list.Items {
			if o.Spec.Cluster.Namespace == m.Namespace {
				seen = append(seen, fmt.Sprintf("%s (incarnation %d)", o.Name, o.Spec.Incarnation))
			}
		}
		if len(seen) != 1 || seen[0] != fmt.Sprintf("%s (incarnation %d)", name, inc) {
			return fmt.Sprintf("objects %v", seen), nil
		}
		pod := &corev1.Pod{}
		switch err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: name}, pod); {
		case apierrors.IsNotFound(err):
			return "no pod " + name, nil
		case err != nil:
			return "", err
		case pod.Labels[etcdfedv1.LabelIncarnation] != fmt.Sprint(inc) || pod.Status.Phase != corev1.PodRunning:
			return fmt.Sprintf("pod %s of incarnation %s, %s", name, pod.Labels[etcdfedv1.LabelIncarnation], pod.Status.Phase), nil
		}
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelMember: member, etcdfedv1.LabelComponent: "pod"}); err != nil {
			return "", err
		}
		var others []string
		for _, p := range pods.Items {
			if p.Name != name && p.Labels[etcdfedv1.LabelClusterUID] == pod.Labels[etcdfedv1.LabelClusterUID] {
				others = append(others, p.Name)
			}
		}
		if len(others) > 0 {
			return fmt.Sprintf("other pods of %s left: %v", member, others), nil
		}
		return "", nil
	})
}
