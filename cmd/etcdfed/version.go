package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/internal/version"
)

func init() {
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the etcdfed version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.String())
			return err
		},
	})
}
