package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
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
			return copyExecutable(self, args[0])
		},
	}
	root.AddCommand(cmd)
}

// copyExecutable copies src to dst (mode 0555) through a temporary file
// renamed into place, so that a hook never runs a half-written binary.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open binary: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("make directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".install-*")
	if err != nil {
		return fmt.Errorf("create binary: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copy binary: %w", err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fmt.Errorf("make binary executable: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write binary: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install binary: %w", err)
	}
	return nil
}
