package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/dev/localenv"
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

var partitionFlags struct {
	groups string
	oneWay []string
	heal   bool
}

var devPartitionCmd = &cobra.Command{
	Use:   "partition --groups 'A,B|C,D' [--one-way FROM>TO]... | --heal",
	Short: "Partition the running environment's network into groups (root only)",
	Long: `Cut the network between groups of units: each group reaches only its own
members. A unit is the hub ("hub": the hub cluster's apiserver and the hub),
a whole member cluster ("member-2": its apiserver, its spoke and every zone),
or one zone of a member cluster ("zone-2", "zone-1b": its nodes and pods
only). Groups are separated by "|", units in a group by ",".

Units no group names reach every group (a bridge), and this command, tests
and the node agents (processes outside every unit) reach every group, as an
observer would.

--one-way FROM>TO adds a one-way cut: FROM cannot open connections to TO,
while TO still reaches FROM. It may be given alone or beside groups, and
more than once.

A new partition replaces the one in place; --heal removes it. Zones failed
with fail-zone stay failed either way. Packets are dropped silently, as on
a real network: clients see timeouts, not refusals. Needs root and
iptables.`,
	Example: `  etcdfed dev partition --groups 'hub,member-3|member-1,member-2'   # the hub with the minority
  etcdfed dev partition --groups 'zone-1|zone-2,zone-3'
  etcdfed dev partition --one-way 'member-1>member-2'
  etcdfed dev partition --heal`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		p, err := partitionFromFlags()
		if err != nil {
			return err
		}
		if partitionFlags.heal {
			return timedFault(cmd, "Healed the partition", func(ctx context.Context, c *localenv.Client) error {
				return c.HealPartition(ctx)
			})
		}
		return timedFault(cmd, "Partitioned ("+p.String()+")", func(ctx context.Context, c *localenv.Client) error {
			return c.Partition(ctx, p)
		})
	},
}

// partitionFromFlags checks the flags before anything is asked of the
// environment: --heal alone, or groups and/or one-way cuts.
func partitionFromFlags() (localenv.Partition, error) {
	var p localenv.Partition
	f := partitionFlags
	if f.heal {
		if f.groups != "" || len(f.oneWay) > 0 {
			return p, fmt.Errorf("--heal takes no --groups or --one-way")
		}
		return p, nil
	}
	var err error
	if p.Groups, err = localenv.ParseGroups(f.groups); err != nil {
		return p, err
	}
	if len(p.Groups) == 1 {
		return p, fmt.Errorf("--groups %q is one group: give two or more, separated by |", f.groups)
	}
	for _, s := range f.oneWay {
		c, err := localenv.ParseCut(s)
		if err != nil {
			return p, err
		}
		p.OneWay = append(p.OneWay, c)
	}
	if p.IsZero() {
		return p, fmt.Errorf("give --groups, --one-way or --heal")
	}
	return p, nil
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
	devPartitionCmd.Flags().StringVar(&partitionFlags.groups, "groups", "", "Groups of units separated by |, units by , (e.g. 'hub,member-3|member-1,member-2').")
	devPartitionCmd.Flags().StringArrayVar(&partitionFlags.oneWay, "one-way", nil, "A one-way cut FROM>TO: FROM cannot reach TO (repeatable).")
	devPartitionCmd.Flags().BoolVar(&partitionFlags.heal, "heal", false, "Remove the partition in place.")
	devCmd.AddCommand(devFailZoneCmd, devRestoreZoneCmd, devPartitionCmd)
}
