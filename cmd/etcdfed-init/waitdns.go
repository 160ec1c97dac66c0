package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/spoke/waitdns"
)

func init() {
	var name, address string
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "wait-dns --name NAME --address ADDRESS",
		Short: "Wait until a DNS name resolves to exactly one expected address (member pods run this before etcd)",
		Long: `wait-dns resolves NAME until its answer is exactly ADDRESS: an IP (the name's
A/AAAA records must be that one IP) or a host name (NAME must be a CNAME to
it, or resolve to the same addresses). Member pods run it as an init
container, so etcd starts only once the member's DNS record points at the
member's new address. The resolver is the system's, or the servers in
ETCDFED_DNS_SERVERS (comma-separated host:port) when set.

Exit status: 0 once the name resolves as expected, non-zero on timeout or
bad arguments.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true, // main prints the error
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return fmt.Errorf("--name is required")
			}
			report := func(msg string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s wait-dns: %s\n", time.Now().UTC().Format(time.RFC3339), msg)
			}
			return waitdns.Wait(cmd.Context(), waitdns.DefaultResolver(), name, address, interval, timeout, report)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "DNS name to resolve (the member's DNS name).")
	cmd.Flags().StringVar(&address, "address", "", "Expected address: an IP or a host name.")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "Give up after this long (0: never).")
	cmd.Flags().DurationVar(&interval, "interval", 250*time.Millisecond, "Time between lookups (queries go to the ring's own DNS servers).")
	root.AddCommand(cmd)
}
