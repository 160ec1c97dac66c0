package localenv

import (
	"os"
	"path/filepath"
)

// ComponentSpec is a process the environment runs besides apiservers and
// node agents: the hub, one spoke per member cluster. It is restarted when
// it exits, logs to logs/<name>.log, has a pid file, and is stopped (and
// kept stopped) while its cluster is failed.
type ComponentSpec struct {
	// Name is unique, e.g. "hub" or "spoke-member-1".
	Name string
	// Path is the executable.
	Path string
	Args []string
	// Env is added to a minimal environment (PATH, HOME).
	Env []string
	// Cluster is the cluster the component belongs to: it runs in that
	// cluster's cgroup (partitioned with it) and stops when it is killed.
	Cluster string
}

// DefaultComponents returns the hub (when bin/hub exists) and one spoke
// per member cluster (when bin/spoke exists).
//
// Each gets its cluster's admin kubeconfig in KUBECONFIG and the addresses
// the environment reserved for it in ETCDFED_* variables. Flags are wired by
// the hub and spoke owners: see hubArgs and spokeArgs.
func DefaultComponents(st *State, binDir string) []ComponentSpec {
	var out []ComponentSpec
	if hub := filepath.Join(binDir, "hub"); executable(hub) {
		out = append(out, ComponentSpec{
			Name: "hub", Path: hub, Cluster: HubClusterName,
			Args: hubArgs(st),
			Env: []string{
				"KUBECONFIG=" + st.KubeconfigPath(HubClusterName),
				"ETCDFED_DNS_SERVERS=" + joinComma(st.DNSServers()),
				"ETCDFED_METRICS_ADDRESS=" + st.Hub.Metrics,
				"ETCDFED_HEALTH_ADDRESS=" + st.Hub.Health,
				"ETCDFED_MEMBER_KUBECONFIG_DIR=" + st.MemberKubeconfigDir(),
			},
		})
	}
	if spoke := filepath.Join(binDir, "spoke"); executable(spoke) {
		for _, c := range st.MemberClusters {
			out = append(out, ComponentSpec{
				Name: "spoke-" + c.Name, Path: spoke, Cluster: c.Name,
				Args: spokeArgs(st, c),
				Env: []string{
					"KUBECONFIG=" + st.KubeconfigPath(c.Name),
					"ETCDFED_CLUSTER_NAME=" + c.Name,
					"ETCDFED_DNS_ADDRESS=" + c.DNS,
					"ETCDFED_GOSSIP_ADDRESS=" + c.Gossip,
					"ETCDFED_METRICS_ADDRESS=" + c.Metrics,
					"ETCDFED_HEALTH_ADDRESS=" + c.Health,
					"ETCDFED_DNS_SERVERS=" + joinComma(st.dnsServersFor(c)),
				},
			})
		}
	}
	return out
}

// hubArgs are the hub's flags in the local environment.
// TODO(hub): wire the hub's flags (kubeconfig Secrets namespace
// RingNamespace, metrics/health on st.Hub.Metrics and st.Hub.Health, ...).
func hubArgs(_ *State) []string { return nil }

// spokeArgs are a spoke's flags in the local environment: one replica (no
// leader election, so a restarted spoke acts at once), gossip with the
// loopback profile and unencrypted (no key Secret here; the spoke logs it),
// everything else on the addresses the environment reserved.
func spokeArgs(_ *State, c ClusterState) []string {
	return []string{
		"--namespace=" + RingNamespace,
		"--cluster-name=" + c.Name,
		"--identity=spoke-" + c.Name,
		"--leader-elect=false",
		"--dns-listen=" + c.DNS,
		"--dns-advertise-address=" + c.DNS,
		"--gossip-bind=" + c.Gossip,
		"--gossip-advertise=" + c.Gossip,
		"--gossip-profile=local",
		"--metrics-bind-address=" + c.Metrics,
		"--health-probe-bind-address=" + c.Health,
		"--member-status-interval=5s",
	}
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}
