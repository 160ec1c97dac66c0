package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func init() {
	var hub hubFlags
	var fromMember, fromBackup string
	var allowUnsigned bool
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "recover NAME",
		Short: "Recover an EtcdCluster that lost its quorum, from a surviving member or a backup",
		Long: `recover asks the hub to recover the EtcdCluster NAME from a permanent loss of
quorum. It is refused while the ring has quorum (Available=True). The hub acts
once it has declared the loss (Available=False, reason QuorumLost: a majority
of the voters is gone beyond failurePolicy.memberGracePeriod, the message
names them and the freshest survivor by raft index).

The survivor (--from-member, default the freshest) restarts as a one-member
cluster from its own data (etcd --force-new-cluster), keeping its name, DNS
record and certificate; the members that were gone come back one at a time as
learners under their names with new incarnations. Member names, DNS names and
client endpoints do not change. Nothing the survivor had committed is lost;
writes only the gone members held are.

With --from-backup latest|OBJECT the ring is recovered from a snapshot in
spec.backup.store instead (when no survivor is usable, or none holds what the
backup holds): latest is the newest snapshot of this EtcdCluster, OBJECT a key
as status.backup.lastSuccess.location shows it after the store's URL. The hub
checks the snapshot first (SnapshotVerified, status.restore); then one member
in a member cluster it can see (the first by name) restarts as a new
incarnation restored from it, as a new one-member etcd cluster (a new cluster
ID and token; the revision raised by 1,000,000,000 and marked compacted, so
watchers are told to resync), and the others come back one at a time as new
incarnations under their names. Names, DNS names and endpoints do not change.
Every write after the snapshot is lost: up to the backup schedule.

The command sets the annotation ` + etcdfedv1.AnnotationRecover + `; with --wait it
follows the recovery until the ring answers again with a leader.`,
		Example: `  etcdfed recover main -n team-a --wait
  etcdfed recover main -n team-a --from-member main-2
  etcdfed recover main -n team-a --from-backup latest --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := hub.client()
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: ns, Name: args[0]}
			req := etcdfedv1.RecoveryRequest{FromMember: fromMember, FromBackup: fromBackup, AllowUnsigned: allowUnsigned, RequestedAt: time.Now().UTC().Truncate(time.Second)}
			if err := requestRecovery(cmd.Context(), c, key, req); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			from := "the freshest survivor"
			switch {
			case fromMember != "":
				from = fromMember
			case fromBackup != "":
				from = "backup " + fromBackup
			}
			fmt.Fprintf(out, "Requested recovery of EtcdCluster %s from %s (request at %s).\n", key, from, req.RequestedAt.Format(time.RFC3339))
			if !wait {
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return waitRecovered(ctx, c, key, time.Second, out)
		},
	}
	hub.bind(cmd.Flags())
	cmd.Flags().StringVar(&fromMember, "from-member", "", "The surviving member to recover from (default: the one with the highest raft index).")
	cmd.Flags().StringVar(&fromBackup, "from-backup", "", "Recover from a snapshot in spec.backup.store instead of a survivor: latest, or an object key.")
	cmd.Flags().BoolVar(&allowUnsigned, "allow-unsigned", false, "With --from-backup: restore a snapshot whose sidecar has no MAC the ring's snapshot key checks (one written before etcdfed signed snapshots).")
	cmd.MarkFlagsMutuallyExclusive("from-member", "from-backup")
	cmd.Flags().BoolVar(&wait, "wait", false, "Wait until the ring answers with a leader again.")
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Minute, "With --wait: give up waiting after this long.")
	root.AddCommand(cmd)
}

// requestRecovery checks that the ring has lost its quorum and sets the
// request annotation. A ring with quorum is refused here, at the earliest
// point: --force-new-cluster (or a restore) on a quorate ring would split
// it.
func requestRecovery(ctx context.Context, c client.Client, key client.ObjectKey, req etcdfedv1.RecoveryRequest) error {
	refuse := func(ec *etcdfedv1.EtcdCluster) error { return recoveryRefusal(ec, req) }
	return annotateRequest(ctx, c, key, refuse, etcdfedv1.AnnotationRecover, req.String())
}

// annotateRequest reads the EtcdCluster, asks refuse whether the request
// may be made, and sets annotation to value: how the CLI asks the hub for
// an operation (recover, rotate-ca).
func annotateRequest(ctx context.Context, c client.Client, key client.ObjectKey, refuse func(*etcdfedv1.EtcdCluster) error, annotation, value string) error {
	return annotateRequestFunc(ctx, c, key, func(ec *etcdfedv1.EtcdCluster) (string, error) { return value, refuse(ec) }, annotation)
}

// annotateRequestFunc is annotateRequest with the value built from the
// EtcdCluster read (an error refuses, nothing written).
func annotateRequestFunc(ctx context.Context, c client.Client, key client.ObjectKey, build func(*etcdfedv1.EtcdCluster) (string, error), annotation string) error {
	ec := &etcdfedv1.EtcdCluster{}
	if err := c.Get(ctx, key, ec); err != nil {
		return fmt.Errorf("get EtcdCluster %s: %w", key, err)
	}
	value, err := build(ec)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[annotation] = value
	if err := c.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("annotate EtcdCluster %s: %w", key, err)
	}
	return nil
}

// recoveryRefusal says why a recovery must not be asked of ec, nil when it
// may.
func recoveryRefusal(ec *etcdfedv1.EtcdCluster, req etcdfedv1.RecoveryRequest) error {
	name := ec.Namespace + "/" + ec.Name
	if ec.Status.ClusterID == "" {
		return fmt.Errorf("EtcdCluster %s has not formed yet: there is nothing to recover", name)
	}
	c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionAvailable)
	if c == nil {
		return fmt.Errorf("EtcdCluster %s has no Available condition yet: the hub has not judged it", name)
	}
	if c.Status == metav1.ConditionTrue {
		return fmt.Errorf("refusing to recover EtcdCluster %s: it has quorum (Available=True, %s: %s); recovery restarts one member as a one-member cluster and is only for a ring that lost its quorum", name, c.Reason, c.Message)
	}
	if req.FromMember != "" && req.FromBackup != "" {
		return fmt.Errorf("recover from a member or from a backup, not both")
	}
	if req.FromMember != "" && !slices.ContainsFunc(ec.Status.Members, func(m etcdfedv1.MemberStatus) bool { return m.Name == req.FromMember }) {
		var names []string
		for _, m := range ec.Status.Members {
			names = append(names, m.Name)
		}
		return fmt.Errorf("EtcdCluster %s has no member %q (members: %v)", name, req.FromMember, names)
	}
	if req.FromBackup != "" && ec.Spec.Backup == nil {
		return fmt.Errorf("EtcdCluster %s has no spec.backup: it names the store to recover from; set it (the store holding the snapshots) and ask again", name)
	}
	if ec.Status.Operation != nil && ec.Status.Operation.Type == etcdfedv1.OperationRecover {
		return fmt.Errorf("EtcdCluster %s is already recovering into %s (step %s)", name, ec.Status.Operation.Member, ec.Status.Operation.Step)
	}
	return nil
}

// waitRecovered polls until the ring answers with a leader and no Recover
// is in flight, printing each change of state.
func waitRecovered(ctx context.Context, c client.Client, key client.ObjectKey, every time.Duration, out io.Writer) error {
	return follow(ctx, c, key, every, out, "recovery", func(ec *etcdfedv1.EtcdCluster) (string, bool, error) {
		switch {
		case ec.Status.Operation != nil && ec.Status.Operation.Type == etcdfedv1.OperationRecover:
			return fmt.Sprintf("recovering from %s: %s (%s)", ec.Status.Operation.Member, ec.Status.Operation.Step, ec.Status.Operation.Message), false, nil
		case meta.IsStatusConditionTrue(ec.Status.Conditions, etcdfedv1.ConditionAvailable):
			return fmt.Sprintf("etcd answers with a leader (%s); members: %s", ec.Status.Leader, ec.Status.MemberSummary), true, nil
		}
		if a := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionAvailable); a != nil {
			return fmt.Sprintf("waiting: %s: %s", a.Reason, a.Message), false, nil
		}
		return "", false, nil
	})
}

// follow polls the EtcdCluster every interval, printing each new state
// look reports with the time since the start, until look says done (its
// last state printed) or fails, or ctx ends (an error naming what, the
// time waited and the last state).
func follow(ctx context.Context, c client.Client, key client.ObjectKey, every time.Duration, out io.Writer, what string,
	look func(*etcdfedv1.EtcdCluster) (state string, done bool, err error)) error {
	start := time.Now()
	last := ""
	for {
		ec := &etcdfedv1.EtcdCluster{}
		state, done := "", false
		if err := c.Get(ctx, key, ec); err != nil {
			state = "cannot read the EtcdCluster: " + err.Error()
		} else {
			var lerr error
			if state, done, lerr = look(ec); lerr != nil {
				return lerr
			}
		}
		if state != last || done {
			fmt.Fprintf(out, "  %5.1fs  %s\n", time.Since(start).Seconds(), state)
			last = state
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s of %s not finished after %s (%s): %w", what, key, time.Since(start).Round(time.Second), last, ctx.Err())
		case <-time.After(every):
		}
	}
}
