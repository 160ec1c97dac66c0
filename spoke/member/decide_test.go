package member

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/budget"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/component/service"
	"github.com/etcdfed/etcdfed/spoke/etcdlog"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// The tests here run decide and computeStatus on snapshots built by hand:
// no apiserver, no etcd. A snapshot goes in; the writes (in order) and the
// status come out.

var testParams = params{helperImage: "ghcr.io/etcdfed/etcdfed:test"}

func testMember(mut ...func(*etcdfedv1.EtcdMember)) *etcdfedv1.EtcdMember {
	m := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: "ring", Generation: 3},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "hub", UID: "uid-1"},
			MemberName: "main-0",
			Image:      "gcr.io/etcd-development/etcd:v3.6.16",
			DNSName:    "main-0.etcd.example.com",
			Zone:       "zone-a",
			TLS:        etcdfedv1.MemberTLS{Mode: etcdfedv1.TLSDisabled},
		},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

// bootstrapped sets a founding bootstrap listing the member with its peer
// URL on the pod's ports.
func bootstrapped(state etcdfedv1.InitialClusterState) func(*etcdfedv1.EtcdMember) {
	return func(m *etcdfedv1.EtcdMember) {
		m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{
			InitialCluster:      m.Spec.MemberName + "=" + spec.PeerURL(m, spec.PodPorts),
			InitialClusterState: state,
			Token:               "main-token",
		}
	}
}

func incarnation(n int64) func(*etcdfedv1.EtcdMember) {
	return func(m *etcdfedv1.EtcdMember) { m.Spec.Incarnation = n }
}

func reclaim(p etcdfedv1.VolumeReclaimPolicy) func(*etcdfedv1.EtcdMember) {
	return func(m *etcdfedv1.EtcdMember) { m.Spec.Storage.VolumeReclaimPolicy = p }
}

func expose(t etcdfedv1.ExposeType) func(*etcdfedv1.EtcdMember) {
	return func(m *etcdfedv1.EtcdMember) { m.Spec.Expose.Type = t }
}

// ranOn records in m's status that it ran on c (status.volume).
func ranOn(c *corev1.PersistentVolumeClaim) func(*etcdfedv1.EtcdMember) {
	return func(m *etcdfedv1.EtcdMember) {
		m.Status.Incarnation = m.Spec.Incarnation
		m.Status.Volume = etcdfedv1.VolumeReference{ClaimName: c.Name, UID: string(c.UID)}
	}
}

// claimOf is m's bound PVC of incarnation inc.
func claimOf(m *etcdfedv1.EtcdMember, inc int64, mut ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	name := spec.ClaimName(m, inc)
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.Namespace, UID: types.UID("uid-" + name), Labels: spec.Labels(m, spec.ComponentData, inc)},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	for _, f := range mut {
		f(c)
	}
	return c
}

// podOf is the pod this spoke builds for m (of m's incarnation, on its
// volume), running and ready on a node.
func podOf(m *etcdfedv1.EtcdMember, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := pod.Build(m, pod.Params{HelperImage: testParams.helperImage, ClaimName: spec.ClaimName(m, m.Spec.Incarnation), Advertised: spec.PodPorts})
	p.UID = "uid-pod"
	p.Spec.NodeName = "node-a1"
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.1.0.1", HostIP: "10.0.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	for _, f := range mut {
		f(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

var now = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))

func terminating(o client.Object) { o.SetDeletionTimestamp(&now) }

// snap builds a snapshot: claims of the member go into claims, the one of
// the current incarnation's name also into claim.
func snap(m *etcdfedv1.EtcdMember, objs ...client.Object) *snapshot {
	s := &snapshot{m: m, budget: budget.Build(m)}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.PersistentVolumeClaim:
			if spec.OwnedBy(m, o.Labels) {
				s.claims = append(s.claims, *o)
			}
			if o.Name == spec.ClaimName(m, m.Spec.Incarnation) {
				s.claim = o
			}
		case *corev1.Service:
			s.service = o
		case *corev1.Pod:
			s.pod = o
		case *corev1.Secret:
			s.secret = o
		}
	}
	if cur := currentPod(m, s.pod); cur != nil && cur.Status.Phase == corev1.PodRunning && cur.Status.PodIP != "" {
		s.etcd = etcdRead{pod: cur, next: DefaultStatusInterval,
			view: &etcdfedv1.MemberEtcdView{ID: "a1", LeaderID: "a1", RaftTerm: 2}}
	}
	return s
}

func describe(ws []write) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s %s %s", w.op, kindOf(w.obj).kind, w.obj.GetName()))
	}
	return out
}

func reasons(st etcdfedv1.EtcdMemberStatus) map[string]string {
	out := map[string]string{}
	for _, c := range st.Conditions {
		out[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return out
}

type decideCase struct {
	name   string
	s      *snapshot
	writes []string
	// conds are the conditions the status must have, as status/reason.
	conds map[string]string
	check func(t *testing.T, d *decision, st etcdfedv1.EtcdMemberStatus)
}

func decideCases() []decideCase {
	fresh := testMember()
	boot := testMember(bootstrapped(etcdfedv1.InitialClusterNew))
	bootClaim := claimOf(boot, 0)
	running := testMember(bootstrapped(etcdfedv1.InitialClusterNew), ranOn(bootClaim))
	tls := testMember(func(m *etcdfedv1.EtcdMember) { m.Spec.TLS = etcdfedv1.MemberTLS{SecretName: "main-0-tls"} }, bootstrapped(etcdfedv1.InitialClusterNew))
	next := testMember(incarnation(1), bootstrapped(etcdfedv1.InitialClusterExisting))
	nextDel := testMember(incarnation(1), bootstrapped(etcdfedv1.InitialClusterExisting), reclaim(etcdfedv1.VolumeDelete))
	old := podOf(testMember(bootstrapped(etcdfedv1.InitialClusterNew)))
	retired := func(c *corev1.PersistentVolumeClaim) { c.Labels[etcdfedv1.LabelRetired] = "true" }
	nodePort := testMember(expose(etcdfedv1.ExposeNodePort))
	foreignSvc := service.Build(nodePort)
	foreignSvc.Labels = map[string]string{"app": "other"}
	leftover := service.Build(nodePort)

	return []decideCase{{
		name:   "a new member gets its volume and no pod before bootstrap",
		s:      snap(fresh),
		writes: []string{"Create PersistentVolumeClaim main-0-data-0"},
		conds: map[string]string{
			etcdfedv1.ConditionStorageReady:  "False/" + ReasonVolumePending,
			etcdfedv1.ConditionPodReady:      "False/" + ReasonWaitingForBootstrap,
			etcdfedv1.ConditionExposed:       "False/" + ReasonWaitingForPodIP,
			etcdfedv1.ConditionMemberHealthy: "False/" + ReasonNoPod,
		},
		check: func(t *testing.T, _ *decision, st etcdfedv1.EtcdMemberStatus) {
			if st.PeerURL != "http://main-0.etcd.example.com:2380" || st.ClientURL != "http://main-0.etcd.example.com:2379" {
				t.Errorf("URLs %s %s", st.PeerURL, st.ClientURL)
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration %d", st.ObservedGeneration)
			}
		},
	}, {
		name:   "with bootstrap, the volume and the pod are created in one pass",
		s:      snap(boot),
		writes: []string{"Create PersistentVolumeClaim main-0-data-0", "Create Pod main-0"},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonPodCreated},
		check: func(t *testing.T, d *decision, st etcdfedv1.EtcdMemberStatus) {
			p := d.writes[1].obj.(*corev1.Pod)
			if p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "main-0-data-0" {
				t.Errorf("pod on %s", p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
			}
			if d.writes[1].event == nil || d.writes[1].event.reason != ReasonPodCreated {
				t.Errorf("event %+v", d.writes[1].event)
			}
			if st.PodName != "main-0" {
				t.Errorf("podName %q", st.PodName)
			}
		},
	}, {
		name:   "TLS Secret missing: no pod",
		s:      snap(tls, claimOf(tls, 0)),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonTLSSecretMissing, etcdfedv1.ConditionStorageReady: "True/" + ReasonBound},
	}, {
		name:   "TLS Secret without a key: no pod",
		s:      snap(tls, claimOf(tls, 0), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "main-0-tls"}, Data: map[string][]byte{"ca.crt": []byte("x")}}),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonTLSSecretInvalid},
	}, {
		name:   "a lost volume is not recreated and no pod starts",
		s:      snap(running),
		writes: []string{},
		conds: map[string]string{
			etcdfedv1.ConditionStorageReady: "False/" + ReasonVolumeLost,
			etcdfedv1.ConditionPodReady:     "False/" + ReasonWaitingForStorage,
		},
		check: func(t *testing.T, d *decision, st etcdfedv1.EtcdMemberStatus) {
			if len(d.events) != 1 || d.events[0].reason != ReasonVolumeLost {
				t.Errorf("events %+v", d.events)
			}
			if st.Volume.UID != string(bootClaim.UID) {
				t.Errorf("status.volume %+v: must still name the volume the member ran on", st.Volume)
			}
		},
	}, {
		name:   "a replaced volume is lost too",
		s:      snap(running, claimOf(boot, 0, func(c *corev1.PersistentVolumeClaim) { c.UID = "uid-new" })),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionStorageReady: "False/" + ReasonVolumeLost, etcdfedv1.ConditionPodReady: "False/" + ReasonWaitingForStorage},
	}, {
		name:   "a terminating volume gets no new pod",
		s:      snap(running, claimOf(boot, 0, func(c *corev1.PersistentVolumeClaim) { terminating(c) })),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionStorageReady: "False/" + ReasonVolumeTerminating, etcdfedv1.ConditionPodReady: "False/" + ReasonWaitingForStorage},
	}, {
		name:   "a volume of another cluster is left alone",
		s:      snap(boot, claimOf(boot, 0, func(c *corev1.PersistentVolumeClaim) { c.Labels[etcdfedv1.LabelClusterUID] = "uid-2" })),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionStorageReady: "False/" + ReasonVolumeConflict, etcdfedv1.ConditionPodReady: "False/" + ReasonWaitingForStorage},
	}, {
		name:   "a running, ready member is reported and left alone",
		s:      snap(running, bootClaim, podOf(running)),
		writes: []string{},
		conds: map[string]string{
			etcdfedv1.ConditionStorageReady:  "True/" + ReasonBound,
			etcdfedv1.ConditionPodReady:      "True/" + ReasonReady,
			etcdfedv1.ConditionExposed:       "True/" + ReasonExposed,
			etcdfedv1.ConditionMemberHealthy: "True/" + ReasonHealthy,
		},
		check: func(t *testing.T, d *decision, st etcdfedv1.EtcdMemberStatus) {
			if st.Address != "10.1.0.1" || st.PodIP != "10.1.0.1" || st.NodeName != "node-a1" || st.Etcd == nil || st.Etcd.ID != "a1" {
				t.Errorf("status %+v", st)
			}
			if d.requeueAfter != DefaultStatusInterval {
				t.Errorf("requeue after %s", d.requeueAfter)
			}
		},
	}, {
		name:   "an etcd that does not answer keeps its last view with the error",
		s:      withEtcdError(snap(running, bootClaim, podOf(running, notReady))),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionMemberHealthy: "False/" + ReasonUnreachable, etcdfedv1.ConditionPodReady: "False/" + ReasonPodNotReady},
		check: func(t *testing.T, _ *decision, st etcdfedv1.EtcdMemberStatus) {
			if st.Etcd == nil || st.Etcd.ID != "old" || st.Etcd.Error != "connection refused" {
				t.Errorf("etcd view %+v", st.Etcd)
			}
		},
	}, {
		name:   "a learner is told from etcd's view",
		s:      asLearner(snap(running, bootClaim, podOf(running, notReady))),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonLearner, etcdfedv1.ConditionMemberHealthy: "True/" + ReasonHealthy},
	}, {
		name:   "an image change replaces the pod on the same volume",
		s:      snap(testMember(bootstrapped(etcdfedv1.InitialClusterNew), ranOn(bootClaim), func(m *etcdfedv1.EtcdMember) { m.Spec.Image = "gcr.io/etcd-development/etcd:v3.6.17" }), bootClaim, podOf(running)),
		writes: []string{"Delete Pod main-0"},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonPodReplaced},
	}, {
		name:   "a bootstrap change does not restart the pod",
		s:      snap(testMember(bootstrapped(etcdfedv1.InitialClusterExisting), ranOn(bootClaim)), bootClaim, podOf(running)),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "True/" + ReasonReady},
	}, {
		name:   "bootstrap removed: the pod stays",
		s:      snap(testMember(ranOn(bootClaim)), bootClaim, podOf(running)),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "True/" + ReasonReady},
	}, {
		name:   "a failed pod is replaced",
		s:      snap(running, bootClaim, podOf(running, func(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted" })),
		writes: []string{"Delete Pod main-0"},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonPodTerminating},
	}, {
		name:   "a foreign pod is left alone",
		s:      snap(running, bootClaim, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "main-0", Labels: map[string]string{"app": "other"}}}),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonPodConflict},
	}, {
		name:   "a raised incarnation: old pod deleted, new volume, old volume labelled retired and kept",
		s:      snap(next, claimOf(next, 0), old),
		writes: []string{"Create PersistentVolumeClaim main-0-data-1", "Delete Pod main-0", "Retire PersistentVolumeClaim main-0-data-0"},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonPodTerminating},
	}, {
		name:   "Delete policy: the retired volume stays until the new pod runs",
		s:      snap(nextDel, claimOf(nextDel, 0), claimOf(nextDel, 1), podOf(nextDel, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })),
		writes: []string{"Retire PersistentVolumeClaim main-0-data-0"},
	}, {
		name:   "Delete policy: the retired volume goes once the new pod runs",
		s:      snap(nextDel, claimOf(nextDel, 0, retired), claimOf(nextDel, 1), podOf(nextDel)),
		writes: []string{"Delete PersistentVolumeClaim main-0-data-0"},
	}, {
		name:   "state new for a later incarnation is refused",
		s:      snap(testMember(incarnation(1), bootstrapped(etcdfedv1.InitialClusterNew)), claimOf(next, 0, retired), claimOf(next, 1)),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonBootstrapRefused},
	}, {
		name: "state new for a later incarnation restored from a snapshot (recovery from a backup) starts",
		s: snap(testMember(incarnation(1), bootstrapped(etcdfedv1.InitialClusterNew), func(m *etcdfedv1.EtcdMember) {
			m.Spec.Bootstrap.Restore = &etcdfedv1.MemberRestore{Store: etcdfedv1.BackupStore{URL: "file:///b"}, Object: "x.db", SHA256: strings.Repeat("a", 64), RevisionBump: 1}
		}), claimOf(next, 0, retired), claimOf(next, 1)),
		writes: []string{"Create Pod main-0"},
	}, {
		name:   "a bootstrap without the member's peer URL is a mismatch",
		s:      snap(testMember(bootstrapped(etcdfedv1.InitialClusterNew), expose(etcdfedv1.ExposeLoadBalancer), wrongPeerURL), bootClaim, lbService(true)),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionPodReady: "False/" + ReasonBootstrapMismatch, etcdfedv1.ConditionExposed: "True/" + ReasonExposed},
	}, {
		name:   "NodePort: the Service is created, the address waits for node ports",
		s:      snap(nodePort, claimOf(nodePort, 0)),
		writes: []string{"Create Service main-0"},
		conds:  map[string]string{etcdfedv1.ConditionExposed: "False/" + ReasonWaitingForNodePorts},
	}, {
		name:   "LoadBalancer without an address: no pod, looked at again",
		s:      snap(testMember(bootstrapped(etcdfedv1.InitialClusterNew), expose(etcdfedv1.ExposeLoadBalancer)), bootClaim, lbService(false)),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionExposed: "False/" + ReasonWaitingForLoadBalancer, etcdfedv1.ConditionPodReady: "False/" + ReasonWaitingForExposure},
		check: func(t *testing.T, d *decision, _ etcdfedv1.EtcdMemberStatus) {
			if d.requeueAfter != loadBalancerPoll {
				t.Errorf("requeue after %s", d.requeueAfter)
			}
		},
	}, {
		name:   "a foreign Service blocks the pod",
		s:      snap(testMember(bootstrapped(etcdfedv1.InitialClusterNew)), bootClaim, foreignSvc),
		writes: []string{},
		conds:  map[string]string{etcdfedv1.ConditionExposed: "False/" + ReasonServiceConflict, etcdfedv1.ConditionPodReady: "False/" + ReasonServiceConflict},
	}, {
		name:   "PodIP: a Service of an earlier exposure goes once no pod exists",
		s:      snap(fresh, claimOf(fresh, 0), leftover),
		writes: []string{"Delete Service main-0"},
	}, {
		name:   "PodIP: a Service of an earlier exposure stays while a pod exists",
		s:      snap(running, bootClaim, leftover, podOf(running)),
		writes: []string{},
	}}
}

func wrongPeerURL(m *etcdfedv1.EtcdMember) {
	m.Spec.Bootstrap.InitialCluster = "main-0=https://elsewhere:2380"
}

func lbService(addressed bool) *corev1.Service {
	s := service.Build(testMember(expose(etcdfedv1.ExposeLoadBalancer)))
	if addressed {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.net"}}
	}
	return s
}

func withEtcdError(s *snapshot) *snapshot {
	s.m = s.m.DeepCopy()
	s.m.Status.Etcd = &etcdfedv1.MemberEtcdView{ID: "old", LeaderID: "old"}
	s.etcd.view, s.etcd.err = nil, errors.New("connection refused")
	return s
}

func asLearner(s *snapshot) *snapshot {
	s.etcd.view.IsLearner = true
	return s
}

// The member's PodDisruptionBudget: created closed, opened when the hub
// grants the member the ring's one disruption, and the node's cordon
// reported as the request.
func TestDecideBudget(t *testing.T) {
	m := testMember()
	s := snap(m)
	s.budget = nil
	if got := describe(decide(s, testParams).writes); !slices.Contains(got, "Create PodDisruptionBudget main-0") {
		t.Fatalf("no budget: writes %q", got)
	}
	granted := m.DeepCopy()
	granted.Spec.Disruption = &etcdfedv1.MemberDisruption{Allowed: true}
	s = snap(granted)
	s.budget = budget.Build(m)
	d := decide(s, testParams)
	if got := describe(d.writes); !slices.Contains(got, "Update PodDisruptionBudget main-0") {
		t.Fatalf("granted: writes %q", got)
	}
	p := podOf(m)
	s = snap(m, claimOf(m, m.Spec.Incarnation), p)
	s.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.Spec.NodeName}, Spec: corev1.NodeSpec{Unschedulable: true}}
	d = decide(s, testParams)
	st := computeStatus(s, d, d.after)
	if st.Disruption == nil || !st.Disruption.Requested || st.Disruption.Since == nil {
		t.Fatalf("cordoned node: status.disruption %+v", st.Disruption)
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range decideCases() {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.s.m.DeepCopy()
			d := decide(tc.s, testParams)
			st := computeStatus(tc.s, d, d.after)
			if got := describe(d.writes); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %q; want %q", got, tc.writes)
			}
			got := reasons(st)
			for typ, want := range tc.conds {
				if got[typ] != want {
					c := meta.FindStatusCondition(st.Conditions, typ)
					t.Errorf("%s = %s; want %s (%+v)", typ, got[typ], want, c)
				}
			}
			if tc.check != nil {
				tc.check(t, d, st)
			}
			if !equality.Semantic.DeepEqual(before, tc.s.m) {
				t.Error("decide or computeStatus changed the snapshot's member")
			}
		})
	}
}

// TestNoVolumeDeletedUnderRetain: whatever the snapshot, with the Retain
// policy decide never deletes a volume, and the writer's rule refuses it.
func TestNoVolumeDeletedUnderRetain(t *testing.T) {
	for _, tc := range decideCases() {
		s := tc.s
		s.m = s.m.DeepCopy()
		s.m.Spec.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeRetain
		for _, w := range decide(s, testParams).writes {
			if c, ok := w.obj.(*corev1.PersistentVolumeClaim); ok && w.op == opDelete {
				t.Errorf("%s: deletes PVC %s under Retain", tc.name, c.Name)
			}
		}
	}
}

func TestMayDeleteVolume(t *testing.T) {
	del := testMember(incarnation(2), reclaim(etcdfedv1.VolumeDelete))
	deleted := testMember(incarnation(2), reclaim(etcdfedv1.VolumeDelete), func(m *etcdfedv1.EtcdMember) { m.DeletionTimestamp = &now })
	deletedRetain := testMember(incarnation(2), func(m *etcdfedv1.EtcdMember) { m.DeletionTimestamp = &now })
	foreign := func(c *corev1.PersistentVolumeClaim) { c.Labels[etcdfedv1.LabelClusterUID] = "uid-2" }
	for _, tc := range []struct {
		name string
		m    *etcdfedv1.EtcdMember
		c    *corev1.PersistentVolumeClaim
		want bool
	}{
		{"Retain, earlier incarnation", testMember(incarnation(2)), claimOf(del, 1), false},
		{"Delete, earlier incarnation", del, claimOf(del, 1), true},
		{"Delete, current incarnation", del, claimOf(del, 2), false},
		{"Delete, later incarnation", del, claimOf(del, 3), false},
		{"Delete, another cluster's", del, claimOf(del, 1, foreign), false},
		{"Delete, deleted member, current incarnation", deleted, claimOf(del, 2), true},
		{"Retain, deleted member", deletedRetain, claimOf(del, 1), false},
	} {
		if got := mayDeleteVolume(tc.m, tc.c); got != tc.want {
			t.Errorf("%s: mayDeleteVolume = %v; want %v", tc.name, got, tc.want)
		}
	}
}

// TestDeleteHooks: a deleted member's objects go through each owned kind's
// delete hook: its pod and Service are deleted, another's are left alone,
// its volumes are labelled retired (Retain) or deleted (Delete).
func TestDeleteHooks(t *testing.T) {
	for _, policy := range []etcdfedv1.VolumeReclaimPolicy{etcdfedv1.VolumeRetain, etcdfedv1.VolumeDelete} {
		t.Run(string(policy), func(t *testing.T) {
			m := testMember(incarnation(1), reclaim(policy), expose(etcdfedv1.ExposeNodePort), func(m *etcdfedv1.EtcdMember) { m.DeletionTimestamp = &now })
			objs := map[string][]client.Object{
				"Pod":                   {podOf(m)},
				"Service":               {service.Build(m)},
				"PersistentVolumeClaim": {claimOf(m, 0), claimOf(m, 1), claimOf(m, 2, func(c *corev1.PersistentVolumeClaim) { c.Labels[etcdfedv1.LabelClusterUID] = "uid-2" })},
			}
			var got []string
			for _, k := range ownedKinds {
				ws := k.memberDeleted(m, objs[k.kind])
				for _, w := range ws {
					if c, ok := w.obj.(*corev1.PersistentVolumeClaim); ok && w.op == opDelete && !mayDeleteVolume(m, c) {
						t.Errorf("the hook deletes PVC %s, which the writer refuses", c.Name)
					}
				}
				got = append(got, describe(ws)...)
			}
			want := []string{"Delete Pod main-0", "Delete Service main-0", "Retire PersistentVolumeClaim main-0-data-0", "Retire PersistentVolumeClaim main-0-data-1"}
			if policy == etcdfedv1.VolumeDelete {
				want = []string{"Delete Pod main-0", "Delete Service main-0", "Delete PersistentVolumeClaim main-0-data-0", "Delete PersistentVolumeClaim main-0-data-1"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("writes %q; want %q", got, want)
			}

			// Another's pod, or one already being deleted, is left alone.
			other := podOf(m, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} })
			going := podOf(m, func(p *corev1.Pod) { terminating(p) })
			if ws := deleteIfOwned(m, []client.Object{other, going}); len(ws) != 0 {
				t.Errorf("writes %q", describe(ws))
			}
		})
	}
}

// TestOwnedKindsCoverTheWrites: every object decide writes is of a kind in
// the one list.
func TestOwnedKindsCoverTheWrites(t *testing.T) {
	for _, tc := range decideCases() {
		for _, w := range decide(tc.s, testParams).writes {
			if kindOf(w.obj) == nil {
				t.Errorf("%s: writes a %T, not an owned kind", tc.name, w.obj)
			}
		}
	}
}

// A member at rest is not re-reported on every read of etcd: a view that
// moved only in its counters is written once per refresh; anything else,
// a move of the sizes a size policy acts on included, at once.
func TestEtcdViewWrittenOnNews(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	view := func(after time.Duration, change func(v *etcdfedv1.MemberEtcdView)) *etcdfedv1.MemberEtcdView {
		v := &etcdfedv1.MemberEtcdView{ID: "a1", LeaderID: "b2", RaftIndex: 100, RaftTerm: 3, DBSize: 1 << 20, Version: "3.6.16",
			Peers: &etcdfedv1.MemberPeerView{Active: []string{"b2", "c3"}}}
		o := metav1.NewTime(at.Add(after))
		v.ObservedAt = &o
		if change != nil {
			change(v)
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		cur     *etcdfedv1.MemberEtcdView
		written bool
	}{
		{"counters moved 10s later: kept", view(10*time.Second, func(v *etcdfedv1.MemberEtcdView) { v.RaftIndex, v.DBSize = 250, 1<<20+64<<10 }), false},
		{"file grown to 380 MiB 10s later: written", view(10*time.Second, func(v *etcdfedv1.MemberEtcdView) { v.DBSize = 380 << 20 }), true},
		{"counters moved a minute later: kept", view(time.Minute, func(v *etcdfedv1.MemberEtcdView) { v.RaftIndex = 900 }), false},
		{"counters moved one refresh later: written", view(etcdViewRefresh, func(v *etcdfedv1.MemberEtcdView) { v.RaftIndex = 900 }), true},
		{"new leader: written", view(time.Second, func(v *etcdfedv1.MemberEtcdView) { v.LeaderID = "c3" }), true},
		{"new term: written", view(time.Second, func(v *etcdfedv1.MemberEtcdView) { v.RaftTerm = 4 }), true},
		{"promoted: written", view(time.Second, func(v *etcdfedv1.MemberEtcdView) { v.IsLearner = true }), true},
		{"new version: written", view(time.Second, func(v *etcdfedv1.MemberEtcdView) { v.Version = "3.6.17" }), true},
		// The peer view is compared by value (a pointer compared as such
		// wrote the status on every read).
		{"same peers 10s later: kept", view(10*time.Second, func(v *etcdfedv1.MemberEtcdView) {
			v.Peers = &etcdfedv1.MemberPeerView{Active: []string{"b2", "c3"}}
		}), false},
		{"a peer lost: written", view(time.Second, func(v *etcdfedv1.MemberEtcdView) {
			v.Peers = &etcdfedv1.MemberPeerView{Active: []string{"b2"}, Lost: []string{"c3"}}
		}), true},
		{"metrics unread: written", view(time.Second, func(v *etcdfedv1.MemberEtcdView) { v.Peers = nil }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := view(0, nil)
			st := &etcdfedv1.EtcdMemberStatus{Incarnation: 1, Etcd: old}
			setEtcdView(st, 1, etcdfedv1.DefaultQuotaBackendBytes, etcdRead{pod: &corev1.Pod{}, view: tc.cur})
			if got := st.Etcd == tc.cur; got != tc.written {
				t.Errorf("written %v, want %v (status holds %+v)", got, tc.written, st.Etcd)
			}
		})
	}
	// A read that fails is news; so is the first view.
	st := &etcdfedv1.EtcdMemberStatus{Incarnation: 1}
	setEtcdView(st, 1, etcdfedv1.DefaultQuotaBackendBytes, etcdRead{pod: &corev1.Pod{}, view: view(0, nil)})
	if st.Etcd == nil {
		t.Fatal("first view not written")
	}
	setEtcdView(st, 1, etcdfedv1.DefaultQuotaBackendBytes, etcdRead{pod: &corev1.Pod{}, err: errors.New("deadline exceeded")})
	if st.Etcd.Error == "" {
		t.Error("a failed read is not reported")
	}
}

// A member that joined under another member's ID answers no status read;
// the ID its log shows is reported as status.etcd.id (the hub gives its
// learner up on it), and a status read's ID is never overwritten.
func TestRunsAsFromTheLog(t *testing.T) {
	log := []byte(`{"level":"warn","msg":"rejected Raft message to mismatch member","local-member-id":"bae111bbcd85ee30","mismatch-member-id":"2c5606393bc77cd7"}` + "\n")
	read := logRead{state: logWasRead, result: etcdlog.Result{Diagnosis: etcdlog.Classify(log)}}
	st := &etcdfedv1.EtcdMemberStatus{Etcd: &etcdfedv1.MemberEtcdView{Error: "read status: context deadline exceeded"}}
	setRunsAs(st, read)
	if st.Etcd.ID != "bae111bbcd85ee30" {
		t.Errorf("status.etcd.id %q, want the ID from the log", st.Etcd.ID)
	}
	answered := &etcdfedv1.EtcdMemberStatus{Etcd: &etcdfedv1.MemberEtcdView{ID: "2c5606393bc77cd7"}}
	setRunsAs(answered, read)
	if answered.Etcd.ID != "2c5606393bc77cd7" {
		t.Errorf("a status read's ID replaced by the log's: %q", answered.Etcd.ID)
	}
	none := &etcdfedv1.EtcdMemberStatus{}
	setRunsAs(none, logRead{state: logNotDue})
	if none.Etcd != nil {
		t.Errorf("an ID without a log read: %+v", none.Etcd)
	}
}
