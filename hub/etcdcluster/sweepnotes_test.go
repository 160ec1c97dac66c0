package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestForgedMemberDoesNotFloodEvents: a compromised member cluster
// re-creates a forged EtcdMember of the ring (a member etcd does not
// list) after every sweep, through a real apiserver. Each pass sweeps it
// again (its volume kept), but the ring gets one VolumesRetained event
// naming it, then one count per sweepEventInterval; an object left behind
// in another cluster meanwhile is still named at once. Before, every pass
// recorded a VolumesRetained warning: a hostile cluster filled the ring's
// events and exhausted the recorder's budget for the EtcdCluster.
func TestForgedMemberDoesNotFloodEvents(t *testing.T) {
	testenv.SkipIfShort(t, "a kube-apiserver")
	ctx := context.Background()
	api := testenv.StartT(t, "member")[0]
	s := ring()
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ringNamespace}}); err != nil {
		t.Fatal(err)
	}
	clock := now
	rec := events.NewFakeRecorder(1000)
	r := &Reconciler{Recorder: rec, Now: func() time.Time { return clock }}
	for _, cs := range s.clusters {
		cs.client = api.Client
	}
	// forge writes an object of the ring for a member etcd does not list,
	// as the member cluster's own credentials can, and puts it in the
	// snapshot as observe would.
	forge := func(cluster, member string, inc int64) {
		t.Helper()
		ms := etcdfedv1.MemberStatus{Name: member, Cluster: cluster, Incarnation: inc}
		obj := desiredMember(s, &s.ec.Status, &ms, nil)
		obj.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: member + "=x", InitialClusterState: etcdfedv1.InitialClusterExisting, Token: "uid-1", ClusterID: "c1"}
		if err := api.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		s.cluster(cluster).members[member] = obj
	}
	pass := func() (retained []string) {
		t.Helper()
		sweep, _ := leftBehind(s, &s.ec.Status)
		d := &decision{sweep: sweep, retain: retainVolumes(s, sweep)}
		if err := r.sweep(ctx, s, d); err != nil {
			t.Fatal(err)
		}
		for _, ref := range sweep {
			cs := s.cluster(ref.cluster)
			obj := cs.members[ref.member]
			if err := api.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()); !apierrors.IsNotFound(err) {
				t.Fatalf("%s in %s not swept: %v", ref.member, ref.cluster, err)
			}
			delete(cs.members, ref.member)
		}
		for {
			select {
			case e := <-rec.Events:
				if strings.Contains(e, etcdfedv1.EventVolumesRetained) {
					retained = append(retained, e)
				}
			default:
				return retained
			}
		}
	}

	var said []string
	for i := range 30 {
		forge("member-2", "main-7", 9)
		if i == 10 {
			forge("member-3", "main-8", 4) // left behind by a Move, say
		}
		got := pass()
		if i == 10 && (len(got) != 1 || !strings.Contains(got[0], "main-8 incarnation 4 in member-3")) {
			t.Errorf("the pass that swept member-3's object recorded %q; want one event naming it", got)
		}
		said = append(said, got...)
		clock = clock.Add(time.Second)
	}
	forged := 0
	for _, e := range said {
		if strings.Contains(e, "main-7") {
			forged++
		}
	}
	if forged != 1 || !strings.Contains(said[0], "main-7 incarnation 9 in member-2") {
		t.Errorf("30 sweeps of an object member-2 re-creates recorded %d events naming it (%q); want 1", forged, said)
	}
	// Past the interval: one more sweep, one event with the count.
	clock = clock.Add(sweepEventInterval)
	forge("member-2", "main-7", 9)
	got := pass()
	if want := fmt.Sprintf("%d objects in member-2 swept again", 30-1+1); len(got) != 1 || !strings.Contains(got[0], want) || !strings.Contains(got[0], "main-7") {
		t.Errorf("the sweep after the interval recorded %q; want one event saying %q", got, want)
	}
}

// TestSweepNotesBounded: per ring and cluster, new objects are named at
// once up to sweepEventBurst events per interval, the rest wait for the
// next one (said then, with no new sweep); a cluster forging a new name
// every pass is held to the burst, and the names remembered are bounded.
func TestSweepNotesBounded(t *testing.T) {
	var n sweepNotes
	at := now
	note := func(cluster string, i int) sweepNote {
		return sweepNote{cluster: cluster, object: fmt.Sprintf("main-%d/obj-%d", i, i), text: fmt.Sprintf("volume %d in %s", i, cluster)}
	}
	total := 0
	for i := range maxSweepNames + 50 {
		got := n.admit("ring", []sweepNote{note("member-2", i)}, at)
		if i < sweepEventBurst && (len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("volume %d in member-2", i))) {
			t.Errorf("pass %d: %q; want the object named at once", i, got)
		}
		total += len(got)
		at = at.Add(time.Second)
	}
	if total != sweepEventBurst {
		t.Errorf("%d events for %d new names within the interval; want %d", total, maxSweepNames+50, sweepEventBurst)
	}
	if got := n.admit("other-ring", []sweepNote{note("member-2", 1)}, at); len(got) != 1 {
		t.Errorf("another ring's sweep in the same cluster: %q; want it named", got)
	}
	if l := len(n.by[sweepKey{"ring", "member-2"}].said); l > maxSweepNames {
		t.Errorf("%d names remembered; at most %d", l, maxSweepNames)
	}
	// After the interval, a pass with nothing swept says what waited.
	at = at.Add(sweepEventInterval)
	got := n.admit("ring", nil, at)
	if len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("volume %d in member-2", sweepEventBurst)) || !strings.Contains(got[0], "more in member-2") || !strings.Contains(got[0], "swept again") {
		t.Errorf("after the interval: %q; want one event naming the waiting objects, counting the rest", got)
	}
	if got := n.admit("ring", nil, at.Add(time.Second)); len(got) != 0 {
		t.Errorf("nothing left to say: %q", got)
	}
	// A deleted ring is forgotten (forgetMemory); another's stays.
	n.forget("ring")
	if _, ok := n.by[sweepKey{"ring", "member-2"}]; ok || n.by[sweepKey{"other-ring", "member-2"}] == nil {
		t.Errorf("after forgetting ring: %d states kept; want other-ring's only", len(n.by))
	}
}
