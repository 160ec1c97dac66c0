package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/cobra"
)

var devShellCmd = &cobra.Command{
	Use:   "shell [-- COMMAND [ARG...]]",
	Short: "Run a shell (or COMMAND) with the environment's variables, inside its network with real nodes",
	Long: `Run $SHELL (or COMMAND) with the variables of etcdfed dev env set
(KUBECONFIG, ETCDFED_KUBECONFIG_<CLUSTER>, ETCDFED_DNS_SERVERS and, once a
ring exists, ETCDCTL_*).

With real nodes (dev up --nodes real) the clusters' apiservers, nodes,
pods and load balancers have addresses in the environment's own network
namespace only: this runs the command there, as
` + "`ip netns exec etcdfed-<slot> COMMAND`" + ` would, so kubectl and etcdctl reach
them. With process nodes it only sets the variables.

  etcdfed dev shell
  etcdfed dev shell -- kubectl get nodes -o wide
  etcdfed dev shell -- kubectl --kubeconfig "$ETCDFED_KUBECONFIG_MEMBER_1" get pods -A`,
	RunE: func(cmd *cobra.Command, args []string) error {
		st, err := loadState()
		if err != nil {
			return err
		}
		ring, err := ringEnv(cmd.Context(), st)
		if err != nil {
			return err
		}
		if len(args) == 0 {
			sh := os.Getenv("SHELL")
			if sh == "" {
				sh = "/bin/sh"
			}
			args = []string{sh}
		}
		path, err := exec.LookPath(args[0])
		if err != nil {
			return err
		}
		env := os.Environ()
		for _, v := range append(envVars(st), ring...) {
			env = append(env, v.Name+"="+v.Value)
		}
		if err := syscall.Exec(path, args, env); err != nil {
			return fmt.Errorf("run %s: %w", args[0], err)
		}
		return nil
	},
}

func init() {
	bindRingFlags(devShellCmd)
	devCmd.AddCommand(devShellCmd)
}
