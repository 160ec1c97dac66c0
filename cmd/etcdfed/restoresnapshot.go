package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/spoke/restore"
)

func init() {
	var in restore.Input
	cmd := &cobra.Command{
		Use:   "restore-snapshot",
		Short: "Restore a member's data directory from a snapshot in an object store (member pods of a restored cluster run this before etcd)",
		Long: `restore-snapshot downloads a snapshot from an object store into the member's
volume, checks it (etcd's appended sha256, the bbolt structure, the sidecar
written with it, and --sha256, the checksum the hub verified), and writes
etcd's data directory with etcdutl's snapshot restore: the member's name and
peer URL, the new cluster's --initial-cluster and token, the revision raised by
--bump-revision and marked compacted. It restores only into a missing or empty
data directory; data already there is never overwritten (the command then
exits 0 and does nothing). Founding members of an EtcdCluster with
spec.bootstrap.fromSnapshot run it as an init container.

Exit status: 0 once restored (or skipped), non-zero when the snapshot cannot
be fetched or fails a check; nothing is written then.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true, // main prints the error
		RunE: func(cmd *cobra.Command, _ []string) error {
			in.Finish()
			report := func(msg string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s restore-snapshot: %s\n", time.Now().UTC().Format(time.RFC3339), msg)
			}
			_, err := restore.Run(cmd.Context(), in, report)
			return err
		},
	}
	restore.BindFlags(cmd.Flags(), &in)
	root.AddCommand(cmd)
}
