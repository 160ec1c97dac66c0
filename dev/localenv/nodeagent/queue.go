package nodeagent

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

func (a *Agent) processNext(ctx context.Context) bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	kind, rest, _ := strings.Cut(key, "/")
	var err error
	switch kind {
	case "pod":
		err = a.syncPod(ctx, rest)
	case "pvc":
		err = a.syncPVC(ctx, rest)
	case "pv":
		err = a.syncPV(ctx, rest)
	}
	if err != nil && ctx.Err() == nil {
		a.log.V(1).Info("Sync failed, retrying", "key", key, "err", err.Error())
		a.queue.AddRateLimited(key)
		return true
	}
	a.queue.Forget(key)
	return true
}

// resync re-examines every pod periodically: pending pods whose
// constraints may now be met, pods whose volumes' Secrets changed.
func (a *Agent) resync(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pods, _ := a.pods.List(everything)
		for _, p := range pods {
			if p.Spec.NodeName == "" || a.ownsNode(p.Spec.NodeName) {
				a.queue.Add("pod/" + p.Namespace + "/" + p.Name)
			}
		}
		a.sweepIPs()
		pvs, _ := a.pvs.List(everything)
		for _, pv := range pvs {
			if pv.Annotations[annProvisionedBy] == a.cfg.Provisioner {
				a.queue.Add("pv/" + pv.Name)
			}
		}
	}
}

func (a *Agent) enqueuePending() {
	if a.pods == nil || a.queue == nil {
		return
	}
	pods, _ := a.pods.List(everything)
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			a.queue.Add("pod/" + p.Namespace + "/" + p.Name)
		}
	}
}

// syncPod drives one pod: schedule it, start or update its worker, or stop
// the worker of a pod that is gone.
func (a *Agent) syncPod(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	pod, err := a.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone from the API (force-deleted, or deleted by us): stop what
		// still runs for it at once.
		for _, w := range a.workersFor(ns, name, "") {
			a.dropWorker(w)
			go w.halt(0)
		}
		return nil
	}
	if err != nil {
		return err
	}
	// A worker for an older pod with the same name.
	for _, w := range a.workersFor(ns, name, pod.UID) {
		a.dropWorker(w)
		go w.halt(0)
	}
	if pod.Spec.NodeName == "" {
		if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
			return nil
		}
		return a.schedule(ctx, pod)
	}
	n, ok := a.node(pod.Spec.NodeName)
	if !ok || n.failed {
		return nil
	}
	a.mu.Lock()
	if a.crashed || ctx.Err() != nil {
		a.mu.Unlock()
		return nil
	}
	w := a.workers[pod.UID]
	if w == nil {
		if pod.DeletionTimestamp == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
			a.mu.Unlock()
			return nil // finished before we (re)started: nothing to run
		}
		w = newPodWorker(a, pod, n)
		a.workers[pod.UID] = w
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			w.run()
		}()
	}
	a.mu.Unlock()
	w.update(pod)
	return nil
}

func (a *Agent) workersFor(ns, name string, exceptUID types.UID) []*podWorker {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*podWorker
	for uid, w := range a.workers {
		if w.ns == ns && w.name == name && uid != exceptUID {
			out = append(out, w)
		}
	}
	return out
}

// dropWorker forgets a worker (it halts on its own).
func (a *Agent) dropWorker(w *podWorker) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.workers[w.uid] == w {
		delete(a.workers, w.uid)
	}
}
