package backup

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
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
	metricDue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_backup_due_timestamp_seconds", Help: "When spec.backup.schedule wants the next backup after the newest stored one (after the EtcdCluster's creation while there is none), Unix time; absent while suspended. A backup older than its schedule allows: time() well past this.",
	}, labelsNN)
)

func init() {
	metrics.Registry.MustRegister(metricDuration, metricSize, metricRevision, metricLastSuccess, metricRetained, metricFailures, metricDue)
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
	for _, g := range []*prometheus.GaugeVec{metricSize, metricRevision, metricLastSuccess, metricRetained, metricDue} {
		g.DeleteLabelValues(namespace, name)
	}
	metricDuration.DeleteLabelValues(namespace, name)
	metricFailures.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
}

// recordDue exports when the schedule wants the next backup: the first
// scheduled time after the newest stored snapshot, or after the
// EtcdCluster's creation while there is none. Retries after failures do
// not move it, so an alert on it fires while backups keep failing.
func recordDue(ec *etcdfedv1.EtcdCluster, st etcdfedv1.BackupStatus) {
	b := ec.Spec.Backup
	sched, err := cron.ParseStandard(b.Schedule)
	if err != nil || b.Suspend {
		metricDue.DeleteLabelValues(ec.Namespace, ec.Name)
		return
	}
	anchor := ec.CreationTimestamp.Time
	if st.LastSuccess != nil {
		anchor = st.LastSuccess.Time.Time
	}
	metricDue.WithLabelValues(ec.Namespace, ec.Name).Set(float64(sched.Next(anchor.UTC()).Unix()))
}
