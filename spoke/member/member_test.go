package member_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/spoke/app"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/internal/spoketest"
	"github.com/etcdfed/etcdfed/spoke/internal/testcerts"
	"github.com/etcdfed/etcdfed/spoke/internal/testetcd"
	"github.com/etcdfed/etcdfed/spoke/member"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.RunMain(m))
}

const (
	timeout = 60 * time.Second
	domain  = "etcd.example.com"
)

// env is one test's namespace in the shared apiserver, with a spoke (its
// EtcdMember reconciler; DNS and gossip off) running on it.
type env struct {
	t   *testing.T
	g   *WithT
	ctx context.Context
	c   client.Client
	ns  string
	ca  *testcerts.CA
}

func start(t *testing.T, opts ...func(*app.Options)) *env {
	t.Helper()
	cl := testenv.Shared(t, "spoke-member")
	ns := testenv.NamespaceT(t, cl, "member")
	o := app.DefaultOptions()
	o.Namespace = ns
	o.HelperImage = "ghcr.io/etcdfed/etcdfed:test"
	o.DNSListen = ""
	o.Gossip.BindAddr = ""
	o.LeaderElection = false
	o.MemberStatusInterval = time.Second
	o.EtcdStatusTimeout = time.Second
	for _, opt := range opts {
		opt(&o)
	}
	spoketest.Run(t, cl.Config, o)
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(timeout)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	return &env{t: t, g: g, ctx: context.Background(), c: cl.Client, ns: ns, ca: testcerts.NewCA(t)}
}

func (e *env) member(name string, mut ...func(*etcdfedv1.EtcdMember)) *etcdfedv1.EtcdMember {
	m := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{etcdfedv1.LabelClusterUID: "uid-" + e.ns}},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "hub", UID: "uid-" + e.ns},
			MemberName: name,
			Image:      "gcr.io/etcd-development/etcd:v3.6.16",
			DNSName:    name + "." + domain,
			Zone:       "zone-a",
			TLS:        etcdfedv1.MemberTLS{SecretName: name + "-tls"},
		},
	}
	for _, f := range mut {
		f(m)
	}
	e.g.Expect(e.c.Create(e.ctx, m)).To(Succeed())
	return m
}

// bootstrap sets a founding bootstrap listing only the member itself.
func bootstrap(m *etcdfedv1.EtcdMember, state etcdfedv1.InitialClusterState, peerURL string) {
	m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{
		InitialCluster:      m.Spec.MemberName + "=" + peerURL,
		InitialClusterState: state,
		Token:               "main-token",
	}
}

func (e *env) update(m *etcdfedv1.EtcdMember, f func(*etcdfedv1.EtcdMember)) {
	e.t.Helper()
	e.g.Eventually(func(g Gomega) {
		cur := &etcdfedv1.EtcdMember{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(m), cur)).To(Succeed())
		f(cur)
		g.Expect(e.c.Update(e.ctx, cur)).To(Succeed())
		*m = *cur
	}).Should(Succeed())
}

func (e *env) secret(m *etcdfedv1.EtcdMember) testcerts.Pair {
	pair := e.ca.Issue(e.t, m.Spec.MemberName, []string{m.Spec.DNSName})
	e.g.Expect(e.c.Create(e.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.Spec.TLS.SecretName, Namespace: e.ns},
		Data:       pair.SecretData(),
	})).To(Succeed())
	return pair
}

func (e *env) node(name, zone string) string {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	e.g.Expect(e.c.Create(e.ctx, n)).To(Succeed())
	e.t.Cleanup(func() { _ = e.c.Delete(context.Background(), n) })
	return n.Name
}

func (e *env) get(m *etcdfedv1.EtcdMember) *etcdfedv1.EtcdMember {
	cur := &etcdfedv1.EtcdMember{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(m), cur)).To(Succeed())
	return cur
}

func (e *env) pod(name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, p)
}

func (e *env) pvc(name string) (*corev1.PersistentVolumeClaim, error) {
	p := &corev1.PersistentVolumeClaim{}
	return p, e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, p)
}

// kubelet plays the kubelet for a pod: binds it to node, runs its init
// container to success and reports it running (and ready) at podIP/hostIP.
func (e *env) kubelet(name, node, podIP, hostIP string, ready bool) *corev1.Pod {
	e.t.Helper()
	var p *corev1.Pod
	e.g.Eventually(func(g Gomega) {
		var err error
		p, err = e.pod(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.DeletionTimestamp).To(BeNil())
		if p.Spec.NodeName == "" {
			g.Expect(e.c.SubResource("binding").Create(e.ctx, p, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			})).To(Succeed())
			p, err = e.pod(name)
			g.Expect(err).NotTo(HaveOccurred())
		}
		readyStatus := corev1.ConditionFalse
		if ready {
			readyStatus = corev1.ConditionTrue
		}
		p.Status = corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  podIP,
			PodIPs: []corev1.PodIP{{IP: podIP}},
			HostIP: hostIP,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: readyStatus},
				{Type: corev1.ContainersReady, Status: readyStatus},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "wait-dns", Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}},
		}
		g.Expect(e.c.Status().Update(e.ctx, p)).To(Succeed())
	}).Should(Succeed())
	return p
}

// finishDeletion plays the kubelet confirming the termination of the pod
// with uid, which the spoke deleted (a pod in a terminal phase is removed at
// once by the apiserver and may already be replaced).
func (e *env) finishDeletion(name string, uid types.UID) {
	e.t.Helper()
	e.g.Eventually(func(g Gomega) {
		p, err := e.pod(name)
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.DeletionTimestamp).NotTo(BeNil(), "the spoke deletes the pod")
		g.Expect(e.c.Delete(e.ctx, p, client.GracePeriodSeconds(0), client.Preconditions{UID: &p.UID})).To(Succeed())
	}).Should(Succeed())
}

func (e *env) bindPVC(name string) {
	e.t.Helper()
	e.g.Eventually(func(g Gomega) {
		p, err := e.pvc(name)
		g.Expect(err).NotTo(HaveOccurred())
		p.Status.Phase = corev1.ClaimBound
		g.Expect(e.c.Status().Update(e.ctx, p)).To(Succeed())
	}).Should(Succeed())
}

func cond(m *etcdfedv1.EtcdMember, t string) metav1.Condition {
	if c := meta.FindStatusCondition(m.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// haveCondition matches a member whose condition t has status and reason.
func haveCondition(t string, status metav1.ConditionStatus, reason string) func(Gomega, *etcdfedv1.EtcdMember) {
	return func(g Gomega, m *etcdfedv1.EtcdMember) {
		c := cond(m, t)
		g.Expect(c.Status).To(Equal(status), "%s: %s %s", t, c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(reason), "%s: %s", t, c.Message)
	}
}

func (e *env) eventually(m *etcdfedv1.EtcdMember, checks ...func(Gomega, *etcdfedv1.EtcdMember)) *etcdfedv1.EtcdMember {
	e.t.Helper()
	var cur *etcdfedv1.EtcdMember
	e.g.Eventually(func(g Gomega) {
		cur = &etcdfedv1.EtcdMember{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(m), cur)).To(Succeed())
		for _, c := range checks {
			c(g, cur)
		}
	}).Should(Succeed())
	return cur
}

// observed waits until the spoke has acted on the member's current
// generation: a sync point for "nothing happened" assertions.
func observed(g Gomega, m *etcdfedv1.EtcdMember) {
	g.Expect(m.Status.ObservedGeneration).To(Equal(m.Generation))
}

// TestPodIPMemberLifecycle follows a member from its EtcdMember to a
// running, healthy pod read over TLS by a real etcd, and back from a deleted
// pod onto the same volume.
func TestPodIPMemberLifecycle(t *testing.T) {
	e := start(t)
	m := e.member("main-0")
	peerURL := "https://main-0." + domain + ":2380"

	// No bootstrap: volume and URLs are prepared, no pod.
	got := e.eventually(m,
		haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonWaitingForBootstrap),
		haveCondition(etcdfedv1.ConditionExposed, metav1.ConditionFalse, member.ReasonWaitingForPodIP),
		haveCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionFalse, member.ReasonVolumePending),
		func(g Gomega, m *etcdfedv1.EtcdMember) {
			g.Expect(m.Status.PeerURL).To(Equal(peerURL))
			g.Expect(m.Status.ClientURL).To(Equal("https://main-0." + domain + ":2379"))
			g.Expect(m.Status.Volume.ClaimName).To(Equal("main-0-data-0"))
			g.Expect(m.Status.Volume.UID).NotTo(BeEmpty())
		}, observed)
	e.g.Expect(got.Finalizers).To(ContainElement("etcdfed.dev/spoke"))
	claim, err := e.pvc("main-0-data-0")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(claim.Labels).To(HaveKeyWithValue(etcdfedv1.LabelIncarnation, "0"))
	e.g.Expect(claim.Labels).To(HaveKeyWithValue(etcdfedv1.LabelComponent, "data"))
	e.g.Expect(claim.OwnerReferences).To(BeEmpty())
	_, err = e.pod("main-0")
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no pod before bootstrap")

	// Bootstrap without the TLS Secret: a clear reason, still no pod.
	e.update(m, func(m *etcdfedv1.EtcdMember) { bootstrap(m, etcdfedv1.InitialClusterNew, peerURL) })
	e.eventually(m, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonTLSSecretMissing), observed)
	_, err = e.pod("main-0")
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no pod without the TLS Secret")

	// The Secret arrives: the pod is created with the contract's shape.
	pair := e.secret(m)
	var p *corev1.Pod
	e.g.Eventually(func() error { p, err = e.pod("main-0"); return err }).Should(Succeed())
	checkPodShape(t, p, m)
	e.eventually(m, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonPodPending))

	// Play kubelet, with a real etcd on the pod IP serving the member's
	// certificate.
	ip := testetcd.FreeLoopbackIP(t)
	testetcd.Start(t, ip, "main-0", m.Spec.DNSName, &pair)
	node := e.node("a1", "zone-a")
	e.kubelet("main-0", node, ip, "10.0.0.1", true)
	e.bindPVC("main-0-data-0")
	got = e.eventually(m,
		haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady),
		haveCondition(etcdfedv1.ConditionExposed, metav1.ConditionTrue, member.ReasonExposed),
		haveCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionTrue, member.ReasonBound),
		haveCondition(etcdfedv1.ConditionMemberHealthy, metav1.ConditionTrue, member.ReasonHealthy),
		func(g Gomega, m *etcdfedv1.EtcdMember) {
			g.Expect(m.Status.PodName).To(Equal("main-0"))
			g.Expect(m.Status.PodIP).To(Equal(ip))
			g.Expect(m.Status.NodeName).To(Equal(node))
			g.Expect(m.Status.Zone).To(Equal("zone-a"))
			g.Expect(m.Status.Address).To(Equal(ip))
			g.Expect(m.Status.Incarnation).To(Equal(int64(0)))
			g.Expect(m.Status.Etcd).NotTo(BeNil())
			g.Expect(m.Status.Etcd.ID).NotTo(BeEmpty())
			g.Expect(m.Status.Etcd.LeaderID).To(Equal(m.Status.Etcd.ID))
			g.Expect(m.Status.Etcd.Version).To(HavePrefix("3.6"))
			g.Expect(m.Status.Etcd.ObservedAt).NotTo(BeNil())
		}, observed)
	t.Logf("status: %+v etcd: %+v", got.Status.Conditions, *got.Status.Etcd)

	// A deleted pod comes back on the same volume.
	claimUID := got.Status.Volume.UID
	e.g.Expect(e.c.Delete(e.ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		np, err := e.pod("main-0")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(np.UID).NotTo(Equal(p.UID))
		g.Expect(np.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("main-0-data-0"))
	}).Should(Succeed())
	claim, err = e.pvc("main-0-data-0")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(string(claim.UID)).To(Equal(claimUID))

	// Bootstrap removed: the pod stays.
	e.kubelet("main-0", node, ip, "10.0.0.1", true)
	cur, _ := e.pod("main-0")
	e.update(m, func(m *etcdfedv1.EtcdMember) { m.Spec.Bootstrap = nil })
	e.eventually(m, observed, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady))
	after, err := e.pod("main-0")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(after.UID).To(Equal(cur.UID))
	e.g.Expect(after.DeletionTimestamp).To(BeNil())
}

func checkPodShape(t *testing.T, p *corev1.Pod, m *etcdfedv1.EtcdMember) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(p.OwnerReferences).To(HaveLen(1))
	g.Expect(p.OwnerReferences[0].Name).To(Equal(m.Name))
	g.Expect(*p.OwnerReferences[0].Controller).To(BeTrue())
	g.Expect(p.Labels).To(HaveKeyWithValue(etcdfedv1.LabelManagedBy, "etcdfed"))
	g.Expect(p.Labels).To(HaveKeyWithValue(etcdfedv1.LabelIncarnation, fmt.Sprint(m.Spec.Incarnation)))
	g.Expect(p.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyAlways))
	// The apiserver accepted the security contexts and computed the
	// pod's QoS class from the requests: never BestEffort.
	g.Expect(p.Spec.SecurityContext.RunAsUser).To(HaveValue(Equal(pod.RunAsUser)))
	g.Expect(p.Spec.SecurityContext.FSGroup).To(HaveValue(Equal(pod.FSGroup)))
	g.Expect(p.Status.QOSClass).To(Equal(corev1.PodQOSBurstable))

	ic := p.Spec.InitContainers[0]
	g.Expect(ic.Name).To(Equal("wait-dns"))
	g.Expect(ic.Image).To(Equal("ghcr.io/etcdfed/etcdfed:test"))
	g.Expect(ic.Command).To(Equal([]string{"etcdfed-init", "wait-dns", "--name", m.Spec.DNSName, "--address", "$(EXPECTED_ADDRESS)", "--timeout", "10m0s"}))

	c := p.Spec.Containers[0]
	g.Expect(c.Name).To(Equal("etcd"))
	g.Expect(c.Image).To(Equal(m.Spec.Image))
	g.Expect(c.Command[0]).To(Equal("/usr/local/bin/etcd"))
	want := []string{
		"--name=" + m.Spec.MemberName,
		"--data-dir=/var/lib/etcd/data",
		"--listen-peer-urls=https://$(POD_IP):2380",
		"--listen-client-urls=https://$(POD_IP):2379",
		"--listen-metrics-urls=http://$(POD_IP):2381",
		"--initial-advertise-peer-urls=" + m.Status.PeerURL,
		"--advertise-client-urls=" + m.Status.ClientURL,
		"--initial-cluster=" + m.Spec.Bootstrap.InitialCluster,
		"--initial-cluster-state=" + string(m.Spec.Bootstrap.InitialClusterState),
		"--initial-cluster-token=main-token",
		"--max-learners=1",
		"--client-cert-auth=true",
		"--peer-client-cert-auth=true",
	}
	if m.Status.PeerURL == "" {
		want = slices.DeleteFunc(want, func(s string) bool {
			return strings.HasPrefix(s, "--initial-advertise") || strings.HasPrefix(s, "--advertise")
		})
	}
	for _, w := range want {
		g.Expect(c.Command).To(ContainElement(w))
	}
	g.Expect(c.Env).To(ContainElement(HaveField("Name", "POD_IP")))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/livez"))
	g.Expect(c.StartupProbe.HTTPGet.Path).To(Equal("/livez"))
	g.Expect(c.ReadinessProbe.HTTPGet.Port.IntValue()).To(Equal(2381))
	g.Expect(c.VolumeMounts).To(ContainElements(
		corev1.VolumeMount{Name: "data", MountPath: "/var/lib/etcd"},
		corev1.VolumeMount{Name: "tls", MountPath: "/etc/etcd/tls", ReadOnly: true},
	))
	vols := map[string]corev1.VolumeSource{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v.VolumeSource
	}
	g.Expect(vols["data"].PersistentVolumeClaim).NotTo(BeNil())
	g.Expect(vols["data"].PersistentVolumeClaim.ClaimName).To(Equal(fmt.Sprintf("%s-data-%d", m.Name, m.Spec.Incarnation)))
	g.Expect(vols["tls"].Secret).NotTo(BeNil())
	g.Expect(vols["tls"].Secret.SecretName).To(Equal(m.Spec.TLS.SecretName))
	g.Expect(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values).To(Equal([]string{m.Spec.Zone}))
}

// runningMember creates a member with bootstrap and Secret and plays the
// kubelet until its pod of the current incarnation runs.
func (e *env) runningMember(name string, mut ...func(*etcdfedv1.EtcdMember)) (*etcdfedv1.EtcdMember, string) {
	e.t.Helper()
	m := e.member(name, mut...)
	if m.Spec.TLS.Mode != etcdfedv1.TLSDisabled {
		e.secret(m)
	}
	// As the hub does: the peer URL the spoke reports goes into bootstrap.
	got := e.eventually(m, func(g Gomega, m *etcdfedv1.EtcdMember) { g.Expect(m.Status.PeerURL).NotTo(BeEmpty()) })
	e.update(m, func(m *etcdfedv1.EtcdMember) { bootstrap(m, etcdfedv1.InitialClusterNew, got.Status.PeerURL) })
	node := e.node(name+"-node", "zone-a")
	e.g.Eventually(func() error { _, err := e.pod(name); return err }).Should(Succeed())
	e.kubelet(name, node, "10.1.0.1", "10.0.0.1", true)
	e.eventually(m, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady))
	return e.get(m), node
}

// TestIncarnationBump: a raised incarnation replaces the pod on a new
// volume; the old volume is retained and labelled, and deleted only with
// the Delete policy once the new pod runs.
func TestIncarnationBump(t *testing.T) {
	for _, policy := range []etcdfedv1.VolumeReclaimPolicy{etcdfedv1.VolumeRetain, etcdfedv1.VolumeDelete} {
		t.Run(string(policy), func(t *testing.T) {
			e := start(t)
			m, node := e.runningMember("main-1", func(m *etcdfedv1.EtcdMember) { m.Spec.Storage.VolumeReclaimPolicy = policy })
			old, _ := e.pod("main-1")

			e.update(m, func(m *etcdfedv1.EtcdMember) {
				m.Spec.Incarnation = 1
				bootstrap(m, etcdfedv1.InitialClusterExisting, "https://"+m.Spec.DNSName+":2380")
			})
			e.finishDeletion("main-1", old.UID)
			var p *corev1.Pod
			e.g.Eventually(func(g Gomega) {
				var err error
				p, err = e.pod("main-1")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.UID).NotTo(Equal(old.UID))
			}).Should(Succeed())
			e.g.Expect(p.Labels[etcdfedv1.LabelIncarnation]).To(Equal("1"))
			e.g.Expect(p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("main-1-data-1"))
			e.g.Expect(p.Spec.Containers[0].Command).To(ContainElement("--initial-cluster-state=existing"))
			e.g.Eventually(func(g Gomega) {
				c, err := e.pvc("main-1-data-0")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Labels).To(HaveKeyWithValue(etcdfedv1.LabelRetired, "true"))
			}).Should(Succeed())
			_, err := e.pvc("main-1-data-1")
			e.g.Expect(err).NotTo(HaveOccurred())

			e.kubelet("main-1", node, "10.1.0.2", "10.0.0.1", true)
			e.eventually(m, observed, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady),
				func(g Gomega, m *etcdfedv1.EtcdMember) {
					g.Expect(m.Status.Incarnation).To(Equal(int64(1)))
					g.Expect(m.Status.Volume.ClaimName).To(Equal("main-1-data-1"))
				})
			if policy == etcdfedv1.VolumeDelete {
				e.g.Eventually(func(g Gomega) {
					c, err := e.pvc("main-1-data-0")
					if apierrors.IsNotFound(err) {
						return
					}
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(c.DeletionTimestamp).NotTo(BeNil(), "the retired volume is deleted")
				}).Should(Succeed())
			} else {
				c, err := e.pvc("main-1-data-0")
				e.g.Expect(err).NotTo(HaveOccurred())
				e.g.Expect(c.DeletionTimestamp).To(BeNil())
			}
		})
	}
}

// TestRecoverySeedKeepsItsVolume: the seed of a recovery from a backup
// (the hub raises its incarnation and sets spec.storage.keepVolumesBefore
// to it) under the Delete policy: once the new pod runs, the earlier
// volume, which may hold writes newer than the backup, is labelled retired
// and kept and is not deleted; deleting the member later leaves it too.
func TestRecoverySeedKeepsItsVolume(t *testing.T) {
	e := start(t)
	m, node := e.runningMember("main-1", func(m *etcdfedv1.EtcdMember) { m.Spec.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeDelete })
	old, _ := e.pod("main-1")
	e.update(m, func(m *etcdfedv1.EtcdMember) {
		m.Spec.Incarnation = 1
		m.Spec.Storage.KeepVolumesBefore = 1
		bootstrap(m, etcdfedv1.InitialClusterNew, "https://"+m.Spec.DNSName+":2380")
		m.Spec.Bootstrap.Restore = &etcdfedv1.MemberRestore{Store: etcdfedv1.BackupStore{URL: "file:///b"}, Object: "x.db", SHA256: strings.Repeat("a", 64), RevisionBump: 1}
	})
	e.finishDeletion("main-1", old.UID)
	e.g.Eventually(func(g Gomega) {
		p, err := e.pod("main-1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.UID).NotTo(Equal(old.UID))
	}).Should(Succeed())
	e.kubelet("main-1", node, "10.1.0.2", "10.0.0.1", true)
	e.eventually(m, observed, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady),
		func(g Gomega, m *etcdfedv1.EtcdMember) { g.Expect(m.Status.Incarnation).To(Equal(int64(1))) })
	kept := func(g Gomega) {
		c, err := e.pvc("main-1-data-0")
		g.Expect(err).NotTo(HaveOccurred(), "the seed's earlier volume is gone")
		g.Expect(c.DeletionTimestamp).To(BeNil(), "the seed's earlier volume is being deleted")
		g.Expect(c.Labels).To(HaveKeyWithValue(etcdfedv1.LabelRetired, "true"))
		g.Expect(c.Labels).To(HaveKeyWithValue(etcdfedv1.LabelKept, "true"))
	}
	e.g.Eventually(kept).Should(Succeed())
	// The Delete policy's retirement had its chance: a few more passes.
	e.g.Consistently(kept, 3*time.Second, 200*time.Millisecond).Should(Succeed())

	e.g.Expect(e.c.Delete(context.Background(), e.get(m))).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		c, err := e.pvc("main-1-data-1")
		if !apierrors.IsNotFound(err) {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.DeletionTimestamp).NotTo(BeNil(), "the current volume goes by the Delete policy")
		}
	}).Should(Succeed())
	kept(e.g)
}

// TestBootstrapRefusedForALaterIncarnation: state new on a member that had
// an earlier incarnation would found a second cluster; no pod.
func TestBootstrapRefusedForALaterIncarnation(t *testing.T) {
	e := start(t)
	m := e.member("main-2")
	e.secret(m)
	e.eventually(m, observed, func(g Gomega, m *etcdfedv1.EtcdMember) { g.Expect(m.Status.Volume.UID).NotTo(BeEmpty()) })
	e.update(m, func(m *etcdfedv1.EtcdMember) {
		m.Spec.Incarnation = 1
		bootstrap(m, etcdfedv1.InitialClusterNew, "https://"+m.Spec.DNSName+":2380")
	})
	e.eventually(m, observed, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonBootstrapRefused))
	_, err := e.pod("main-2")
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

// TestInvalidSpecDeletesNothing: a spec the spoke cannot run gets a
// condition; the running pod and its volume stay.
func TestInvalidSpecDeletesNothing(t *testing.T) {
	e := start(t)
	m, _ := e.runningMember("main-3")
	p, _ := e.pod("main-3")
	gen := m.Generation
	e.update(m, func(m *etcdfedv1.EtcdMember) { m.Spec.DNSName = "main-3.etcd.example.com." })
	got := e.eventually(m, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonInvalidSpec))
	e.g.Expect(cond(got, etcdfedv1.ConditionPodReady).Message).To(ContainSubstring("dnsName"))
	e.g.Expect(got.Status.ObservedGeneration).To(Equal(gen), "observedGeneration stays at the last valid spec")
	after, err := e.pod("main-3")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(after.UID).To(Equal(p.UID))
	e.g.Expect(after.DeletionTimestamp).To(BeNil())
	_, err = e.pvc("main-3-data-0")
	e.g.Expect(err).NotTo(HaveOccurred())

	// A bootstrap that does not list the member's peer URL: no pod.
	n := e.member("main-4", func(m *etcdfedv1.EtcdMember) {
		bootstrap(m, etcdfedv1.InitialClusterNew, "https://main-4."+domain+":31380")
	})
	e.secret(n)
	e.eventually(n, observed, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonBootstrapMismatch))
	_, err = e.pod("main-4")
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

// TestPodPolicyRefusesAnnotations: a spoke whose member cluster allows
// only prometheus.io/ annotations on member pods runs a member whose
// template carries prometheus.io/scrape, and refuses one asking for a
// sidecar injection, whatever the hub allowed: PodReady=False
// RefusedByPolicy naming the key and the spoke's flag, the running pod and
// its volume kept, observedGeneration at the last spec it ran; a new
// member asking for it gets no pod. Taking the annotation away again lets
// the member run on.
func TestPodPolicyRefusesAnnotations(t *testing.T) {
	e := start(t, func(o *app.Options) { o.AllowedPodAnnotations = []string{"prometheus.io/"} })
	m, _ := e.runningMember("main-3", func(m *etcdfedv1.EtcdMember) {
		m.Spec.PodTemplate.Annotations = map[string]string{"prometheus.io/scrape": "true"}
	})
	p, _ := e.pod("main-3")
	e.g.Expect(p.Annotations).To(HaveKeyWithValue("prometheus.io/scrape", "true"))
	gen := m.Generation
	e.update(m, func(m *etcdfedv1.EtcdMember) {
		m.Spec.PodTemplate.Annotations["sidecar.istio.io/inject"] = "true"
	})
	got := e.eventually(m, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonRefusedByPolicy))
	msg := cond(got, etcdfedv1.ConditionPodReady).Message
	e.g.Expect(msg).To(ContainSubstring(`"sidecar.istio.io/inject"`))
	e.g.Expect(msg).To(ContainSubstring("--allowed-pod-annotations"))
	e.g.Expect(msg).NotTo(ContainSubstring("prometheus.io/scrape\""), "an allowed key is not named")
	e.g.Expect(got.Status.ObservedGeneration).To(Equal(gen), "observedGeneration stays at the last spec the spoke ran")
	e.g.Consistently(func(g Gomega) {
		after, err := e.pod("main-3")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(after.UID).To(Equal(p.UID))
		g.Expect(after.DeletionTimestamp).To(BeNil())
		g.Expect(after.Annotations).NotTo(HaveKey("sidecar.istio.io/inject"))
	}, 2*time.Second, 100*time.Millisecond).Should(Succeed())
	_, err := e.pvc("main-3-data-0")
	e.g.Expect(err).NotTo(HaveOccurred())

	// A new member asking for it: no pod.
	n := e.member("main-4", func(m *etcdfedv1.EtcdMember) {
		m.Spec.PodTemplate.Annotations = map[string]string{"sidecar.istio.io/inject": "true"}
	})
	e.secret(n)
	e.eventually(n, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonRefusedByPolicy))
	e.g.Consistently(func() bool { _, err := e.pod("main-4"); return apierrors.IsNotFound(err) }, time.Second, 100*time.Millisecond).Should(BeTrue())

	// The annotation taken away: the member's spec is run again.
	m = e.get(m)
	e.update(m, func(m *etcdfedv1.EtcdMember) { delete(m.Spec.PodTemplate.Annotations, "sidecar.istio.io/inject") })
	e.eventually(m, observed, func(g Gomega, m *etcdfedv1.EtcdMember) {
		g.Expect(cond(m, etcdfedv1.ConditionPodReady).Reason).NotTo(Equal(member.ReasonRefusedByPolicy))
	})
}

// TestNodePortMember: node ports are advertised, the node IP is the
// address, and wait-dns expects the host IP.
func TestNodePortMember(t *testing.T) {
	e := start(t)
	m := e.member("main-5", func(m *etcdfedv1.EtcdMember) { m.Spec.Expose.Type = etcdfedv1.ExposeNodePort })
	e.secret(m)
	var svc corev1.Service
	e.g.Eventually(func(g Gomega) {
		g.Expect(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "main-5"}, &svc)).To(Succeed())
		g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
	}).Should(Succeed())
	e.g.Expect(svc.Spec.PublishNotReadyAddresses).To(BeTrue())
	e.g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(etcdfedv1.LabelMember, "main-5"))
	peer, client := svc.Spec.Ports[0].NodePort, svc.Spec.Ports[1].NodePort
	got := e.eventually(m, func(g Gomega, m *etcdfedv1.EtcdMember) {
		g.Expect(m.Status.PeerURL).To(Equal(fmt.Sprintf("https://main-5.%s:%d", domain, peer)))
		g.Expect(m.Status.ClientURL).To(Equal(fmt.Sprintf("https://main-5.%s:%d", domain, client)))
	})
	// The hub builds initialCluster from the reported peer URL.
	e.update(m, func(m *etcdfedv1.EtcdMember) { bootstrap(m, etcdfedv1.InitialClusterNew, got.Status.PeerURL) })
	var p *corev1.Pod
	e.g.Eventually(func() error { var err error; p, err = e.pod("main-5"); return err }).Should(Succeed())
	e.g.Expect(p.Spec.Containers[0].Command).To(ContainElements(
		fmt.Sprintf("--initial-advertise-peer-urls=https://main-5.%s:%d", domain, peer),
		fmt.Sprintf("--advertise-client-urls=https://main-5.%s:%d", domain, client),
		"--listen-peer-urls=https://$(POD_IP):2380",
	))
	e.g.Expect(p.Spec.InitContainers[0].Env[0].ValueFrom.FieldRef.FieldPath).To(Equal("status.hostIP"))
	node := e.node("np", "zone-a")
	e.kubelet("main-5", node, "10.1.0.5", "192.0.2.15", true)
	e.eventually(m, haveCondition(etcdfedv1.ConditionExposed, metav1.ConditionTrue, member.ReasonExposed),
		func(g Gomega, m *etcdfedv1.EtcdMember) { g.Expect(m.Status.Address).To(Equal("192.0.2.15")) })
}

// TestLoadBalancerMember: no pod until the load balancer has an address,
// which is then the member's address and wait-dns's expectation.
func TestLoadBalancerMember(t *testing.T) {
	e := start(t)
	m := e.member("main-6", func(m *etcdfedv1.EtcdMember) {
		m.Spec.Expose = etcdfedv1.ExposeSpec{Type: etcdfedv1.ExposeLoadBalancer, ServiceAnnotations: map[string]string{"example.net/internal": "true"}}
		bootstrap(m, etcdfedv1.InitialClusterNew, "https://"+m.Spec.DNSName+":2380")
	})
	e.secret(m)
	e.eventually(m, observed,
		haveCondition(etcdfedv1.ConditionExposed, metav1.ConditionFalse, member.ReasonWaitingForLoadBalancer),
		haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonWaitingForExposure))
	_, err := e.pod("main-6")
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue())

	var svc corev1.Service
	e.g.Expect(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "main-6"}, &svc)).To(Succeed())
	e.g.Expect(svc.Annotations).To(HaveKeyWithValue("example.net/internal", "true"))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb-6.elb.example.net"}}
	e.g.Expect(e.c.Status().Update(e.ctx, &svc)).To(Succeed())

	var p *corev1.Pod
	e.g.Eventually(func() error { p, err = e.pod("main-6"); return err }).Should(Succeed())
	env := p.Spec.InitContainers[0].Env[0]
	e.g.Expect(env.ValueFrom).To(BeNil())
	e.g.Expect(env.Value).To(Equal("lb-6.elb.example.net"))
	e.eventually(m, haveCondition(etcdfedv1.ConditionExposed, metav1.ConditionTrue, member.ReasonExposed),
		func(g Gomega, m *etcdfedv1.EtcdMember) { g.Expect(m.Status.Address).To(Equal("lb-6.elb.example.net")) })
}

// TestForeignPodIsLeftAlone: a pod of the member's name that etcdfed did
// not make is reported, never touched.
func TestForeignPodIsLeftAlone(t *testing.T) {
	e := start(t)
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "main-7", Namespace: e.ns, Labels: map[string]string{"app": "other"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	e.g.Expect(e.c.Create(e.ctx, foreign)).To(Succeed())
	m := e.member("main-7", func(m *etcdfedv1.EtcdMember) {
		bootstrap(m, etcdfedv1.InitialClusterNew, "https://"+m.Spec.DNSName+":2380")
	})
	e.secret(m)
	e.eventually(m, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonPodConflict))
	p, err := e.pod("main-7")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(p.UID).To(Equal(foreign.UID))
	e.g.Expect(p.DeletionTimestamp).To(BeNil())
	e.g.Expect(p.Labels).To(Equal(map[string]string{"app": "other"}))
}

// TestFailedPodIsReplaced: a pod that will not run again (evicted) is
// replaced on the same volume.
func TestFailedPodIsReplaced(t *testing.T) {
	e := start(t)
	m, _ := e.runningMember("main-8")
	p, _ := e.pod("main-8")
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
	e.g.Expect(e.c.Status().Update(e.ctx, p)).To(Succeed())
	e.finishDeletion("main-8", p.UID)
	e.g.Eventually(func(g Gomega) {
		np, err := e.pod("main-8")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(np.UID).NotTo(Equal(p.UID))
		g.Expect(np.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("main-8-data-0"))
	}).Should(Succeed())
	e.eventually(m, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonPodPending))
}

// TestSpecChangeReplacesPod: a member spec changed by the hub (which rolls
// such changes one member at a time) replaces the pod on the same volume;
// a bootstrap change does not, and neither does a spoke that merely renders
// the unchanged spec differently.
func TestSpecChangeReplacesPod(t *testing.T) {
	e := start(t)
	m, node := e.runningMember("main-9")
	p, _ := e.pod("main-9")

	e.update(m, func(m *etcdfedv1.EtcdMember) { m.Spec.Image = "gcr.io/etcd-development/etcd:v3.6.17" })
	e.eventually(m, observed, func(g Gomega, m *etcdfedv1.EtcdMember) {
		g.Expect(cond(m, etcdfedv1.ConditionPodReady).Status).To(Equal(metav1.ConditionFalse), "PodReady is false from the moment the pod is replaced")
	})
	e.finishDeletion("main-9", p.UID)
	var np *corev1.Pod
	e.g.Eventually(func(g Gomega) {
		var err error
		np, err = e.pod("main-9")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(np.UID).NotTo(Equal(p.UID))
	}).Should(Succeed())
	e.g.Expect(np.Spec.Containers[0].Image).To(Equal("gcr.io/etcd-development/etcd:v3.6.17"))
	e.g.Expect(np.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("main-9-data-0"))
	e.kubelet("main-9", node, "10.1.0.9", "10.0.0.1", true)
	e.eventually(m, observed, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady))

	// Bootstrap switched to existing: no restart.
	e.update(m, func(m *etcdfedv1.EtcdMember) { m.Spec.Bootstrap.InitialClusterState = etcdfedv1.InitialClusterExisting })
	e.eventually(m, observed, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady))
	same, _ := e.pod("main-9")
	e.g.Expect(same.UID).To(Equal(np.UID))
	e.g.Expect(same.DeletionTimestamp).To(BeNil())

	// A pod rendered by another spoke version for the same member spec is
	// kept and reported.
	same.Annotations["etcdfed.dev/pod-spec-hash"] = "rendered-by-an-older-spoke"
	e.g.Expect(e.c.Update(e.ctx, same)).To(Succeed())
	e.eventually(m, func(g Gomega, m *etcdfedv1.EtcdMember) {
		c := cond(m, etcdfedv1.ConditionPodReady)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("spoke upgrade"))
	})
	after, _ := e.pod("main-9")
	e.g.Expect(after.UID).To(Equal(np.UID))
	e.g.Expect(after.DeletionTimestamp).To(BeNil())
}

// TestDeletedMember: the pod and Service go; volumes are retained and
// labelled (Retain).
func TestDeletedMember(t *testing.T) {
	e := start(t)
	m, _ := e.runningMember("main-10", func(m *etcdfedv1.EtcdMember) { m.Spec.Expose.Type = etcdfedv1.ExposeNodePort })
	e.g.Expect(e.c.Delete(e.ctx, m)).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		err := e.c.Get(e.ctx, client.ObjectKeyFromObject(m), &etcdfedv1.EtcdMember{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	p, err := e.pod("main-10")
	if err == nil {
		e.g.Expect(p.DeletionTimestamp).NotTo(BeNil())
	}
	err = e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "main-10"}, &corev1.Service{})
	if err == nil {
		t.Error("the Service of a deleted member remains")
	}
	c, err := e.pvc("main-10-data-0")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(c.DeletionTimestamp).To(BeNil())
	e.g.Expect(c.Labels).To(HaveKeyWithValue(etcdfedv1.LabelRetired, "true"))
}

// TestDeletedMemberDeletePolicy: with the Delete reclaim policy the
// volumes of a deleted member go with its pod and Service, through the
// same delete hooks.
func TestDeletedMemberDeletePolicy(t *testing.T) {
	e := start(t)
	m, _ := e.runningMember("main-12", func(m *etcdfedv1.EtcdMember) {
		m.Spec.Expose.Type = etcdfedv1.ExposeNodePort
		m.Spec.Storage.VolumeReclaimPolicy = etcdfedv1.VolumeDelete
	})
	e.g.Expect(e.c.Delete(e.ctx, m)).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		err := e.c.Get(e.ctx, client.ObjectKeyFromObject(m), &etcdfedv1.EtcdMember{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	if p, err := e.pod("main-12"); err == nil {
		e.g.Expect(p.DeletionTimestamp).NotTo(BeNil())
	}
	err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "main-12"}, &corev1.Service{})
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Service of a deleted member remains")
	if c, err := e.pvc("main-12-data-0"); err == nil {
		e.g.Expect(c.DeletionTimestamp).NotTo(BeNil(), "the volume is deleted with the Delete policy")
	} else {
		e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}
}

// TestLostVolumeIsNotRecreated: the PVC the member ran on vanished; the
// spoke says so and does not start the member on an empty volume.
func TestLostVolumeIsNotRecreated(t *testing.T) {
	e := start(t)
	m, _ := e.runningMember("main-11")
	e.eventually(m, observed, func(g Gomega, m *etcdfedv1.EtcdMember) { g.Expect(m.Status.Volume.UID).NotTo(BeEmpty()) })
	// The volume is deleted under the pod (pvc-protection keeps it while
	// the pod exists), then the pod goes: no new pod on a dying volume.
	c, _ := e.pvc("main-11-data-0")
	e.g.Expect(e.c.Delete(e.ctx, c)).To(Succeed())
	e.eventually(m, haveCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionFalse, member.ReasonVolumeTerminating))
	p, _ := e.pod("main-11")
	e.g.Expect(e.c.Delete(e.ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
	e.eventually(m, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonWaitingForStorage))
	// envtest has no controller removing the pvc-protection finalizer.
	e.g.Eventually(func(g Gomega) {
		c, err := e.pvc("main-11-data-0")
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		c.Finalizers = nil
		g.Expect(e.c.Update(e.ctx, c)).To(Succeed())
		_, err = e.pvc("main-11-data-0")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	e.eventually(m, haveCondition(etcdfedv1.ConditionStorageReady, metav1.ConditionFalse, member.ReasonVolumeLost),
		haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionFalse, member.ReasonWaitingForStorage))
	_, err := e.pvc("main-11-data-0")
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a lost volume is not recreated")
	_, err = e.pod("main-11")
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

// TestTwoRingsWithOneMemberName: the EtcdMember of main-0 of one ring,
// named after the member alone (written before names carried the ring),
// and the EtcdMember of main-0 of a ring of the same name in another
// namespace, named by the scheme (etcdfedv1.MemberObjectName), in one
// ring namespace: each gets its own volume named after its EtcdMember,
// neither sees the other's as a conflict, and deleting one leaves the
// other's volume alone although both carry member label main-0.
func TestTwoRingsWithOneMemberName(t *testing.T) {
	e := start(t)
	legacy := e.member("main-0")
	scopedName := etcdfedv1.MemberObjectName("hub-b", "main", "main-0")
	scoped := e.member(scopedName, func(m *etcdfedv1.EtcdMember) {
		uid := "uid-b-" + e.ns
		m.Labels[etcdfedv1.LabelClusterUID] = uid
		m.Spec.Cluster = etcdfedv1.ClusterReference{Name: "main", Namespace: "hub-b", UID: uid}
		m.Spec.MemberName = "main-0"
		m.Spec.DNSName = "main-0.b." + domain
		m.Spec.TLS.SecretName = scopedName + "-tls"
	})
	for _, m := range []*etcdfedv1.EtcdMember{legacy, scoped} {
		e.eventually(m, func(g Gomega, m *etcdfedv1.EtcdMember) {
			g.Expect(m.Status.PeerURL).To(Equal("https://" + m.Spec.DNSName + ":2380"))
			g.Expect(m.Status.Volume.ClaimName).To(Equal(m.Name + "-data-0"))
		})
	}
	lc, err := e.pvc("main-0-data-0")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(lc.Labels).To(HaveKeyWithValue(etcdfedv1.LabelMember, "main-0"))
	e.g.Expect(lc.Labels).NotTo(HaveKey(etcdfedv1.LabelMemberObject))
	sc, err := e.pvc(scopedName + "-data-0")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(sc.Labels).To(HaveKeyWithValue(etcdfedv1.LabelMember, "main-0"))
	e.g.Expect(sc.Labels).To(HaveKeyWithValue(etcdfedv1.LabelMemberObject, scopedName))

	e.g.Expect(e.c.Delete(e.ctx, scoped)).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		c, err := e.pvc(scopedName + "-data-0")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Labels).To(HaveKeyWithValue(etcdfedv1.LabelRetired, "true"))
	}).Should(Succeed())
	lc, err = e.pvc("main-0-data-0")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(lc.Labels).NotTo(HaveKey(etcdfedv1.LabelRetired))
	e.g.Expect(lc.DeletionTimestamp).To(BeNil())
	e.g.Expect(meta.FindStatusCondition(e.get(legacy).Status.Conditions, etcdfedv1.ConditionStorageReady).Reason).NotTo(Equal("VolumeConflict"))
}

// TestTwoIncarnationsOfOneMemberInOneCluster: a Move between two zones of
// one member cluster keeps the old incarnation's EtcdMember (the scheme's
// name) and adds the new one's under a name of its own
// (etcdfedv1.IncarnationObjectName). The spoke runs both side by side:
// each has its own pod, Service and volume named after its object, each
// Service selects its own pod only, and deleting the old object (the
// Move's last step) leaves the new incarnation's pod, Service and volume
// alone.
func TestTwoIncarnationsOfOneMemberInOneCluster(t *testing.T) {
	e := start(t)
	oldName, newName := etcdfedv1.MemberObjectName("hub", "main", "main-0"), etcdfedv1.IncarnationObjectName("hub", "main", "main-0", 4)
	incarnation := func(name string, inc int64, zone, dnsName string) func(*etcdfedv1.EtcdMember) {
		return func(m *etcdfedv1.EtcdMember) {
			m.Spec.MemberName, m.Spec.Incarnation, m.Spec.Zone, m.Spec.DNSName = "main-0", inc, zone, dnsName
			m.Spec.TLS.SecretName = name + "-tls"
			m.Spec.Expose.Type = etcdfedv1.ExposeNodePort
		}
	}
	old, _ := e.runningMember(oldName, incarnation(oldName, 3, "zone-a", "main-0."+domain))
	nw, _ := e.runningMember(newName, incarnation(newName, 4, "zone-b", "main-0-i4."+domain))
	e.g.Expect(e.get(old).Status.PeerURL).To(HavePrefix("https://main-0." + domain + ":"))
	e.g.Expect(e.get(nw).Status.PeerURL).To(HavePrefix("https://main-0-i4." + domain + ":"))
	newPod, err := e.pod(newName)
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, o := range []struct {
		name string
		inc  int64
	}{{oldName, 3}, {newName, 4}} {
		svc := &corev1.Service{}
		e.g.Expect(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: o.name}, svc)).To(Succeed())
		pods := &corev1.PodList{}
		e.g.Expect(e.c.List(e.ctx, pods, client.InNamespace(e.ns), client.MatchingLabels(svc.Spec.Selector))).To(Succeed())
		e.g.Expect(pods.Items).To(HaveLen(1), "Service %s selects %d pods", o.name, len(pods.Items))
		e.g.Expect(pods.Items[0].Name).To(Equal(o.name))
		_, err := e.pvc(fmt.Sprintf("%s-data-%d", o.name, o.inc))
		e.g.Expect(err).NotTo(HaveOccurred())
	}

	e.g.Expect(e.c.Delete(e.ctx, old)).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		err := e.c.Get(e.ctx, client.ObjectKeyFromObject(old), &etcdfedv1.EtcdMember{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		c, err := e.pvc(oldName + "-data-3")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Labels).To(HaveKeyWithValue(etcdfedv1.LabelRetired, "true"))
	}).Should(Succeed())
	err = e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: oldName}, &corev1.Service{})
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old incarnation's Service remains")
	e.eventually(nw, observed, haveCondition(etcdfedv1.ConditionPodReady, metav1.ConditionTrue, member.ReasonReady))
	p, err := e.pod(newName)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(p.UID).To(Equal(newPod.UID))
	e.g.Expect(p.DeletionTimestamp).To(BeNil())
	e.g.Expect(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: newName}, &corev1.Service{})).To(Succeed())
	c, err := e.pvc(newName + "-data-4")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(c.Labels).NotTo(HaveKey(etcdfedv1.LabelRetired))
	e.g.Expect(c.DeletionTimestamp).To(BeNil())
}
