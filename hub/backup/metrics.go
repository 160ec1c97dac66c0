package backup

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

var (
	labelsNN = []string{"namespace", "name"}

	metricDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "etcdfed_backup_duration_seconds",
		Help:    "Time of successful backups: stream, check and upload.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 16), // 0.25s to about 2.3h
	}, labelsNN)
	metricSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_backup_size_bytes", Help: "Size of the newest stored snapshot.",
	}, labelsNN)
	metricRevision = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_backup_revision", Help: "etcd revision of the newest stored snapshot.",
	}, labelsNN)
	metricLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_backup_last_success_timestamp_seconds", Help: "When the newest stored snapshot was taken (Unix time). Alert on time() minus this.",
	}, labelsNN)
	metricRetained = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_backup_retained_snapshots", Help: "Snapshots of the current etcd cluster in the store after pruning.",
	}, labelsNN)
	metricFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_backup_failures_total", Help: "Failed backups by BackupHealthy reason (PruneFailed: stored, not pruned).",
	}, []string{"namespace", "name", "reason"})
)

func init() {
	metrics.Registry.MustRegister(metricDuration, metricSize, metricRevision, metricLastSuccess, metricRetained, metricFailures)
}

func observeSuccess(ec *etcdfedv1.EtcdCluster, s *etcdfedv1.BackupSnapshot, retained int) {
	metricDuration.WithLabelValues(ec.Namespace, ec.Name).Observe(s.Duration.Seconds())
	metricSize.WithLabelValues(ec.Namespace, ec.Name).Set(float64(s.SizeBytes))
	metricRevision.WithLabelValues(ec.Namespace, ec.Name).Set(float64(s.Revision))
	metricLastSuccess.WithLabelValues(ec.Namespace, ec.Name).Set(float64(s.Time.Unix()))
	metricRetained.WithLabelValues(ec.Namespace, ec.Name).Set(float64(retained))
}

func observeFailure(ec *etcdfedv1.EtcdCluster, reason string) {
	metricFailures.WithLabelValues(ec.Namespace, ec.Name, reason).Inc()
}

func forgetMetrics(namespace, name string) {
	for _, g := range []*prometheus.GaugeVec{metricSize, metricRevision, metricLastSuccess, metricRetained} {
		g.DeleteLabelValues(namespace, name)
	}
	metricDuration.DeleteLabelValues(namespace, name)
	metricFailures.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
}
