package localenv

import "fmt"

// AddComponent starts a component the environment did not start itself,
// for example a second replica of a member cluster's spoke, supervised
// like the others (restarted when it exits, stopped with its cluster and
// with the environment). Its name must be new.
func (e *Env) AddComponent(spec ComponentSpec) error {
	e.mu.Lock()
	_, taken := e.comps[spec.Name]
	e.mu.Unlock()
	if taken {
		return fmt.Errorf("component %q exists", spec.Name)
	}
	return e.startComponent(spec)
}

// ComponentEnv returns a component's environment variables (besides the
// minimal environment every component gets).
func (e *Env) ComponentEnv(name string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	run, ok := e.comps[name]
	if !ok {
		return nil, fmt.Errorf("no component %q", name)
	}
	return append([]string(nil), run.spec.Env...), nil
}
