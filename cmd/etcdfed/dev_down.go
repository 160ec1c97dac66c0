package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

var downFlags struct{ purge bool }

var devDownCmd = &cobra.Command{
	Use:   "down",
	Short: "Stop the local environment and every process it started",
	Long: `Ask the environment's supervisor to stop everything, then kill whatever
is still named by a pid file in the state directory (a supervisor that died
leaves nothing behind either), and remove partition rules and cgroups. The
state directory stays, so the next up resumes the same clusters; --purge
deletes it.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		out := cmd.OutOrStdout()
		if _, err := localenv.LoadState(devFlags.stateDir); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(out, "No environment in %s.\n", devFlags.stateDir)
			return nil
		}
		start := time.Now()
		if c, err := localenv.Connect(devFlags.stateDir); err == nil {
			fmt.Fprintf(out, "Stopping the supervisor (pid %d)...\n", c.Info.PID)
			ctx, cancel := withTimeout(cmd.Context(), 2*time.Minute)
			err := c.Shutdown(ctx)
			cancel()
			if err != nil {
				fmt.Fprintf(out, "The supervisor did not stop cleanly (%v): killing what is left.\n", err)
				if p, perr := os.FindProcess(c.Info.PID); perr == nil && c.Info.Alive() {
					_ = p.Kill()
				}
			}
		}
		killed, err := localenv.Cleanup(devFlags.stateDir)
		for _, k := range killed {
			fmt.Fprintf(out, "Killed leftover %s (pid %d).\n", k.Name, k.PID)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Stopped in %.1fs.\n", time.Since(start).Seconds())
		if downFlags.purge {
			if err := os.RemoveAll(devFlags.stateDir); err != nil {
				return err
			}
			fmt.Fprintf(out, "Removed %s.\n", devFlags.stateDir)
		}
		return nil
	},
}

func init() {
	devDownCmd.Flags().BoolVar(&downFlags.purge, "purge", false, "delete the state directory too")
	devCmd.AddCommand(devDownCmd)
}
