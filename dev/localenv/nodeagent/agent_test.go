package nodeagent_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
)

func TestNodesRegisteredReadyWithZones(t *testing.T) {
	_, cs := fixture(t)
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		zones := map[string]bool{}
		for _, n := range nodes.Items {
			zones[n.Labels[nodeagent.ZoneLabel]] = true
			g.Expect(n.Status.Addresses).To(ContainElement(HaveField("Type", corev1.NodeInternalIP)))
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					ip := netip.MustParseAddr(a.Address)
					g.Expect(ip.IsLoopback()).To(BeTrue(), "InternalIP %s", ip)
				}
			}
			g.Expect(n.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
		}
		g.Expect(zones).To(HaveKey(zoneA))
		g.Expect(zones).To(HaveKey(zoneB))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// An etcd pod becomes Running and Ready on its own loopback address, its
// data lands in the claim's directory, and deleting the pod kills etcd;
// deleting the claim then deletes the directory.
func TestEtcdPodRunsOnOwnAddressWithDataInClaim(t *testing.T) {
	_, cs := fixture(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)

	_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data-etcd-0"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Pods(ns).Create(ctx, etcdPod("etcd-0", zoneA, "data-etcd-0"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	start := time.Now()
	var pod *corev1.Pod
	g.Eventually(func(g Gomega) {
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, "etcd-0", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(podReady(pod)).To(BeTrue(), "conditions %+v", pod.Status.Conditions)
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	t.Logf("etcd pod Ready %.1fs after creation", time.Since(start).Seconds())

	g.Expect(pod.Spec.NodeName).To(Equal("node-" + zoneA))
	podIP := netip.MustParseAddr(pod.Status.PodIP)
	hostIP := netip.MustParseAddr(pod.Status.HostIP)
	g.Expect(podIP.IsLoopback()).To(BeTrue())
	g.Expect(podIP).NotTo(Equal(hostIP))
	g.Expect(podIP).NotTo(Equal(netip.MustParseAddr("127.0.0.1")))
	cs0 := pod.Status.ContainerStatuses[0]
	g.Expect(cs0.Ready).To(BeTrue())
	g.Expect(*cs0.Started).To(BeTrue())
	g.Expect(cs0.State.Running).NotTo(BeNil())
	pid := containerPID(g, pod)
	g.Expect(processAlive(pid)).To(BeTrue())

	// etcd listens on the pod IP only.
	cmdline := readFile("/proc/" + itoa(pid) + "/cmdline")
	g.Expect(cmdline).To(ContainSubstring("--listen-client-urls=http://" + podIP.String() + ":2379"))
	cli := etcdClient(t, "http://"+podIP.String()+":2379")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.Put(wctx, "hello", "world")
	g.Expect(err).NotTo(HaveOccurred())

	// The claim is bound to a volume in the pod's zone whose directory
	// holds etcd's data.
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-etcd-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pv.Labels[nodeagent.ZoneLabel]).To(Equal(zoneA))
	dir := volumeDir(pv.Name)
	g.Expect(pv.Spec.Local.Path).To(Equal(dir))
	g.Expect(filepath.Join(dir, "data", "member", "wal")).To(BeADirectory())
	g.Expect(filepath.Join(dir, "data", "member", "snap", "db")).To(BeARegularFile())

	// Deletion stops etcd (SIGTERM within the grace period) and then the
	// pod object goes away.
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "etcd-0", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func(g Gomega) { waitGone(g, cs, ns, "etcd-0") }).WithTimeout(60 * time.Second).Should(Succeed())
	g.Expect(processAlive(pid)).To(BeFalse(), "etcd (pid %d) survived its pod", pid)
	g.Expect(dir).To(BeADirectory(), "data must outlive the pod")

	// Deleting the claim deletes the volume and its directory.
	g.Expect(cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-etcd-0", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pv still there: %v", err)
		_, err = os.Stat(dir)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "directory still there")
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// A claim whose class retains volumes keeps its directory after deletion.
func TestRetainedVolumeKeepsDirectory(t *testing.T) {
	_, cs := fixture(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)
	retain := corev1.PersistentVolumeReclaimRetain
	mode := storageBindingWFFC()
	sc := storageClass("retain-"+ns, &retain, &mode)
	_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	c := claim("kept")
	c.Spec.StorageClassName = &sc.Name
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Pods(ns).Create(ctx, etcdPod("etcd-0", zoneB, "kept"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var pvName string
	g.Eventually(func(g Gomega) {
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "kept", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pvc.Spec.VolumeName).NotTo(BeEmpty())
		pvName = pvc.Spec.VolumeName
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, "etcd-0", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(podReady(pod)).To(BeTrue())
	}).WithTimeout(60 * time.Second).Should(Succeed())
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "etcd-0", metav1.DeleteOptions{})).To(Succeed())
	g.Expect(cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "kept", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pv.Status.Phase).To(Equal(corev1.VolumeReleased))
	}).WithTimeout(60 * time.Second).Should(Succeed())
	g.Expect(filepath.Join(volumeDir(pvName), "data", "member")).To(BeADirectory())
}

var startLine = regexp.MustCompile(`^--- (\S+): start (\d+) `)

// A crashing container is restarted with kubelet's back-off: immediately,
// then after base, 2*base, ... The gaps between starts are read from the
// container log's start markers and must be at least the back-off (a lower
// bound the agent enforces, not a timing guess).
func TestCrashingContainerRestartsWithBackoff(t *testing.T) {
	_, cs := fixture(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crasher"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "etcd", Image: "etcd", Command: []string{"etcd", "--no-such-flag"},
		}}},
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	sawBackOff := false
	g.Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "crasher", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
		st := p.Status.ContainerStatuses[0]
		if w := st.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
			g.Expect(w.Message).To(ContainSubstring("back-off"))
		}
		g.Expect(st.LastTerminationState.Terminated).NotTo(BeNil())
		g.Expect(st.LastTerminationState.Terminated.ExitCode).NotTo(BeZero())
		g.Expect(st.RestartCount).To(BeNumerically(">=", 4))
		g.Expect(sawBackOff).To(BeTrue())
	}).WithTimeout(90 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	p, err := cs.CoreV1().Pods(ns).Get(ctx, "crasher", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	logs, _ := filepath.Glob(filepath.Join(fx.state, "logs", "pods", ns+"_crasher_"+string(p.UID), "etcd.log"))
	g.Expect(logs).To(HaveLen(1))
	var starts []time.Time
	for _, l := range strings.Split(readFile(logs[0]), "\n") {
		if m := startLine.FindStringSubmatch(l); m != nil {
			ts, err := time.Parse(time.RFC3339Nano, m[1])
			g.Expect(err).NotTo(HaveOccurred())
			starts = append(starts, ts)
		}
	}
	g.Expect(len(starts)).To(BeNumerically(">=", 5))
	// Restart k (1-based) waits 0 for k=1, then base*2^(k-2).
	base := time.Second
	for k := 2; k < len(starts) && k <= 4; k++ {
		gap := starts[k].Sub(starts[k-1])
		want := base << (k - 2)
		t.Logf("restart %d: %.2fs after the previous start (back-off %s)", k, gap.Seconds(), want)
		g.Expect(gap).To(BeNumerically(">=", want))
	}
}

// A command without a binary in bin/ fails the container with a clear
// reason instead of running something else.
func TestUnknownCommandFailsWithReason(t *testing.T) {
	_, cs := fixture(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nope"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "sh", Image: "busybox", Command: []string{"/bin/sh", "-c", "echo hi"},
		}}},
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "nope", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
		w := p.Status.ContainerStatuses[0].State.Waiting
		g.Expect(w).NotTo(BeNil())
		g.Expect(w.Reason).To(Equal("CreateContainerError"))
		g.Expect(w.Message).To(ContainSubstring(`no binary for command "/bin/sh"`))
		g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// A pod whose affinity names a zone without nodes stays Pending with the
// scheduler's kind of message.
func TestUnschedulablePodSaysWhy(t *testing.T) {
	_, cs := fixture(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)
	pod := etcdPod("nowhere", "zone-x", "")
	pod.Spec.NodeSelector = nil
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: nodeagent.ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-x"}}}}}}}}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "nowhere", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Spec.NodeName).To(BeEmpty())
		g.Expect(p.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodScheduled), HaveField("Reason", corev1.PodReasonUnschedulable),
			HaveField("Message", ContainSubstring("didn't match Pod's node affinity")))))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func itoa(i int) string { return fmtInt(i) }
