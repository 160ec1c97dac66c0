package etcdcluster

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/membership"
)

var (
	labelsNN = []string{"namespace", "name"}

	metricMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_members", Help: "Members recorded for the EtcdCluster.",
	}, labelsNN)
	metricReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_ready_members", Help: "Ready voting members of the EtcdCluster.",
	}, labelsNN)
	metricCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_condition", Help: "1 when the EtcdCluster's condition is True, else 0.",
	}, []string{"namespace", "name", "type"})
	metricZoneFailures = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_zone_failures_tolerated", Help: "Simultaneous zone failures the current placement survives with quorum.",
	}, labelsNN)
	metricPassDeadline = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_hub_pass_deadline_exceeded_total", Help: "Reconcile passes of the EtcdCluster that ran out of their deadline.",
	}, labelsNN)
	metricClusterRead = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "etcdfed_hub_member_cluster_read_seconds", Help: "Time to read one member cluster's objects in a reconcile pass.",
		Buckets: []float64{.001, .005, .025, .1, .5, 1, 2.5, 5},
	}, []string{"member_cluster"})
	metricClusterReadTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_hub_member_cluster_read_timeouts_total", Help: "Reads of a member cluster that did not finish within their deadline.",
	}, []string{"member_cluster"})
	metricCARotation = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_ca_rotation_phase", Help: "1 for the phase of the EtcdCluster's last CA rotation (Trusting, Reissuing, Dropping, Completed, Refused), 0 for the others.",
	}, []string{"namespace", "name", "phase"})
	metricCARotationDone = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_ca_rotation_members_done", Help: "Members that run what the current CA rotation phase needs.",
	}, labelsNN)
	metricCARotationHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_ca_rotation_held_since_timestamp_seconds", Help: "When the CA rotation began to hold after its Trusting phase for `etcdfed rotate-ca --continue` (0 when it does not hold).",
	}, labelsNN)
	metricZoneState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_zone_state", Help: "1 for the zone witness's verdict on a zone of a multi-zone member cluster (Alive, Unknown, Failed), 0 for the others.",
	}, []string{"namespace", "name", "member_cluster", "zone", "state"})
	metricSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_membership_steps_total", Help: "Steps of operations (membership changes and rolls) taken by the hub, by action and result.",
	}, []string{"namespace", "name", "action", "result"})
)

func init() {
	metrics.Registry.MustRegister(metricMembers, metricReady, metricCondition, metricZoneFailures, metricSteps,
		metricPassDeadline, metricClusterRead, metricClusterReadTimeouts, metricCARotation, metricCARotationDone, metricCARotationHeld, metricZoneState)
}

// recordMetrics exports the status a pass computed and the step it took.
func recordMetrics(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus, d *decision, res applyResult) {
	metricMembers.WithLabelValues(ec.Namespace, ec.Name).Set(float64(len(st.Members)))
	metricReady.WithLabelValues(ec.Namespace, ec.Name).Set(float64(st.ReadyMembers))
	for _, t := range []string{etcdfedv1.ConditionAvailable, etcdfedv1.ConditionAllMembersReady, etcdfedv1.ConditionProgressing, etcdfedv1.ConditionDegraded, etcdfedv1.ConditionFailureTolerant} {
		val := 0.0
		if meta.IsStatusConditionTrue(st.Conditions, t) {
			val = 1
		}
		metricCondition.WithLabelValues(ec.Namespace, ec.Name, t).Set(val)
	}
	if d.placement.Current.Members > 0 {
		metricZoneFailures.WithLabelValues(ec.Namespace, ec.Name).Set(float64(d.placement.Current.ZoneFailures))
	}
	if a := d.plan.Action; a != "" && a != membership.ActNone && a != membership.ActWait && a != membership.ActHoldCARotation {
		result := "ok"
		if res.stepErr != nil {
			result = "error"
		}
		metricSteps.WithLabelValues(ec.Namespace, ec.Name, string(a), result).Inc()
	}
	recordMaintenanceMetrics(ec, st)
	if cr := st.CARotation; cr != nil {
		for _, p := range []etcdfedv1.CARotationPhase{etcdfedv1.CARotationTrusting, etcdfedv1.CARotationReissuing, etcdfedv1.CARotationDropping, etcdfedv1.CARotationCompleted, etcdfedv1.CARotationRefused} {
			val := 0.0
			if cr.Phase == p {
				val = 1
			}
			metricCARotation.WithLabelValues(ec.Namespace, ec.Name, string(p)).Set(val)
		}
		metricCARotationDone.WithLabelValues(ec.Namespace, ec.Name).Set(float64(cr.MembersDone))
		held := 0.0
		if cr.HeldSince != nil && cr.ContinuedAt == nil && cr.Phase == etcdfedv1.CARotationTrusting {
			held = float64(cr.HeldSince.Unix())
		}
		metricCARotationHeld.WithLabelValues(ec.Namespace, ec.Name).Set(held)
	}
}

func forgetMetrics(ec *etcdfedv1.EtcdCluster) {
	for _, g := range []*prometheus.GaugeVec{metricMembers, metricReady, metricZoneFailures} {
		g.DeleteLabelValues(ec.Namespace, ec.Name)
	}
	metricCondition.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricCARotation.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricCARotationDone.DeleteLabelValues(ec.Namespace, ec.Name)
	metricCARotationHeld.DeleteLabelValues(ec.Namespace, ec.Name)
	metricSteps.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricPassDeadline.DeleteLabelValues(ec.Namespace, ec.Name)
	forgetMaintenanceMetrics(ec)
}
