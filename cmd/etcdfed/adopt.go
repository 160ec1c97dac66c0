package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// adoptFlags are the flags of `etcdfed adopt NAME` that create the
// adoption (all but --retire, --wait and the hub's).
type adoptFlags struct {
	endpoints              []string
	caCert, caKey          string
	clientCert, clientKey  string
	replicas               int32
	version, domain        string
	clusters               []string
	auth                   string
	peerSkipSAN, retireNow bool
	caSecret, clientSecret string
}

// adoptCreateFlags name the flags that only creation takes, for the
// refusal of --retire beside them.
var adoptCreateFlags = []string{"endpoints", "ca-cert", "ca-key", "client-cert", "client-key", "replicas", "etcd-version", "domain",
	"clusters", "auth", "peer-skip-client-san-verification", "retire-when-joined", "ca-secret", "client-secret", "dry-run", "check-etcd"}

// adoptCmd holds the flags of `etcdfed adopt`.
type adoptCmd struct {
	hub                             hubFlags
	f                               adoptFlags
	retire, wait, dryRun, checkEtcd bool
	timeout                         time.Duration
}

func init() {
	var a adoptCmd
	cmd := &cobra.Command{
		Use:   "adopt NAME --endpoints URL,... --ca-cert FILE --ca-key FILE --etcd-version V --domain D --auth Enabled|Disabled",
		Short: "Take an etcd cluster etcdfed did not create into a ring it manages (spec.adopt), and later retire its original members",
		Long: `adopt creates the EtcdCluster NAME with spec.adopt, and the Secrets it
names, for an etcd cluster that runs outside etcdfed (kubeadm's static pods,
a StatefulSet, plain processes). The hub then joins spec.replicas members of
its own to the running cluster, one at a time (a learner, caught up,
promoted), keeping its data and cluster ID (docs/adoption.md).

  --ca-cert, --ca-key          the existing cluster's CA (kubeadm:
                               /etc/kubernetes/pki/etcd/ca.crt and ca.key); it
                               becomes the ring's CA (Secret NAME-adopted-ca,
                               spec.tls.caSecretName), so that the original
                               members trust the new ones.
  --client-cert, --client-key  a client certificate of that CA whose common
                               name is an etcd user with the root role (Secret
                               NAME-adopt-client, spec.adopt.clientSecretName).
                               Needed only when the existing cluster has etcd
                               authentication on: otherwise the hub issues its
                               own from the CA (user etcdfed-hub), which etcd
                               does not know yet.
  --auth                       Enabled turns etcd authentication on (or keeps
                               it on): clients of the old endpoints whose
                               certificate's common name is neither root nor a
                               spec.clients user lose access. Disabled turns
                               it off. There is no default: choose.
  --etcd-version               the version the originals run (or the next
                               minor): the hub checks it against what they
                               report before anything joins.

--check-etcd also dials the endpoints from where the command runs, as the
hub will, and refuses an adoption the hub would stall on: the cluster does
not answer, has authentication on while no root client certificate is
given, or runs a version spec.version cannot join (the hub's own check,
docs/adoption.md). Without --client-cert it dials with a certificate for
the hub's user issued for the check, valid 10 minutes and stored nowhere.
Without --check-etcd nothing is dialled: the hub, not this machine, must
reach the endpoints.

Everything is checked before anything is written: the files are read and
parsed, each key must match its certificate, the CA must be a CA, the client
certificate must be issued by it for client use, every endpoint must be an
https:// URL, and neither the EtcdCluster nor a Secret of the same name may
exist; then the apiserver validates every object in a dry run. Nothing is
written when a check fails. --dry-run runs every check and prints the
objects as YAML (the CA's private key included, as kubectl does) instead of
creating them.

Follow the adoption with 'etcdfed status NAME' (or --wait). Once it is
Joined (every etcdfed member a voter beside the originals) and your clients
have the ring's endpoints (status.endpoints), retire the originals, one at a
time, the leader last:

  etcdfed adopt NAME --retire

which sets spec.adopt.retire (--retire-when-joined sets it at creation).`,
		Example: `  etcdfed adopt main -n etcd --endpoints https://10.0.0.5:2379,https://10.0.0.6:2379,https://10.0.0.7:2379 \
      --ca-cert ca.crt --ca-key ca.key --etcd-version 3.6.16 --domain main.etcd.example.com \
      --replicas 5 --clusters member-1,member-2,member-3 --auth Disabled --wait
  # authentication already on in the existing cluster: give the hub root's certificate
  etcdfed adopt main -n etcd --endpoints https://10.0.0.5:2379 --ca-cert ca.crt --ca-key ca.key \
      --client-cert root.crt --client-key root.key --etcd-version 3.6.16 --domain main.etcd.example.com --auth Enabled
  # once Joined and the clients have the ring's endpoints:
  etcdfed adopt main -n etcd --retire --wait`,
		Args: cobra.ExactArgs(1),
		RunE: a.run,
	}
	a.bind(cmd.Flags())
	root.AddCommand(cmd)
}

// bind defines the command's flags on fs.
func (a *adoptCmd) bind(fs *pflag.FlagSet) {
	a.hub.bind(fs)
	fs.StringSliceVar(&a.f.endpoints, "endpoints", nil, "Client URLs of every original member as the hub reaches them, https:// (spec.adopt.endpoints).")
	fs.StringVar(&a.f.caCert, "ca-cert", "", "File with the existing cluster's CA certificate (PEM).")
	fs.StringVar(&a.f.caKey, "ca-key", "", "File with the existing cluster's CA key (PEM).")
	fs.StringVar(&a.f.clientCert, "client-cert", "", "File with a client certificate of the CA for an etcd user with the root role (PEM); when the existing cluster has authentication on.")
	fs.StringVar(&a.f.clientKey, "client-key", "", "File with the key of --client-cert (PEM).")
	fs.Int32Var(&a.f.replicas, "replicas", 3, "etcdfed members the ring has once adopted (odd, 1 to 9; spec.replicas).")
	fs.StringVar(&a.f.version, "etcd-version", "", "etcd version of the ring (spec.version): the one the originals run, or the next minor.")
	fs.StringVar(&a.f.domain, "domain", "", "DNS domain of the ring's member names (spec.dns.domain); the originals must resolve it.")
	fs.StringSliceVar(&a.f.clusters, "clusters", nil, "Member clusters that may host the ring's members (spec.topology.clusters; default: every registered one).")
	fs.StringVar(&a.f.auth, "auth", "", "etcd authentication once adopted: Enabled or Disabled (spec.tls.auth; required).")
	fs.BoolVar(&a.f.peerSkipSAN, "peer-skip-client-san-verification", false, "Peer connections pass NAT or a load balancer (spec.tls.peerSkipClientSANVerification); start the originals with it too.")
	fs.BoolVar(&a.f.retireNow, "retire-when-joined", false, "Retire the originals as soon as every etcdfed member is a voter (spec.adopt.retire at creation).")
	fs.StringVar(&a.f.caSecret, "ca-secret", "", "Name of the CA Secret to create (default NAME-adopted-ca).")
	fs.StringVar(&a.f.clientSecret, "client-secret", "", "Name of the client certificate's Secret to create (default NAME-adopt-client).")
	fs.BoolVar(&a.checkEtcd, "check-etcd", false, "Before writing anything, dial the endpoints from here as the hub will (the client certificate, or one issued now from the CA for etcdfed-hub, valid 10 minutes) and refuse what the hub would stall on: no answer, authentication on without a root client certificate, originals on a version spec.version cannot join.")
	fs.BoolVar(&a.dryRun, "dry-run", false, "Check everything, the apiserver's validation included, and print the objects instead of creating them.")
	fs.BoolVar(&a.retire, "retire", false, "Retire the originals of the adoption NAME under way (sets spec.adopt.retire).")
	fs.BoolVar(&a.wait, "wait", false, "Follow the adoption until it is Joined (with --retire or --retire-when-joined: Complete).")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Minute, "With --wait: give up waiting after this long.")
}

// run creates the adoption NAME (or, with --retire, retires its
// originals) and with --wait follows it to the phase asked for.
func (a *adoptCmd) run(cmd *cobra.Command, args []string) error {
	out := cmd.OutOrStdout()
	if a.retire {
		if err := refuseCreateFlags(cmd); err != nil {
			return err
		}
	}
	c, ns, err := a.hub.client()
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: args[0]}
	until := etcdfedv1.AdoptionJoined
	if a.retire {
		if err := retireAdoption(cmd.Context(), c, key, out); err != nil {
			return err
		}
		until = etcdfedv1.AdoptionComplete
	} else {
		objs, err := a.f.objects(key)
		if err != nil {
			return err
		}
		if a.checkEtcd {
			if err := objs.checkEtcd(cmd.Context(), out); err != nil {
				return err
			}
		}
		if err := objs.create(cmd.Context(), c, a.dryRun, out); err != nil || a.dryRun {
			return err
		}
		if a.f.retireNow {
			until = etcdfedv1.AdoptionComplete
		}
	}
	if !a.wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
	defer cancel()
	return waitAdoptionPhase(ctx, c, key, until, time.Second, out)
}

// refuseCreateFlags refuses, beside --retire, the flags that create an
// adoption.
func refuseCreateFlags(cmd *cobra.Command) error {
	var set []string
	for _, n := range adoptCreateFlags {
		if cmd.Flags().Changed(n) {
			set = append(set, "--"+n)
		}
	}
	if len(set) > 0 {
		return fmt.Errorf("--retire changes an adoption under way and takes no %s: those create one", strings.Join(set, ", "))
	}
	return nil
}

// retireAdoption sets spec.adopt.retire of the adoption key, unless it is
// no adoption or already set.
func retireAdoption(ctx context.Context, c client.Client, key client.ObjectKey, out io.Writer) error {
	ec := &etcdfedv1.EtcdCluster{}
	if err := c.Get(ctx, key, ec); err != nil {
		return fmt.Errorf("get EtcdCluster %s: %w", key, err)
	}
	if err := retireRefusal(ec); err != nil {
		return err
	}
	before := ec.DeepCopy()
	ec.Spec.Adopt.Retire = true
	if err := c.Patch(ctx, ec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("set spec.adopt.retire of EtcdCluster %s: %w", key, err)
	}
	phase := "not found yet"
	if a := ec.Status.Adoption; a != nil && a.Summary != "" {
		phase = a.Summary
	}
	fmt.Fprintf(out, "Set spec.adopt.retire of EtcdCluster %s (adoption %s): the originals are removed one at a time, the leader last, once every etcdfed member is a ready voter; each old endpoint stops with its member.\n", key, phase)
	return nil
}

// retireRefusal says why the originals of ec cannot be retired through
// `--retire`, nil when they can.
func retireRefusal(ec *etcdfedv1.EtcdCluster) error {
	name := ec.Namespace + "/" + ec.Name
	a := ec.Status.Adoption
	switch {
	case ec.Spec.Adopt == nil:
		return fmt.Errorf("EtcdCluster %s adopts nothing (no spec.adopt): it has no original members to retire", name)
	case a != nil && a.Phase == etcdfedv1.AdoptionComplete:
		return fmt.Errorf("EtcdCluster %s's adoption is complete: every original member is retired already", name)
	case ec.Spec.Adopt.Retire:
		return fmt.Errorf("EtcdCluster %s already retires its originals (spec.adopt.retire is true; adoption %s)", name, adoptionSummary(a))
	}
	return nil
}

func adoptionSummary(a *etcdfedv1.AdoptionStatus) string {
	if a == nil || a.Summary == "" {
		return "not started"
	}
	return a.Summary
}

// waitAdoptionPhase follows the adoption until it reaches phase (Complete
// is reached from any phase; Joined also counts as reached by Retiring
// and Complete) with no operation in flight.
func waitAdoptionPhase(ctx context.Context, c client.Client, key client.ObjectKey, phase etcdfedv1.AdoptionPhase, every time.Duration, out io.Writer) error {
	order := []etcdfedv1.AdoptionPhase{etcdfedv1.AdoptionConnecting, etcdfedv1.AdoptionJoining, etcdfedv1.AdoptionJoined, etcdfedv1.AdoptionRetiring, etcdfedv1.AdoptionComplete}
	return follow(ctx, c, key, every, out, "adoption", func(ec *etcdfedv1.EtcdCluster) (string, bool, error) {
		a := ec.Status.Adoption
		if a == nil {
			return "waiting for the hub to take the EtcdCluster", false, nil
		}
		state := a.Summary
		if a.Message != "" {
			state += " (" + a.Message + ")"
		}
		done := slices.Index(order, a.Phase) >= slices.Index(order, phase) && ec.Status.Operation == nil
		return state, done, nil
	})
}
