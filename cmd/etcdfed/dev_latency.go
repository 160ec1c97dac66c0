package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

const latencyHelp = `A distance is a preset, links of its own, or both (a link wins over the
preset's for the same pair), separated by commas:

  none             zero distance everywhere (removes every rule)
  one-region       every member cluster and zone 1 to 2ms apart (1.5ms ± 0.5ms)
  three-regions    member cluster i in region (i-1) mod 3: regions 1-2 10ms,
                   1-3 30ms, 2-3 60ms apart (± a tenth); the zones of a cluster
                   and the clusters of one region as one-region; the hub at zero
  A:B=ROUNDTRIP[/JITTER[/LOSS%]]
                   between two units (zones, member clusters, the hub), both
                   ways: zone-1:zone-2=20ms/5ms/0.1%

Each direction is delayed by half the round trip, plus or minus half the
jitter (bytes are never reordered); a lost TCP segment costs a retransmission
timeout (200ms or the round trip), a lost datagram is dropped. A pair of
zones wins over the pair of their clusters. TCP between the units and UDP to
the spokes' DNS (:1053; :53 with real nodes) and gossip (:7946) are
delayed. Needs root and iptables (as partitions do). With real nodes the
same distance applies to what the nodes and pods send, chosen by their
address blocks (docs/local-environment.md).`

var devLatencyCmd = &cobra.Command{
	Use:   "latency",
	Short: "Set or show the distance (round trip, jitter, loss) between zones and member clusters",
	Long: `Put distance between the running environment's zones and member clusters,
as between regions: the environment sends their traffic through a delaying
proxy (the kernel here has no netem).

` + latencyHelp,
}

var devLatencySetCmd = &cobra.Command{
	Use:   "set DISTANCE",
	Short: "Set the distance between units of the running environment (recorded for the next up)",
	Long: `Set the distance between units, replacing the one in place. Connections
already through the proxy follow the new numbers at once; TCP connections
between units that were direct and now lie at a distance are reset and
reconnect through the proxy. The distance is recorded in state.json: the
next etcdfed dev up keeps it.

` + latencyHelp,
	Example: `  etcdfed dev latency set three-regions
  etcdfed dev latency set 'member-1:member-2=20ms/5ms/0.1%,zone-1a:zone-1b=1ms'
  etcdfed dev latency set 'one-region,hub:member-3=40ms'
  etcdfed dev latency set none`,
	Args: cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		d, err := localenv.ParseDistance(args[0])
		if err != nil {
			return err
		}
		return timedFault(cmd, "Distance set to "+d.String(), func(ctx context.Context, c *localenv.Client) error {
			return c.SetDistance(ctx, d)
		})
	},
}

var devLatencyShowCmd = &cobra.Command{
	Use:   "show",
	Short: "Show the distance in place and every link it makes",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		c, err := connect()
		if err != nil {
			return err
		}
		ctx, cancel := withTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		s, err := c.Distance(ctx)
		if err != nil {
			return err
		}
		printDistance(cmd.OutOrStdout(), &s)
		if len(s.Routes) > 0 {
			fmt.Fprintln(cmd.OutOrStdout(), "Proxy routes (open connections or flows):")
			for _, r := range s.Routes {
				fmt.Fprintln(cmd.OutOrStdout(), "  "+r)
			}
		}
		return nil
	},
}

// printDistance prints the distance and its links, one a line.
func printDistance(out io.Writer, s *localenv.DistanceStatus) {
	fmt.Fprintf(out, "Distance: %s", s.Spec)
	if s.Proxied > 0 {
		fmt.Fprintf(out, " (%d connections and flows through the proxy)", s.Proxied)
	}
	fmt.Fprintln(out)
	for _, l := range s.Links {
		pair, link, _ := strings.Cut(l, "=")
		fmt.Fprintf(out, "  %-24s %s\n", pair, link)
	}
}

func init() {
	devLatencyCmd.AddCommand(devLatencySetCmd, devLatencyShowCmd)
	devCmd.AddCommand(devLatencyCmd)
}
