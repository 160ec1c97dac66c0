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
		Use:   "prepare-data --data-dir DIR [--cluster-id ID] [--object KEY --sha256 SUM --store-url URL ...]",
		Short: "Prepare a member's data directory before etcd starts: refuse data of another cluster, restore an empty one from a snapshot (member pods run this)",
		Long: `prepare-data runs in a member's pod before etcd (an init container, the etcdfed
helper image, etcdfed-init).

With --cluster-id, a data directory that already holds data must belong to
that etcd cluster (the cluster ID in its WAL): data of another cluster is
refused (non-zero exit, the message names both IDs) and kept as it is, so etcd
never starts on it.

With --object, an empty (or missing) data directory is restored from a
snapshot in an object store: the snapshot is downloaded into the member's
volume and checked (etcd's appended sha256, the bbolt structure, the sidecar
written with it, and --sha256, the checksum the hub verified), then etcd's
data directory is written with etcdutl's snapshot restore: the member's name
and peer URL, the new cluster's --initial-cluster and token, the revision
raised by --bump-revision and marked compacted. Data already there is never
overwritten. Founding members of an EtcdCluster with
spec.bootstrap.fromSnapshot, and the member a recovery from a backup restores,
run it.

Exit status: 0 once prepared (or nothing to do), non-zero when the data
belongs to another cluster, or the snapshot cannot be fetched or fails a
check; nothing is written then.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true, // main prints the error
		RunE: func(cmd *cobra.Command, _ []string) error {
			in.Finish()
			report := func(msg string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s prepare-data: %s\n", time.Now().UTC().Format(time.RFC3339), msg)
			}
			_, err := restore.Run(cmd.Context(), in, report)
			return err
		},
	}
	restore.BindFlags(cmd.Flags(), &in)
	root.AddCommand(cmd)
}
