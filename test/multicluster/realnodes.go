package multicluster

import (
	"context"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

// RealTopology is the topology of a local environment of real nodes
// (localenv.NodesReal): the hub and the spokes run in-cluster, deployed
// from config/; the ring's DNS is the spokes' (their load balancer
// addresses); pods connect from their own addresses. Killing the hub
// deletes its pod (its Deployment starts another); stopping it scales the
// Deployment to zero. Partitions of any shape and distance are made in
// the environment's network namespace, by the units' address blocks.
// Namespaces the tests create in the hub cluster get
// the RoleBinding config/samples/hub_access.yaml gives default.
func RealTopology(env *localenv.Env) (*Topology, error) {
	st := env.State()
	members := map[string]string{}
	for _, c := range st.MemberClusters {
		members[c.Name] = env.Kubeconfig(c.Name)
	}
	t, err := NewTopology(env.Kubeconfig(localenv.HubClusterName), members, st.DNSServers())
	if err != nil {
		return nil, err
	}
	t.Hub.OnNamespace = env.GrantHub
	t.FailZone = func(ctx context.Context, zone, mode string) error {
		return env.FailZone(ctx, zone, localenv.Mode(mode))
	}
	t.RestoreZone = env.RestoreZone
	t.CanPartition = env.CanPartition()
	if t.CanPartition == nil {
		t.Partition, t.HealPartition = env.Partition, env.HealPartition
		t.SetDistance = env.SetDistance
	}
	t.PeerSourceIsPodIP = true
	t.StopMemberAPIServer = env.StopAPIServer
	t.StartMemberAPIServer = env.StartAPIServer
	t.HubNamespace = localenv.RingNamespace
	t.KillHub = env.KillHubPods
	t.StopHub = func(ctx context.Context) error { return env.ScaleHub(ctx, 0) }
	t.StartHub = func(ctx context.Context) error { return env.ScaleHub(ctx, 1) }
	t.VolumeDir = env.VolumeDir
	t.DNSServerOf = map[string]string{}
	for _, c := range st.MemberClusters {
		t.DNSServerOf[c.Name] = c.DNS
	}
	return t, nil
}
