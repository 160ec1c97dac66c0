package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func init() {
	var hub hubFlags
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "backup NAME",
		Short: "Take a snapshot of an EtcdCluster now, into its backup store",
		Long: `backup asks the hub for one snapshot of the EtcdCluster NAME now, outside its
schedule, for example before a risky change. It sets the annotation
` + etcdfedv1.AnnotationBackupRequested + ` to a new token; the hub takes the
snapshot from a healthy follower, checks it and stores it where
spec.backup.store says (spec.backup must be set), then records the token in
status.backup.lastRequest. With --wait the command follows the backup and
prints where it was stored; it fails when the backup failed.`,
		Example: `  etcdfed backup main -n team-a --wait`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := hub.client()
			if err != nil {
				return err
			}
			token, err := requestBackup(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: args[0]}, time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Requested a backup of EtcdCluster %s/%s (request %s).\n", ns, args[0], token)
			if !wait {
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return waitBackup(ctx, c, client.ObjectKey{Namespace: ns, Name: args[0]}, token, time.Second, out)
		},
	}
	hub.bind(cmd.Flags())
	cmd.Flags().BoolVar(&wait, "wait", false, "Wait until the backup is stored (or failed) and print the result.")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "With --wait: give up waiting after this long (the backup itself is bounded by spec.backup.timeout).")
	root.AddCommand(cmd)
}

// requestBackup sets the request annotation to a new token.
func requestBackup(ctx context.Context, c client.Client, key client.ObjectKey, now time.Time) (string, error) {
	ec := &etcdfedv1.EtcdCluster{}
	if err := c.Get(ctx, key, ec); err != nil {
		return "", fmt.Errorf("get EtcdCluster %s: %w", key, err)
	}
	if ec.Spec.Backup == nil {
		return "", fmt.Errorf("EtcdCluster %s has no spec.backup: set spec.backup.store (and a schedule) first", key)
	}
	token := now.UTC().Format(time.RFC3339Nano)
	before := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[etcdfedv1.AnnotationBackupRequested] = token
	if err := c.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
		return "", fmt.Errorf("annotate EtcdCluster %s: %w", key, err)
	}
	return token, nil
}

// waitBackup polls until the hub has handled token, printing a line each
// time the state changes, and returns an error when the backup failed.
func waitBackup(ctx context.Context, c client.Client, key client.ObjectKey, token string, every time.Duration, out io.Writer) error {
	start := time.Now()
	last := ""
	for {
		ec := &etcdfedv1.EtcdCluster{}
		err := c.Get(ctx, key, ec)
		state := ""
		switch {
		case err != nil:
			state = "cannot read the EtcdCluster: " + err.Error()
		case ec.Status.Backup != nil && ec.Status.Backup.LastRequest == token:
			return reportBackup(out, ec, token, time.Since(start))
		case refusedBackup(ec) != nil:
			return refusedBackup(ec)
		case ec.Status.Backup != nil && ec.Status.Backup.InProgress != nil && ec.Status.Backup.InProgress.Request == token:
			state = "snapshot in progress"
		case ec.Status.Backup != nil && ec.Status.Backup.InProgress != nil:
			state = "waiting for a " + string(ec.Status.Backup.InProgress.Trigger) + " backup in progress to finish"
		default:
			state = "waiting for the hub to start the backup"
		}
		if state != last {
			fmt.Fprintf(out, "  %5.1fs  %s\n", time.Since(start).Seconds(), state)
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("backup of %s not finished after %s (%s): %w", key, time.Since(start).Round(time.Second), last, ctx.Err())
		case <-time.After(every):
		}
	}
}

// refusedBackup: the hub's tenancy policy refuses the ring's store, so no
// backup, requested or scheduled, is taken until the spec or the policy
// changes.
func refusedBackup(ec *etcdfedv1.EtcdCluster) error {
	c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != etcdfedv1.BackupReasonForbidden || c.ObservedGeneration != ec.Generation {
		return nil
	}
	return fmt.Errorf("the hub refuses backups of %s/%s (%s): %s", ec.Namespace, ec.Name, c.Reason, c.Message)
}

func reportBackup(out io.Writer, ec *etcdfedv1.EtcdCluster, token string, waited time.Duration) error {
	st := ec.Status.Backup
	if s := st.LastSuccess; s != nil && s.Request == token {
		fmt.Fprintf(out, "Stored %s\n  revision %d, %d bytes, from member %s, took %s (waited %s)\n",
			s.Location, s.Revision, s.SizeBytes, s.Member, s.Duration.Round(time.Millisecond), waited.Round(time.Second))
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionBackupHealthy); c != nil && c.Reason == etcdfedv1.BackupReasonPruneFailed {
			fmt.Fprintf(out, "  warning: %s\n", c.Message)
		}
		return nil
	}
	if f := st.LastFailure; f != nil && f.Request == token {
		return fmt.Errorf("backup %s of %s/%s failed (%s): %s", token, ec.Namespace, ec.Name, f.Reason, f.Message)
	}
	return errors.New("the hub recorded the request but neither a success nor a failure for it")
}
