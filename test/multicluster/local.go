package multicluster

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

// LocalTopology is the topology of a local environment. The ring's DNS is
// dns (started on the member clusters' DNS addresses) when the environment
// runs no spokes.
func LocalTopology(env *localenv.Env, dns *RingDNS) (*Topology, error) {
	st := env.State()
	members := map[string]string{}
	for _, c := range st.MemberClusters {
		members[c.Name] = env.Kubeconfig(c.Name)
	}
	t, err := NewTopology(env.Kubeconfig(localenv.HubClusterName), members, st.DNSServers())
	if err != nil {
		return nil, err
	}
	if dns != nil {
		t.DNSServers = dns.Addresses()
		t.PublishRecords = dns.Publish
	}
	t.FailZone = func(ctx context.Context, zone, mode string) error {
		return env.FailZone(ctx, zone, localenv.Mode(mode))
	}
	t.RestoreZone = env.RestoreZone
	t.CanPartition = env.CanPartition()
	if t.CanPartition == nil {
		t.Partition, t.HealPartition = env.Partition, env.HealPartition
		t.SetDistance = env.SetDistance
		if d := env.State().Distance; d != nil {
			t.BaseDistance = *d
		}
	}
	// As root with iptables the environment gives every pod its own
	// source address (the same mechanism as partitions); otherwise, or in
	// shared source address mode, pods connect from 127.0.0.1.
	t.PeerSourceIsPodIP = env.SharedSourceAddress() == ""
	t.StopMemberAPIServer = env.StopAPIServer
	t.StopNodeLeases = env.StopNodeLeases
	t.StartMemberAPIServer = env.StartAPIServer
	t.HubMetricsURL = "http://" + st.Hub.Metrics + "/metrics"
	t.HubNamespace = localenv.RingNamespace
	// The hub's pod deleted and replaced: the new hub starts at once, so
	// what a test measures after a kill is the hub's own resume, not the
	// local supervisor's crash back-off.
	t.KillHub = func(context.Context) error {
		_, err := env.KillComponent("hub", true)
		return err
	}
	t.DNSServerOf = map[string]string{}
	for _, c := range st.MemberClusters {
		t.DNSServerOf[c.Name] = c.DNS
	}
	t.StopHub = func(context.Context) error { return env.StopComponent("hub", 5*time.Second) }
	t.StartHub = func(context.Context) error { return env.StartComponent("hub") }
	t.VolumeDir = env.VolumeDir
	defaults := map[string][]string{}
	t.RestartHubWith = func(_ context.Context, drop []string, extra ...string) error {
		if _, ok := defaults["hub"]; !ok {
			args, err := env.ComponentArgs("hub")
			if err != nil {
				return err
			}
			defaults["hub"] = args
		}
		var args []string
		for _, a := range defaults["hub"] {
			name, _, _ := strings.Cut(a, "=")
			if !slices.Contains(drop, name) {
				args = append(args, a)
			}
		}
		return env.RestartComponentWith("hub", append(args, extra...), 5*time.Second)
	}
	t.RestartSpokeWith = func(_ context.Context, cluster string, extra ...string) error {
		name := "spoke-" + cluster
		if _, ok := defaults[name]; !ok {
			args, err := env.ComponentArgs(name)
			if err != nil {
				return err
			}
			defaults[name] = args
		}
		return env.RestartComponentWith(name, append(slices.Clone(defaults[name]), extra...), 5*time.Second)
	}
	return t, nil
}
