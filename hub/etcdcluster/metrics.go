package etcdcluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
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

	// The series the shipped alerts and dashboard need per member and per
	// ring (config/monitoring), computed from the status a pass wrote.
	metricVoters = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_voting_members", Help: "Voting members of the EtcdCluster in etcd (learners and members not yet added aside); quorum is half of them plus one.",
	}, labelsNN)
	metricAdoption = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_adoption_originals", Help: "Original members of an adopted cluster (spec.adopt), by state: serving (still in etcd) or retired.",
	}, []string{"namespace", "name", "state"})
	metricGrace = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_member_grace_period_seconds", Help: "spec.failurePolicy.memberGracePeriod: how long a member may be not ready before the hub replaces it.",
	}, labelsNN)
	metricMemberInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_member_info", Help: "1 for each recorded member, with its member cluster, zone, role and etcd version.",
	}, []string{"namespace", "name", "member", "member_cluster", "zone", "role", "version"})
	metricMemberReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_member_ready", Help: "1 when the member answers its health endpoint, else 0.",
	}, []string{"namespace", "name", "member"})
	metricMemberReadyChanged = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_member_ready_changed_timestamp_seconds", Help: "When the member's readiness last changed, on the hub's clock (Unix time).",
	}, []string{"namespace", "name", "member"})
	metricCertExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_certificate_expiry_timestamp_seconds", Help: "When a certificate the hub keeps for the EtcdCluster expires (Unix time): the CA (ca), the hub's etcd client certificate (hub-client), each member's (member/<name>). The hub renews leaves 30 days ahead.",
	}, []string{"namespace", "name", "certificate"})
	metricRevoked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_revoked_certificates", Help: "How many serial numbers the EtcdCluster's current revocation list holds (spec.tls.revokedCertificates).",
	}, []string{"namespace", "name"})
	metricRevocationBehind = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_revocation_members_behind", Help: "How many members of the EtcdCluster do not run with its current revocation list yet (status.revocation: membersTotal - membersCurrent).",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(metricAdoption)
	metrics.Registry.MustRegister(metricMembers, metricReady, metricCondition, metricZoneFailures, metricSteps,
		metricPassDeadline, metricClusterRead, metricClusterReadTimeouts, metricCARotation, metricCARotationDone, metricCARotationHeld, metricZoneState,
		metricVoters, metricGrace, metricMemberInfo, metricMemberReady, metricMemberReadyChanged, metricCertExpiry,
		metricRevoked, metricRevocationBehind)
}

// recordMetrics exports the status a pass computed and the step it took.
func recordMetrics(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus, d *decision, res applyResult) {
	metricMembers.WithLabelValues(ec.Namespace, ec.Name).Set(float64(len(st.Members)))
	metricReady.WithLabelValues(ec.Namespace, ec.Name).Set(float64(st.ReadyMembers))
	// Exported from the first pass on, so that increase() sees the first
	// deadline exceeded.
	metricPassDeadline.WithLabelValues(ec.Namespace, ec.Name)
	recordMemberMetrics(ec, st)
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
	if a := d.plan.Action; !idleAction(a) {
		result := "ok"
		if res.stepErr != nil {
			result = "error"
		}
		metricSteps.WithLabelValues(ec.Namespace, ec.Name, string(a), result).Inc()
	}
	recordMaintenanceMetrics(ec, st)
	recordLeaderMetrics(ec, st)
	if a := st.Adoption; a != nil {
		retired := 0
		for _, o := range a.Originals {
			if o.Retired != nil {
				retired++
			}
		}
		metricAdoption.WithLabelValues(ec.Namespace, ec.Name, "serving").Set(float64(len(a.Originals) - retired))
		metricAdoption.WithLabelValues(ec.Namespace, ec.Name, "retired").Set(float64(retired))
	}
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
	for _, g := range []*prometheus.GaugeVec{metricMembers, metricReady, metricZoneFailures, metricVoters, metricGrace} {
		g.DeleteLabelValues(ec.Namespace, ec.Name)
	}
	for _, g := range []*prometheus.GaugeVec{metricMemberInfo, metricMemberReady, metricMemberReadyChanged, metricCertExpiry, metricRevoked, metricRevocationBehind} {
		g.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	}
	metricCondition.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricCARotation.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricAdoption.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricCARotationDone.DeleteLabelValues(ec.Namespace, ec.Name)
	metricCARotationHeld.DeleteLabelValues(ec.Namespace, ec.Name)
	metricSteps.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricPassDeadline.DeleteLabelValues(ec.Namespace, ec.Name)
	forgetMaintenanceMetrics(ec)
	metricLeaderMoves.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricLeaderInPlace.DeleteLabelValues(ec.Namespace, ec.Name)
}

// recordMemberMetrics exports each member's placement, role and
// readiness, the voters, and the grace a member has before it is replaced.
func recordMemberMetrics(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) {
	l := prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name}
	metricMemberInfo.DeletePartialMatch(l)
	metricMemberReady.DeletePartialMatch(l)
	metricMemberReadyChanged.DeletePartialMatch(l)
	voters := 0
	for _, m := range st.Members {
		if m.ID != "" && m.Role != etcdfedv1.RoleLearner {
			voters++
		}
		metricMemberInfo.WithLabelValues(ec.Namespace, ec.Name, m.Name, m.Cluster, m.Zone, string(m.Role), m.Version).Set(1)
		ready := 0.0
		if m.Ready {
			ready = 1
		}
		metricMemberReady.WithLabelValues(ec.Namespace, ec.Name, m.Name).Set(ready)
		if m.LastTransitionTime != nil {
			metricMemberReadyChanged.WithLabelValues(ec.Namespace, ec.Name, m.Name).Set(float64(m.LastTransitionTime.Unix()))
		}
	}
	metricVoters.WithLabelValues(ec.Namespace, ec.Name).Set(float64(voters))
	metricGrace.WithLabelValues(ec.Namespace, ec.Name).Set(durationOr(ec.Spec.FailurePolicy.MemberGracePeriod, 5*time.Minute).Seconds())
}

// recordCertificateMetrics exports the expiry of the certificates the
// pass saw: the CA, the hub's client certificate, and the members' in the
// member clusters it could read (a member in a cluster out of sight keeps
// no series until it is seen again).
func recordCertificateMetrics(ec *etcdfedv1.EtcdCluster, s *snapshot) {
	metricCertExpiry.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	if rs := ec.Status.Revocation; rs != nil {
		metricRevoked.WithLabelValues(ec.Namespace, ec.Name).Set(float64(rs.Revoked))
		metricRevocationBehind.WithLabelValues(ec.Namespace, ec.Name).Set(float64(rs.MembersTotal - rs.MembersCurrent))
	} else {
		metricRevoked.DeleteLabelValues(ec.Namespace, ec.Name)
		metricRevocationBehind.DeleteLabelValues(ec.Namespace, ec.Name)
	}
	if !ec.Spec.TLS.Mode.Enabled() {
		return
	}
	set := func(cert string, certPEM []byte) {
		if t, ok := pki.NotAfter(certPEM); ok {
			metricCertExpiry.WithLabelValues(ec.Namespace, ec.Name, cert).Set(float64(t.Unix()))
		}
	}
	if s.pki.ca != nil {
		set("ca", s.pki.ca.CertPEM)
	}
	if s.pki.hubClient != nil {
		set("hub-client", s.pki.hubClient.Data[pki.KeyCert])
	}
	for _, m := range ec.Status.Members {
		if cs := s.cluster(m.Cluster); cs.visible() {
			if sec := cs.secrets[pki.MemberSecretName(m.Name)]; sec != nil {
				set("member/"+m.Name, sec.Data[pki.KeyCert])
			}
		}
	}
}
