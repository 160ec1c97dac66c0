package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

var statusFlags struct{ json bool }

var devStatusCmd = &cobra.Command{
	Use:   "status",
	Short: "Show the local environment: clusters, processes, pods, failed zones, memory",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		out := cmd.OutOrStdout()
		st, err := localenv.LoadState(devFlags.stateDir)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(out, "No environment in %s (etcdfed dev up).\n", devFlags.stateDir)
			return nil
		}
		if err != nil {
			return err
		}
		c, err := localenv.Connect(devFlags.stateDir)
		if err != nil {
			fmt.Fprintf(out, "Stopped: %v.\n", err)
			return printSummary(out, st.Dir, 0)
		}
		ctx, cancel := withTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		s, err := c.Status(ctx)
		if err != nil {
			fmt.Fprintf(out, "Supervisor pid %d (started %s): %v\n", c.Info.PID, c.Info.Started.Format(time.TimeOnly), err)
			return nil
		}
		if statusFlags.json {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(s)
		}
		printStatus(out, st, s)
		return nil
	},
}

func init() {
	devStatusCmd.Flags().BoolVar(&statusFlags.json, "json", false, "print the status as JSON")
	devCmd.AddCommand(devStatusCmd)
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", (b+512*1024)>>20) }

// printStatus prints the environment's status: a summary, the member
// clusters, and every process with its memory.
func printStatus(out io.Writer, st *localenv.State, s localenv.Status) {
	ready := "starting"
	if !s.Ready.IsZero() {
		ready = fmt.Sprintf("ready since %s (started in %.1fs)", s.Ready.Format(time.TimeOnly), s.Ready.Sub(s.Started).Seconds())
	}
	where := fmt.Sprintf("addresses 127.%d.0.0/16", s.Slot)
	if st.Real() {
		where = "real nodes in network namespace " + localenv.NetnsName(s.Slot) + " (etcdfed dev shell enters it)"
	}
	fmt.Fprintf(out, "Environment %s: supervisor pid %d, %s, %s\n", s.StateDir, s.Supervisor.PID, ready, where)
	fmt.Fprintf(out, "Nodes: %s\n\n", nodeModeLine(st))
	if s.Partition != nil {
		fmt.Fprintf(out, "Partitioned: %s (etcdfed dev partition --heal)\n\n", s.Partition)
	}
	if s.Distance != nil {
		printDistance(out, s.Distance)
		fmt.Fprintln(out)
	}
	printEnvClusters(out, st, s)
	fmt.Fprintln(out)
	n := printProcesses(out, s)
	fmt.Fprintf(out, "\n%d processes, %s in total (PSS; RSS %s)\n", n, mib(s.TotalPSS), mib(s.TotalRSS))
	switch {
	case s.SharedSourceAddress != "":
		fmt.Fprintf(out, "Note: %s\n", s.SharedSourceAddress)
	case s.Partitions != "":
		fmt.Fprintf(out, "Partitions unavailable: %s\n", s.Partitions)
	}
}

// printEnvClusters prints a table of the clusters: apiserver, up, zones,
// failed zones, DNS.
func printEnvClusters(out io.Writer, st *localenv.State, s localenv.Status) {
	failed := map[string][]string{}
	for _, f := range s.Failed {
		failed[f.Cluster] = append(failed[f.Cluster], f.Zone+" ("+string(f.Mode)+")")
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tAPISERVER\tUP\tZONES\tFAILED\tDNS")
	zones := map[string][]string{}
	for _, c := range st.MemberClusters {
		for _, z := range c.Zones {
			zones[c.Name] = append(zones[c.Name], z.Name)
		}
	}
	for _, c := range s.Clusters {
		up := "yes"
		if !c.Up {
			up = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.APIServer, up, dash(strings.Join(zones[c.Name], ",")),
			dash(strings.Join(failed[c.Name], ",")), dash(c.DNS))
	}
	_ = tw.Flush()
}

// printProcesses prints a table of the processes: the supervisor, each
// cluster's, the components, then the pods by name. It returns how many.
func printProcesses(out io.Writer, s localenv.Status) int {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tPID\tRESTARTS\tRSS\tPSS\tDETAIL")
	row := func(p localenv.ProcessStatus) {
		pid := fmt.Sprint(p.PID)
		if p.PID == 0 {
			pid = "-"
		}
		detail := p.Detail
		if p.LastExit != "" {
			detail = strings.TrimSpace(detail + " last " + p.LastExit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", p.Name, pid, p.Restarts, mib(p.RSS), mib(p.PSS), dash(detail))
	}
	row(s.Supervisor)
	n := 1
	for _, c := range s.Clusters {
		for _, p := range c.Processes {
			row(p)
			n++
		}
	}
	for _, p := range s.Components {
		row(p)
		n++
	}
	var pods []localenv.ProcessStatus
	for _, c := range s.Clusters {
		for _, p := range c.Pods {
			p.Name = c.Name + ":" + p.Name
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for _, p := range pods {
		row(p)
		n++
	}
	_ = tw.Flush()
	return n
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
