package nodeagent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podWorker owns the processes of one pod (one UID) on one node.
type podWorker struct {
	a        *Agent
	uid      types.UID
	ns, name string
	node     nodeState
	log      logr.Logger
	dir      string // volumes of this pod
	logDir   string

	ctx    context.Context // cancelled: stop every process
	cancel context.CancelFunc
	done   chan struct{} // run has returned, every process is gone

	updates chan struct{}
	dirty   chan struct{}
	flushed chan struct{} // status loop has exited
	hurry   chan struct{} // closed: kill now, whatever grace was given
	hurried sync.Once

	mu          sync.Mutex
	pod         *corev1.Pod
	ip          netip.Addr
	mounts      map[string]map[string]string // container -> mountPath -> host dir
	volumesErr  string
	startTime   *metav1.Time
	inits       []*ctr
	ctrs        []*ctr
	initialized bool
	finalPhase  corev1.PodPhase
	stopGrace   time.Duration
	noWrites    bool
	deleting    bool
	condSince   map[corev1.PodConditionType]condMark
	podCgroup   string
	attached    bool
	refreshed   time.Time
}

type condMark struct {
	status corev1.ConditionStatus
	since  metav1.Time
}

// ctr is the runtime state of one container.
type ctr struct {
	spec     corev1.Container
	init     bool
	state    corev1.ContainerState
	last     corev1.ContainerState
	restarts int32
	ready    bool
	started  bool
	ran      bool // started at least once (in this or an earlier life of the pod)
	backoffN int
	binary   string
	pid      int
	kill     chan time.Duration
}

func newPodWorker(a *Agent, pod *corev1.Pod, node nodeState) *podWorker {
	ctx, cancel := context.WithCancel(context.Background())
	id := fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID)
	w := &podWorker{
		a: a, uid: pod.UID, ns: pod.Namespace, name: pod.Name, node: node,
		log:       a.log.WithValues("pod", pod.Namespace+"/"+pod.Name, "node", node.Name),
		dir:       filepath.Join(a.cfg.StateDir, "pods", id),
		logDir:    a.podLogDir(pod.Namespace, pod.Name, pod.UID),
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		updates:   make(chan struct{}, 1),
		dirty:     make(chan struct{}, 1),
		flushed:   make(chan struct{}),
		hurry:     make(chan struct{}),
		pod:       pod.DeepCopy(),
		condSince: map[corev1.PodConditionType]condMark{},
	}
	// Restart counts survive an agent or zone restart, as on a real node.
	prev := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		prev[s.Name] = s
	}
	mk := func(c corev1.Container, init bool) *ctr {
		x := &ctr{spec: c, init: init, kill: make(chan time.Duration, 1),
			state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
		if s, ok := prev[c.Name]; ok {
			x.restarts = s.RestartCount
			x.ran = s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil || s.RestartCount > 0
			if s.State.Terminated != nil {
				x.last = s.State
			} else {
				x.last = s.LastTerminationState
			}
		}
		return x
	}
	for _, c := range pod.Spec.InitContainers {
		w.inits = append(w.inits, mk(c, true))
	}
	for _, c := range pod.Spec.Containers {
		w.ctrs = append(w.ctrs, mk(c, false))
	}
	if pod.Status.StartTime != nil {
		st := *pod.Status.StartTime
		w.startTime = &st
	}
	return w
}

// update hands the worker the latest pod object.
func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod.DeepCopy()
	startDelete := pod.DeletionTimestamp != nil && !w.deleting
	if startDelete {
		w.deleting = true
	}
	w.mu.Unlock()
	if startDelete {
		go w.deleteFlow(pod)
	}
	select {
	case w.updates <- struct{}{}:
	default:
	}
}

func (w *podWorker) markDirty() {
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

func (w *podWorker) grace() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopGrace
}

// halt stops every process (SIGTERM, then SIGKILL after grace; at once
// when grace is 0) and makes no more API writes. It returns once the
// worker is gone.
func (w *podWorker) halt(grace time.Duration) {
	w.mu.Lock()
	w.noWrites = true
	if !w.deleting || grace < w.stopGrace {
		w.stopGrace = grace
	}
	w.mu.Unlock()
	if grace <= 0 {
		w.hurried.Do(func() { close(w.hurry) })
	}
	w.cancel()
	<-w.done
	<-w.flushed
}

// deleteFlow is graceful deletion: stop the containers within the pod's
// grace period, then remove the pod object, as kubelet does.
func (w *podWorker) deleteFlow(pod *corev1.Pod) {
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	w.log.Info("Killing pod", "grace", grace.String())
	w.mu.Lock()
	w.stopGrace = grace
	w.mu.Unlock()
	w.cancel()
	<-w.done
	<-w.flushed
	w.mu.Lock()
	noWrites := w.noWrites
	w.mu.Unlock()
	if noWrites {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	err := w.a.cs.CoreV1().Pods(w.ns).Delete(ctx, w.name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &w.uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.log.Error(err, "Deleting pod object")
	}
	w.a.dropWorker(w)
	// Claims this pod used may now be released.
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && w.a.queue != nil {
			w.a.queue.Add("pvc/" + w.ns + "/" + v.PersistentVolumeClaim.ClaimName)
		}
	}
}

// run is the pod's life: sandbox (IP, volumes), init containers, then the
// main containers until the pod is stopped.
func (w *podWorker) run() {
	go w.statusLoop()
	defer func() {
		w.teardownNetwork()
		w.mu.Lock()
		ip, deleting := w.ip, w.deleting
		w.mu.Unlock()
		// A deleted pod frees its address; a halted one (zone failure,
		// agent stop) keeps it for when it runs again.
		if ip.IsValid() && deleting {
			w.a.releaseIP(w.uid, ip)
		}
		if deleting {
			_ = os.RemoveAll(w.dir) // secret, configMap and emptyDir contents; claims live elsewhere
		}
		close(w.done)
	}()

	if !w.prepareLoop() {
		return
	}
	go func() { // keep Secret and ConfigMap volumes current
		for {
			select {
			case <-w.ctx.Done():
				return
			case <-w.updates:
				w.refreshVolumes()
			}
		}
	}()
	for _, c := range w.inits {
		ok := w.runContainer(c)
		if w.ctx.Err() != nil {
			return
		}
		if !ok {
			w.mu.Lock()
			w.finalPhase = corev1.PodFailed
			w.mu.Unlock()
			w.markDirty()
			<-w.ctx.Done()
			return
		}
	}
	w.mu.Lock()
	w.initialized = true
	w.mu.Unlock()
	w.markDirty()

	var wg sync.WaitGroup
	for _, c := range w.ctrs {
		wg.Add(1)
		go func() { defer wg.Done(); w.runContainer(c) }()
	}
	wg.Wait()
	if w.ctx.Err() != nil {
		return
	}
	// Every container finished for good (restartPolicy Never/OnFailure).
	w.mu.Lock()
	w.finalPhase = corev1.PodSucceeded
	for _, c := range w.ctrs {
		if t := c.state.Terminated; t == nil || t.ExitCode != 0 {
			w.finalPhase = corev1.PodFailed
		}
	}
	w.mu.Unlock()
	w.markDirty()
	<-w.ctx.Done()
}

// prepareLoop allocates the pod IP and makes the volumes, retrying while a
// Secret, ConfigMap or claim is missing. False when stopped meanwhile.
func (w *podWorker) prepareLoop() bool {
	w.mu.Lock()
	want := w.pod.Status.PodIP
	hostNetwork := w.pod.Spec.HostNetwork
	w.mu.Unlock()
	var ip netip.Addr
	var err error
	if hostNetwork {
		ip = w.node.IP // shares the node's address; nothing to allocate
	} else {
		ip, err = w.a.allocateIP(w.uid, w.node.PodIPs, want)
	}
	if err != nil {
		w.setVolumesErr(err.Error())
	} else {
		w.mu.Lock()
		w.ip = ip
		if w.startTime == nil {
			now := metav1.Now()
			w.startTime = &now
		}
		w.mu.Unlock()
		// Reported at once, as kubelet does once the sandbox has its
		// address: the spoke publishes it to DNS while the volumes are
		// made, and the init containers wait on that record.
		w.markDirty()
	}
	for {
		if ip.IsValid() {
			err = w.setupNetwork(ip)
			if err == nil {
				err = w.prepareVolumes()
			}
			if err == nil {
				w.setVolumesErr("")
				return true
			}
			w.setVolumesErr(err.Error())
		}
		t := time.NewTimer(2 * time.Second)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		case <-w.updates:
			t.Stop()
		}
		if !ip.IsValid() {
			if ip, err = w.a.allocateIP(w.uid, w.node.PodIPs, want); err == nil {
				w.mu.Lock()
				w.ip = ip
				w.mu.Unlock()
				w.markDirty()
			}
		}
	}
}

// processes lists the pod's running processes.
func (w *podWorker) processes() []ProcessInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []ProcessInfo
	for _, c := range append(append([]*ctr{}, w.inits...), w.ctrs...) {
		if c.pid != 0 && c.state.Running != nil {
			out = append(out, ProcessInfo{Namespace: w.ns, Pod: w.name, Container: c.spec.Name,
				Node: w.node.Name, Zone: w.node.Zone, PodIP: w.ip.String(), PID: c.pid})
		}
	}
	return out
}

// waitCtx sleeps for d unless the worker stops first (false).
func (w *podWorker) waitCtx(d time.Duration) bool {
	if d <= 0 {
		return w.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// pidFile names the pid file of a container process.
func (w *podWorker) pidFile(c *ctr) string {
	return filepath.Join(w.a.cfg.PIDDir, fmt.Sprintf("pod-%s-%s.pid", w.uid, c.spec.Name))
}
