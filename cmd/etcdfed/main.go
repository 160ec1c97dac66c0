// Command etcdfed is the user's CLI: the local environment (`dev`), the
// status of an EtcdCluster (`status`), client certificates, drills
// (`drill zone-failure`). The init containers of member pods are another
// binary, cmd/etcdfed-init.
// Each subcommand lives in its own file and registers itself with root in
// an init function.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/internal/resolverenv"
)

var root = &cobra.Command{
	Use:   "etcdfed",
	Short: "Run and inspect etcd clusters whose members span several Kubernetes clusters",
	Long: `etcdfed runs one etcd cluster whose members live in several Kubernetes
clusters and zones, so that losing a zone or a whole cluster keeps etcd
quorate. This CLI starts a local environment, shows an EtcdCluster's status,
issues client certificates and drills zone failures.`,
	SilenceUsage: true,
	// main prints the error once.
	SilenceErrors: true,
}

func main() {
	resolverenv.Install()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
