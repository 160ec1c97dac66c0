package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/hub/shard"
)

var clusterCmd = &cobra.Command{
	Use:   "cluster",
	Short: "Join member clusters to the hub, list them, unjoin them",
	Long: `A member cluster hosts etcd members. Joining one installs etcdfed there (the
CRDs, the ring namespace, the spoke, the hub's least-privilege ServiceAccount)
and registers it with the hub, with a short-lived token the hub renews.

  etcdfed cluster join member-1 --kubeconfig-member member-1.kubeconfig
  etcdfed cluster list
  etcdfed cluster unjoin member-1 --kubeconfig-member member-1.kubeconfig

--kubeconfig and --context name the hub cluster, as for every etcdfed
command; --kubeconfig-member and --member-context the member cluster.`,
}

func init() { root.AddCommand(clusterCmd) }

// kubeFlags locate one cluster the way kubectl does.
type kubeFlags struct{ kubeconfig, context string }

func (k kubeFlags) config(what string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.kubeconfig != "" {
		rules.ExplicitPath = k.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s kubeconfig: %w", what, err)
	}
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

func (k *kubeFlags) bindHub(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "Kubeconfig of the hub cluster (default: KUBECONFIG, then ~/.kube/config).")
	fs.StringVar(&k.context, "context", "", "Kubeconfig context of the hub cluster.")
}

func (k *kubeFlags) bindMember(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig-member", "", "Kubeconfig of the member cluster, with rights to install CRDs and RBAC there (required).")
	fs.StringVar(&k.context, "member-context", "", "Kubeconfig context of the member cluster.")
}

// hubAndMember loads the hub's and the member cluster's REST configs.
func hubAndMember(hub, member kubeFlags) (*rest.Config, *rest.Config, error) {
	if member.kubeconfig == "" {
		return nil, nil, fmt.Errorf("--kubeconfig-member is required: the member cluster's kubeconfig")
	}
	h, err := hub.config("hub")
	if err != nil {
		return nil, nil, err
	}
	m, err := member.config("member")
	if err != nil {
		return nil, nil, err
	}
	return h, m, nil
}

// progressPrinter prints each line with the time since start.
func progressPrinter(w io.Writer) func(string) {
	start := time.Now()
	return func(s string) { fmt.Fprintf(w, "[%6.1fs] %s\n", time.Since(start).Seconds(), s) }
}

// knobs are the options hub install and cluster join share.
type knobs struct {
	install.Knobs
	leaderElect bool
}

func (k *knobs) bind(fs *pflag.FlagSet) {
	fs.StringVar(&k.ImageRepository, "image-repository", install.Images, "Where the images come from: <repository>/hub, <repository>/spoke and <repository>/etcdfed-init (the member pods' init containers).")
	fs.StringVar(&k.ImageTag, "image-tag", install.DefaultImageTag(), "Tag of those images.")
	fs.StringVar(&k.Image, "image", "", "One image holding every binary (the Dockerfile's default stage), for hub, spoke and init containers alike, instead of --image-repository and --image-tag (NAME[:TAG][@DIGEST]).")
	fs.StringVar(&k.LogLevel, "log-level", "info", "Log level: info, debug, or a number (the hub's --zap-log-level, the spoke's -v).")
	fs.BoolVar(&k.leaderElect, "leader-elect", true, "Elect a leader with a Lease (one replica acts); false runs one replica without it.")
}

func (k *knobs) get() install.Knobs {
	out := k.Knobs
	out.NoLeaderElection = !k.leaderElect
	return out
}

func init() {
	var hub, member kubeFlags
	var o install.JoinOptions
	var kn knobs
	var spokeMode string
	var labels []string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "join NAME --kubeconfig-member FILE",
		Short: "Install etcdfed in a member cluster and register it with the hub",
		Long: `join makes a Kubernetes cluster a member cluster of the hub, under NAME:

  1. in the member cluster: installs or upgrades the etcdfed CRDs, the ring
     namespace etcdfed-system, the hub's ServiceAccount with exactly the
     rights of config/rbac/hub-member (etcdfed objects and certificates in
     the ring namespace, node and node-Lease reads; no right to mint a
     token of its own), the ring's gossip key (copied from the hub), and the
     spoke (config/spoke: RBAC, Deployment, and a LoadBalancer or NodePort
     Service for DNS and gossip);
  2. mints a token of that ServiceAccount (TokenRequest, --token-lifetime):
     no token that never expires. The spoke mints the next one after a
     third of its life and seals it to the hub's public key, which join
     copies from the hub cluster (Secret etcdfed-hub-sealing-key, made
     once) onto the Secret etcdfed-hub-credential; the hub opens it. A
     stolen token cannot renew itself: it lasts its lifetime. Every token
     is bound to etcdfed-hub-credential, which the spoke deletes after
     --credential-lifetime: the renewals end then; run join again before
     (it starts a new chain once two thirds of the old one have passed);
  3. writes the registration Secret NAME in the hub's etcdfed-system, with the
     member apiserver's URL and CA, the token, and --label labels;
  4. waits until the spoke runs and the hub reports the cluster engaged and
     its spoke alive, printing a line per step.

A second run with the same flags changes nothing. --dry-run prints every
object join would write (credentials left out) and writes nothing. join
refuses a member kubeconfig that skips TLS verification, a server
already registered under another name, and, before it writes anything, a
member cluster another hub cluster joined (a member cluster answers one
hub cluster): --take-over takes it over when that hub cluster is lost
(docs/disaster-recovery.md), and ends the other hub's tokens there.

--spoke external installs everything but the spoke's Deployment, Service and
ConfigMap: for a spoke run outside the cluster (the local environment).
`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.Knobs = args[0], kn.get()
			var err error
			if o.External, err = externalSpoke(spokeMode); err != nil {
				return err
			}
			if o.Labels, err = parseLabels(labels); err != nil {
				return err
			}
			if o.Hub, o.Member, err = hubAndMember(hub, member); err != nil {
				return err
			}
			if dryRun {
				o.DryRun = cmd.OutOrStdout()
			}
			o.Progress = progressPrinter(cmd.OutOrStdout())
			return install.Join(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	hub.bindHub(f)
	member.bindMember(f)
	f.StringVar(&o.MemberServer, "member-server", "", "The member apiserver's URL as the hub reaches it (default: the member kubeconfig's server).")
	f.StringVar(&spokeMode, "spoke", "deploy", "deploy: run the spoke in the member cluster; external: the spoke runs elsewhere (install everything else).")
	f.StringVar(&o.Expose, "spoke-expose", install.ExposeLoadBalancer, "How other clusters reach the spoke's DNS and gossip: LoadBalancer (a DNS and a gossip Service, each advertised at its address) or NodePort (ports 30053 and 30946 of every node, advertised at the node's IP).")
	f.StringVar(&o.Advertise, "advertise-address", "", "Host other clusters reach the spoke's DNS (port 53) at, and its gossip (port 7946) unless --gossip-advertise-address is given, with --spoke-expose LoadBalancer (default: the DNS Service's address, waited for).")
	f.StringVar(&o.GossipAdvertise, "gossip-advertise-address", "", "Host other clusters reach the spoke's gossip (port 7946) at, the gossip Service etcdfed-spoke-gossip (default: --advertise-address, or the gossip Service's address, waited for).")
	f.StringVar(&o.HelperImage, "helper-image", "", "Image member pods run their init containers from (default: <repository>/etcdfed-init:<tag>, or --image).")
	f.StringVar(&o.GossipProfile, "gossip-profile", "wan", "Gossip timing: wan (across zones and regions, detects a dead spoke in 30-40s) or lan (one site, about 5s).")
	f.StringArrayVar(&labels, "label", nil, "KEY=VALUE label of the registration (EtcdCluster spec.topology.clusterSelector selects by them; zone.etcdfed.dev/ZONE= registers a zone of the cluster, and the hub then refuses zones its spoke reports outside those registered); repeatable.")
	f.StringVar(&o.ZoneLabel, "zone-label", "", "For a cluster that is one zone and whose nodes carry no topology.kubernetes.io/zone label: label every node with this zone (unjoin removes it).")
	f.DurationVar(&o.CredentialLifetime, "credential-lifetime", install.DefaultCredentialLifetime, "How long the hub may renew its token: then the spoke ends every token of the chain (a stolen one's too) until join runs again.")
	f.DurationVar(&o.TokenLifetime, "token-lifetime", install.DefaultTokenLifetime, "Lifetime of the hub's token (at least 10m); the hub renews it after a third, so it may be away for two thirds before the credential lapses.")
	f.BoolVar(&o.TakeOver, "take-over", false, "Join a member cluster another hub cluster joined (after that hub cluster was lost): its credential chain ends, and every token of that hub with it. Without it join refuses such a cluster.")
	f.BoolVar(&dryRun, "dry-run", false, "Print every object join would write, and write nothing.")
	f.BoolVar(&o.Wait, "wait", true, "Wait until the hub reports the cluster engaged and its spoke alive.")
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "How long to wait for each step.")
	kn.bind(f)
	clusterCmd.AddCommand(cmd)
}

// externalSpoke reads --spoke: deploy (the spoke runs in the member
// cluster) or external.
func externalSpoke(mode string) (bool, error) {
	switch mode {
	case "deploy":
		return false, nil
	case "external":
		return true, nil
	}
	return false, fmt.Errorf("--spoke %q: want deploy or external", mode)
}

// parseLabels reads the --label KEY=VALUE flags.
func parseLabels(labels []string) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want KEY=VALUE", l)
		}
		out[k] = v
	}
	return out, nil
}

func init() {
	var hub, member kubeFlags
	var o install.UnjoinOptions
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "unjoin NAME --kubeconfig-member FILE",
		Short: "Remove a member cluster from the hub and what join installed there",
		Long: `unjoin deletes the hub's registration of NAME and waits for the hub to revoke
NAME's gossip identity (the hub then rotates the spokes' gossip key, so that
what NAME kept lets it neither join the gossip ring nor speak as any cluster
there), then deletes in the member cluster the
hub's ServiceAccount (its token stops working), the spoke, what the spoke and
the hub kept there for etcdfed (the spoke's Leases and EtcdSpoke, the rings'
DNS zones, certificates of members gone), the zone labels join set, and the
CRDs and the ring namespace when nothing else is left in them.

It never deletes a member's data or a live member's objects: while the
cluster hosts members of a ring it refuses, names them, and prints the
command that cordons the cluster so the hub moves them away. Volumes of
members that lived there are kept and listed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Hub, o.Member, err = hubAndMember(hub, member); err != nil {
				return err
			}
			o.Name = args[0]
			if dryRun {
				o.DryRun = cmd.OutOrStdout()
			}
			o.Progress = progressPrinter(cmd.OutOrStdout())
			return install.Unjoin(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	hub.bindHub(f)
	member.bindMember(f)
	f.BoolVar(&dryRun, "dry-run", false, "Print what unjoin would delete, and delete nothing.")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "How long to wait for the spoke to stop and the hub's token to be refused.")
	clusterCmd.AddCommand(cmd)
}

func init() {
	var hub kubeFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the member clusters registered with the hub and how the hub sees them",
		Long: `list shows every member cluster registered in the hub: its apiserver, whether
the hub holds a synced connection to it (ENGAGED) and sees its spoke's Lease
renewed (SPOKE), as the hub last wrote on the registration, when the hub's
token there expires (the member cluster's spoke mints the next one and seals
it to the hub; a cluster joined before that shows "self-renewing": join it
again to end the hub's self-renewal), and the ring members placed there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := hub.config("hub")
			if err != nil {
				return err
			}
			cs, err := install.List(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return printClusters(cmd.OutOrStdout(), cs, time.Now())
		},
	}
	hub.bindHub(cmd.Flags())
	clusterCmd.AddCommand(cmd)
}

func printClusters(w io.Writer, cs []install.Cluster, now time.Time) error {
	if len(cs) == 0 {
		_, err := fmt.Fprintf(w, "No member cluster is registered in the hub's %s: etcdfed cluster join NAME --kubeconfig-member FILE\n", install.Namespace)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSERVER\tENGAGED\tSPOKE\tCREDENTIAL\tMEMBERS\tPROBLEM")
	for _, c := range cs {
		engaged, spoke := "?", "?"
		if c.Reported {
			engaged, spoke = fmt.Sprint(c.Status.Engaged), c.Status.Spoke
		}
		cred := "not etcdfed's"
		if !c.Expires.IsZero() {
			if left := c.Expires.Sub(now); left > 0 {
				cred = "expires in " + left.Truncate(time.Minute).String()
			} else {
				cred = "EXPIRED (join again)"
			}
		}
		if c.SelfRenewing {
			// Issue 37: joined before the spoke sealed the hub's tokens.
			cred += ", self-renewing (join again to end the hub's self-renewal)"
		}
		members := strings.Join(c.Members, ",")
		if members == "" {
			members = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Server, engaged, spoke, cred, members, c.Status.Problem)
	}
	return tw.Flush()
}

func init() {
	var hub kubeFlags
	var o install.HubInstallOptions
	var kn knobs
	var mode string
	var dryRun bool
	hubCmd := &cobra.Command{Use: "hub", Short: "Install the hub"}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install or upgrade the hub in the hub cluster",
		Long: `install puts the hub into the hub cluster: the etcdfed CRDs, the namespace
etcdfed-system, the hub's ServiceAccount and RBAC (config/rbac/hub), its
Deployment (config/hub) with the knobs below, the ring's gossip key, and a
RoleBinding in each --etcdcluster-namespace so the hub may keep its Secrets
and events there. It waits until the hub runs. A second run with the same
flags changes nothing; --dry-run prints every object and writes nothing.

--hub external installs everything but the Deployment: for a hub run outside
the cluster (the local environment).

--shard NAME installs the hub of one shard of the rings, beside the others
on the same member clusters, spokes, gossip and DNS: its Deployment is
etcdfed-hub-NAME, its leader-election Lease etcdfed-hub-NAME, and it owns
the EtcdClusters --shard-selector selects (by default those labelled
etcdfed.dev/shard=NAME). The first shard's install replaces the unsharded
hub's Deployment; another shard's leaves the others alone. Label every
ring for a shard first: a ring no shard selects is served by none. Give the
fleet's duties (--fleet-duties) to one shard.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Knobs = kn.get()
			if _, err := shard.Parse(o.Shard.Name, o.Shard.Selector); err != nil {
				return err
			}
			switch mode {
			case "deploy":
			case "external":
				o.External = true
			default:
				return fmt.Errorf("--hub %q: want deploy or external", mode)
			}
			var err error
			if o.Hub, err = hub.config("hub"); err != nil {
				return err
			}
			if dryRun {
				o.DryRun = cmd.OutOrStdout()
			}
			o.Progress = progressPrinter(cmd.OutOrStdout())
			return install.InstallHub(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	hub.bindHub(f)
	f.StringVar(&mode, "hub", "deploy", "deploy: run the hub in the cluster; external: the hub runs elsewhere (install everything else).")
	f.BoolVar(&o.MetricsService, "metrics-service", true, "A Service in front of the hub's metrics port, for Prometheus (config/components/hub-metrics).")
	f.StringArrayVar(&o.MetricsReaders, "metrics-reader", nil, "Who may read the hub's /metrics: NAMESPACE/NAME (a ServiceAccount, e.g. monitoring/prometheus), user:NAME or group:NAME; repeatable. None: every caller is refused.")
	f.BoolVar(&o.PrometheusOperator, "prometheus-operator", false, "A ServiceMonitor and the shipped alerts as a PrometheusRule (needs the Prometheus Operator's CRDs).")
	f.StringArrayVar(&o.EtcdClusterNamespaces, "etcdcluster-namespace", nil, "A namespace that will hold EtcdClusters (the hub gets a RoleBinding there); repeatable.")
	f.BoolVar(&dryRun, "dry-run", false, "Print every object install would write, and write nothing.")
	f.BoolVar(&o.Wait, "wait", true, "Wait until the hub's Deployment has rolled out.")
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "How long to wait.")
	f.StringVar(&o.Shard.Name, "shard", "", "Install the hub of this shard of the rings (Deployment and Lease etcdfed-hub-NAME) beside the other shards' hubs; empty: one hub owns every ring.")
	f.StringVar(&o.Shard.Selector, "shard-selector", "", "Label selector over EtcdClusters choosing the shard's rings (the hub's --shard-selector); empty: etcdfed.dev/shard=NAME. Shards' selectors must not overlap.")
	f.BoolVar(&o.Shard.FleetDuties, "fleet-duties", true, "With --shard: this shard's hub also keeps the EtcdSpokes' gossip peers and the registration Secrets' tokens (the hub's --fleet-duties); give them to one shard, false on the others.")
	kn.bind(f)
	hubCmd.AddCommand(cmd)
	root.AddCommand(hubCmd)
}
