package multicluster

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/hub/shard"
)

// TestScenarioHubShards: two hubs on the same member clusters, spokes,
// gossip and DNS, each over its shard of the rings: the environment's hub
// restarted as shard a (--shard a: the rings labelled etcdfed.dev/shard=a),
// a second hub process as shard b (--fleet-duties=false). Each shard's hub
// leads with its own Lease, and each shard's 3-member ring becomes
// Available, failure tolerant, served by its own hub (its per-ring metrics
// are on that hub's /metrics only). Then ring b, under the recorded
// workload, is moved to shard a by changing its label: hub b lets go of it
// (its metrics of the ring forgotten, nothing written), hub a takes it over
// from its status. Nothing of either ring is deleted (every EtcdMember,
// EtcdDNSZone and Secret in every member cluster keeps its UID), no member
// pod restarts, no etcd member ID changes, both rings stay Available and
// tolerant, and the workload is linearizable with nothing lost. Last, a
// third hub whose selector overlaps shard a's: neither acts on the rings
// both select (a ShardConflict event on each, etcdfed_hub_shard_conflicts
// 2 on both hubs, a scale-up left undone) until hub c stops, when hub a
// scales the ring.
func TestScenarioHubShards(t *testing.T) {
	skipUnlessScenarios(t, "two hub shards, a ring moved between them")
	topo := hubTopology(t)
	env := hubFx.env
	if env == nil {
		t.Skip("needs the local environment's hub process")
	}
	ctx := context.Background()
	args, err := env.ComponentArgs("hub")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.RestartComponentWith("hub", append(slices.Clone(args), "--shard=a"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.RestartComponentWith("hub", args, 5*time.Second) })
	urlA := topo.HubMetricsURL
	urlB := addShardHub(t, env, "hub-shard-b", 3, "--shard=b", "--fleet-duties=false")
	for _, m := range topo.Members {
		for _, u := range []string{urlA, urlB} {
			if err := WaitForHubEngaged(ctx, u, m.Name, 2*time.Minute); err != nil {
				t.Fatalf("%s: %v", u, err)
			}
		}
	}
	for _, name := range []string{"a", "b"} {
		lease := shard.LeaseName + "-" + name
		if err := poll(ctx, time.Minute, "shard "+name+"'s hub holds its Lease", func(ctx context.Context) (string, error) {
			var l coordinationv1.Lease
			if err := topo.Hub.Client.Get(ctx, client.ObjectKey{Namespace: topo.HubNamespace, Name: lease}, &l); err != nil {
				return err.Error(), nil
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				return "no holder", nil
			}
			return "", nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	ringA := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "shards", Name: "sha", Domain: "sha.etcd.test", Replicas: 3,
		WantZones: "1/1/1", Labels: map[string]string{shard.Label: "a"}})
	ringB := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "shards", Name: "shb", Domain: "shb.etcd.test", Replicas: 3,
		WantZones: "1/1/1", Labels: map[string]string{shard.Label: "b"}})
	t.Logf("both shards' rings Available and tolerant %.1fs after creation", time.Since(start).Seconds())
	servedBy := func(ring, url string, want bool) {
		t.Helper()
		if err := poll(ctx, time.Minute, fmt.Sprintf("%s served by %s: %v", ring, url, want), func(context.Context) (string, error) {
			has, err := hasRingMetrics(url, "shards", ring)
			if err != nil {
				return err.Error(), nil
			}
			if has != want {
				return fmt.Sprintf("metrics of %s there: %v", ring, has), nil
			}
			return "", nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	servedBy("sha", urlA, true)
	servedBy("sha", urlB, false)
	servedBy("shb", urlB, true)
	servedBy("shb", urlA, false)

	ecB, err := ringB.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	ecA, err := ringA.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: ringB.Client, Prefix: "shards/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	before := map[string]ringState{}
	for _, ec := range []*etcdfedv1.EtcdCluster{ecA, ecB} {
		before[ec.Name] = observeRing(ctx, t, topo, ec)
	}

	// The move: ring b's label now says shard a.
	moved := time.Now()
	patch := ecB.DeepCopy()
	patch.Labels[shard.Label] = "a"
	if err := topo.Hub.Client.Patch(ctx, patch, client.MergeFrom(ecB)); err != nil {
		t.Fatal(err)
	}
	servedBy("shb", urlB, false)
	servedBy("shb", urlA, true)
	t.Logf("ring shb moved from shard b to shard a: hub a serves it %.1fs after the relabel", time.Since(moved).Seconds())
	// A few passes of the new hub over it, under the workload.
	waitForWorkloadProgress(ctx, t, w)
	for _, ring := range []string{"sha", "shb"} {
		if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: "shards", Name: ring, Replicas: 3, Tolerant: true}); err != nil {
			t.Fatal(err)
		}
	}
	checkWorkload(ctx, t, w)
	for _, ec := range []*etcdfedv1.EtcdCluster{ecA, ecB} {
		after := observeRing(ctx, t, topo, ec)
		b := before[ec.Name]
		samePods(t, ec.Name, b.pods, after.pods)
		if !slices.Equal(b.memberIDs, after.memberIDs) {
			t.Errorf("%s: etcd member IDs changed: %v, now %v", ec.Name, b.memberIDs, after.memberIDs)
		}
		for k, uid := range b.objects {
			if got, ok := after.objects[k]; !ok || got != uid {
				t.Errorf("%s: %s deleted (UID %s, now %q)", ec.Name, k, uid, got)
			}
		}
	}
	if t.Failed() {
		return
	}

	// A third hub whose selector overlaps shard a's: both rings (now of
	// shard a) are of shards a and c. Neither hub acts on them: each
	// tells why, counts them, and writes nothing to them; once hub c
	// stops (its claim released), hub a acts on them again.
	overlap := time.Now()
	urlC := addShardHub(t, env, "hub-shard-c", 4, "--shard=c", "--shard-selector="+shard.Label+" in (a,c)", "--fleet-duties=false")
	for _, u := range []string{urlA, urlC} {
		if err := poll(ctx, time.Minute, u+" holds both rings for the overlap", func(context.Context) (string, error) {
			v, err := metricValue(u, "etcdfed_hub_shard_conflicts")
			if err != nil || v != "2" {
				return fmt.Sprintf("etcdfed_hub_shard_conflicts %q (%v)", v, err), nil
			}
			return "", nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ring := range []*ManagedEtcd{ringA, ringB} {
		note, err := waitForHubEventNote(ctx, topo.Hub, ring, etcdfedv1.EventShardConflict, `shard "c"`, "neither does")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s held %.1fs after hub c started: %s", ring.Name, time.Since(overlap).Seconds(), note)
	}
	// Held: a spec change is acted on by neither hub.
	ecA, err = ringA.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	rv := ecA.ResourceVersion
	scaled := ecA.DeepCopy()
	scaled.Spec.Replicas = 5
	if err := topo.Hub.Client.Patch(ctx, scaled, client.MergeFrom(ecA)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	held, err := ringA.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	if held.Status.ObservedGeneration == held.Generation || len(held.Status.Members) != 3 {
		t.Fatalf("a ring two shards hold was acted on: observedGeneration %d of %d, %d members (resourceVersion %s before the patch)", held.Status.ObservedGeneration, held.Generation, len(held.Status.Members), rv)
	}
	if err := env.StopComponent("hub-shard-c", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if _, err := waitForHubEventNote(ctx, topo.Hub, ringA, etcdfedv1.EventShardConflict, "acts on it again"); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: "shards", Name: "sha", Replicas: 5, Tolerant: true}); err != nil {
		t.Fatal(err)
	}
	t.Logf("hub c stopped: hub a took ring sha on again and scaled it to 5 members %.1fs later", time.Since(released).Seconds())
}

// ringState is what a ring's move must not change: its pods, its etcd
// member IDs, and the UIDs of its objects in the member clusters.
type ringState struct {
	pods      map[string]podState
	memberIDs []string
	objects   map[string]string // cluster/kind/name -> UID
}

func observeRing(ctx context.Context, t *testing.T, topo *Topology, ec *etcdfedv1.EtcdCluster) ringState {
	t.Helper()
	uid := string(ec.UID)
	pods, err := RingPods(ctx, topo, uid)
	if err != nil {
		t.Fatal(err)
	}
	cur := &etcdfedv1.EtcdCluster{}
	if err := topo.Hub.Client.Get(ctx, client.ObjectKeyFromObject(ec), cur); err != nil {
		t.Fatal(err)
	}
	st := ringState{pods: pods, objects: map[string]string{}}
	for _, m := range cur.Status.Members {
		st.memberIDs = append(st.memberIDs, m.Name+"="+m.ID)
	}
	slices.Sort(st.memberIDs)
	for _, c := range topo.Members {
		sel := []client.ListOption{client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: uid}}
		var members etcdfedv1.EtcdMemberList
		var zones etcdfedv1.EtcdDNSZoneList
		var secrets corev1.SecretList
		for _, l := range []client.ObjectList{&members, &zones, &secrets} {
			if err := c.Client.List(ctx, l, sel...); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range members.Items {
			st.objects[c.Name+"/EtcdMember/"+o.Name] = string(o.UID)
		}
		for _, o := range zones.Items {
			st.objects[c.Name+"/EtcdDNSZone/"+o.Name] = string(o.UID)
		}
		for _, o := range secrets.Items {
			st.objects[c.Name+"/Secret/"+o.Name] = string(o.UID)
		}
	}
	if len(st.objects) == 0 {
		t.Fatalf("%s: no objects in the member clusters", ec.Name)
	}
	return st
}

// hasRingMetrics reports whether the hub at url exports the per-ring
// gauge etcdfed_cluster_members of namespace/name: a hub that passed over
// the ring does, one that let go of it (or never owned it) does not.
func hasRingMetrics(url, namespace, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	raw, err := getMetrics(ctx, http.DefaultClient, url, "")
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(raw, "\n") {
		if strings.HasPrefix(l, "etcdfed_cluster_members{") && strings.Contains(l, `name="`+name+`"`) && strings.Contains(l, `namespace="`+namespace+`"`) {
			return true, nil
		}
	}
	return false, nil
}

// addShardHub runs another hub process beside the environment's, with its
// flags plus extra (a shard's), its metrics and health on the hub's agent
// address plus offset, and stops it when the test ends. It returns its
// metrics URL.
func addShardHub(t *testing.T, env *localenv.Env, name string, offset byte, extra ...string) string {
	t.Helper()
	args, err := env.ComponentArgs("hub")
	if err != nil {
		t.Fatal(err)
	}
	args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--shard") })
	hubEnv, err := env.ComponentEnv("hub")
	if err != nil {
		t.Fatal(err)
	}
	b4 := netip.MustParseAddr(env.State().Hub.AgentAddress).As4()
	b4[3] += offset
	ip := netip.AddrFrom4(b4)
	metrics := netip.AddrPortFrom(ip, addr.AgentMetricsPort).String()
	args = append(args, "--metrics-bind-address="+metrics, "--health-probe-bind-address="+netip.AddrPortFrom(ip, addr.AgentHealthPort).String())
	args = append(args, extra...)
	if err := env.AddComponent(localenv.ComponentSpec{Name: name, Path: filepath.Join(hubFx.bin, "hub"), Cluster: localenv.HubClusterName, Args: args, Env: hubEnv}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.StopComponent(name, 5*time.Second) })
	return "http://" + metrics + "/metrics"
}
