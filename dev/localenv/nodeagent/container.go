package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// Container waiting reasons, as kubelet reports them.
const (
	reasonCreateContainerError       = "CreateContainerError"
	reasonCreateContainerConfigError = "CreateContainerConfigError"
	reasonCrashLoopBackOff           = "CrashLoopBackOff"
	reasonRunContainerError          = "RunContainerError"
)

// configError is an error in the pod's spec or in what it references; its
// reason goes into the container's waiting state.
type configError struct {
	reason string
	msg    string
}

func (e *configError) Error() string { return e.msg }

// runContainer runs one container for the life of the pod: start it,
// probe it, restart it as the restart policy says with back-off. For an
// init container it returns once the container succeeded (true) or failed
// for good (false). It returns false when the worker stops.
func (w *podWorker) runContainer(c *ctr) bool {
	w.mu.Lock()
	policy := w.pod.Spec.RestartPolicy
	w.mu.Unlock()
	if c.init && policy == corev1.RestartPolicyAlways {
		policy = corev1.RestartPolicyOnFailure // init containers run to completion
	}
	for {
		if w.ctx.Err() != nil {
			return false
		}
		p, spec := w.startContainer(c)
		if p == nil {
			if !w.waitCtx(w.a.cfg.BackoffBase) {
				return false
			}
			continue
		}
		started := metav1.NewTime(p.Started())
		killReason := w.runUntilExit(c, p, spec, started)
		term := w.recordExit(c, p, spec, started, killReason)
		if w.ctx.Err() != nil {
			return false
		}
		code := term.ExitCode
		restart := policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0)
		if c.init && code == 0 {
			return true
		}
		if !restart {
			return !c.init
		}
		if !w.waitCtx(w.backOff(c, term)) {
			return false
		}
	}
}

// startContainer starts c's process, counting a restart when it ran
// before. When it cannot, it says why in c's waiting state and returns a
// nil process.
func (w *podWorker) startContainer(c *ctr) (*proc.Process, proc.Spec) {
	spec, err := w.command(c)
	if err != nil {
		reason := reasonCreateContainerError
		var ce *configError
		if errors.As(err, &ce) {
			reason = ce.reason
		}
		w.setState(c, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}})
		w.log.Info("Cannot start container", "container", c.spec.Name, "reason", reason, "err", err.Error())
		return nil, spec
	}
	w.mu.Lock()
	if c.ran {
		c.restarts++
	}
	c.ran = true
	restarts := c.restarts
	w.mu.Unlock()
	writeLogHeader(spec.LogPath, fmt.Sprintf("--- %s: start %d (%s) ---", time.Now().Format(time.RFC3339Nano), restarts, strings.Join(append([]string{spec.Path}, spec.Args...), " ")))
	p, err := proc.Start(spec)
	if err != nil {
		w.setState(c, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonRunContainerError, Message: err.Error()}})
		return nil, spec
	}
	return p, spec
}

// runUntilExit marks c running, probes it (not an init container) and
// waits until its process exits: on its own, stopped with the pod, or
// killed by a failed probe (then it returns why).
func (w *podWorker) runUntilExit(c *ctr, p *proc.Process, spec proc.Spec, started metav1.Time) (killReason string) {
	w.mu.Lock()
	c.pid = p.PID()
	c.binary = spec.Path
	c.ready = false
	c.started = c.spec.StartupProbe == nil
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
	w.mu.Unlock()
	w.markDirty()
	w.log.V(1).Info("Started container", "container", c.spec.Name, "pid", p.PID())

	probeCtx, stopProbes := contextWithCancel(w.ctx)
	defer stopProbes()
	if !c.init {
		go w.probeLoop(probeCtx, c, spec)
	}
	select {
	case <-p.Done():
	case <-w.ctx.Done():
		w.stopProcess(p, w.runPreStop(c, w.grace()))
	case g := <-c.kill:
		killReason = "liveness or startup probe failed"
		w.stopProcess(p, w.runPreStop(c, g))
	}
	return killReason
}

// recordExit sets c's terminated state from its exited process, as
// kubelet reports it, and returns it.
func (w *podWorker) recordExit(c *ctr, p *proc.Process, spec proc.Spec, started metav1.Time, killReason string) *corev1.ContainerStateTerminated {
	code, sig, at := p.Exit()
	term := &corev1.ContainerStateTerminated{ExitCode: int32(code), StartedAt: started, FinishedAt: metav1.NewTime(at),
		ContainerID: fmt.Sprintf("local://%d", p.PID()), Reason: "Completed"}
	if code != 0 {
		term.Reason = "Error"
		term.Message = killReason
		if term.Message == "" && c.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			term.Message = logTail(spec.LogPath)
		}
	}
	if sig != "" {
		if s, ok := signalNumber(sig); ok {
			term.Signal = int32(s)
		}
	}
	w.mu.Lock()
	c.pid, c.ready, c.started = 0, false, false
	c.state = corev1.ContainerState{Terminated: term}
	w.mu.Unlock()
	w.markDirty()
	if w.ctx.Err() == nil {
		w.log.Info("Container exited", "container", c.spec.Name, "exitCode", code, "signal", sig)
	}
	return term
}

// backOff is how long c waits before its restart, as kubelet's back-off:
// the first restart is immediate, then base, doubling to max; a container
// that ran for twice max is forgiven. A wait shows as CrashLoopBackOff.
func (w *podWorker) backOff(c *ctr, term *corev1.ContainerStateTerminated) time.Duration {
	w.mu.Lock()
	defer w.markDirty()
	defer w.mu.Unlock()
	if term.FinishedAt.Sub(term.StartedAt.Time) > 2*w.a.cfg.BackoffMax {
		c.backoffN = 0
	}
	delay := time.Duration(0)
	if c.backoffN > 0 {
		delay = w.a.cfg.BackoffBase << (c.backoffN - 1)
		if delay > w.a.cfg.BackoffMax || delay <= 0 {
			delay = w.a.cfg.BackoffMax
		}
	}
	c.backoffN++
	c.last = corev1.ContainerState{Terminated: term}
	if delay > 0 {
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonCrashLoopBackOff,
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.spec.Name, w.name, w.ns, w.uid)}}
	}
	return delay
}

func (w *podWorker) stopProcess(p *proc.Process, grace time.Duration) {
	if grace <= 0 {
		p.Kill()
		<-p.Done()
		return
	}
	p.Signal(sigTERM)
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
}

func (w *podWorker) setState(c *ctr, st corev1.ContainerState) {
	w.mu.Lock()
	c.state = st
	w.mu.Unlock()
	w.markDirty()
}

// Kubelet's bounds of a termination message taken from the log
// (FallbackToLogsOnError).
const (
	fallbackLogLines = 80
	fallbackLogBytes = 2048
)

// logTail is the end of the container's last run in its log file, as
// kubelet's FallbackToLogsOnError takes it: at most fallbackLogLines lines
// and fallbackLogBytes bytes.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(data)
	if i := strings.LastIndex(s, "\n--- "); i >= 0 {
		if j := strings.IndexByte(s[i+1:], '\n'); j >= 0 {
			s = s[i+1+j+1:] // after the last run's header
		}
	} else if strings.HasPrefix(s, "--- ") {
		if j := strings.IndexByte(s, '\n'); j >= 0 {
			s = s[j+1:]
		}
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > fallbackLogLines {
		lines = lines[len(lines)-fallbackLogLines:]
	}
	s = strings.Join(lines, "\n")
	if len(s) > fallbackLogBytes {
		s = s[len(s)-fallbackLogBytes:]
	}
	return s
}

func writeLogHeader(path, line string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = f.WriteString(line + "\n")
	_ = f.Close()
}

// imageBase is the last path element of an image reference without tag or
// digest: registry.k8s.io/etcd:3.6.16-0 gives etcd.
func imageBase(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	base := path.Base(image)
	if i := strings.IndexByte(base, ':'); i >= 0 {
		base = base[:i]
	}
	return base
}

// resolveBinary maps a container's argv[0] to a binary in the bin
// directory by base name.
func (a *Agent) resolveBinary(argv0 string) (string, error) {
	base := path.Base(argv0)
	if base == "" || base == "." || base == "/" || base == ".." {
		return "", &configError{reasonCreateContainerError, fmt.Sprintf("local node: cannot run command %q", argv0)}
	}
	p := filepath.Join(a.cfg.BinDir, base)
	fi, err := os.Stat(p)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", &configError{reasonCreateContainerError, fmt.Sprintf(
			"local node: no binary for command %q: looked for %s (the local environment runs the binaries in its bin directory, e.g. etcd, etcdctl, etcdutl, etcdfed; run `make build` for etcdfed)",
			argv0, p)}
	}
	return p, nil
}

// argv returns the container's command line before expansion.
func argv(c *corev1.Container) []string {
	if len(c.Command) > 0 {
		return append(append([]string{}, c.Command...), c.Args...)
	}
	return append([]string{imageBase(c.Image)}, c.Args...)
}

// command builds the process of a container: binary, expanded and
// path-mapped arguments, environment, working and log paths.
func (w *podWorker) command(c *ctr) (proc.Spec, error) {
	w.mu.Lock()
	pod := w.pod.DeepCopy()
	ip := w.ip
	mounts := w.mounts[c.spec.Name]
	w.mu.Unlock()
	vars, order, err := w.a.containerEnv(pod, &c.spec, ip.String(), w.node)
	if err != nil {
		return proc.Spec{}, err
	}
	pm := newPathMap(mounts)
	args := argv(&c.spec)
	bin, err := w.a.containerBinary(args[0], c.spec.Image)
	if err != nil {
		return proc.Spec{}, err
	}
	for i := range args {
		args[i] = pm.rewrite(expand(args[i], vars))
	}
	env := w.a.baseEnv(pod)
	for _, k := range order {
		env = append(env, k+"="+pm.rewrite(vars[k]))
	}
	dir := w.dir
	if c.spec.WorkingDir != "" {
		dir = pm.rewrite(c.spec.WorkingDir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return proc.Spec{}, &configError{reasonCreateContainerConfigError, fmt.Sprintf("working directory %s: %v", dir, err)}
	}
	return proc.Spec{
		Name:    fmt.Sprintf("%s/%s/%s/%s", w.a.cfg.ClusterName, w.ns, w.name, c.spec.Name),
		Path:    bin,
		Args:    args[1:],
		Env:     env,
		Dir:     dir,
		LogPath: filepath.Join(w.logDir, c.spec.Name+".log"),
		PIDFile: w.pidFile(c),
		Cgroup:  w.cgroup(),
	}, nil
}

// baseEnv is what every process gets before the pod's variables.
func (a *Agent) baseEnv(pod *corev1.Pod) []string {
	env := []string{
		"PATH=" + a.cfg.BinDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME=" + pod.Name,
		"HOME=/tmp",
	}
	if len(a.cfg.DNSServers) > 0 {
		env = append(env, DNSServersEnv+"="+strings.Join(a.cfg.DNSServers, ","))
	}
	return append(env, a.cfg.ExtraEnv...)
}

func signalNumber(name string) (int, bool) {
	for i := 1; i < 65; i++ {
		if sigName(i) == name {
			return i, true
		}
	}
	return 0, false
}
