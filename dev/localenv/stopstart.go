package localenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// StopComponent stops a component (for example "hub") and keeps it
// stopped, as when its Deployment is scaled to zero: SIGTERM, SIGKILL after
// grace, no restart. StartComponent starts it again.
func (e *Env) StopComponent(name string, grace time.Duration) error {
	e.mu.Lock()
	run, ok := e.comps[name]
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("no component %q", name)
	}
	run.svc.Stop(grace)
	return nil
}

// StartComponent starts a component that StopComponent stopped. A
// component still running is left alone.
func (e *Env) StartComponent(name string) error {
	e.mu.Lock()
	run, ok := e.comps[name]
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("no component %q", name)
	}
	select {
	case <-run.svc.Exited():
	default:
		return nil
	}
	return e.startComponent(run.spec)
}

// ComponentArgs returns a component's flags.
func (e *Env) ComponentArgs(name string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	run, ok := e.comps[name]
	if !ok {
		return nil, fmt.Errorf("no component %q", name)
	}
	return slices.Clone(run.spec.Args), nil
}

// RestartComponentWith stops a component (SIGTERM, SIGKILL after grace)
// and starts it again with args as its flags, kept for its later
// restarts: how a test runs a spoke with a changed flag (a gossip Secret
// that does not exist), and back.
func (e *Env) RestartComponentWith(name string, args []string, grace time.Duration) error {
	if err := e.StopComponent(name, grace); err != nil {
		return err
	}
	e.mu.Lock()
	run, ok := e.comps[name]
	if ok {
		run.spec.Args = slices.Clone(args)
	}
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("no component %q", name)
	}
	return e.StartComponent(name)
}

// VolumeDir is the directory of a provisioned volume (PV name) in a member
// cluster; "" when the cluster's node agent does not run (with real nodes:
// when its apiserver does not answer, or the PV is no local volume).
func (e *Env) VolumeDir(cluster, pvName string) string {
	if e.state.Real() {
		return e.realVolumeDir(cluster, pvName)
	}
	a := e.Agent(cluster)
	if a == nil {
		return ""
	}
	return a.VolumeDir(pvName)
}

// SetComponentPath sets the executable a component runs from its next
// start on, kept for its later restarts: how a test rolls it to a new
// build, as a Deployment's rollout to a new image does. The running
// process is left alone. It returns the executable set before.
func (e *Env) SetComponentPath(name, path string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	run, ok := e.comps[name]
	if !ok {
		return "", fmt.Errorf("no component %q", name)
	}
	prev := run.spec.Path
	run.spec.Path = path
	return prev, nil
}

// ComponentExecutable is the executable the component's running process
// was started from (its /proc/<pid>/exe, the same process as its pid
// file names), for a test to check a rollout.
func (e *Env) ComponentExecutable(name string) (string, error) {
	rec, err := proc.ReadPIDFile(filepath.Join(e.state.pidDir(), name+".pid"))
	if err != nil {
		return "", fmt.Errorf("component %s: %w", name, err)
	}
	if proc.StartTicks(rec.PID) != rec.StartTicks {
		return "", fmt.Errorf("component %s: pid %d is no longer the process its pid file names", name, rec.PID)
	}
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(rec.PID), "exe"))
	if err != nil {
		return "", fmt.Errorf("component %s (pid %d): %w", name, rec.PID, err)
	}
	return exe, nil
}
