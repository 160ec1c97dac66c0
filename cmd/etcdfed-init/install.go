package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/internal/fileinstall"
)

func init() {
	cmd := &cobra.Command{
		Use:   "install PATH",
		Short: "Copy this binary to PATH (a volume shared with the etcd container, for its preStop hook)",
		Long: `install copies etcdfed-init to PATH, executable. Member pods run it as an init
container that writes into a volume the etcd container mounts too: etcd's
image holds no etcdfed-init, and its preStop hook runs etcdfed-init prestop
from there.`,
		Args:          cobra.ExactArgs(1),
		SilenceErrors: true, // main prints the error
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this binary: %w", err)
			}
			return fileinstall.CopyExecutable(self, args[0], 0o555)
		},
	}
	root.AddCommand(cmd)
}
