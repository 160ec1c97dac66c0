// Command etcdfed is the user's CLI. Its commands, one file each, each
// registering itself with root in an init function:
//
//   - `hub` installs the hub into the hub cluster and exports or imports
//     the keys only the hub holds (the escrow a rebuild needs);
//   - `cluster` joins member clusters to the hub, lists and unjoins them;
//   - `status` shows an EtcdCluster's members, conditions, round trips and
//     timing; `support-bundle` collects state, events and logs into one
//     archive without secrets;
//   - `client-cert` issues an etcd client certificate for a ring, and
//     `client-cert revoke` revokes certificates of its CA;
//   - `backup` takes a snapshot now; `recover` brings back a ring that lost
//     its quorum; `rotate-ca` replaces a ring's CA; `adopt` takes in an etcd
//     cluster etcdfed did not create;
//   - `drill` proves that losing a failure domain loses nothing;
//   - `dev` runs the local environment (real kube-apiservers as clusters,
//     member pods as processes or on real nodes), with its faults and
//     distances;
//   - `version` prints the version.
//
// The init containers of member pods are another binary, cmd/etcdfed-init.
// TestPackageDocNamesEveryCommand keeps this list and the command tree
// equal.
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
quorate. This CLI installs the hub and joins member clusters to it, shows an
EtcdCluster's status, issues client certificates, takes backups, recovers,
rotates CAs, adopts existing etcd clusters, drills zone failures, and runs a
local environment to try all of it on one machine.`,
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
