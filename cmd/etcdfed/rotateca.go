package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// rotateCACmd holds the flags of `etcdfed rotate-ca`.
type rotateCACmd struct {
	hub              hubFlags
	wait, hold, cont bool
	timeout          time.Duration
}

func init() {
	var r rotateCACmd
	cmd := &cobra.Command{
		Use:   "rotate-ca NAME",
		Short: "Replace the CA of an EtcdCluster, with no moment where two members distrust each other",
		Long: `rotate-ca asks the hub to replace the CA of the EtcdCluster NAME. The hub
generates a new CA and works in three phases, each restarting the members one
at a time (followers first, the leader last after moving leadership away, each
a ready voter caught up with the leader before the next):

  Trusting   the new CA is stored beside the old one; every member restarts
             trusting both; every consumer Secret (spec.clients) gets both in
             ca.crt.
  Reissuing  the new CA issues: every member restarts with a certificate of
             the new CA; the hub's and every consumer's client certificate are
             reissued from it.
  Dropping   the old CA is removed: every member restarts trusting the new CA
             alone; every consumer's ca.crt holds the new CA alone.

A phase starts only when every member and consumer Secret holds what the phase
before wants. Consumers that read their CA file only at start (kube-apiserver)
must be restarted after Trusting, before the members present certificates of
the new CA. Declare them (spec.clients[].caReload: AtStart), or pass
--hold-after-trusting: the rotation then holds once every member trusts both
CAs and every consumer Secret holds both (status.caRotation.heldSince set,
Progressing naming the consumers to restart, event CARotationHeld). Restart
them, then run

  etcdfed rotate-ca NAME --continue

which answers that hold (it copies heldSince into the request); the rotation
goes on with Reissuing. status.caRotation shows the phase and progress;
Progressing=True with reason CARotation while it runs.

A hub rebuilt without the escrow (etcdfed hub import) holds the take-over of a
running ring whose CA Secret it lacks (status.takeOver, phase Held). rotate-ca
is then the way on: the hub takes the ring over on the CA its members trust,
stored without its key, reaches etcd with a member's certificate, and the
rotation moves every member, the hub and every consumer onto a new CA.

The command sets the annotation ` + etcdfedv1.AnnotationRotateCA + `; with --wait it
follows the rotation until it completes, or until it holds.`,
		Example: `  etcdfed rotate-ca main -n team-a --wait
  etcdfed rotate-ca main -n team-a --hold-after-trusting --wait
  # restart the consumers that read their CA only at start, then:
  etcdfed rotate-ca main -n team-a --continue --wait`,
		Args: cobra.ExactArgs(1),
		RunE: r.run,
	}
	r.hub.bind(cmd.Flags())
	cmd.Flags().BoolVar(&r.hold, "hold-after-trusting", false, "Hold the rotation after its Trusting phase (every member and consumer Secret trusts both CAs) until `etcdfed rotate-ca NAME --continue`, to restart consumers that read their CA only at start.")
	cmd.Flags().BoolVar(&r.cont, "continue", false, "Answer the hold of the rotation under way: the consumers that read their CA only at start were restarted.")
	cmd.Flags().BoolVar(&r.wait, "wait", false, "Wait until the rotation completes (or holds after Trusting).")
	cmd.Flags().DurationVar(&r.timeout, "timeout", 30*time.Minute, "With --wait: give up waiting after this long.")
	root.AddCommand(cmd)
}

// run requests a CA rotation (or, with --continue, answers its hold), and
// with --wait follows it until it completes or holds.
func (r *rotateCACmd) run(cmd *cobra.Command, args []string) error {
	c, ns, err := r.hub.client()
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: args[0]}
	out := cmd.OutOrStdout()
	var req etcdfedv1.CARotationRequest
	if r.cont {
		if r.hold {
			return fmt.Errorf("--continue answers a hold under way; --hold-after-trusting asks for one in a new rotation: not both")
		}
		if req, err = continueCARotation(cmd.Context(), c, key); err != nil {
			return err
		}
		fmt.Fprintf(out, "Answered the hold of the CA rotation of EtcdCluster %s (held since %s); it goes on with Reissuing.\n", key, req.ContinueHold.Format(time.RFC3339))
	} else {
		if req, err = requestCARotation(cmd.Context(), c, key, time.Now(), r.hold); err != nil {
			return err
		}
		fmt.Fprintf(out, "Requested a CA rotation of EtcdCluster %s (request at %s).\n", key, req.RequestedAt.Format(time.RFC3339))
	}
	if !r.wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), r.timeout)
	defer cancel()
	return waitCARotated(ctx, c, key, req.RequestedAt, !r.cont, time.Second, out)
}

// requestCARotation sets the request annotation, unless a rotation is
// under way or cannot be done.
func requestCARotation(ctx context.Context, c client.Client, key client.ObjectKey, now time.Time, hold bool) (etcdfedv1.CARotationRequest, error) {
	req := etcdfedv1.CARotationRequest{RequestedAt: now.UTC().Truncate(time.Second), HoldAfterTrusting: hold}
	return req, annotateRequest(ctx, c, key, caRotationRefusal, etcdfedv1.AnnotationRotateCA, req.String())
}

// continueCARotation answers the hold under way: the request of the
// rotation (its requestedAt as the hub recorded it) with continueHold set
// to status.caRotation.heldSince.
func continueCARotation(ctx context.Context, c client.Client, key client.ObjectKey) (etcdfedv1.CARotationRequest, error) {
	var req etcdfedv1.CARotationRequest
	err := annotateRequestFunc(ctx, c, key, func(ec *etcdfedv1.EtcdCluster) (map[string]string, error) {
		var err error
		req, err = caContinueRequest(ec)
		return map[string]string{etcdfedv1.AnnotationRotateCA: req.String()}, err
	})
	return req, err
}

// caContinueRequest is the request that answers ec's hold, or why there is
// no hold to answer.
func caContinueRequest(ec *etcdfedv1.EtcdCluster) (etcdfedv1.CARotationRequest, error) {
	name := ec.Namespace + "/" + ec.Name
	cr := ec.Status.CARotation
	switch {
	case cr == nil || !cr.Phase.InProgress():
		return etcdfedv1.CARotationRequest{}, fmt.Errorf("EtcdCluster %s is not rotating its CA: there is no hold to answer", name)
	case cr.ContinuedAt != nil || cr.Phase != etcdfedv1.CARotationTrusting:
		return etcdfedv1.CARotationRequest{}, fmt.Errorf("EtcdCluster %s's CA rotation is past its hold (phase %s): nothing to answer", name, cr.Phase)
	case cr.HeldSince == nil:
		msg := cr.Message
		if msg == "" {
			msg = "no message yet"
		}
		return etcdfedv1.CARotationRequest{}, fmt.Errorf("EtcdCluster %s's CA rotation does not hold yet (phase Trusting, %d of %d members done: %s); "+
			"restart the consumers that read their CA only at start once it holds (status.caRotation.heldSince), not before: their Secrets may not hold both CAs yet",
			name, cr.MembersDone, cr.MembersTotal, msg)
	case cr.RequestedAt == nil:
		return etcdfedv1.CARotationRequest{}, fmt.Errorf("EtcdCluster %s's CA rotation has no request time recorded", name)
	}
	req := etcdfedv1.CARotationRequest{RequestedAt: cr.RequestedAt.UTC(), HoldAfterTrusting: cr.HoldAfterTrusting}
	if v, ok := ec.Annotations[etcdfedv1.AnnotationRotateCA]; ok {
		if old, err := etcdfedv1.ParseCARotationRequest(v); err == nil && old.RequestedAt.UTC().Truncate(time.Second).Equal(req.RequestedAt) {
			req.HoldAfterTrusting = old.HoldAfterTrusting
		}
	}
	held := cr.HeldSince.UTC()
	req.ContinueHold = &held
	return req, nil
}

// caRotationRefusal says why a CA rotation must not be asked of ec, nil
// when it may.
func caRotationRefusal(ec *etcdfedv1.EtcdCluster) error {
	name := ec.Namespace + "/" + ec.Name
	switch {
	case !ec.Spec.TLS.Mode.Enabled():
		return fmt.Errorf("EtcdCluster %s runs without TLS (spec.tls.mode: Disabled): there is no CA to rotate", name)
	case ec.Spec.TLS.CASecretName != "":
		return fmt.Errorf("EtcdCluster %s uses the CA you provide in Secret %s (spec.tls.caSecretName): etcdfed rotates only a CA it generated", name, ec.Spec.TLS.CASecretName)
	case ec.Status.ClusterID == "" && (ec.Status.TakeOver == nil || ec.Status.TakeOver.Phase != etcdfedv1.TakeOverHeld):
		// A take-over held for the CA's key is the exception: the request
		// lets the hub take the ring over on the CA its members trust and
		// rotate it onto a new one.
		return fmt.Errorf("EtcdCluster %s has not formed yet", name)
	case ec.Status.CARotation != nil && ec.Status.CARotation.Phase.InProgress():
		return fmt.Errorf("EtcdCluster %s is already rotating its CA (phase %s, %d of %d members done)", name, ec.Status.CARotation.Phase, ec.Status.CARotation.MembersDone, ec.Status.CARotation.MembersTotal)
	}
	return nil
}

// waitCARotated polls until the rotation requested at requestedAt
// completes (or is refused), printing each change of state.
// With untilHeld it also returns when the rotation holds after Trusting,
// saying what to do.
func waitCARotated(ctx context.Context, c client.Client, key client.ObjectKey, requestedAt time.Time, untilHeld bool, every time.Duration, out io.Writer) error {
	return follow(ctx, c, key, every, out, "CA rotation", func(ec *etcdfedv1.EtcdCluster) (string, bool, error) {
		cr := ec.Status.CARotation
		switch {
		case cr == nil || cr.RequestedAt == nil || cr.RequestedAt.Time.Before(requestedAt):
			return "waiting for the hub to take the request", false, nil
		case cr.Phase == etcdfedv1.CARotationRefused:
			return "", false, fmt.Errorf("the hub refused the CA rotation of %s: %s", key, cr.Message)
		case cr.Phase == etcdfedv1.CARotationCompleted:
			return fmt.Sprintf("complete: every member and consumer trusts %s alone", cr.NewCA), true, nil
		case untilHeld && cr.Phase == etcdfedv1.CARotationTrusting && cr.HeldSince != nil && cr.ContinuedAt == nil:
			return "held: " + cr.Message, true, nil
		}
		state := fmt.Sprintf("%s: %d of %d members done", cr.Phase, cr.MembersDone, cr.MembersTotal)
		if op := ec.Status.Operation; op != nil {
			state += fmt.Sprintf("; %s %s %s", op.Type, op.Member, op.Step)
		}
		return state, false, nil
	})
}
