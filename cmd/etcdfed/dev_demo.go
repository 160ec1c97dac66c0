package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/internal/clusterstatus"
	"github.com/etcdfed/etcdfed/internal/scheme"
	"github.com/etcdfed/etcdfed/internal/text"
)

// The demo EtcdCluster `etcdfed dev up` creates in the hub.
const (
	demoName      = "demo"
	demoNamespace = "default"
	demoDomain    = "demo.etcdfed.test"
)

// ringFlags pick the EtcdCluster of `dev env` and `dev etcdctl`.
var ringFlags struct {
	name, namespace string
}

func bindRingFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&ringFlags.name, "cluster", "", "EtcdCluster to use (default: "+demoName+", or the only one)")
	cmd.Flags().StringVar(&ringFlags.namespace, "cluster-namespace", demoNamespace, "namespace of the EtcdCluster in the hub")
}

func hubClientFromState(st *localenv.State) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", st.KubeconfigPath(localenv.HubClusterName))
	if err != nil {
		return nil, fmt.Errorf("hub kubeconfig: %w", err)
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// demoCluster is the demo EtcdCluster's spec. Where the local environment
// cannot give pods their own source address (sharedSource says why), every
// peer connects from 127.0.0.1, so etcd's check of a peer's source IP
// against its certificate must be off.
func demoCluster(members int, version, sharedSource string) *etcdfedv1.EtcdCluster {
	return &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: demoName},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: int32(members),
			Version:  version,
			DNS:      etcdfedv1.DNSSpec{Domain: demoDomain, TTLSeconds: ptr[int32](5)},
			TLS:      etcdfedv1.TLSSpec{PeerSkipClientSANVerification: sharedSource != ""},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// runDemo creates the demo EtcdCluster (unless it exists), shows progress
// until it is Available with every member ready, then prints its status
// and how to use it. sharedSource is the environment's
// SharedSourceAddress.
func runDemo(ctx context.Context, out io.Writer, st *localenv.State, members int, version, sharedSource string, timeout time.Duration) error {
	if members <= 0 {
		return nil
	}
	if bin, err := binDir(); err != nil || !isExecutable(filepath.Join(bin, "hub")) {
		fmt.Fprintln(out, "\nNo hub runs (bin/hub missing: make build), so no demo EtcdCluster was created.")
		return nil
	}
	c, err := hubClientFromState(st)
	if err != nil {
		return err
	}
	ec := demoCluster(members, version, sharedSource)
	switch err := c.Create(ctx, ec); {
	case apierrors.IsAlreadyExists(err):
		fmt.Fprintf(out, "\nEtcdCluster %s/%s exists (its spec.version stays as it is); waiting for it.\n", demoNamespace, demoName)
	case err != nil:
		return fmt.Errorf("create the demo EtcdCluster: %w", err)
	default:
		fmt.Fprintf(out, "\nCreated EtcdCluster %s/%s: %d members of etcd %s over %d member clusters, domain %s.\n", demoNamespace, demoName, members, version, len(st.MemberClusters), demoDomain)
		if ec.Spec.TLS.PeerSkipClientSANVerification {
			fmt.Fprintln(out, "Warning: it sets spec.tls.peerSkipClientSANVerification: true, because here every pod connects from 127.0.0.1 and etcd would reject each peer whose certificate does not name that address. Peers still present certificates from the ring's CA; only the address check is off.")
		}
	}
	ec, err = followCluster(ctx, out, c, client.ObjectKey{Namespace: demoNamespace, Name: demoName}, timeout)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	if err := clusterstatus.Render(out, ec, time.Now()); err != nil {
		return err
	}
	self := "etcdfed"
	if exe, err := os.Executable(); err == nil {
		self = exe
	}
	fmt.Fprint(out, demoHints(self, st))
	return nil
}

// demoHints are the commands the demo suggests once its ring is ready.
// With real nodes the hub's apiserver is reached from the environment's
// network only, so etcdfed status and the drill run inside it (dev
// shell): from the host, the apiserver's address is not this machine's
// and would go out by the default route.
func demoHints(self string, st *localenv.State) string {
	sd := shellQuote(st.Dir)
	status := "%[1]s status %[3]s --kubeconfig %[4]s"
	drill := "%[1]s drill zone-failure --cluster %[5]s/%[3]s --zone zone-1 --mode kill --kubeconfig %[4]s"
	if st.Real() {
		inside := "%[1]s dev shell --state-dir %[2]s -- "
		status, drill = inside+status, inside+drill
	}
	return fmt.Sprintf(`
Use it (names resolve through the ring's DNS, with a client certificate; your resolver is not touched):
  %[1]s dev etcdctl --state-dir %[2]s -- member list -w table
  %[1]s dev etcdctl --state-dir %[2]s -- put hello world
  %[1]s dev etcdctl --state-dir %[2]s -- endpoint status -w table
Drill a zone failure under a checked client workload, with a report (about 2.5 minutes: the zone grace is 2 minutes):
  `+drill+`
Or by hand:
  %[1]s dev fail-zone zone-1 --state-dir %[2]s; `+status+`
`, self, sd, demoName, shellQuote(st.KubeconfigPath(localenv.HubClusterName)), demoNamespace)
}

// followCluster prints a line whenever the EtcdCluster's progress changes
// and returns once it is Available with every member ready and no change in
// flight.
func followCluster(ctx context.Context, out io.Writer, c client.Client, key client.ObjectKey, timeout time.Duration) (*etcdfedv1.EtcdCluster, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	last := ""
	for {
		ec := &etcdfedv1.EtcdCluster{}
		if err := c.Get(ctx, key, ec); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("EtcdCluster %s not ready after %s", key, timeout)
			}
		} else {
			line := progressLine(ec)
			if line != last {
				fmt.Fprintf(out, "[%6.1fs] %s\n", time.Since(start).Seconds(), line)
				last = line
			}
			st := ec.Status
			if meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionAvailable) &&
				meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionAllMembersReady) && st.Operation == nil {
				return ec, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("EtcdCluster %s not ready after %s: %s", key, timeout, last)
		case <-time.After(time.Second):
		}
	}
}

func progressLine(ec *etcdfedv1.EtcdCluster) string {
	st := ec.Status
	parts := []string{fmt.Sprintf("%s: %s members ready", ec.Name, orDash(st.MemberSummary))}
	if st.ZoneSummary != "" {
		parts = append(parts, "zones "+st.ZoneSummary)
	}
	if op := st.Operation; op != nil {
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s %s", op.Type, op.Member))+": "+op.Step)
	} else if c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionProgressing); c != nil && c.Reason == etcdfedv1.ReasonWaiting {
		parts = append(parts, "waiting: "+c.Message)
	}
	if meta.IsStatusConditionTrue(st.Conditions, etcdfedv1.ConditionAvailable) {
		parts = append(parts, "available")
	}
	// The spokes found in etcd's logs why members cannot connect.
	if c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue &&
		slices.Contains(etcdfedv1.PeerConnectionProblems, c.Reason) {
		parts = append(parts, "blocked: "+text.Truncate(c.Message, 700))
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// findRing returns the EtcdCluster ringFlags name, or the demo one, or the
// only one in the namespace.
func findRing(ctx context.Context, c client.Client) (*etcdfedv1.EtcdCluster, error) {
	name := ringFlags.name
	if name == "" {
		var list etcdfedv1.EtcdClusterList
		if err := c.List(ctx, &list, client.InNamespace(ringFlags.namespace)); err != nil {
			return nil, fmt.Errorf("list EtcdClusters: %w", err)
		}
		switch {
		case len(list.Items) == 0:
			return nil, nil
		case len(list.Items) == 1:
			return &list.Items[0], nil
		}
		name = demoName
	}
	ec := &etcdfedv1.EtcdCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ringFlags.namespace, Name: name}, ec); err != nil {
		if apierrors.IsNotFound(err) && ringFlags.name == "" {
			return nil, errors.New("several EtcdClusters and none is named " + demoName + ": pick one with --cluster")
		}
		return nil, err
	}
	return ec, nil
}

func init() {
	// The ring part of `dev env`: endpoints and a client certificate kept
	// under <state>/ring/<namespace>-<name>/.
	ringEnv = func(ctx context.Context, st *localenv.State) ([]envVar, error) {
		c, err := hubClientFromState(st)
		if err != nil {
			return nil, err
		}
		ec, err := findRing(ctx, c)
		if err != nil || ec == nil {
			return nil, err
		}
		vars := []envVar{{"ETCDCTL_ENDPOINTS", strings.Join(ec.Status.Endpoints, ",")}}
		if ec.Spec.TLS.Mode == etcdfedv1.TLSDisabled {
			return vars, nil
		}
		dir, err := ringCerts(ctx, c, st, ec)
		if err != nil {
			return nil, err
		}
		return append(vars,
			envVar{"ETCDCTL_CACERT", filepath.Join(dir, pki.FileCA)},
			envVar{"ETCDCTL_CERT", filepath.Join(dir, pki.FileClientCert)},
			envVar{"ETCDCTL_KEY", filepath.Join(dir, pki.FileClientKey)}), nil
	}
	bindRingFlags(devEnvCmd)

	cmd := &cobra.Command{
		Use:   "etcdctl -- ARGS...",
		Short: "Run etcdctl against the local ring (its DNS names, a client certificate)",
		Long: `etcdctl runs bin/etcdctl (built from go.etcd.io/etcd/etcdctl at the pinned
version) with the ring's endpoints, a client certificate issued from the
EtcdCluster's CA, and ETCDFED_DNS_SERVERS so that member names resolve
through the ring's DNS servers without touching this machine's resolver.

  etcdfed dev etcdctl -- member list -w table
  etcdfed dev etcdctl -- put hello world
  etcdfed dev etcdctl -- get hello`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := loadState()
			if err != nil {
				return err
			}
			ring, err := ringEnv(cmd.Context(), st)
			if err != nil {
				return err
			}
			if len(ring) == 0 {
				return errors.New("no EtcdCluster in the hub yet (etcdfed dev up creates the demo one)")
			}
			bin, err := binDir()
			if err != nil {
				return err
			}
			ctl := exec.CommandContext(cmd.Context(), filepath.Join(bin, "etcdctl"), args...)
			ctl.Stdin, ctl.Stdout, ctl.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctl.Env = append(os.Environ(), "ETCDFED_DNS_SERVERS="+strings.Join(st.DNSServers(), ","))
			for _, v := range ring {
				ctl.Env = append(ctl.Env, v.Name+"="+v.Value)
			}
			return ctl.Run()
		},
	}
	bindRingFlags(cmd)
	devCmd.AddCommand(cmd)
}

// ringCerts writes the CA and a client certificate for ec under the state
// directory, reusing them while they are valid and from the current CA.
func ringCerts(ctx context.Context, c client.Client, st *localenv.State, ec *etcdfedv1.EtcdCluster) (string, error) {
	dir := filepath.Join(st.Dir, "ring", ec.Namespace+"-"+ec.Name)
	ca, err := pki.ReadCA(ctx, c, ec)
	if err != nil {
		return "", err
	}
	if old, err := os.ReadFile(filepath.Join(dir, pki.FileClientCert)); err == nil {
		if renew, _ := ca.NeedsRenewal(old, nil, time.Now()); !renew && pki.CommonName(old) == etcdfedv1.EtcdRootUser {
			return dir, nil
		}
	}
	// Root: with etcd authentication on, a common name no spec.clients
	// entry declares reads and writes nothing.
	leaf, err := ca.IssueClient(etcdfedv1.EtcdRootUser, time.Now())
	if err != nil {
		return "", err
	}
	if err := pki.WriteClientFiles(dir, ca.CertPEM, leaf); err != nil {
		return "", err
	}
	return dir, nil
}
