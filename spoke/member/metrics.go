package member

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
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
	memberDisruptionRequested = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_spoke_member_disruption_requested",
		Help: "1 while the node of the member's pod is cordoned (a drain waits for the hub's grant), else 0.",
	}, []string{"namespace", "member"})
	memberDisruptionsAllowed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_spoke_member_disruptions_allowed",
		Help: "The member's PodDisruptionBudget status.disruptionsAllowed: 1 only while the hub grants it the ring's one disruption.",
	}, []string{"namespace", "member"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(memberHealthy, memberPodReady, memberDisruptionRequested, memberDisruptionsAllowed)
}

func recordDisruption(key types.NamespacedName, d *etcdfedv1.MemberDisruptionStatus) {
	if d == nil {
		return
	}
	memberDisruptionRequested.WithLabelValues(key.Namespace, key.Name).Set(b2f(d.Requested))
	memberDisruptionsAllowed.WithLabelValues(key.Namespace, key.Name).Set(float64(d.DisruptionsAllowed))
}

func recordHealth(key types.NamespacedName, healthy, ready bool) {
	memberHealthy.WithLabelValues(key.Namespace, key.Name).Set(b2f(healthy))
	memberPodReady.WithLabelValues(key.Namespace, key.Name).Set(b2f(ready))
}

func forgetMetrics(key types.NamespacedName) {
	memberHealthy.DeleteLabelValues(key.Namespace, key.Name)
	memberPodReady.DeleteLabelValues(key.Namespace, key.Name)
	memberDisruptionRequested.DeleteLabelValues(key.Namespace, key.Name)
	memberDisruptionsAllowed.DeleteLabelValues(key.Namespace, key.Name)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
