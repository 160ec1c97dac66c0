package nodeagent

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// probeLoop runs a container's probes while it runs: the startup probe
// first, then readiness and liveness. A failed startup or liveness probe
// asks runContainer to kill the container.
func (w *podWorker) probeLoop(ctx context.Context, c *ctr, spec proc.Spec) {
	if sp := c.spec.StartupProbe; sp != nil {
		if !w.probeUntil(ctx, c, sp, spec, true) {
			return
		}
		w.mu.Lock()
		c.started = true
		w.mu.Unlock()
		w.markDirty()
	}
	go w.readinessLoop(ctx, c, spec)
	if lp := c.spec.LivenessProbe; lp != nil {
		w.probeUntil(ctx, c, lp, spec, false)
	}
}

// probeUntil probes periodically. For a startup probe it returns true on
// the first success; for a liveness probe it never succeeds. After
// failureThreshold consecutive failures it asks for a kill and returns
// false.
func (w *podWorker) probeUntil(ctx context.Context, c *ctr, p *corev1.Probe, spec proc.Spec, startup bool) bool {
	period, failures := probePeriod(p), probeFailureThreshold(p)
	if !sleepCtx(ctx, time.Duration(p.InitialDelaySeconds)*time.Second) {
		return false
	}
	fails := int32(0)
	for {
		ok, msg := w.runProbe(ctx, c, p, spec)
		if ctx.Err() != nil {
			return false
		}
		if ok {
			fails = 0
			if startup {
				return true
			}
		} else {
			fails++
			if fails >= failures {
				kind := "Liveness"
				if startup {
					kind = "Startup"
				}
				grace := w.podGrace()
				if p.TerminationGracePeriodSeconds != nil {
					grace = time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
				}
				w.log.Info(kind+" probe failed, killing container", "container", c.spec.Name, "failures", fails, "msg", msg)
				select {
				case c.kill <- grace:
				default:
				}
				return false
			}
		}
		if !sleepCtx(ctx, period) {
			return false
		}
	}
}

func (w *podWorker) readinessLoop(ctx context.Context, c *ctr, spec proc.Spec) {
	rp := c.spec.ReadinessProbe
	if rp == nil {
		w.setReady(c, true)
		return
	}
	if !sleepCtx(ctx, time.Duration(rp.InitialDelaySeconds)*time.Second) {
		return
	}
	successes, fails := int32(0), int32(0)
	needOK := rp.SuccessThreshold
	if needOK < 1 {
		needOK = 1
	}
	for {
		ok, _ := w.runProbe(ctx, c, rp, spec)
		if ctx.Err() != nil {
			return
		}
		if ok {
			successes, fails = successes+1, 0
			if successes >= needOK {
				w.setReady(c, true)
			}
		} else {
			successes, fails = 0, fails+1
			if fails >= probeFailureThreshold(rp) {
				w.setReady(c, false)
			}
		}
		if !sleepCtx(ctx, probePeriod(rp)) {
			return
		}
	}
}

func (w *podWorker) setReady(c *ctr, ready bool) {
	w.mu.Lock()
	changed := c.ready != ready && c.state.Running != nil
	if changed {
		c.ready = ready
	}
	w.mu.Unlock()
	if changed {
		w.log.V(1).Info("Readiness changed", "container", c.spec.Name, "ready", ready)
		w.markDirty()
	}
}

func (w *podWorker) podGrace() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

func probePeriod(p *corev1.Probe) time.Duration {
	if p.PeriodSeconds > 0 {
		return time.Duration(p.PeriodSeconds) * time.Second
	}
	return 10 * time.Second
}

func probeFailureThreshold(p *corev1.Probe) int32 {
	if p.FailureThreshold > 0 {
		return p.FailureThreshold
	}
	return 3
}

func probeTimeout(p *corev1.Probe) time.Duration {
	if p.TimeoutSeconds > 0 {
		return time.Duration(p.TimeoutSeconds) * time.Second
	}
	return time.Second
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// runProbe executes one probe against the pod IP.
func (w *podWorker) runProbe(ctx context.Context, c *ctr, p *corev1.Probe, spec proc.Spec) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout(p))
	defer cancel()
	w.mu.Lock()
	ip := w.ip.String()
	w.mu.Unlock()
	switch {
	case p.HTTPGet != nil:
		return w.a.probeHTTP(ctx, p.HTTPGet, ip, &c.spec)
	case p.TCPSocket != nil:
		host := p.TCPSocket.Host
		if host == "" {
			host = ip
		}
		port, err := resolvePort(p.TCPSocket.Port, &c.spec)
		if err != nil {
			return false, err.Error()
		}
		conn, err := w.a.dialer().DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close()
		return true, ""
	case p.Exec != nil:
		return w.probeExec(ctx, c, p.Exec.Command, spec)
	}
	return false, "unsupported probe handler (the local node runs httpGet, tcpSocket and exec probes)"
}

func resolvePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("port %q not found in container %s", port.StrVal, c.Name)
}

func (a *Agent) probeHTTP(ctx context.Context, g *corev1.HTTPGetAction, podIP string, c *corev1.Container) (bool, string) {
	host := g.Host
	if host == "" {
		host = podIP
	}
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return false, err.Error()
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	if u.Path == "" {
		u.Path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/1.36")
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	tr := &http.Transport{
		DialContext:       a.dialer().DialContext,
		DisableKeepAlives: true,
		// Kubelet does not verify the serving certificate of probes.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet's probe semantics
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP probe failed with statuscode: %d: %s", resp.StatusCode, body)
}

func (w *podWorker) probeExec(ctx context.Context, c *ctr, command []string, spec proc.Spec) (bool, string) {
	if len(command) == 0 {
		return false, "empty exec command"
	}
	w.mu.Lock()
	pod := w.pod.DeepCopy()
	ip := w.ip.String()
	mounts := w.mounts[c.spec.Name]
	w.mu.Unlock()
	vars, _, err := w.a.containerEnv(pod, &c.spec, ip, w.node)
	if err != nil {
		return false, err.Error()
	}
	bin, err := w.a.resolveBinary(command[0])
	if err != nil {
		return false, err.Error()
	}
	pm := newPathMap(mounts)
	args := make([]string, 0, len(command)-1)
	for _, a := range command[1:] {
		args = append(args, pm.rewrite(expand(a, vars)))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	// Like kubelet's exec, the probe runs where the container runs: in its
	// cgroup (so partitions apply to it) and its own process group.
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if spec.Cgroup != "" {
		f, err := os.Open(spec.Cgroup)
		if err != nil {
			return false, err.Error()
		}
		defer f.Close()
		attr.UseCgroupFD, attr.CgroupFD = true, int(f.Fd())
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		return false, fmt.Sprintf("exec probe: %v: %s", err, out)
	}
	return true, ""
}
