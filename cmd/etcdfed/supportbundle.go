package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/etcdfed/etcdfed/cli/supportbundle"
)

func init() {
	var hub hubFlags
	var out string
	var members, logFiles []string
	o := supportbundle.Options{}
	cmd := &cobra.Command{
		Use:   "support-bundle NAME",
		Short: "Collect an EtcdCluster's state, events, logs and etcd's view into one archive, without secrets",
		Long: `support-bundle writes one .tar.gz with what is needed to see what an
EtcdCluster went through: the EtcdCluster and its events, the hub's
registrations, pods and logs, in every member cluster its EtcdMembers,
EtcdSpokes, DNS zones, Leases, events, and the spokes' and members' pods and
logs (each log bounded), and etcd's own endpoint status, member list and
alarms. errors.txt says what could not be collected.

Member clusters are read with the hub's own credentials from its
registrations, which do not allow pods or logs; give an administrator's
kubeconfig with --member-kubeconfig NAME=FILE to include them. For a hub
or spokes run as processes (etcdfed dev), add their log files with
--log-file.

No secret goes in: Secrets are listed by key and size, and every file is
scrubbed of private keys, tokens, and the value of every Secret read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, ns, err := hub.config()
			if err != nil {
				return err
			}
			o.Hub, o.Namespace, o.Name, o.LogFiles = cfg, ns, args[0], logFiles
			o.Members = map[string]*rest.Config{}
			for _, m := range members {
				name, path, ok := strings.Cut(m, "=")
				if !ok || name == "" || path == "" {
					return fmt.Errorf("--member-kubeconfig %q: want NAME=FILE", m)
				}
				if o.Members[name], err = (kubeFlags{kubeconfig: path}).config("member " + name); err != nil {
					return err
				}
			}
			if out == "" {
				out = fmt.Sprintf("etcdfed-support-%s-%s-%s.tar.gz", ns, args[0], time.Now().UTC().Format("20060102T150405Z"))
			}
			f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			s, err := supportbundle.Collect(cmd.Context(), o, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				_ = os.Remove(out)
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Wrote %s: %d files, %d bytes.\n", out, s.Files, s.Bytes)
			if len(s.Errors) > 0 {
				fmt.Fprintf(w, "Not collected (errors.txt):\n  %s\n", strings.Join(s.Errors, "\n  "))
			}
			return nil
		},
	}
	hub.bind(cmd.Flags())
	f := cmd.Flags()
	f.StringVarP(&out, "out", "o", "", "Archive to write (default etcdfed-support-<namespace>-<name>-<time>.tar.gz).")
	f.StringArrayVar(&members, "member-kubeconfig", nil, "NAME=FILE: an administrator's kubeconfig of member cluster NAME, to include its pods, events and logs; repeatable.")
	f.StringArrayVar(&logFiles, "log-file", nil, "A log file to include (its last --log-bytes), for a hub or spoke run as a process; repeatable.")
	f.StringVar(&o.HubNamespace, "hub-namespace", "etcdfed-system", "The hub's namespace (registrations, the hub's pods).")
	f.StringVar(&o.RingNamespace, "ring-namespace", "etcdfed-system", "The ring namespace in member clusters.")
	f.Int64Var(&o.LogLines, "log-lines", 2000, "Lines of each container log to include.")
	f.Int64Var(&o.LogBytes, "log-bytes", 1<<20, "Bytes of each log to include at most.")
	root.AddCommand(cmd)
}
