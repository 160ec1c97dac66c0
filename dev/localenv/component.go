package localenv

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
	"github.com/etcdfed/etcdfed/internal/leaderlock"
)

// ComponentSpec is a process the environment runs besides apiservers and
// node agents: the hub, one spoke per member cluster. It is restarted when
// it exits, logs to logs/<name>.log, has a pid file, and is stopped (and
// kept stopped) while its cluster is failed.
type ComponentSpec struct {
	// Name is unique, e.g. "hub" or "spoke-member-1".
	Name string
	// Path is the executable.
	Path string
	Args []string
	// Env is added to a minimal environment (PATH, HOME).
	Env []string
	// Cluster is the cluster the component belongs to: it runs in that
	// cluster's cgroup (partitioned with it) and stops when it is killed.
	Cluster string
	// PodName tells the component its pod's name in POD_NAME, as the
	// downward API tells a Deployment's pod: <Name>-<n>, the same after a
	// crash (KillComponent without restartNow: a container restarted in
	// its pod), a new n for a new pod (KillComponent with restartNow, or
	// StartComponent after StopComponent). The hub holds its
	// leader-election Lease under that name. A copy of a component's spec
	// under another Name (a standby replica) is another pod.
	PodName bool
}

// DefaultComponents returns the hub (when bin/hub exists) and one spoke
// per member cluster (when bin/spoke exists).
//
// Each gets its cluster's admin kubeconfig in KUBECONFIG, the ring's DNS
// servers in ETCDFED_DNS_SERVERS (the resolver hook of internal/resolverenv)
// and flags binding everything it serves to the addresses the environment
// reserved for it (hubArgs, spokeArgs).
func DefaultComponents(st *State, binDir string) []ComponentSpec {
	var out []ComponentSpec
	if hub := filepath.Join(binDir, "hub"); executable(hub) {
		out = append(out, ComponentSpec{
			Name: "hub", Path: hub, Cluster: HubClusterName, PodName: true,
			Args: hubArgs(st),
			Env: []string{
				"KUBECONFIG=" + st.KubeconfigPath(HubClusterName),
				"ETCDFED_DNS_SERVERS=" + joinComma(st.DNSServers()),
			},
		})
	}
	if spoke := filepath.Join(binDir, "spoke"); executable(spoke) {
		for _, c := range st.MemberClusters {
			out = append(out, ComponentSpec{
				Name: "spoke-" + c.Name, Path: spoke, Cluster: c.Name,
				Args: spokeArgs(st, c),
				Env: []string{
					"KUBECONFIG=" + st.KubeconfigPath(c.Name),
					"ETCDFED_DNS_SERVERS=" + joinComma(st.dnsServersFor(c)),
				},
			})
		}
	}
	return out
}

// hubArgs are the hub's flags in the local environment (cmd/hub as of
// this writing): member clusters come from the kubeconfig Secrets the
// environment registered, as for a real user. The hub logs at debug level
// here: logs/hub.log is where a drill, a benchmark or a developer reads
// where each pass's time went and what the planner waits for (its V(1)
// lines); a production hub keeps the info default.
//
// Two allowances of the hub's tenancy rules, both for what the local
// environment is: every pod and spoke listens on a loopback address, which
// a real member cluster's reports never carry
// (--allow-loopback-member-addresses); and the environment is one
// developer's machine, whose file:// stores (its filesystem) are the
// documented way to try backups here (--allow-ambient-store-credentials).
// And one key prefix of pod annotations, bench.etcdfed.dev/, the mark the
// benchmarks roll members with (--allowed-pod-annotations).
// The kubeconfig Secrets it registers are self-contained (certificates
// inline, no exec plugin): they pass the hub's check as they are.
func hubArgs(st *State) []string {
	return []string{
		"--namespace=" + RingNamespace,
		"--ring-namespace=" + RingNamespace,
		"--metrics-bind-address=" + st.Hub.Metrics,
		// Plain HTTP here: the tests and benchmarks read the hub's metrics
		// (passes, engaged clusters) also while an apiserver is stopped,
		// when a delegated TokenReview could not answer. The secure
		// default is tested in internal/metricsserve.
		"--metrics-secure=false",
		"--health-probe-bind-address=" + st.Hub.Health,
		"--zap-log-level=debug",
		"--allow-loopback-member-addresses",
		"--allow-ambient-store-credentials",
		"--allowed-pod-annotations=bench.etcdfed.dev/",
	}
}

// spokeArgs are a spoke's flags in the local environment (cmd/spoke as of
// this writing): DNS, gossip, metrics and health on the cluster's agent
// address; gossip seeded with every other spoke, with the loopback
// profile, encrypted with the ring's key `etcdfed cluster join` copied into
// every member cluster (register); one replica, so no leader election.
func spokeArgs(st *State, c ClusterState) []string {
	args := []string{
		"--kubeconfig=" + st.KubeconfigPath(c.Name),
		"--namespace=" + RingNamespace,
		"--cluster-name=" + c.Name,
		"--dns-listen=" + c.DNS,
		"--gossip-bind=" + c.Gossip,
		"--gossip-profile=local",
		"--gossip-secret=" + install.GossipSecret,
		"--metrics-bind-address=" + c.Metrics,
		"--metrics-secure=false",
		"--health-probe-bind-address=" + c.Health,
		"--leader-elect=false",
	}
	for _, o := range st.MemberClusters {
		if o.Name != c.Name {
			args = append(args, "--gossip-seed="+o.Gossip)
		}
	}
	return args
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

func (e *Env) startComponent(spec ComponentSpec) error {
	if spec.PodName {
		e.newPod(spec.Name)
	}
	svc, err := startService(spec.Name, func() proc.Spec {
		env := append(minimalEnv(), spec.Env...)
		if spec.PodName {
			env = append(env, e.podEnv(spec.Name))
		}
		return proc.Spec{
			Name: spec.Name, Path: spec.Path, Args: spec.Args,
			Env:     env,
			Dir:     e.state.Dir,
			LogPath: filepath.Join(e.state.logDir(), spec.Name+".log"),
			PIDFile: filepath.Join(e.state.pidDir(), spec.Name+".pid"),
			Cgroup:  e.cgroupDir(spec.Cluster, "infra"),
		}
	}, true, e.log)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.comps[spec.Name] = &compRun{spec: spec, svc: svc}
	e.mu.Unlock()
	return nil
}

// KillComponent SIGKILLs a component (for example "hub"). With restartNow
// false that is a crash, and the component is restarted after its back-off
// (doubling while it keeps dying within a minute of starting); with
// restartNow true it is a pod deleted and replaced, restarted at once. It
// returns the pid killed.
func (e *Env) KillComponent(name string, restartNow bool) (int, error) {
	e.mu.Lock()
	run, ok := e.comps[name]
	e.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("no component %q", name)
	}
	if restartNow && run.spec.PodName {
		e.newPod(name) // its replacement is another pod
	}
	pid := run.svc.Kill(restartNow)
	if pid == 0 {
		return 0, fmt.Errorf("component %q is not running", name)
	}
	return pid, nil
}

// newPod counts a new pod of component name (ComponentSpec.PodName).
func (e *Env) newPod(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pods == nil {
		e.pods = map[string]int{}
	}
	e.pods[name]++
}

// podEnv is component name's POD_NAME as of its current pod.
func (e *Env) podEnv(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprintf("%s=%s-%d", leaderlock.PodNameEnv, name, e.pods[name])
}
