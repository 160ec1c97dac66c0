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

// roundTripSeconds is every probe's round trip, by peer cluster.
var roundTripSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "etcdfed_spoke_gossip_round_trip_seconds",
	Help:    "Round trip of each direct gossip probe (UDP ping to ack) from this spoke to a peer spoke, by peer cluster.",
	Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5},
}, []string{"peer"})

func init() {
	ctrlmetrics.Registry.MustRegister(roundTripSeconds)
}
