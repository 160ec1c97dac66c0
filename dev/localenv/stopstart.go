package localenv

import (
	"fmt"
	"slices"
	"time"
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
