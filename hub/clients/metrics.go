package clients

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	labelsClient = []string{"namespace", "name", "client"}

	metricExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_client_certificate_expiry_timestamp_seconds",
		Help: "When the certificate in a consumer's Secret (spec.clients) expires (Unix time). The hub renews it when a third of its lifetime is left (7-day certificates: 2 days 8 hours before); alert when time() plus a day is above it.",
	}, labelsClient)
	metricIssued = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_client_certificates_issued_total",
		Help: "Client certificates issued into consumers' Secrets (first issue and renewals).",
	}, labelsClient)
	metricFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_client_secret_failures_total",
		Help: "Passes in which a consumer's Secret could not be read or written.",
	}, labelsClient)
)

func init() {
	metrics.Registry.MustRegister(metricExpiry, metricIssued, metricFailures)
}

// forgetMetrics drops the series of the named clients (all when nil) of
// one EtcdCluster.
func forgetMetrics(namespace, name string, clients []string) {
	if clients == nil {
		for _, m := range []*prometheus.MetricVec{metricExpiry.MetricVec, metricIssued.MetricVec, metricFailures.MetricVec} {
			m.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
		}
		return
	}
	for _, c := range clients {
		l := prometheus.Labels{"namespace": namespace, "name": name, "client": c}
		metricExpiry.Delete(l)
		metricIssued.Delete(l)
		metricFailures.Delete(l)
	}
}
