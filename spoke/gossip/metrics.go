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

// roundTripsHeld counts the probes after which a peer's window had moved
// significantly from what was published of it but was held, its window
// warming up (RoundTripWarmUp).
var roundTripsHeld = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "etcdfed_spoke_gossip_round_trips_held_total",
	Help: "Probes after which a peer's round trip had moved significantly from the one published but was not published again, its window warming up after the spoke's start or the peer's return, by peer cluster.",
}, []string{"peer"})

func init() {
	ctrlmetrics.Registry.MustRegister(roundTripsHeld)
}
