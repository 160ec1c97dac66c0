package shard

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var metricInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "etcdfed_hub_shard_info",
	Help: "1, labelled with this hub's shard of the rings and its selector over EtcdClusters (empty for the unsharded hub, owner of every ring).",
}, []string{"shard", "selector"})

func init() { metrics.Registry.MustRegister(metricInfo) }

// Export sets etcdfed_hub_shard_info for s: which rings this hub serves
// (the per-ring gauges, etcdfed_cluster_*, list those it passed over).
func (s Shard) Export() {
	metricInfo.Reset()
	sel := ""
	if s.Selector != nil {
		sel = s.Selector.String()
	}
	metricInfo.WithLabelValues(s.Name, sel).Set(1)
}

var metricConflicts = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "etcdfed_hub_shard_conflicts",
	Help: "Rings this hub's shard owns but does not act on, because a live claim of another hub's shard selects them too (or this hub's own claim is not read back yet); each such ring has a ShardConflict event.",
})

func init() { metrics.Registry.MustRegister(metricConflicts) }
