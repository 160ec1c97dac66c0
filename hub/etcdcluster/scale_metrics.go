package etcdcluster

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the hub's cost per ring: etcd clients held and dialled, and
// the staleness timer's wake-ups.
var (
	metricEtcdClients = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "etcdfed_hub_etcd_clients", Help: "etcd clients the hub holds open, one per EtcdCluster it has dialled.",
	})
	metricEtcdDials = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "etcdfed_hub_etcd_dials_total", Help: "etcd clients the hub created: a ring's first pass, or its endpoints or certificates changed.",
	})
	metricEtcdIdleClosed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "etcdfed_hub_etcd_idle_closed_total", Help: "etcd clients the hub closed because no pass used them for a while (the ring is at rest).",
	})
	metricLeaseStale = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_hub_lease_stale_total", Help: "Times a member cluster's spoke Lease went stale on the hub's clock (each wakes the EtcdClusters the cluster concerns).",
	}, []string{"member_cluster"})
	metricPassesChained = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "etcdfed_hub_passes_chained_total", Help: "Passes that took an operation's first step on the observation of the pass that recorded its start, without waiting for the status event (one per operation begun).",
	})
	metricRingWakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_hub_ring_wakes_total",
		Help: "EtcdCluster passes asked for by member-cluster news, by what woke them: member-cluster (a spoke's report, its Lease back or stale, for the rings the cluster concerns), gossip-view (a spoke's view of peers, for the rings both concern), round-trips (for the rings that record them). A ring already queued is counted again but passes once.",
	}, []string{"source"})
	metricNodeLeaseStale = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_hub_node_lease_stale_total", Help: "Times a node Lease (kube-node-lease) of a member cluster went stale on the hub's clock (each wakes the EtcdClusters with members in the node's zone).",
	}, []string{"member_cluster"})
)

func init() {
	metrics.Registry.MustRegister(metricEtcdClients, metricEtcdDials, metricEtcdIdleClosed, metricLeaseStale, metricNodeLeaseStale, metricPassesChained, metricRingWakes)
}
