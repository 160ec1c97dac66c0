package registration

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	metricCredentialExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_hub_member_credential_expiry_timestamp_seconds",
		Help: "When the hub's token for the member cluster expires (Unix time); the hub renews it after a third of its life.",
	}, []string{"member_cluster"})
	metricChainEnd = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_hub_member_credential_chain_end_timestamp_seconds",
		Help: "When the hub's credential chain in the member cluster ends (Unix time): no renewal goes past it, and the spoke ends every token of the chain then; `etcdfed cluster join` starts a new one.",
	}, []string{"member_cluster"})
	metricRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_hub_member_credential_renewals_total",
		Help: "Renewals of the hub's token for the member cluster, by result (ok, error).",
	}, []string{"member_cluster", "result"})
	metricSpokeSeen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_hub_spoke_last_seen_timestamp_seconds",
		Help: "When the hub last saw the member cluster's spoke Lease renewed, on the hub's clock (Unix time; 0 when never).",
	}, []string{"member_cluster"})
)

func init() {
	metrics.Registry.MustRegister(metricCredentialExpiry, metricChainEnd, metricRenewals, metricSpokeSeen)
}

func forgetMetrics(cluster string) {
	metricCredentialExpiry.DeleteLabelValues(cluster)
	metricChainEnd.DeleteLabelValues(cluster)
	metricRenewals.DeletePartialMatch(prometheus.Labels{"member_cluster": cluster})
	metricSpokeSeen.DeleteLabelValues(cluster)
}
