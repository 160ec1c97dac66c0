package member

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/catrust"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/etcdlog"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// snapshot is everything one pass observed of a member. observe builds it;
// decide and computeStatus read it and never change it.
type snapshot struct {
	// m is the EtcdMember as read at the start of the pass.
	m *etcdfedv1.EtcdMember
	// secret is the member's TLS Secret; nil when TLS is off or it does not
	// exist.
	secret *corev1.Secret
	// The objects of the member's names and labels, of each owned kind:
	// claims are the member's PVCs of every incarnation, by name; claim is
	// the PVC of the current incarnation's name, whoever owns it. Each is
	// nil when there is none.
	claims  []corev1.PersistentVolumeClaim
	claim   *corev1.PersistentVolumeClaim
	service *corev1.Service
	pod     *corev1.Pod
	// zone is the zone label of the node the current pod runs on.
	zone string
	// budget is the member's PodDisruptionBudget; nil when none.
	budget *policyv1.PodDisruptionBudget
	// node is the node the current pod runs on; nil when none.
	node *corev1.Node
	// etcd is the member's own view from its etcd.
	etcd etcdRead
	// log is what etcd's log says about its peer connections.
	log logRead
}

// etcdRead is one read of the member's own status from its etcd.
type etcdRead struct {
	// pod is the pod read: of the current incarnation, running, with an
	// IP. nil: none, nothing was read.
	pod *corev1.Pod
	// blocked says why etcd could not be read although the pod runs (the
	// TLS Secret cannot be used).
	blocked *pod.Blocker
	// view is etcd's answer, err why there is none.
	view *etcdfedv1.MemberEtcdView
	err  error
	// next is when to read again (with a pod).
	next time.Duration
}

// logState is what became of the member's etcd log in a pass.
type logState int

const (
	// logOff: logs are not read (Reconciler.Logs is nil); PeerConnections
	// is left as it is.
	logOff logState = iota
	// logNoPod: no running pod of the current incarnation on a node;
	// PeerConnections is removed.
	logNoPod
	// logReady: the pod is ready, so its peers are reachable; not read.
	logReady
	// logNotDue: nothing to read yet (etcd warms up, or was read lately
	// for this pod); PeerConnections is left as it is.
	logNotDue
	// logWasRead: result holds the read.
	logWasRead
)

// logRead is what observe learnt from the member's etcd log.
type logRead struct {
	state logState
	// previous: the read is of etcd's last run (it waits to restart).
	previous bool
	result   etcdlog.Result
	// next is when to look again; 0: when the pod changes.
	next time.Duration
}

// currentPod is p when it is the member's pod of the current incarnation
// and not being deleted, else nil.
func currentPod(m *etcdfedv1.EtcdMember, p *corev1.Pod) *corev1.Pod {
	if p == nil || !spec.OwnedBy(m, p.Labels) || p.DeletionTimestamp != nil {
		return nil
	}
	if inc, ok := spec.Incarnation(p.Labels); !ok || inc != m.Spec.Incarnation {
		return nil
	}
	return p
}

// tlsBlocker says why the member's TLS Secret cannot be used, nil when it
// can (or TLS is off). The hub writes the Secret.
func tlsBlocker(m *etcdfedv1.EtcdMember, sec *corev1.Secret) *pod.Blocker {
	if !spec.TLSEnabled(m) {
		return nil
	}
	name := m.Spec.TLS.SecretName
	if sec == nil {
		return &pod.Blocker{Reason: ReasonTLSSecretMissing, Message: fmt.Sprintf("TLS Secret %s does not exist yet (the hub writes it)", name)}
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(sec.Data[k]) == 0 {
			return &pod.Blocker{Reason: ReasonTLSSecretInvalid, Message: fmt.Sprintf("TLS Secret %s has no %s", name, k)}
		}
	}
	if _, err := etcdstatus.TLSConfig(sec.Data["ca.crt"], sec.Data["tls.crt"], sec.Data["tls.key"], m.Spec.DNSName); err != nil {
		return &pod.Blocker{Reason: ReasonTLSSecretInvalid, Message: fmt.Sprintf("TLS Secret %s: %v", name, err)}
	}
	if want := m.Spec.TLS.CAHash; want != "" {
		// The hub writes the Secret before the spec that names its trust,
		// but this spoke's cache of Secrets can lag behind its cache of
		// members: a pod started now would run etcd on the old trust for
		// good (etcd reads its trusted CAs only at start), and refuse the
		// certificates of the new CA once the hub switches to it.
		if held := catrust.Held(sec.Data["ca.crt"], sec.Data["tls.crt"]); held != want {
			return &pod.Blocker{Reason: ReasonTLSSecretNotCurrent, Message: fmt.Sprintf("TLS Secret %s holds CA trust %q, the member's spec names %q (a CA rotation step): the pod waits until the Secret holds it, since etcd reads its trusted CAs only when it starts", name, held, want)}
		}
	}
	return nil
}

func isReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
