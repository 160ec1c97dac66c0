// Command etcdfed-init is the helper member pods run as init containers
// before etcd starts: `wait-dns` (the member's DNS name resolves to its new
// address), `prepare-data` (refuse data of another cluster, restore an
// empty data directory from a snapshot) and `install` (copy itself where
// the etcd container finds it); and as the etcd container's preStop hook:
// `prestop` (move leadership off the member before it stops). The spoke's --helper-image is an
// image holding it (/usr/local/bin/etcdfed-init).
//
// It links only what those need: no local environment, no envtest, no
// test code (make verify checks that with hack/proddeps). Each subcommand
// lives in its own file and registers itself with root in an init
// function.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/internal/resolverenv"
	"github.com/etcdfed/etcdfed/internal/version"
)

var root = &cobra.Command{
	Use:   "etcdfed-init",
	Short: "The init containers and preStop hook of etcdfed member pods: wait-dns, prepare-data, install, prestop",
	Long: `etcdfed-init runs in every etcdfed member pod before etcd: wait-dns holds the
pod until the member's DNS name points at its new address, and prepare-data
checks (and, for a restore, writes) the member's data directory. The spoke
renders both into the pod; nobody needs to run them by hand.`,
	Version:      version.String(),
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
