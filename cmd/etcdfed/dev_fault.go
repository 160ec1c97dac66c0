package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/internal/localenv"
)

var faultFlags struct{ mode string }

var devFailZoneCmd = &cobra.Command{
	Use:   "fail-zone ZONE|CLUSTER",
	Short: "Fail a zone (or a whole member cluster) of the running environment",
	Long: `Fail a zone by name (every member cluster's zone of that name), or a whole
member cluster by its name.

--mode kill (default) kills the zone's pods at once and marks its nodes
unreachable (Ready=Unknown, unreachable taints), as a power loss would; when
every zone of a member cluster is killed, its spoke and its apiserver stop
too. --mode partition cuts the zone's network off instead (its loopback block,
with the processes of its cgroup: nothing leaves, nothing enters, packets are
dropped silently); when it is the cluster's only zone, the cluster's
apiserver and spoke are cut off with it. Partitions need root and iptables.

restore-zone undoes either.`,
	Args: cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		return timedFault(cmd, "Failed "+args[0]+" ("+faultFlags.mode+")", func(ctx context.Context, c *localenv.Client) error {
			return c.FailZone(ctx, args[0], localenv.Mode(faultFlags.mode))
		})
	},
}

var devRestoreZoneCmd = &cobra.Command{
	Use:   "restore-zone ZONE|CLUSTER",
	Short: "Restore a zone or member cluster failed with fail-zone",
	Args:  cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		return timedFault(cmd, "Restored "+args[0], func(ctx context.Context, c *localenv.Client) error {
			return c.RestoreZone(ctx, args[0])
		})
	},
}

// timedFault runs a fault-injection call against the running environment
// and reports what it did and how long it took.
func timedFault(cmd *cobra.Command, done string, f func(context.Context, *localenv.Client) error) error {
	c, err := connect()
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(cmd.Context(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := f(ctx, c); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s in %.1fs.\n", done, time.Since(start).Seconds())
	return nil
}

func init() {
	devFailZoneCmd.Flags().StringVar(&faultFlags.mode, "mode", string(localenv.ModeKill), "kill or partition")
	devCmd.AddCommand(devFailZoneCmd, devRestoreZoneCmd)
}
