package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdfed/etcdfed/dev/drill"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/internal/resolverenv"
)

var drillCmd = &cobra.Command{
	Use:   "drill",
	Short: "Prove that losing a failure domain loses nothing and heals itself",
}

func init() {
	var hub hubFlags
	var f struct {
		drillFlags
		zone, mode string
		duration   time.Duration
	}
	cmd := &cobra.Command{
		Use:   "zone-failure --cluster [NAMESPACE/]NAME --zone ZONE --mode cordon|kill|partition",
		Short: "Fail a zone under a recorded client workload, let the hub heal the ring, restore the zone and report",
		Long: `zone-failure runs a recorded client workload against an EtcdCluster (puts and
linearizable gets with unique values, and watches over all endpoints and on
each endpoint), fails one zone, follows the EtcdCluster's status while the hub
reacts, restores the zone, waits until the ring has healed, checks the
workload and prints a report: when the failure was detected, the longest gap
between acknowledged writes, when the zone's members were replaced and the
ring healed, which members moved, and the verdicts (linearizable, no
acknowledged write lost, every watch complete and in order). It exits
non-zero when a check failed or the ring did not heal.

--zone is a zone name (that zone in every member cluster) or CLUSTER/ZONE.
--mode cordon adds the zone to spec.topology.cordonedZones, so the hub moves
  its members away one at a time, and removes it again to restore. It works on
  every deployment and needs only the hub (patch EtcdClusters, read the CA
  Secret).
--mode kill and --mode partition kill the zone's processes or cut its network
  off. Only the local environment (etcdfed dev up) can do that; partition
  also needs root.
--duration holds the failure that long; without it the failure is held until
  the hub has moved every member out of the zone (at most --timeout).

The drill refuses to start on a ring that is not healthy (not Available, a
member not ready, a change in flight) or on a zone whose loss would take
quorum. Its keys live under etcdfed-drill/ and are deleted at the end. The
client certificate is issued from the EtcdCluster's CA as client-cert does.
Member names resolve through --dns-server, else ETCDFED_DNS_SERVERS, else the
local environment's DNS when it runs this hub, else the system resolver.

  etcdfed drill zone-failure --cluster default/demo --zone zone-1 --mode kill
  etcdfed drill zone-failure --cluster prod/main --zone eu-west-1a --mode cordon --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			zone, err := drill.ParseZone(f.zone)
			if err != nil {
				return err
			}
			mode, err := drill.ParseMode(f.mode)
			if err != nil {
				return err
			}
			if f.duration < 0 || f.timeout <= 0 {
				return errors.New("--duration must not be negative and --timeout must be positive")
			}
			in, env, err := f.input(&hub)
			if err != nil {
				return err
			}
			in.Zone, in.Mode, in.Duration, in.Faults = zone, mode, f.duration, env.faults(f.stateDir, env.hubHost)
			return runDrill(cmd, in, f.json, drill.Run)
		},
	}
	hub.bind(cmd.Flags())
	fl := cmd.Flags()
	f.bind(fl)
	fl.StringVar(&f.zone, "zone", "", "Zone to fail: a zone name, or CLUSTER/ZONE for one member cluster's zone.")
	fl.StringVar(&f.mode, "mode", "", "How to fail it: cordon (any deployment), kill or partition (local environment only).")
	fl.DurationVar(&f.duration, "duration", 0, "Hold the failure this long (default: until the hub has moved the zone's members).")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "Longest wait for the members to be replaced, and again for the ring to heal.")
	_ = cmd.MarkFlagRequired("cluster")
	_ = cmd.MarkFlagRequired("zone")
	_ = cmd.MarkFlagRequired("mode")
	drillCmd.AddCommand(cmd)
	drillCmd.AddCommand(migrateDrillCmd())
	root.AddCommand(drillCmd)
}

// drillFlags are the flags every drill takes.
type drillFlags struct {
	cluster, stateDir, artifacts string
	timeout                      time.Duration
	json, allowCompaction        bool
	dnsServers                   []string
}

func (f *drillFlags) bind(fl *pflag.FlagSet) {
	fl.StringVar(&f.cluster, "cluster", "", "EtcdCluster to drill, NAMESPACE/NAME or NAME (namespace from -n or the context).")
	fl.BoolVar(&f.json, "json", false, "Print the report as a JSON document (progress still goes to stderr).")
	fl.StringSliceVar(&f.dnsServers, "dns-server", nil, "DNS server (host:port) resolving the ring's member names; repeatable.")
	fl.StringVar(&f.stateDir, "state-dir", defaultStateDir(), "State directory of the local environment (for kill and partition, and its DNS).")
	fl.StringVar(&f.artifacts, "artifacts", "", "Directory for porcupine's visualization when the history is not linearizable.")
	fl.BoolVar(&f.allowCompaction, "allow-watch-compaction", false, "Do not fail the watch check when the ring compacted revisions a watcher still needed.")
}

// input is the drill's input from the flags every drill takes: the hub's
// client, the EtcdCluster, the DNS servers (the local environment's when
// it runs this hub), and the local environment.
func (f *drillFlags) input(hub *hubFlags) (drill.Input, localEnv, error) {
	if f.cluster == "" {
		return drill.Input{}, localEnv{}, errors.New("--cluster is required ([NAMESPACE/]NAME of the EtcdCluster)")
	}
	cfg, ns, err := hub.config()
	if err != nil {
		return drill.Input{}, localEnv{}, err
	}
	// The hub of a local environment of real nodes: its clusters and
	// pods are reached from its network namespace only.
	if st, err := localenv.LoadState(f.stateDir); err == nil && st.Real() && sameHost(st.Hub.APIServer, cfg.Host) {
		if err := localenv.JoinNetwork(f.stateDir); err != nil {
			return drill.Input{}, localEnv{}, err
		}
	}
	name := f.cluster
	if i := strings.Index(f.cluster, "/"); i >= 0 {
		ns, name = f.cluster[:i], f.cluster[i+1:]
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return drill.Input{}, localEnv{}, fmt.Errorf("--cluster %q: want NAMESPACE/NAME or NAME", f.cluster)
	}
	c, _, err := hub.client()
	if err != nil {
		return drill.Input{}, localEnv{}, err
	}
	env := localEnvOf(f.stateDir, cfg.Host)
	in := drill.Input{Hub: c, Namespace: ns, Name: name, Timeout: f.timeout,
		DNSServers: f.dnsServers, AllowWatchCompaction: f.allowCompaction, Artifacts: f.artifacts}
	if len(in.DNSServers) == 0 && os.Getenv(resolverenv.EnvVar) == "" && env.state != nil {
		in.DNSServers = env.state.DNSServers()
	}
	return in, env, nil
}

// runDrill runs a drill with its progress on standard error, prints the
// report, and fails when the drill did.
func runDrill(cmd *cobra.Command, in drill.Input, asJSON bool, run func(context.Context, drill.Input) (*drill.Report, error)) error {
	errOut := cmd.ErrOrStderr()
	in.Progress = func(line string) { fmt.Fprintln(errOut, line) }
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	rep, err := run(ctx, in)
	if err != nil {
		return err
	}
	if asJSON {
		err = rep.JSON(cmd.OutOrStdout())
	} else {
		err = rep.Text(cmd.OutOrStdout())
	}
	if err != nil {
		return err
	}
	if !rep.Pass {
		return fmt.Errorf("drill failed: %s", strings.Join(rep.Failures, "; "))
	}
	return nil
}

func migrateDrillCmd() *cobra.Command {
	var hub hubFlags
	var f drillFlags
	var to []string
	cmd := &cobra.Command{
		Use:   "migrate --cluster [NAMESPACE/]NAME --to CLUSTER,CLUSTER,...",
		Short: "Move a ring to other member clusters under a recorded client workload and report what it cost",
		Long: `migrate runs a recorded client workload against an EtcdCluster (puts and
linearizable gets with unique values, and watches over all endpoints and on
each endpoint), sets spec.topology.clusters to --to with one spec change, and
follows the hub while it moves every member there, one at a time, make before
break, the leader last. Meanwhile it samples the failure tolerance etcd's own
member list gives (every voter asked for its status, four times a second).
Once every member is a ready voter in the new clusters, it checks the
workload and prints a report (mode migrate): when each member moved, the
operations and how long each took, the lowest failure tolerance sampled, the
longest gap between acknowledged writes, and the verdicts (linearizable, no
acknowledged write lost, every watch complete and in order, every member
moved, failure tolerance never lost). It exits non-zero when a check failed.

The migration is the point: the ring stays in the new clusters. The drill
refuses to start on a ring that is not healthy, with moves paused, or with
every member already in --to; it needs only the hub (patch EtcdClusters, read
the CA Secret) and works on every deployment.

  etcdfed drill migrate --cluster default/demo --to member-4,member-5,member-6
  etcdfed drill migrate --cluster prod/main --to seed-d,seed-e,seed-f --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(to) == 0 {
				return errors.New("--to is required: the member clusters to move the ring to")
			}
			if f.timeout <= 0 {
				return errors.New("--timeout must be positive")
			}
			in, _, err := f.input(&hub)
			if err != nil {
				return err
			}
			in.To = to
			return runDrill(cmd, in, f.json, drill.RunMigrate)
		},
	}
	hub.bind(cmd.Flags())
	fl := cmd.Flags()
	f.bind(fl)
	fl.StringSliceVar(&to, "to", nil, "Member clusters to move the ring to (spec.topology.clusters from then on), comma-separated.")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Minute, "Longest wait for every member to be moved.")
	_ = cmd.MarkFlagRequired("cluster")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// localEnv is the local environment in a state directory when it runs the
// hub the drill talks to.
type localEnv struct {
	state *localenv.State
	// hubHost is the hub's address the drill talks to.
	hubHost string
	// why says why there is none.
	why error
}

func localEnvOf(stateDir, hubHost string) localEnv {
	st, err := localenv.LoadState(stateDir)
	if err != nil {
		return localEnv{hubHost: hubHost, why: fmt.Errorf("no local environment in %s (etcdfed dev up)", stateDir)}
	}
	if !sameHost(st.Hub.APIServer, hubHost) {
		return localEnv{hubHost: hubHost, why: fmt.Errorf("the hub at %s is not the local environment's hub (%s in %s)", hubHost, st.Hub.APIServer, stateDir)}
	}
	return localEnv{state: st, hubHost: hubHost}
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host && ua.Host != ""
}

// faults fails zones through the local environment's supervisor; where
// none runs this hub, every check says why.
func (e localEnv) faults(stateDir, hubHost string) *drill.Faults {
	unsupported := func() error {
		return fmt.Errorf("%w; on any other deployment use --mode cordon", e.why)
	}
	zoneName := func(z drill.Zone) (string, error) { return localZoneName(e.state, z) }
	connect := func() (*localenv.Client, error) {
		if e.state == nil {
			return nil, unsupported()
		}
		c, err := localenv.Connect(stateDir)
		if err != nil {
			return nil, fmt.Errorf("the local environment in %s: %w", stateDir, err)
		}
		return c, nil
	}
	return &drill.Faults{
		Check: func(ctx context.Context, mode drill.Mode) error {
			c, err := connect()
			if err != nil {
				return err
			}
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			if mode == drill.ModePartition && st.Partitions != "" {
				return fmt.Errorf("partitions are unavailable here: %s", st.Partitions)
			}
			if len(st.Failed) > 0 {
				var f []string
				for _, z := range st.Failed {
					f = append(f, fmt.Sprintf("%s (%s)", z.ZoneRef, z.Mode))
				}
				return fmt.Errorf("the local environment already has failed zones: %s (etcdfed dev restore-zone)", strings.Join(f, ", "))
			}
			return nil
		},
		Fail: func(ctx context.Context, z drill.Zone, mode drill.Mode) error {
			name, err := zoneName(z)
			if err != nil {
				return err
			}
			c, err := connect()
			if err != nil {
				return err
			}
			return c.FailZone(ctx, name, localenv.Mode(mode))
		},
		Restore: func(ctx context.Context, z drill.Zone) error {
			name, err := zoneName(z)
			if err != nil {
				return err
			}
			c, err := connect()
			if err != nil {
				return err
			}
			return c.RestoreZone(ctx, name)
		},
	}
}

// localZoneName maps the drill's zone to the name the local environment
// fails: zones there are named per cluster, so CLUSTER/ZONE works only
// when no other cluster has a zone of that name.
func localZoneName(st *localenv.State, z drill.Zone) (string, error) {
	var in []string
	for _, c := range st.MemberClusters {
		for _, cz := range c.Zones {
			if cz.Name == z.Name {
				in = append(in, c.Name)
			}
		}
	}
	switch {
	case len(in) == 0:
		return "", fmt.Errorf("the local environment has no zone %s", z.Name)
	case z.Cluster != "" && !slices.Contains(in, z.Cluster):
		return "", fmt.Errorf("member cluster %s of the local environment has no zone %s (it is in %s)", z.Cluster, z.Name, strings.Join(in, ", "))
	case z.Cluster != "" && len(in) > 1:
		return "", fmt.Errorf("the local environment fails zones by name and %s is in %s", z.Name, strings.Join(in, ", "))
	}
	return z.Name, nil
}
