package nodeagent

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// cgroup is the pod's own cgroup (below its zone's), "" without cgroups.
func (w *podWorker) cgroup() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.podCgroup
}

// setupNetwork creates the pod's cgroup and attaches its address, before
// any of its processes starts.
func (w *podWorker) setupNetwork(ip netip.Addr) error {
	if w.a.cfg.Cgroup == nil {
		return nil
	}
	zone := w.a.cfg.Cgroup(w.node.Zone)
	if zone == "" {
		return nil
	}
	dir := filepath.Join(zone, "pod-"+string(w.uid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	w.mu.Lock()
	w.podCgroup = dir
	hostNetwork := w.pod.Spec.HostNetwork
	attached := w.attached
	w.mu.Unlock()
	if w.a.cfg.Network == nil || hostNetwork || attached {
		return nil
	}
	if err := w.a.cfg.Network.AttachPod(ip, dir); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	w.mu.Lock()
	w.attached = true
	w.mu.Unlock()
	return nil
}

// teardownNetwork undoes setupNetwork once every process is gone.
func (w *podWorker) teardownNetwork() {
	w.mu.Lock()
	dir, ip, attached := w.podCgroup, w.ip, w.attached
	w.attached = false
	w.mu.Unlock()
	if dir == "" {
		return
	}
	if attached {
		w.a.cfg.Network.DetachPod(ip, dir)
	}
	for try := 0; try < 50; try++ { // EBUSY until the last process is reaped
		if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.log.Info("Could not remove the pod's cgroup", "cgroup", dir)
}
