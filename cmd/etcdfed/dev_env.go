package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

var devEnvCmd = &cobra.Command{
	Use:   "env",
	Short: "Print shell export lines for the local environment (eval \"$(etcdfed dev env)\")",
	Long: `Print export lines that eval accepts:

  KUBECONFIG                       the hub's kubeconfig
  ETCDFED_KUBECONFIG_<CLUSTER>     each cluster's kubeconfig (HUB, MEMBER_1, ...)
  ETCDFED_DNS_SERVERS              the ring's DNS servers (host:port), read by
                                   the etcdfed-built etcdctl and etcdfed
  ETCDFED_STATE_DIR                the state directory
  ETCDCTL_ENDPOINTS, ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY
                                   once a ring exists`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		st, err := loadState()
		if err != nil {
			return err
		}
		ring, err := ringEnv(cmd.Context(), st)
		if err != nil {
			return err
		}
		return printEnv(cmd.OutOrStdout(), st, ring)
	},
}

func init() { devCmd.AddCommand(devEnvCmd) }

// envVar is one exported variable.
type envVar struct{ Name, Value string }

func envName(cluster string) string {
	return "ETCDFED_KUBECONFIG_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(cluster))
}

// envVars are the environment's variables (printEnv, dev shell).
func envVars(st *localenv.State) []envVar {
	vars := []envVar{
		{"ETCDFED_STATE_DIR", st.Dir},
		{"KUBECONFIG", st.KubeconfigPath(st.Hub.Name)},
	}
	for _, c := range st.Clusters() {
		vars = append(vars, envVar{envName(c.Name), st.KubeconfigPath(c.Name)})
	}
	return append(vars, envVar{"ETCDFED_DNS_SERVERS", strings.Join(st.DNSServers(), ",")})
}

func printEnv(w io.Writer, st *localenv.State, ring []envVar) error {
	if st.Real() {
		fmt.Fprintf(w, "# Real nodes: the clusters' addresses exist in network namespace %s only; run commands there with `etcdfed dev shell` (or `etcdfed dev shell -- CMD`).\n", localenv.NetnsName(st.Slot))
	}
	for _, v := range envVars(st) {
		fmt.Fprintf(w, "export %s=%s\n", v.Name, shellQuote(v.Value))
	}
	if len(ring) == 0 {
		fmt.Fprintln(w, "# No ring yet: ETCDCTL_ENDPOINTS and ETCDCTL_CACERT/CERT/KEY appear once an EtcdCluster exists.")
	}
	for _, v := range ring {
		fmt.Fprintf(w, "export %s=%s\n", v.Name, shellQuote(v.Value))
	}
	return nil
}

// shellQuote quotes s for POSIX shells.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:,=@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
