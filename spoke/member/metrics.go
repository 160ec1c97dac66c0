package member

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	memberHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_spoke_member_healthy",
		Help: "1 when the member's etcd answers its status read and has a leader (MemberHealthy=True), else 0.",
	}, []string{"namespace", "member"})
	memberPodReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_spoke_member_pod_ready",
		Help: "1 when the member's pod of its current incarnation is ready (etcd /readyz), else 0.",
	}, []string{"namespace", "member"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(memberHealthy, memberPodReady)
}

func recordHealth(key types.NamespacedName, healthy, ready bool) {
	memberHealthy.WithLabelValues(key.Namespace, key.Name).Set(b2f(healthy))
	memberPodReady.WithLabelValues(key.Namespace, key.Name).Set(b2f(ready))
}

func forgetMetrics(key types.NamespacedName) {
	memberHealthy.DeleteLabelValues(key.Namespace, key.Name)
	memberPodReady.DeleteLabelValues(key.Namespace, key.Name)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
