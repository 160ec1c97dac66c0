package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// recoverCmd holds the flags of `etcdfed recover`.
type recoverCmd struct {
	hub                                   hubFlags
	fromMember, fromBackup, confirmFenced string
	allowUnsigned, wait                   bool
	timeout                               time.Duration
}

func init() {
	var r recoverCmd
	cmd := &cobra.Command{
		Use:   "recover NAME --confirm-fenced MEMBERS",
		Short: "Recover an EtcdCluster that lost its quorum, from a surviving member or a backup",
		Long: `recover asks the hub to recover the EtcdCluster NAME from a permanent loss of
quorum. It is refused while the ring has quorum (Available=True). The hub acts
once it has declared the loss (Available=False, reason QuorumLost: fewer than a
quorum of the voters answer, beyond failurePolicy.memberGracePeriod).

Forcing a new cluster beside a majority that still serves splits the ring: two
clusters answer under the same names, and the writes of one are lost. The hub
cannot tell a dead member from one it is cut off from, so before a recovery
every voter that is not a survivor must be fenced: stopped for good (its pod
deleted and kept from starting: its member cluster powered off, its spoke and
pod stopped) or cut off from clients and peers for good. Without
--confirm-fenced the command shows those members (status.quorumLoss.mustFence)
and refuses; with --confirm-fenced NAMES (comma separated, naming each of
them) it records the confirmation (annotation ` + etcdfedv1.AnnotationFenced + `) and
the request. Members whose own cluster shows their data lost need no fencing.

The survivor (--from-member, default the freshest) restarts as a one-member
cluster from its own data (etcd --force-new-cluster), keeping its name, DNS
record and certificate; the members that were gone come back one at a time as
learners under their names with new incarnations. Member names, DNS names and
client endpoints do not change. Nothing the survivor had committed is lost;
writes only the gone members held are. The old incarnations' volumes are kept
until you delete them (an event names each, with the revision it held).

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

The command sets the annotation ` + etcdfedv1.AnnotationRecover + ` (with a uid: the hub acts
on a request once, and refuses one dated in the future); with --wait it
follows the recovery until the ring answers again with a leader.`,
		Example: `  etcdfed recover main -n team-a                                    # shows whom to fence
  etcdfed recover main -n team-a --confirm-fenced main-1,main-2 --wait
  etcdfed recover main -n team-a --from-member main-0 --confirm-fenced main-1,main-2
  etcdfed recover main -n team-a --from-backup latest --confirm-fenced main-1,main-2 --wait`,
		Args: cobra.ExactArgs(1),
		RunE: r.run,
	}
	r.hub.bind(cmd.Flags())
	cmd.Flags().StringVar(&r.fromMember, "from-member", "", "The surviving member to recover from (default: the one with the highest raft index).")
	cmd.Flags().StringVar(&r.fromBackup, "from-backup", "", "Recover from a snapshot in spec.backup.store instead of a survivor: latest, or an object key.")
	cmd.Flags().BoolVar(&r.allowUnsigned, "allow-unsigned", false, "With --from-backup: restore a snapshot whose sidecar has no MAC the ring's snapshot key checks (one written before etcdfed signed snapshots).")
	cmd.MarkFlagsMutuallyExclusive("from-member", "from-backup")
	cmd.Flags().StringVar(&r.confirmFenced, "confirm-fenced", "", "Confirm that these members (comma separated: every member the hub lists as to be fenced) are stopped for good or cut off, so that forcing a new cluster splits nothing.")
	cmd.Flags().BoolVar(&r.wait, "wait", false, "Wait until the ring answers with a leader again.")
	cmd.Flags().DurationVar(&r.timeout, "timeout", 15*time.Minute, "With --wait: give up waiting after this long.")
	root.AddCommand(cmd)
}

// run records the fencing confirmation and the recovery request, and with
// --wait follows the recovery until the ring has a leader again.
func (r *recoverCmd) run(cmd *cobra.Command, args []string) error {
	fenced, err := splitNames(r.confirmFenced)
	if err != nil {
		return err
	}
	c, ns, err := r.hub.client()
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: args[0]}
	now := time.Now().UTC().Truncate(time.Second)
	req := etcdfedv1.RecoveryRequest{FromMember: r.fromMember, FromBackup: r.fromBackup, AllowUnsigned: r.allowUnsigned, RequestedAt: now, UID: string(uuid.NewUUID())}
	out := cmd.OutOrStdout()
	confirmed, err := requestRecovery(cmd.Context(), c, key, req, fenced, now)
	if err != nil {
		return err
	}
	from := "the freshest survivor"
	switch {
	case r.fromMember != "":
		from = r.fromMember
	case r.fromBackup != "":
		from = "backup " + r.fromBackup
	}
	if len(confirmed) > 0 {
		fmt.Fprintf(out, "Confirmed fenced: %s.\n", strings.Join(confirmed, ", "))
	}
	fmt.Fprintf(out, "Requested recovery of EtcdCluster %s from %s (request %s at %s).\n", key, from, req.UID, req.RequestedAt.Format(time.RFC3339))
	if !r.wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), r.timeout)
	defer cancel()
	return waitRecovered(ctx, c, key, time.Second, out)
}

// splitNames reads a comma-separated list of member names.
func splitNames(s string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if slices.Contains(out, n) {
				return nil, fmt.Errorf("--confirm-fenced names %s twice", n)
			}
			out = append(out, n)
		}
	}
	return out, nil
}

// requestRecovery checks that the ring has lost its quorum and that every
// member the hub lists as to be fenced is named in fenced, and sets the
// fencing confirmation (when fenced names any) and the request annotation
// in one write. A ring with quorum is refused here, at the earliest point:
// --force-new-cluster (or a restore) on a quorate ring would split it. It
// returns the members confirmed fenced.
func requestRecovery(ctx context.Context, c client.Client, key client.ObjectKey, req etcdfedv1.RecoveryRequest, fenced []string, now time.Time) ([]string, error) {
	var confirmed []string
	err := annotateRequestFunc(ctx, c, key, func(ec *etcdfedv1.EtcdCluster) (map[string]string, error) {
		if err := recoveryRefusal(ec, req); err != nil {
			return nil, err
		}
		f, err := fencingConfirmation(ec, fenced, now)
		if err != nil {
			return nil, err
		}
		values := map[string]string{etcdfedv1.AnnotationRecover: req.String()}
		if f != nil {
			values[etcdfedv1.AnnotationFenced] = f.String()
			for _, m := range f.Members {
				confirmed = append(confirmed, m.Name)
			}
		}
		return values, nil
	})
	if err != nil {
		return nil, err
	}
	return confirmed, nil
}

// fencingConfirmation checks fenced against status.quorumLoss: it must
// name every member to fence, and no survivor or unknown member; it
// returns the confirmation to record (with each member's etcd ID from the
// status, so it holds for that incarnation only), nil when fenced is empty
// and nothing needs fencing.
func fencingConfirmation(ec *etcdfedv1.EtcdCluster, fenced []string, now time.Time) (*etcdfedv1.FencingConfirmation, error) {
	name := ec.Namespace + "/" + ec.Name
	q := ec.Status.QuorumLoss
	var must []etcdfedv1.QuorumMember
	if q != nil {
		must = q.MustFence
	}
	var missing []string
	for _, m := range must {
		if !slices.Contains(fenced, m.Name) {
			missing = append(missing, m.Name)
		}
	}
	if len(missing) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "EtcdCluster %s: before a new cluster is forced, these members must be fenced (stopped for good, or cut off from clients and peers), or they may go on serving a majority the hub cannot see and the ring splits in two:\n", name)
		for _, m := range must {
			fmt.Fprintf(&b, "  %s [%s] in %s: %s\n", m.Name, m.ID, m.Cluster, m.Why)
		}
		all := make([]string, len(must))
		for i, m := range must {
			all[i] = m.Name
		}
		fmt.Fprintf(&b, "Fence them (docs/quorum-loss.md, \"Fencing before a recovery\"), then run again with --confirm-fenced %s", strings.Join(all, ","))
		return nil, errors.New(b.String())
	}
	if len(fenced) == 0 {
		return nil, nil
	}
	f := &etcdfedv1.FencingConfirmation{ConfirmedAt: now, By: "etcdfed recover"}
	for _, n := range fenced {
		if q != nil && slices.ContainsFunc(q.Survivors, func(s etcdfedv1.QuorumMember) bool { return s.Name == n }) {
			return nil, fmt.Errorf("%s answers its spoke with its data: it is a survivor, not a member to fence", n)
		}
		i := slices.IndexFunc(ec.Status.Members, func(m etcdfedv1.MemberStatus) bool { return m.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("EtcdCluster %s has no member %q to confirm fenced", name, n)
		}
		f.Members = append(f.Members, etcdfedv1.FencedMember{Name: n, ID: ec.Status.Members[i].ID})
	}
	return f, nil
}

// annotateRequest reads the EtcdCluster, asks refuse whether the request
// may be made, and sets annotation to value: how the CLI asks the hub for
// an operation (recover, rotate-ca).
func annotateRequest(ctx context.Context, c client.Client, key client.ObjectKey, refuse func(*etcdfedv1.EtcdCluster) error, annotation, value string) error {
	return annotateRequestFunc(ctx, c, key, func(ec *etcdfedv1.EtcdCluster) (map[string]string, error) {
		return map[string]string{annotation: value}, refuse(ec)
	})
}

// annotateRequestFunc is annotateRequest with the annotations built from
// the EtcdCluster read (an error refuses, nothing written), all set in one
// write.
func annotateRequestFunc(ctx context.Context, c client.Client, key client.ObjectKey, build func(*etcdfedv1.EtcdCluster) (map[string]string, error)) error {
	ec := &etcdfedv1.EtcdCluster{}
	if err := c.Get(ctx, key, ec); err != nil {
		return fmt.Errorf("get EtcdCluster %s: %w", key, err)
	}
	values, err := build(ec)
	if err != nil {
		return err
	}
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	maps.Copy(ec.Annotations, values)
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
