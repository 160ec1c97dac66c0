package multicluster

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// Cluster is one Kubernetes cluster, reached through its kubeconfig only.
type Cluster struct {
	Name       string
	Kubeconfig string
	REST       *rest.Config
	// Client has the Kubernetes and etcdfed types.
	Client    client.Client
	Clientset kubernetes.Interface
	// OnNamespace, when set, runs after a test created a namespace in this
	// cluster (ensureNamespace): what the cluster needs there besides, for
	// example the RoleBinding an in-cluster hub needs in every namespace
	// holding EtcdClusters.
	OnNamespace func(ctx context.Context, name string) error
}

// NewCluster connects to the cluster a kubeconfig file names.
func NewCluster(name, kubeconfig string) (*Cluster, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s: %w", name, err)
	}
	rc.QPS, rc.Burst = 50, 100
	cl, err := client.New(rc, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Cluster{Name: name, Kubeconfig: kubeconfig, REST: rc, Client: cl, Clientset: cs}, nil
}

// Zones lists the zones of the cluster's nodes (topology.kubernetes.io/zone).
func (c *Cluster) Zones(ctx context.Context) ([]string, error) {
	nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, n := range nodes.Items {
		if z := n.Labels[corev1.LabelTopologyZone]; z != "" {
			set[z] = true
		}
	}
	out := make([]string, 0, len(set))
	for z := range set {
		out = append(out, z)
	}
	sort.Strings(out)
	return out, nil
}

// Topology is what scenarios run on: a hub, member clusters, the ring's
// DNS, and how to inject faults there.
type Topology struct {
	Hub     *Cluster
	Members []*Cluster
	// DNSServers are the ring's DNS servers (host:port) the test resolves
	// member names with; empty means the system resolver.
	DNSServers []string
	// DNSServerOf is each member cluster's own DNS server (its spoke's),
	// one of DNSServers; nil when unknown.
	DNSServerOf map[string]string
	// PublishRecords serves A records name -> address in the ring's DNS
	// (scenarios without a hub publish their own records). Nil when the
	// environment cannot.
	PublishRecords func(ctx context.Context, domain string, records map[string]string) error
	// FailZone and RestoreZone inject and heal faults: mode "kill" or
	// "partition". Nil when the environment cannot.
	FailZone    func(ctx context.Context, zone, mode string) error
	RestoreZone func(ctx context.Context, zone string) error
	// CanPartition is nil when FailZone supports mode "partition" (and
	// Partition works).
	CanPartition error
	// Partition cuts the network into groups of units (each group reaches
	// only its own; a unit is "hub", a member cluster or a zone) and
	// one-way cuts; HealPartition undoes it. Nil when the environment
	// cannot (localenv.Env.Partition).
	Partition     func(ctx context.Context, p localenv.Partition) error
	HealPartition func(ctx context.Context) error
	// SetDistance puts distance (round trips, jitter, loss) between
	// units; the zero Distance removes it. Nil when the environment
	// cannot (localenv.Env.SetDistance).
	SetDistance func(ctx context.Context, d localenv.Distance) error
	// BaseDistance is the distance the environment started at
	// (DISTANCE, ETCDFED_DISTANCE; zero without): a fault that changed
	// the distance heals back to it.
	BaseDistance localenv.Distance
	// RestartSpokeWith restarts a member cluster's spoke with extra flags
	// added to its own (none: its own again). Nil when the topology
	// cannot.
	RestartSpokeWith func(ctx context.Context, cluster string, extra ...string) error
	// KillHub SIGKILLs the hub process, as when its pod is deleted; whatever
	// runs it (the local environment, a Deployment) starts a new one at
	// once, without a crash back-off. Nil when the topology cannot.
	KillHub func(ctx context.Context) error
	// StopHub stops the hub and keeps it stopped (its Deployment scaled
	// to zero); StartHub starts it again. Nil when the topology cannot.
	StopHub  func(ctx context.Context) error
	StartHub func(ctx context.Context) error
	// RestartHubWith restarts the hub with its own flags less those named
	// in drop (by their name, "--flag") and with extra added; nil drop and
	// no extra: its own flags again. Nil when the topology cannot.
	RestartHubWith func(ctx context.Context, drop []string, extra ...string) error
	// VolumeDir is the directory holding a PV's data in a member cluster,
	// for scenarios that damage a member's data. Nil when the topology
	// cannot reach volumes.
	VolumeDir func(cluster, pvName string) string
	// StopMemberAPIServer and StartMemberAPIServer take a member cluster's
	// apiserver away, and back on the same address, while its pods and
	// agents keep running. Nil when the topology cannot.
	StopMemberAPIServer  func(cluster string) error
	StartMemberAPIServer func(ctx context.Context, cluster string) error
	// StopNodeLeases stops (stop true) or resumes the renewal of the node
	// Leases of one zone of a member cluster, nothing else (its kubelets
	// cut off from their apiserver, its machines fine). Nil when the
	// topology cannot.
	StopNodeLeases func(cluster, zone string, stop bool) error
	// HubMetricsURL is the hub's Prometheus endpoint; "" when unknown.
	HubMetricsURL string
	// HubNamespace holds the member clusters' kubeconfig Secrets in the hub.
	HubNamespace string
	// PeerSourceIsPodIP is true when member pods connect to their peers
	// from their own pod IP, so etcd's peer certificate check of the
	// source address can pass; otherwise EtcdClusters need
	// spec.tls.peerSkipClientSANVerification.
	PeerSourceIsPodIP bool
}

// NewTopology builds a topology from kubeconfig files (for example kind
// clusters); the callbacks are the caller's to set.
func NewTopology(hubKubeconfig string, memberKubeconfigs map[string]string, dnsServers []string) (*Topology, error) {
	t := &Topology{DNSServers: dnsServers}
	var err error
	if hubKubeconfig != "" {
		if t.Hub, err = NewCluster("hub", hubKubeconfig); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(memberKubeconfigs))
	for n := range memberKubeconfigs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c, err := NewCluster(n, memberKubeconfigs[n])
		if err != nil {
			return nil, err
		}
		t.Members = append(t.Members, c)
	}
	return t, nil
}
