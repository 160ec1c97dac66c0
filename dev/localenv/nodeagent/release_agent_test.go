package nodeagent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// An etcd pod whose image names the 3.5 release runs bin/etcd-3.5.35, and
// etcd says so; one whose release is not in bin/ fails with
// CreateContainerError naming what it asked for.
func TestImageTagPicksEtcdRelease(t *testing.T) {
	_, cs := fixture(t)
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "etcd-3.5.35")); err != nil {
		t.Skipf("bin/etcd-3.5.35 is not built (hack/tools.sh etcd35): %v", err)
	}
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)

	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data-etcd-35"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	old := etcdPod("etcd-35", zoneA, "data-etcd-35")
	old.Spec.Containers[0].Image = "gcr.io/etcd-development/etcd:v3.5.35"
	_, err = cs.CoreV1().Pods(ns).Create(ctx, old, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var pod *corev1.Pod
	g.Eventually(func(g Gomega) {
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, "etcd-35", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(podReady(pod)).To(BeTrue(), "conditions %+v", pod.Status.Conditions)
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	cli := etcdClient(t, "http://"+pod.Status.PodIP+":2379")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, "http://"+pod.Status.PodIP+":2379")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Version).To(Equal("3.5.35"))

	missing := etcdPod("etcd-missing", zoneA, "")
	missing.Spec.Containers[0].Image = "gcr.io/etcd-development/etcd:v3.6.99"
	_, err = cs.CoreV1().Pods(ns).Create(ctx, missing, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "etcd-missing", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
		w := p.Status.ContainerStatuses[0].State.Waiting
		g.Expect(w).NotTo(BeNil())
		g.Expect(w.Reason).To(Equal("CreateContainerError"))
		g.Expect(w.Message).To(ContainSubstring("asks for etcd 3.6.99"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
