package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// testedReleases is "3.5.35, 3.6.16 and 3.7.3": the newest patch of each
// line, the ones hack/tools.sh builds.
func testedReleases() string {
	var vs []string
	for _, l := range etcdversion.Lines() {
		vs = append(vs, l.Newest.String())
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " and " + vs[len(vs)-1]
}

// checkDemoVersion refuses an --etcd-version etcdfed does not run, before
// anything starts, with the policy's reason.
func checkDemoVersion(v string) error {
	parsed, err := etcdversion.Parse(v)
	if err == nil {
		err = etcdversion.Check(parsed)
	}
	if err != nil {
		return fmt.Errorf("--etcd-version %s: %w", v, err)
	}
	return nil
}

var upFlags struct {
	clusters, zones, members int
	etcdVersion              string
	detach, supervise        bool
	sharedSource             bool
	nodes                    string
	images                   string
	latency                  string
	timeout                  time.Duration
}

var devUpCmd = &cobra.Command{
	Use:   "up",
	Short: "Start the local environment (a hub and member clusters as real apiservers)",
	Long: `Start a hub cluster and --clusters member clusters (each with
--zones-per-cluster zones, one node per zone) as real kube-apiservers, install
the etcdfed CRDs, register the member clusters with the hub (kubeconfig
Secrets in etcdfed-system), and run a node agent per member cluster. The hub
and one spoke per member cluster start too when bin/hub and bin/spoke exist.

As root with iptables and cgroup v2, every pod connects from its own
address and zones can be partitioned. Elsewhere (or with
--shared-source-address) pods connect from 127.0.0.1: up says so in one
line at start, and the demo EtcdCluster turns off etcd's check of a peer's
address against its certificate (spec.tls.peerSkipClientSANVerification).

A second up on the same --state-dir reuses it (same addresses, credentials
and data; topology flags are then ignored). In the foreground, Ctrl-C stops
everything; with --detach a background supervisor owns the environment and
up returns once it is ready; etcdfed dev down stops it.`,
	Args: cobra.NoArgs,
	RunE: runDevUp,
}

func init() {
	f := devUpCmd.Flags()
	f.IntVar(&upFlags.clusters, "clusters", localenv.DefaultClusters, fmt.Sprintf("number of member clusters (1-%d)", addr.MaxMemberClusters))
	f.IntVar(&upFlags.zones, "zones-per-cluster", localenv.DefaultZonesPerCluster, fmt.Sprintf("zones in each member cluster (1-%d)", addr.MaxZones))
	f.IntVar(&upFlags.members, "members", localenv.DefaultMembers, "members of the demo EtcdCluster the hub forms (0: none)")
	f.StringVar(&upFlags.etcdVersion, "etcd-version", etcdversion.Default().String(),
		"etcd release of the demo EtcdCluster (spec.version); the local nodes run bin/etcd-<release> or bin/etcd, which hack/tools.sh builds for "+testedReleases())
	f.BoolVar(&upFlags.detach, "detach", false, "run in the background and return once the environment is ready")
	f.DurationVar(&upFlags.timeout, "timeout", 0, fmt.Sprintf("how long to wait for the environment to be ready (with --detach) and for the demo ring to be Available (0: %s, or %s with real nodes)", processStartTimeout, realStartTimeout))
	f.BoolVar(&upFlags.sharedSource, "shared-source-address", false,
		"pods connect from one shared address (127.0.0.1) even where root and iptables could give each its own, as on machines without them")
	f.StringVar(&upFlags.nodes, "nodes", string(localenv.NodesProcess),
		"how nodes run: process (pods as local processes, the default) or real (kubelet, containerd and runc per node, the hub and the spokes deployed in-cluster from config/; root, see docs/local-environment.md)")
	f.StringVar(&upFlags.images, "images", "",
		"with --nodes real: the directory `make images` wrote (OCI tarballs and images.txt) to import into every node; empty: up builds the same images itself (dev/images)")
	f.StringVar(&upFlags.latency, "latency", "",
		"distance between zones and member clusters from the start: none, one-region, three-regions, or links like 'zone-1:zone-2=20ms/5ms/0.1%' (see etcdfed dev latency --help); empty keeps the one state.json recorded (root)")
	f.BoolVar(&upFlags.supervise, "supervise", false, "run as the background supervisor (used by --detach)")
	_ = f.MarkHidden("supervise")
	devCmd.AddCommand(devUpCmd)
}

func upConfig() (localenv.Config, error) {
	bin, err := binDir()
	if err != nil {
		return localenv.Config{}, err
	}
	images := upFlags.images
	if images != "" {
		if images, err = filepath.Abs(images); err != nil {
			return localenv.Config{}, err
		}
	}
	var dist *localenv.Distance
	if upFlags.latency != "" {
		d, err := localenv.ParseDistance(upFlags.latency)
		if err != nil {
			return localenv.Config{}, fmt.Errorf("--latency: %w", err)
		}
		dist = &d
	}
	return localenv.Config{
		StateDir: devFlags.stateDir, Clusters: upFlags.clusters, ZonesPerCluster: upFlags.zones,
		Members: upFlags.members, BinDir: bin, SharedSourceAddress: upFlags.sharedSource,
		// The apiservers store in the etcd the demo ring runs: a first
		// `make demo` builds one etcd.
		StoreEtcd: localenv.StoreEtcd(bin, upFlags.etcdVersion),
		Nodes:     localenv.NodeMode(upFlags.nodes), ImagesDir: images, Distance: dist,
	}, nil
}

// The start deadlines when --timeout is not given. Real nodes start
// containerd, kubelet and kube-proxy per node, import the images and
// deploy the hub and the spokes in-cluster: 80 to 100 s on an idle
// machine, but 300 to 342 s under a load average of 60 to 70
// (docs/measurements/realnodes.md), past the process nodes' deadline, where
// `make demo NODES=real` was killed ("the environment was not ready
// after 5m0s") with nothing wrong but the machine's load.
const (
	processStartTimeout = 5 * time.Minute
	realStartTimeout    = 15 * time.Minute
)

// startTimeout is --timeout, or when it is 0 the deadline of the node
// mode: the mode asked, or an existing state directory's.
func startTimeout(flag time.Duration, stateDir string, asked localenv.NodeMode) time.Duration {
	if flag > 0 {
		return flag
	}
	real := asked == localenv.NodesReal
	if st, err := localenv.LoadState(stateDir); err == nil {
		real = st.Real()
	}
	if real {
		return realStartTimeout
	}
	return processStartTimeout
}

func runDevUp(cmd *cobra.Command, _ []string) error {
	out := cmd.OutOrStdout()
	if err := checkDemoVersion(upFlags.etcdVersion); err != nil {
		return err
	}
	if cmd.Flags().Changed("nodes") {
		if err := checkNodeMode(devFlags.stateDir, localenv.NodeMode(upFlags.nodes)); err != nil {
			return err
		}
	}
	upFlags.timeout = startTimeout(upFlags.timeout, devFlags.stateDir, localenv.NodeMode(upFlags.nodes))
	if c, err := localenv.Connect(devFlags.stateDir); err == nil {
		if upFlags.supervise {
			return fmt.Errorf("already running under pid %d", c.Info.PID)
		}
		fmt.Fprintf(out, "The environment in %s already runs (supervisor pid %d).\n", devFlags.stateDir, c.Info.PID)
		return printSummary(out, devFlags.stateDir, 0)
	}
	cfg, err := upConfig()
	if err != nil {
		return err
	}
	if err := enterRealNetwork(cfg); err != nil {
		return err
	}
	if upFlags.detach && !upFlags.supervise {
		return detach(cmd, cfg)
	}

	// Foreground, or the detached supervisor itself.
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "logs"), 0o755); err != nil {
		return err
	}
	var logOut io.Writer = os.Stderr
	if !upFlags.supervise {
		f, err := os.OpenFile(filepath.Join(cfg.StateDir, "logs", "supervisor.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		logOut = f
	}
	cfg.Log = textLogger(logOut)
	cfg.Progress = func(ev localenv.Event) { fmt.Fprintln(out, ev.String()) }

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once; Pdeathsig takes the children along
	}()
	start := time.Now()
	return localenv.Supervise(ctx, cfg, func(env *localenv.Env) {
		if upFlags.supervise {
			return
		}
		_ = printSummary(out, env.State().Dir, time.Since(start))
		go func() {
			if err := runDemo(ctx, out, env.State(), upFlags.members, upFlags.etcdVersion, env.SharedSourceAddress(), upFlags.timeout); err != nil {
				fmt.Fprintln(out, "demo:", err)
			}
			fmt.Fprintln(out, "Running in the foreground: Ctrl-C stops everything.")
		}()
	})
}

// checkNodeMode refuses a node mode asked with --nodes that the state
// directory, running or not, does not hold: a state directory keeps the
// mode it was made with, and reusing it silently would run the other mode
// (a `make demo NODES=real` after a `make demo` once brought the process
// nodes back, saying nothing of the mode asked).
func checkNodeMode(stateDir string, asked localenv.NodeMode) error {
	st, err := localenv.LoadState(stateDir)
	if err != nil {
		return nil // a new state directory takes the mode asked
	}
	has := st.NodeMode()
	if has == asked {
		return nil
	}
	return fmt.Errorf("--nodes %s: the environment in %s runs %s nodes, and a state directory keeps the mode it was made with; "+
		"start %s nodes beside it with another directory (etcdfed dev up --nodes %s --state-dir %s-%s), "+
		"or replace it, its rings included (etcdfed dev down --purge --state-dir %s, then dev up again)",
		asked, stateDir, has, asked, asked, shellQuote(stateDir), asked, shellQuote(stateDir))
}

// enterRealNetwork re-runs `dev up` in a network namespace of its own
// when the environment runs real nodes (a new one asked with --nodes real,
// or an existing state directory of real nodes); the detached supervisor
// inherits it.
func enterRealNetwork(cfg localenv.Config) error {
	real := cfg.Nodes == localenv.NodesReal
	if st, err := localenv.LoadState(cfg.StateDir); err == nil {
		real = st.Real()
	}
	if !real {
		return nil
	}
	_, err := localenv.EnterOwnNetwork(cfg.StateDir)
	return err
}

func textLogger(w io.Writer) logr.Logger {
	return funcr.New(func(prefix, args string) {
		fmt.Fprintln(w, time.Now().Format("15:04:05.000"), prefix, args)
	}, funcr.Options{})
}

// detach starts the supervisor in its own session, shows its progress and
// returns once it reports ready (or failed).
func detach(cmd *cobra.Command, cfg localenv.Config) error {
	out := cmd.OutOrStdout()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logDir := filepath.Join(cfg.StateDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(logDir, "supervisor.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	sup := exec.Command(exe, supervisorArgs(cfg)...)
	sup.Stdout, sup.Stderr = logFile, logFile
	sup.Env = append(os.Environ(), "ETCDFED_BIN_DIR="+cfg.BinDir)
	sup.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sup.Start(); err != nil {
		return fmt.Errorf("start supervisor: %w", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = sup.Wait(); close(exited) }()
	start := time.Now()
	fmt.Fprintf(out, "Starting the local environment in %s (supervisor pid %d, log %s)\n", cfg.StateDir, sup.Process.Pid, logPath)

	// Follow the supervisor's progress lines until it is ready.
	rf, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer rf.Close()
	follow := (&progressLines{rd: bufio.NewReader(rf), out: out}).follow
	deadline := time.After(upFlags.timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		follow()
		if info, err := localenv.ReadSupervisor(cfg.StateDir); err == nil && info.PID == sup.Process.Pid {
			if info.Ready != nil {
				follow()
				_ = sup.Process.Release()
				if err := printSummary(out, cfg.StateDir, time.Since(start)); err != nil {
					return err
				}
				st, err := localenv.LoadState(cfg.StateDir)
				if err != nil {
					return err
				}
				return runDemo(cmd.Context(), out, st, cfg.Members, upFlags.etcdVersion, info.SharedSourceAddress, upFlags.timeout)
			}
			if info.Error != "" {
				<-exited
				follow()
				return fmt.Errorf("the environment did not start: %s (log: %s)", info.Error, logPath)
			}
		}
		select {
		case <-exited:
			follow()
			return fmt.Errorf("the supervisor exited before the environment was ready (%s); its log %s ends with:\n%s", exitDesc(waitErr), logPath, tailFile(logPath, 15))
		case <-deadline:
			_ = sup.Process.Signal(syscall.SIGTERM)
			<-exited
			return fmt.Errorf("the environment was not ready after %s; see %s", upFlags.timeout, logPath)
		case <-tick.C:
		}
	}
}

// supervisorArgs are the arguments of `etcdfed dev up --supervise` for
// cfg.
func supervisorArgs(cfg localenv.Config) []string {
	args := []string{"dev", "up", "--supervise", "--state-dir", cfg.StateDir,
		"--clusters", fmt.Sprint(cfg.Clusters), "--zones-per-cluster", fmt.Sprint(cfg.ZonesPerCluster),
		"--members", fmt.Sprint(cfg.Members)}
	if cfg.SharedSourceAddress {
		args = append(args, "--shared-source-address")
	}
	args = append(args, "--nodes", string(cfg.Nodes))
	if cfg.ImagesDir != "" {
		args = append(args, "--images", cfg.ImagesDir)
	}
	if cfg.Distance != nil {
		args = append(args, "--latency", cfg.Distance.String())
	}
	return args
}

// progressLines copies the progress lines ("[...") of the supervisor's
// log to out as they are written.
type progressLines struct {
	rd      *bufio.Reader
	out     io.Writer
	partial string
}

// follow copies the complete lines written since it last ran; a line
// still being written waits for the next time.
func (p *progressLines) follow() {
	for {
		line, err := p.rd.ReadString('\n')
		p.partial += line
		if err != nil {
			return
		}
		if strings.HasPrefix(p.partial, "[") {
			fmt.Fprint(p.out, p.partial)
		}
		p.partial = ""
	}
}

func exitDesc(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func tailFile(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func printSummary(out io.Writer, stateDir string, took time.Duration) error {
	st, err := localenv.LoadState(stateDir)
	if err != nil {
		return err
	}
	self := "etcdfed"
	if exe, err := os.Executable(); err == nil {
		self = exe
	}
	writeSummary(out, self, st, took)
	return nil
}

// writeSummary says where the environment's clusters are and the commands
// that use them. With real nodes their addresses exist in the
// environment's network namespace only (from the host such an address
// leads wherever the host's routes send it), so the command that needs an
// apiserver runs inside it, through dev shell. self is this program, as
// the commands name it (a dev shell has no bin/ on its PATH).
func writeSummary(out io.Writer, self string, st *localenv.State, took time.Duration) {
	if took > 0 {
		fmt.Fprintf(out, "\nThe local environment is ready (%.1fs). State: %s\n", took.Seconds(), st.Dir)
	}
	fmt.Fprintf(out, "  nodes: %s\n", nodeModeLine(st))
	fmt.Fprintf(out, "  %-10s %-26s %s\n", st.Hub.Name, st.Hub.APIServer, st.KubeconfigPath(st.Hub.Name))
	for _, c := range st.MemberClusters {
		var zones []string
		for _, z := range c.Zones {
			zones = append(zones, z.Name)
		}
		fmt.Fprintf(out, "  %-10s %-26s %s  zones %s, DNS %s\n", c.Name, c.APIServer, st.KubeconfigPath(c.Name), strings.Join(zones, ","), c.DNS)
	}
	sd, me := shellQuote(st.Dir), shellQuote(self)
	inside := ""
	if st.Real() {
		inside = me + " dev shell --state-dir " + sd + " -- "
		fmt.Fprintf(out, "\n  %s dev shell --state-dir %s   # a shell in the environment's network, where its addresses are, with KUBECONFIG, DNS, etcdctl\n", me, sd)
	} else {
		fmt.Fprintf(out, "\n  eval \"$(%s dev env --state-dir %s)\"   # KUBECONFIG, DNS, etcdctl\n", me, sd)
	}
	fmt.Fprintf(out, "  %s dev status --state-dir %s\n", me, sd)
	fmt.Fprintf(out, "  %s%s cluster list --kubeconfig %s   # installed by etcdfed hub install and cluster join\n", inside, me, shellQuote(st.KubeconfigPath(st.Hub.Name)))
	fmt.Fprintf(out, "  %s dev down --state-dir %s\n", me, sd)
}

var errNotRunning = errors.New("the local environment is not running (etcdfed dev up)")

func connect() (*localenv.Client, error) {
	c, err := localenv.Connect(devFlags.stateDir)
	if errors.Is(err, localenv.ErrNotRunning) {
		return nil, fmt.Errorf("%w: %w", errNotRunning, err)
	}
	return c, err
}

// loadState reads the state of the environment in --state-dir.
func loadState() (*localenv.State, error) {
	st, err := localenv.LoadState(devFlags.stateDir)
	if err != nil {
		return nil, fmt.Errorf("no environment in %s (etcdfed dev up): %w", devFlags.stateDir, err)
	}
	return st, nil
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, d)
}

// nodeModeLine says how the environment's nodes run, for the summary and
// `dev status`.
func nodeModeLine(st *localenv.State) string {
	if st.Real() {
		return "real (kubelet, containerd and runc per node; the hub and the spokes in-cluster)"
	}
	return "process (pods as local processes under a node agent; the hub and the spokes as local processes)"
}
