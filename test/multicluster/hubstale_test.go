package multicluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
)

// TestScenarioHubStaleRestore: the hub cluster's store (its apiserver's
// etcd) restored to a snapshot taken before a Move and a Replace of a
// running ring, as an operator restores a lost hub cluster from an old
// backup. The restored hub starts with a stale ledger: status.members
// names incarnations, etcd IDs and clusters that are gone, and
// status.lastIncarnation is below what the member clusters hold. Rule 17:
// it observes before it acts and never deletes, replaces or forces
// anything on the strength of those records. For two minutes after the
// hub is back, sampled every 500 ms: etcd's member list (names and IDs)
// is unchanged, no EtcdMember object or volume of the ring is deleted or
// replaced (same UIDs, same incarnations). Then the ring is Ready and failure
// tolerant with its status matching etcd's own member list, its
// lastIncarnation at least every incarnation the member clusters hold,
// and the recorded workload is linearizable, nothing lost.
func TestScenarioHubStaleRestore(t *testing.T) {
	skipUnlessScenarios(t, "the hub cluster's store restored to a snapshot older than a Move and a Replace")
	topo := hubTopology(t)
	env := hubFx.env
	if env == nil || env.State().Real() {
		t.Skip("needs the local environment with process nodes (the hub cluster's store is restored in place)")
	}
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "stale", Name: "stale", Domain: "stale.etcd.test", Replicas: 3, WantZones: "1/1/1"})
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "stale/", WatchEachEndpoint: true})
	ec, err := etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	before := incarnations(ec)
	snap := filepath.Join(t.TempDir(), "hub-store.db")
	if err := env.SnapshotClusterStore(ctx, localenv.HubClusterName, snap); err != nil {
		t.Fatal(err)
	}
	t.Logf("hub cluster's store saved with the ring at %v", before)

	// A Move (a cordoned zone's member moved out, make before break) and a
	// Replace (a member's volume lost), both after the snapshot.
	setCordon := func(zones []string) {
		t.Helper()
		ec, err := etcd.Get(ctx, topo.Hub)
		if err != nil {
			t.Fatal(err)
		}
		old := ec.DeepCopy()
		ec.Spec.Topology.CordonedZones = zones
		if err := topo.Hub.Client.Patch(ctx, ec, client.MergeFrom(old)); err != nil {
			t.Fatal(err)
		}
	}
	zone := ec.Status.Members[0].Zone
	setCordon([]string{zone})
	if err := poll(ctx, 3*time.Minute, "the Move out of "+zone+" ends", func(context.Context) (string, error) {
		ec, err := etcd.Get(ctx, topo.Hub)
		if err != nil {
			return "", err
		}
		if ec.Status.Operation != nil || ec.Status.Members[0].Zone == zone {
			return fmt.Sprintf("%s in %s, operation %v", ec.Status.Members[0].Name, ec.Status.Members[0].Zone, ec.Status.Operation), nil
		}
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	setCordon(nil)
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
		t.Fatal(err)
	}
	VolumeLostSpec(ctx, VolumeLostSpecInput{T: t, Topology: topo, Etcd: etcd, Member: ec.Status.Members[1].Name})
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
		t.Fatal(err)
	}
	ec, err = etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	real := incarnations(ec)
	if fmt.Sprint(real) == fmt.Sprint(before) {
		t.Fatalf("the Move and the Replace changed nothing: %v", real)
	}
	ids, err := memberIDs(ctx, etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	live, err := ringObjects(ctx, topo, string(ec.UID))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the ring now: %v, etcd IDs %v, objects %v", real, ids, live)

	// The hub cluster's store restored: the hub stopped (its pods go with
	// their control plane), the store put back, the hub started again.
	if err := env.StopComponent("hub", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	restoredAt := time.Now()
	if err := env.RestoreClusterStore(ctx, localenv.HubClusterName, snap); err != nil {
		t.Fatal(err)
	}
	if err := env.StartComponent("hub"); err != nil {
		t.Fatal(err)
	}
	stale, err := etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hub cluster restored in %.1fs; its record of the ring: %v (lastIncarnation %d)", time.Since(restoredAt).Seconds(), incarnations(stale), stale.Status.LastIncarnation)
	if fmt.Sprint(incarnations(stale)) != fmt.Sprint(before) {
		t.Fatalf("the restored store holds %v, not the record from before the Move and the Replace (%v)", incarnations(stale), before)
	}

	// Two minutes of the restored hub: nothing live touched.
	deadline := time.Now().Add(2 * time.Minute)
	samples := 0
	for time.Now().Before(deadline) {
		got, err := memberIDs(ctx, etcd.Client)
		if err == nil && fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Fatalf("etcd's member list changed under the stale hub: %v, was %v", got, ids)
		}
		objs, err := ringObjects(ctx, topo, string(ec.UID))
		if err == nil {
			for k, uid := range live {
				if objs[k] != uid {
					t.Fatalf("the stale hub deleted or replaced %s (UID %s, now %q)", k, uid, objs[k])
				}
			}
		}
		samples++
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("for 2 minutes after the restore (%d samples) etcd's members and the ring's objects and volumes stayed as they were", samples)

	// The ring reconciled to its real membership.
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name, Replicas: 3, Tolerant: true}); err != nil {
		t.Fatal(err)
	}
	ec, err = etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	if got := incarnations(ec); fmt.Sprint(got) != fmt.Sprint(real) {
		t.Errorf("the hub's record after the restore: %v, the ring's real members: %v", got, real)
	}
	for _, m := range ec.Status.Members {
		if ids[m.Name] != strings.TrimPrefix(m.ID, "0x") && ids[m.Name] != m.ID {
			t.Errorf("member %s recorded with etcd ID %s, etcd lists %s", m.Name, m.ID, ids[m.Name])
		}
	}
	maxInc := int64(0)
	for k := range live {
		if strings.HasPrefix(k, "EtcdMember ") {
			if n := objectIncarnation(ctx, topo, k); n > maxInc {
				maxInc = n
			}
		}
	}
	if ec.Status.LastIncarnation < maxInc {
		t.Errorf("status.lastIncarnation %d is below incarnation %d that a member cluster holds: a new member could reuse its number and volume name", ec.Status.LastIncarnation, maxInc)
	}
	w.Stop()
	checkWorkload(ctx, t, w)
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// ringObjects lists a ring's EtcdMember objects and their volumes in
// every member cluster, keyed "Kind cluster/name", with their UIDs (and an
// EtcdMember's incarnation): what a hub must never delete or replace on
// the strength of a stale record. A pod may restart (a roll onto a changed
// spec restarts it on its volume); an object or a volume replaced is a
// member lost.
func ringObjects(ctx context.Context, topo *Topology, uid string) (map[string]string, error) {
	out := map[string]string{}
	for _, cl := range topo.Members {
		var ems etcdfedv1.EtcdMemberList
		if err := cl.Client.List(ctx, &ems, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: uid}); err != nil {
			return nil, fmt.Errorf("list EtcdMembers in %s: %w", cl.Name, err)
		}
		for _, em := range ems.Items {
			out["EtcdMember "+cl.Name+"/"+em.Name] = fmt.Sprintf("%s incarnation %d", em.UID, em.Spec.Incarnation)
			if v := em.Status.Volume; v.ClaimName != "" {
				var pvc corev1.PersistentVolumeClaim
				if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: em.Namespace, Name: v.ClaimName}, &pvc); err == nil {
					out["PersistentVolumeClaim "+cl.Name+"/"+pvc.Name] = string(pvc.UID)
				}
			}
		}
	}
	return out, nil
}

// objectIncarnation reads spec.incarnation of the EtcdMember a key of
// ringObjects names.
func objectIncarnation(ctx context.Context, topo *Topology, key string) int64 {
	ref := strings.TrimPrefix(key, "EtcdMember ")
	clusterName, name, _ := strings.Cut(ref, "/")
	for _, cl := range topo.Members {
		if cl.Name != clusterName {
			continue
		}
		var em etcdfedv1.EtcdMember
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: name}, &em); err == nil {
			return em.Spec.Incarnation
		}
	}
	return 0
}
