// Command spoke is etcdfed's agent in a member cluster: it runs each
// EtcdMember's volume, pod and exposure, serves the ring's DNS zones, renews
// its liveness Lease and takes part in the spokes' gossip ring. Every flag
// can also be set with an environment variable, ETCDFED_SPOKE_<FLAG> (upper
// case, dashes as underscores); a flag on the command line wins.
package main

import (
	"errors"
	goflag "flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcdfed/etcdfed/internal/version"
	"github.com/etcdfed/etcdfed/spoke/app"
)

// envPrefix prefixes the environment variable of every flag.
const envPrefix = "ETCDFED_SPOKE_"

func main() {
	o := app.DefaultOptions()
	fs := pflag.NewFlagSet("spoke", pflag.ContinueOnError)
	var kubeconfig string
	var showVersion bool
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig of the member cluster; empty: $KUBECONFIG, then in-cluster config.")
	bindOptions(fs, &o)
	fs.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	logCfg := textlogger.NewConfig()
	gfs := goflag.NewFlagSet("log", goflag.ContinueOnError)
	logCfg.AddFlags(gfs)
	fs.AddGoFlagSet(gfs)
	fs.Lookup("v").Usage = "Log verbosity: 0 info, 1 details, 2 memberlist debug."
	fs.Lookup("vmodule").Usage = "Per-file log verbosity, pattern=N,..."
	fs.VisitAll(func(f *pflag.Flag) { f.Usage += fmt.Sprintf(" [env %s]", envName(f.Name)) })
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: spoke [flags]\n\netcdfed's agent in a member cluster. Every flag may also be given as an\nenvironment variable %s<FLAG>; the command line wins.\n\nFlags:\n%s", envPrefix, fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if err := applyEnv(fs); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	if showVersion {
		fmt.Println(version.String())
		return
	}
	ctrl.SetLogger(textlogger.NewLogger(logCfg))
	log := ctrl.Log.WithName("spoke")

	cfg, err := restConfig(kubeconfig)
	if err != nil {
		log.Error(err, "Loading kubeconfig")
		os.Exit(1)
	}
	s, err := app.New(cfg, o)
	if err != nil {
		log.Error(err, "Configuring the spoke")
		os.Exit(1)
	}
	if err := s.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Spoke stopped")
		os.Exit(1)
	}
}

// bindOptions defines the flags of the spoke's options on fs, with o's
// values as defaults.
func bindOptions(fs *pflag.FlagSet, o *app.Options) {
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Ring namespace: where EtcdMember, EtcdSpoke, EtcdDNSZone, member pods, volumes, Services, TLS Secrets and the spoke's Leases live.")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "This member cluster's name as registered with the hub, used as the gossip node name; empty: EtcdSpoke spec.clusterName (written by the hub). Gossip waits until one is set.")
	fs.StringVar(&o.HelperImage, "helper-image", o.HelperImage, "Image with the etcdfed-init helper on its PATH, run as the init containers of member pods (wait-dns, prepare-data).")
	fs.StringSliceVar(&o.AllowedPodAnnotations, "allowed-pod-annotations", o.AllowedPodAnnotations, "Annotation keys, or prefixes ending in '/' or '.' (comma-separated, repeatable; * for any), that members' pods in this member cluster may carry (EtcdMember spec.podTemplate.annotations). A member asking for another is refused here whatever the hub allowed: PodReady=False, reason RefusedByPolicy, nothing created or deleted, a running pod left as it is.")
	fs.DurationVar(&o.WaitDNSTimeout, "wait-dns-timeout", o.WaitDNSTimeout, "How long one run of wait-dns waits for the member's DNS name to resolve to its address before it fails (the kubelet then restarts it).")
	fs.DurationVar(&o.MemberStatusInterval, "member-status-interval", o.MemberStatusInterval, "How often a running member's own etcd status is read into EtcdMember status.etcd.")
	fs.DurationVar(&o.EtcdStatusTimeout, "etcd-status-timeout", o.EtcdStatusTimeout, "Timeout of one etcd status read.")
	fs.DurationVar(&o.EtcdLogInterval, "etcd-log-interval", o.EtcdLogInterval, "Least time between two reads of a not-ready member's etcd log (pods/log), which explain why it cannot join.")
	fs.DurationVar(&o.EtcdLogTimeout, "etcd-log-timeout", o.EtcdLogTimeout, "Timeout of one etcd log read.")
	fs.StringVar(&o.DNSListen, "dns-listen", o.DNSListen, "ip:port where the embedded DNS server serves the ring's zones over UDP and TCP; empty disables it.")
	fs.StringSliceVar(&o.DNSAdvertise, "dns-advertise-address", o.DNSAdvertise, "host:port where other clusters and member pods reach this spoke's DNS (published in EtcdSpoke status.dnsAddresses); repeatable or comma separated. Empty: the --dns-listen address when it names an IP.")
	fs.IntVar(&o.DNSRateLimit.ResponsesPerSecond, "dns-rate-limit", o.DNSRateLimit.ResponsesPerSecond, "Response-rate limit of the DNS server: UDP responses per second to one client /24 (IPv6 /56), bursts of twice that; over it every second response is sent truncated (the client retries over TCP, never limited) and the others dropped. 0 turns it off.")
	fs.IntVar(&o.DNSRateLimit.Slip, "dns-rate-limit-slip", o.DNSRateLimit.Slip, "Every Nth response over the rate limit is sent truncated instead of dropped; -1 drops them all.")
	fs.Var(&prefixList{p: &o.DNSRateLimit.Exempt}, "dns-rate-limit-exempt", "Client networks (CIDR) the rate limit never applies to; repeatable or comma separated. Default: loopback.")
	fs.StringVar(&o.Gossip.BindAddr, "gossip-bind", o.Gossip.BindAddr, "ip:port for gossip (UDP and TCP); empty disables gossip.")
	fs.StringVar(&o.Gossip.AdvertiseAddr, "gossip-advertise", o.Gossip.AdvertiseAddr, "host:port other spokes reach this spoke's gossip on; empty: the bound address, or a private IP when bound to 0.0.0.0.")
	fs.StringSliceVar(&o.GossipSeeds, "gossip-seed", o.GossipSeeds, "Gossip seed host:port, joined besides EtcdSpoke spec.gossipPeers; repeatable or comma separated.")
	fs.StringVar(&o.GossipSecret, "gossip-secret", o.GossipSecret, "Secret in the ring namespace whose key \"key\" (16, 24 or 32 bytes) encrypts gossip, and whose \"accept\" holds further keys accepted during a rotation. The hub writes it, with a key of its own ring of spokes; gossip waits for it. Empty runs gossip UNENCRYPTED (logged loudly).")
	fs.StringVar(&o.Gossip.Profile, "gossip-profile", o.Gossip.Profile, "memberlist settings: wan (probe 5s, timeout 3s, suspicion x6: detects a dead spoke in ~30-40s; across zones and regions), lan (1s, 500ms, x4: ~5s), local (1s, 200ms, x3: loopback).")
	fs.DurationVar(&o.Gossip.ProbeInterval, "gossip-probe-interval", 0, "Override the profile's probe interval.")
	fs.DurationVar(&o.Gossip.ProbeTimeout, "gossip-probe-timeout", 0, "Override the profile's probe timeout.")
	fs.IntVar(&o.Gossip.SuspicionMult, "gossip-suspicion-mult", 0, "Override the profile's suspicion multiplier.")
	fs.DurationVar(&o.Gossip.RejoinInterval, "gossip-rejoin-interval", 0, "How often every gossip seed is joined again, a state exchange that heals partitions and takes a restarted spoke back quickly (0: 10s).")
	fs.DurationVar(&o.LeaseRenewInterval, "lease-renew-interval", o.LeaseRenewInterval, "How often the liveness Lease \"spoke\" is renewed.")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", o.LeaseDuration, "leaseDurationSeconds written into the liveness Lease.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "Elect one active replica (a Lease in the ring namespace); every replica serves DNS.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader election Lease.")
	fs.StringVar(&o.Identity, "identity", o.Identity, "This replica's name in Leases; empty: $POD_NAME, then the host name.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz; \"0\" disables.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics (Prometheus); \"0\" disables.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve /metrics over TLS to callers whose bearer token the member cluster's apiserver authenticates (TokenReview) and allows GET /metrics (SubjectAccessReview; bind the ClusterRole etcdfed-metrics-reader). false: plain HTTP to anyone.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Directory with tls.crt and tls.key for /metrics; empty: a self-signed certificate made at start.")
}

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// environment variable.
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, serr)
			}
		}
	})
	return err
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

// prefixList is a flag of CIDRs; the first Set replaces the default.
type prefixList struct {
	p   *[]netip.Prefix
	set bool
}

func (l *prefixList) String() string {
	if l.p == nil {
		return ""
	}
	var out []string
	for _, p := range *l.p {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

func (l *prefixList) Set(v string) error {
	if !l.set {
		*l.p, l.set = nil, true
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return err
		}
		*l.p = append(*l.p, p)
	}
	return nil
}

func (l *prefixList) Type() string { return "cidrs" }
