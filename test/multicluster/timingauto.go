package multicluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/pkg/timing"
)

// TimingAutoSpecInput names the ring and the round trip put between its
// member clusters.
type TimingAutoSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// RoundTrip is put live between every pair of member clusters.
	RoundTrip time.Duration
}

// TimingAutoSpec: a ring with spec.etcd.timing Auto (the default) at zero
// distance runs etcd's defaults; a round trip put live between its member
// clusters is measured by the spokes, the hub chooses a longer heartbeat
// and election timeout (status.timing) and rolls them onto every member
// (its EtcdMember and a process started after the choice); from the
// moment the distance is in place to the end of the roll, etcd's raft
// term moves only by the roll's own hand-off of leadership (one election
// at most: the leader goes last, leadership moved away first), so the
// distance and the roll cause no other election; the recorded workload
// loses nothing.
func TimingAutoSpec(ctx context.Context, in TimingAutoSpecInput) {
	t := in.T
	t.Helper()
	topo, hub := in.Topology, in.Topology.Hub
	if topo.SetDistance == nil {
		t.Skip("TimingAutoSpec: the topology cannot set a distance")
	}
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	if tm := ec.Status.Timing; tm == nil || tm.HeartbeatIntervalMillis != etcdfedv1.DefaultHeartbeatIntervalMillis || tm.ElectionTimeoutMillis != etcdfedv1.DefaultElectionTimeoutMillis {
		t.Fatalf("at zero distance status.timing = %+v, want etcd's defaults", tm)
	}
	w := startScenarioWorkload(ctx, t, in.Etcd, "timing-auto")

	var links []string
	for i, a := range topo.Members {
		for _, b := range topo.Members[i+1:] {
			links = append(links, fmt.Sprintf("%s:%s=%s", a.Name, b.Name, in.RoundTrip))
		}
	}
	d, err := localenv.ParseDistance(strings.Join(links, ","))
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.SetDistance(ctx, d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.SetDistance(context.Background(), topo.BaseDistance) })
	t.Logf("distance set: %s", d)
	progress(ctx, t, w, 50, time.Minute)
	before, err := WaitForEveryMemberStatus(ctx, in.Etcd, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	term0 := maxTerm(before)

	// The hub chooses from the spokes' measurements.
	start := time.Now()
	var chosen etcdfedv1.TimingStatus
	err = WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: in.Etcd, What: "a heartbeat longer than etcd's default in status.timing", Timeout: 5*time.Minute + timing.Settle, Until: func(ec *etcdfedv1.EtcdCluster) string {
		tm := ec.Status.Timing
		if tm == nil || tm.HeartbeatIntervalMillis <= etcdfedv1.DefaultHeartbeatIntervalMillis {
			return fmt.Sprintf("timing %+v; round trips %+v", tm, ec.Status.RoundTrips)
		}
		chosen = *tm
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	chosenAt := time.Now()
	t.Logf("timing chosen %.1fs after the distance: %d/%d ms (%s): %s", time.Since(start).Seconds(), chosen.HeartbeatIntervalMillis, chosen.ElectionTimeoutMillis, chosen.Source, chosen.Message)
	if chosen.Source != etcdfedv1.TimingSourceAuto || chosen.ElectionTimeoutMillis < 10*chosen.HeartbeatIntervalMillis {
		t.Errorf("chosen timing %+v: want Auto, election timeout at least ten heartbeats", chosen)
	}

	// Rolled: every member's object carries the values, its etcd started
	// after they were chosen, the ring ready with nothing in flight.
	err = poll(ctx, 8*time.Minute, "every member rolled onto the chosen timing", func(ctx context.Context) (string, error) {
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(ec.Status.Members), Timeout: 5 * time.Second}); err != nil {
			return err.Error(), nil
		}
		got, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		if got.Status.Operation != nil {
			return fmt.Sprintf("operation %s of %s in flight", got.Status.Operation.Type, got.Status.Operation.Member), nil
		}
		var not []string
		for _, ms := range got.Status.Members {
			why, err := rolledOnto(ctx, memberCluster(t, topo, ms.Cluster), in.Etcd, ms.Name, chosen, start)
			if err != nil {
				return "", err
			}
			if why != "" {
				not = append(not, ms.Name+": "+why)
			}
		}
		return strings.Join(not, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("every member rolled onto %d/%d ms %.1fs after the choice", chosen.HeartbeatIntervalMillis, chosen.ElectionTimeoutMillis, time.Since(chosenAt).Seconds())
	progress(ctx, t, w, 50, time.Minute)
	after, err := WaitForEveryMemberStatus(ctx, in.Etcd, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if elections := maxTerm(after) - term0; elections > 1 {
		t.Errorf("raft term moved by %d from the distance in place to the end of the roll: want at most the roll's own hand-off of leadership (1)", elections)
	} else {
		t.Logf("raft term moved by %d over the distance and the roll", elections)
	}
	w.Stop()
	gap, at := w.MaxWriteGapAt()
	t.Logf("longest gap between acknowledged writes: %s at %s", gap.Round(time.Millisecond), at.Format(time.TimeOnly))
	checkWorkload(ctx, t, w)
}

// rolledOnto says why member does not yet run with timing tm ("" when it
// does): its EtcdMember's etcd settings, and a pod whose etcd container
// started after since.
func rolledOnto(ctx context.Context, c *Cluster, m *ManagedEtcd, member string, tm etcdfedv1.TimingStatus, since time.Time) (string, error) {
	var em etcdfedv1.EtcdMember
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: m.ObjectName(member)}, &em); err != nil {
		return "", err
	}
	hb, el := em.Spec.Etcd.HeartbeatIntervalMillis, em.Spec.Etcd.ElectionTimeoutMillis
	if hb == nil || el == nil || *hb != tm.HeartbeatIntervalMillis || *el != tm.ElectionTimeoutMillis {
		return fmt.Sprintf("EtcdMember etcd settings %v/%v", deref(hb), deref(el)), nil
	}
	var pod corev1.Pod
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: m.ObjectName(member)}, &pod); err != nil {
		return "pod: " + err.Error(), nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != "etcd" {
			continue
		}
		if r := cs.State.Running; r != nil && r.StartedAt.After(since) && cs.Ready {
			return "", nil
		}
		return fmt.Sprintf("etcd container %+v, not started after %s", cs.State, metav1.NewTime(since)), nil
	}
	return "no etcd container status", nil
}

func deref(p *int32) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// maxTerm is the highest raft term among the members' answers: every
// election, a hand-off of leadership included, raises it by one.
func maxTerm(st map[string]*clientv3.StatusResponse) uint64 {
	var term uint64
	for _, s := range st {
		if s != nil && s.Header != nil {
			term = max(term, s.Header.RaftTerm)
		}
	}
	return term
}
