package nodeagent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// One apiserver and one agent (two zones, one node each) serve every test
// of this package; each test works in its own namespace. The agent is the
// scheduler of the whole cluster, so tests never run in parallel.
var fx struct {
	once    sync.Once
	err     error
	cluster *testenv.Cluster
	slot    *addr.Slot
	agent   *nodeagent.Agent
	cs      kubernetes.Interface
	state   string
	stop    context.CancelFunc
	done    chan struct{}
}

const (
	zoneA = "zone-a"
	zoneB = "zone-b"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fx.stop != nil {
		fx.stop()
		<-fx.done
	}
	if fx.cluster != nil {
		_ = fx.cluster.Stop()
	}
	fx.slot.Release()
	if fx.state != "" {
		_ = os.RemoveAll(fx.state)
	}
	os.Exit(code)
}

// fixture returns the shared agent, starting it on first use.
func fixture(t *testing.T) (*nodeagent.Agent, kubernetes.Interface) {
	t.Helper()
	testenv.SkipIfShort(t, "kube-apiserver and etcd")
	fx.once.Do(func() {
		bin, err := testenv.BinDir()
		if err != nil {
			fx.err = err
			return
		}
		cs, err := testenv.Start(context.Background(), testenv.Options{WithoutCRDs: true}, "nodeagent")
		if err != nil {
			fx.err = err
			return
		}
		fx.cluster = cs[0]
		if fx.slot, fx.err = addr.Acquire(0); fx.err != nil {
			return
		}
		fx.state, _ = os.MkdirTemp("", "nodeagent-test-")
		p := fx.slot.Plan
		var nodes []nodeagent.Node
		for z, zone := range []string{zoneA, zoneB} {
			zr := p.Zone(1, z+1)
			base := zr.Addr().As4()
			nodes = append(nodes, nodeagent.Node{
				Name: "node-" + zone, Zone: zone, IP: p.Node(1, z+1, 0),
				PodIPs: nodeagent.IPRange{
					First: addrFrom(base, addr.FirstPodHost),
					Last:  addrFrom(base, addr.LastPodHost),
				},
			})
		}
		verbose := os.Getenv("NODEAGENT_TEST_LOG") != ""
		fx.agent, fx.err = nodeagent.New(nodeagent.Config{
			ClusterName: "test", REST: fx.cluster.Config, Nodes: nodes, BinDir: bin, StateDir: fx.state,
			BackoffBase: time.Second, BackoffMax: 8 * time.Second, HeartbeatInterval: 2 * time.Second, NodeLeaseDuration: 4 * time.Second,
			ShutdownGrace: 5 * time.Second,
			Log: funcr.New(func(prefix, args string) {
				if verbose {
					fmt.Fprintln(os.Stderr, prefix, args)
				}
			}, funcr.Options{Verbosity: 1}),
		})
		if fx.err != nil {
			return
		}
		fx.cs = fx.agent.Client()
		ctx, cancel := context.WithCancel(context.Background())
		fx.stop, fx.done = cancel, make(chan struct{})
		go func() { defer close(fx.done); _ = fx.agent.Run(ctx) }()
	})
	if fx.err != nil {
		t.Fatalf("fixture: %v", fx.err)
	}
	return fx.agent, fx.cs
}

func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: strings.ToLower(t.Name()) + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("namespace: %v", err)
	}
	return ns.Name
}

// etcdPod is a single-member, TLS-free etcd pod in the spoke's shape:
// $(POD_IP) listeners, data under the claim mounted at /var/lib/etcd,
// probes on the metrics listener.
func etcdPod(name, zone, claim string) *corev1.Pod {
	args := []string{
		"--name=$(POD_NAME)",
		"--data-dir=/var/lib/etcd/data",
		"--listen-client-urls=http://$(POD_IP):2379",
		"--advertise-client-urls=http://$(POD_IP):2379",
		"--listen-peer-urls=http://$(POD_IP):2380",
		"--initial-advertise-peer-urls=http://$(POD_IP):2380",
		"--initial-cluster=$(POD_NAME)=http://$(POD_IP):2380",
		"--listen-metrics-urls=http://$(POD_IP):2381",
		"--unsafe-no-fsync",
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "etcd"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{nodeagent.ZoneLabel: zone},
			Containers: []corev1.Container{{
				Name:    "etcd",
				Image:   "registry.k8s.io/etcd:3.6.16-0",
				Command: []string{"/usr/local/bin/etcd"},
				Args:    args,
				Env: []corev1.EnvVar{
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				Ports: []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}, {Name: "metrics", ContainerPort: 2381}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("metrics")}},
					PeriodSeconds: 1, FailureThreshold: 3},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromInt32(2381)}},
					PeriodSeconds: 2, FailureThreshold: 5},
				StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(2381)}},
					PeriodSeconds: 1, FailureThreshold: 60},
			}},
		},
	}
	if claim != "" {
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}
	}
	return pod
}

func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQty("1Gi")}},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerPID is the pid in a local container ID ("local://<pid>").
func containerPID(g Gomega, p *corev1.Pod) int {
	g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
	id := p.Status.ContainerStatuses[0].ContainerID
	g.Expect(id).To(HavePrefix("local://"))
	pid, err := strconv.Atoi(strings.TrimPrefix(id, "local://"))
	g.Expect(err).NotTo(HaveOccurred())
	return pid
}

func processAlive(pid int) bool {
	return proc.StartTicks(pid) != 0 && !strings.Contains(readFile(fmt.Sprintf("/proc/%d/stat", pid)), ") Z ")
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func etcdClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitGone(g Gomega, cs kubernetes.Interface, ns, name string) {
	_, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod %s/%s still exists", ns, name)
}

func volumeDir(pvName string) string { return filepath.Join(fx.state, "volumes", pvName) }
