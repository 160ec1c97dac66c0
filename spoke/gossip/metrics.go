package gossip

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var peersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "etcdfed_spoke_gossip_peers",
	Help: "Peer spokes this spoke's gossip knows of, by state (alive, dead).",
}, []string{"state"})

func init() {
	ctrlmetrics.Registry.MustRegister(peersGauge)
}
