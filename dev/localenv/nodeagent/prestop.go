package nodeagent

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// preStopExtra is what kubelet adds to the grace once when a preStop hook
// used it up: SIGTERM still gets this long before SIGKILL.
const preStopExtra = 2 * time.Second

// runPreStop runs the container's preStop exec hook, as kubelet does before
// it sends SIGTERM: with the container's environment and mounts, bounded by
// the grace period. It returns the grace left for SIGTERM (kubelet's 2 s
// extension when the hook used it all). A container without an exec
// preStop hook, a kill without grace, or a hurried stop skip it.
func (w *podWorker) runPreStop(c *ctr, grace time.Duration) time.Duration {
	lc := c.spec.Lifecycle
	if grace <= 0 || lc == nil || lc.PreStop == nil || lc.PreStop.Exec == nil || len(lc.PreStop.Exec.Command) == 0 {
		return grace
	}
	select {
	case <-w.hurry:
		return grace
	default:
	}
	start := time.Now()
	hook := &ctr{spec: c.spec}
	hook.spec.Command, hook.spec.Args = lc.PreStop.Exec.Command, nil
	spec, err := w.command(hook)
	if err != nil {
		w.log.Info("PreStop hook failed", "container", c.spec.Name, "err", err.Error())
		return grace
	}
	// Kubelet runs exec hooks without expanding $(VAR) and keeps their
	// output out of the container's log.
	spec.Args = append([]string{}, lc.PreStop.Exec.Command[1:]...)
	pm := newPathMap(w.mountsOf(c.spec.Name))
	for i := range spec.Args {
		spec.Args[i] = pm.rewrite(spec.Args[i])
	}
	spec.Name += "/prestop"
	spec.LogPath = filepath.Join(w.logDir, c.spec.Name+".prestop.log")
	spec.PIDFile = filepath.Join(w.a.cfg.PIDDir, fmt.Sprintf("pod-%s-%s-prestop.pid", w.uid, c.spec.Name))
	writeLogHeader(spec.LogPath, fmt.Sprintf("--- %s: preStop ---", start.Format(time.RFC3339Nano)))
	p, err := proc.Start(spec)
	if err != nil {
		w.log.Info("PreStop hook failed", "container", c.spec.Name, "err", err.Error())
		return grace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.Done():
	case <-t.C:
		p.Kill()
		<-p.Done()
	case <-w.hurry:
		p.Kill()
		<-p.Done()
	}
	code, sig, _ := p.Exit()
	took := time.Since(start)
	w.log.Info("PreStop hook ran", "container", c.spec.Name, "exitCode", code, "signal", sig, "took", took.Round(time.Millisecond).String())
	left := grace - took
	if left < preStopExtra {
		left = preStopExtra
	}
	return left
}

// mountsOf is the container's mount map (mountPath -> host dir).
func (w *podWorker) mountsOf(name string) map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mounts[name]
}
