package pod

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Probe paths on etcd's metrics listener (plain HTTP). /livez is a local
// check that passes on a learner and on a member without quorum; /readyz
// needs quorum and fails on a learner, which serves no clients.
const (
	PathLivez  = "/livez"
	PathReadyz = "/readyz"
	// PathHealth is the readiness of an etcd without /readyz: it needs
	// quorum, and a learner fails it (it serves no linearizable read).
	PathHealth = "/health"
)

// etcd351LivezPatch is the first 3.5 patch release with /livez and /readyz
// (etcd-io/etcd server/v3 etcdserver/api/etcdhttp/health.go, new in
// v3.5.11; v3.5.10 serves /health only). 3.6 and later have them.
const etcd351LivezPatch = 11

// hasLivez reports whether etcd version (such as "3.6.16") serves /livez
// and /readyz. A version it cannot read is taken as one that does: every
// release etcdfed knows after 3.5.10 does.
func hasLivez(version string) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) != 3 {
		return true
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	patch, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || major != 3 {
		return true
	}
	switch {
	case minor < 5:
		return false
	case minor == 5:
		return patch >= etcd351LivezPatch
	default:
		return true
	}
}

// probes are the etcd container's startup, liveness and readiness probes.
// Startup waits up to 10 minutes for a first start (a large snapshot to
// apply, a slow disk) before liveness may restart etcd; liveness restarts
// only an etcd that stopped answering locally for 80 s, never one that
// merely lost quorum; readiness every 2 s, because a replacement member
// counts as a ready voter (full redundancy, the disruption budget) only
// once it passes after its promotion. Where etcd has no /livez (3.5.10 and
// older), startup and liveness only connect to the metrics port: their
// /health needs quorum, and restarting members for a lost quorum would make
// it worse.
func probes(m *etcdfedv1.EtcdMember) (startup, liveness, readiness *corev1.Probe) {
	if hasLivez(m.Spec.Version) {
		return httpProbe(PathLivez, 2, 5, 300), httpProbe(PathLivez, 10, 15, 8), httpProbe(PathReadyz, 2, 5, 3)
	}
	return tcpProbe(2, 5, 300), tcpProbe(10, 15, 8), httpProbe(PathHealth, 2, 5, 3)
}

func httpProbe(path string, period, timeout, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path:   path,
			Port:   intstr.FromInt32(spec.MetricsPort),
			Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    period,
		TimeoutSeconds:   timeout,
		FailureThreshold: failures,
		SuccessThreshold: 1,
	}
}

func tcpProbe(period, timeout, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(spec.MetricsPort)}},
		PeriodSeconds:    period,
		TimeoutSeconds:   timeout,
		FailureThreshold: failures,
		SuccessThreshold: 1,
	}
}
