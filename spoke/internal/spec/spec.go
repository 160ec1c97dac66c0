// Package spec resolves an EtcdMember's defaults and derives the names,
// labels and URLs every spoke component agrees on. Pure functions only.
package spec

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// FieldOwner is the field manager of every write the spoke makes.
const FieldOwner = "etcdfed-spoke"

// Finalizer keeps an EtcdMember until the spoke has cleaned up after it.
const Finalizer = "etcdfed.dev/spoke"

// Component label values.
const (
	ComponentData = "data"
	ComponentPod  = "pod"
	ComponentPeer = "peer"
	// ComponentNetworkPolicy labels a member's NetworkPolicy.
	ComponentNetworkPolicy = "network-policy"
)

// Ports etcd listens on inside the pod.
const (
	ClientPort        = etcdfedv1.DefaultClientPort
	PeerPort          = etcdfedv1.DefaultPeerPort
	MetricsPort int32 = 2381
)

// The names of the member's objects derive from the EtcdMember's name, which
// carries the ring's namespace and name (etcdfedv1.MemberObjectName), or is
// the member's name alone for an EtcdMember written before that scheme.

// PodName is the name of the member's pod.
func PodName(m *etcdfedv1.EtcdMember) string { return m.Name }

// ServiceName is the name of the member's Service (NodePort, LoadBalancer).
func ServiceName(m *etcdfedv1.EtcdMember) string { return m.Name }

// ClaimName is the name of the member's data volume for one incarnation.
func ClaimName(m *etcdfedv1.EtcdMember, incarnation int64) string {
	return m.Name + "-data-" + strconv.FormatInt(incarnation, 10)
}

// ExposeType returns spec.expose.type with its default, PodIP.
func ExposeType(m *etcdfedv1.EtcdMember) etcdfedv1.ExposeType {
	if m.Spec.Expose.Type == "" {
		return etcdfedv1.ExposePodIP
	}
	return m.Spec.Expose.Type
}

// TLSEnabled reports whether peer and client traffic use TLS (the default).
func TLSEnabled(m *etcdfedv1.EtcdMember) bool { return m.Spec.TLS.Mode.Enabled() }

// Scheme is https, or http when TLS is disabled.
func Scheme(m *etcdfedv1.EtcdMember) string { return m.Spec.TLS.Mode.URLScheme() }

// URL is scheme://<dnsName>:<port>.
func URL(m *etcdfedv1.EtcdMember, port int32) string {
	return etcdfedv1.MemberURL(m.Spec.TLS.Mode, m.Spec.DNSName, port)
}

// ReclaimPolicy returns spec.storage.volumeReclaimPolicy with its default,
// Retain.
func ReclaimPolicy(m *etcdfedv1.EtcdMember) etcdfedv1.VolumeReclaimPolicy {
	if m.Spec.Storage.VolumeReclaimPolicy == "" {
		return etcdfedv1.VolumeRetain
	}
	return m.Spec.Storage.VolumeReclaimPolicy
}

// StorageSize returns spec.storage.size with its default.
func StorageSize(m *etcdfedv1.EtcdMember) resource.Quantity {
	if m.Spec.Storage.Size != nil {
		return *m.Spec.Storage.Size
	}
	return resource.MustParse(etcdfedv1.DefaultStorageSize)
}

// EtcdVersion is the etcd release the member runs (spec.version), whose
// flags the spoke renders; the policy's default (the newest line) when it
// is empty or not a release.
func EtcdVersion(m *etcdfedv1.EtcdMember) etcdversion.Version {
	if v, err := etcdversion.Parse(m.Spec.Version); err == nil {
		return v
	}
	return etcdversion.Default()
}

// HeartbeatMillis returns spec.etcd.heartbeatIntervalMillis with its default.
func HeartbeatMillis(m *etcdfedv1.EtcdMember) int32 {
	if v := m.Spec.Etcd.HeartbeatIntervalMillis; v != nil {
		return *v
	}
	return etcdfedv1.DefaultHeartbeatIntervalMillis
}

// ElectionMillis returns spec.etcd.electionTimeoutMillis with its default.
func ElectionMillis(m *etcdfedv1.EtcdMember) int32 {
	if v := m.Spec.Etcd.ElectionTimeoutMillis; v != nil {
		return *v
	}
	return etcdfedv1.DefaultElectionTimeoutMillis
}

// TerminationGraceSeconds returns the pod template's grace period with its
// default: long enough for etcd to stop cleanly after SIGTERM. A leader
// first hands leadership to a follower, waiting up to etcd's request
// timeout (5 s plus two election timeouts), then closes its database; the
// default is 15 s plus two election timeouts, and never below 30 s.
func TerminationGraceSeconds(m *etcdfedv1.EtcdMember) int64 {
	if v := m.Spec.PodTemplate.TerminationGracePeriodSeconds; v != nil {
		return *v
	}
	// Round the election timeouts up to whole seconds.
	g := 15 + (2*int64(ElectionMillis(m))+999)/1000
	return max(g, 30)
}

// Default requests of the init containers (wait-dns, prepare-data): small
// and without limits, so that they never make the pod BestEffort and never
// hold a node's capacity.
const (
	HelperCPURequest    = "10m"
	HelperMemoryRequest = "32Mi"
)

// EtcdResources returns the etcd container's resources: the pod template's,
// with etcdfedv1.DefaultEtcdCPURequest and DefaultEtcdMemoryRequest
// requested for cpu and memory where neither a request nor a limit names
// them (a limit alone makes the kubelet request as much), so the pod is
// never BestEffort.
func EtcdResources(m *etcdfedv1.EtcdMember) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	if t := m.Spec.PodTemplate.Resources; t != nil {
		r = *t.DeepCopy()
	}
	for name, def := range map[corev1.ResourceName]string{
		corev1.ResourceCPU:    etcdfedv1.DefaultEtcdCPURequest,
		corev1.ResourceMemory: etcdfedv1.DefaultEtcdMemoryRequest,
	} {
		_, req := r.Requests[name]
		_, lim := r.Limits[name]
		if req || lim {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = resource.MustParse(def)
	}
	return r
}

// HelperResources are the init containers' resources.
func HelperResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(HelperCPURequest),
		corev1.ResourceMemory: resource.MustParse(HelperMemoryRequest),
	}}
}

// Labels returns the labels of an object of the member: SelectorLabels
// (cluster UID, member, and the EtcdMember's name when it is not the
// member's), managed-by, incarnation and component, and the cluster's name
// and namespace when they are valid label values.
func Labels(m *etcdfedv1.EtcdMember, component string, incarnation int64) map[string]string {
	l := SelectorLabels(m)
	l[etcdfedv1.LabelManagedBy] = etcdfedv1.ManagedByValue
	l[etcdfedv1.LabelIncarnation] = strconv.FormatInt(incarnation, 10)
	l[etcdfedv1.LabelComponent] = component
	if len(validation.IsValidLabelValue(m.Spec.Cluster.Name)) == 0 {
		l[etcdfedv1.LabelClusterName] = m.Spec.Cluster.Name
	}
	if len(validation.IsValidLabelValue(m.Spec.Cluster.Namespace)) == 0 {
		l[etcdfedv1.LabelClusterNamespace] = m.Spec.Cluster.Namespace
	}
	return l
}

// SelectorLabels select every object of the member (all incarnations): the
// ring's UID and the member's name, and the EtcdMember's name when it is not
// the member's (etcdfedv1.MemberObjectName). An EtcdMember named after the
// member alone (written before that scheme) keeps the selector its objects
// were created with, so that nothing of a running member changes.
func SelectorLabels(m *etcdfedv1.EtcdMember) map[string]string {
	l := map[string]string{
		etcdfedv1.LabelClusterUID: m.Spec.Cluster.UID,
		etcdfedv1.LabelMember:     m.Spec.MemberName,
	}
	if m.Name != m.Spec.MemberName {
		l[etcdfedv1.LabelMemberObject] = m.Name
	}
	return l
}

// MemberOfLabels is the EtcdMember an object labelled by SelectorLabels
// belongs to ("" when the labels name none).
func MemberOfLabels(labels map[string]string) string {
	if o := labels[etcdfedv1.LabelMemberObject]; o != "" {
		return o
	}
	return labels[etcdfedv1.LabelMember]
}

// PodSelector selects the member's pod of any incarnation (the Service's
// selector).
func PodSelector(m *etcdfedv1.EtcdMember) map[string]string {
	l := SelectorLabels(m)
	l[etcdfedv1.LabelComponent] = ComponentPod
	return l
}

// Incarnation parses the incarnation label of an object; ok is false when it
// is missing or not a number.
func Incarnation(labels map[string]string) (int64, bool) {
	v, ok := labels[etcdfedv1.LabelIncarnation]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// OwnedBy reports whether an object's labels say it belongs to the member
// (SelectorLabels: same cluster UID, member and EtcdMember). Objects of
// another EtcdCluster, or of another EtcdMember, are never touched.
func OwnedBy(m *etcdfedv1.EtcdMember, labels map[string]string) bool {
	for k, v := range SelectorLabels(m) {
		if labels[k] != v {
			return false
		}
	}
	return labels[etcdfedv1.LabelMemberObject] == "" || labels[etcdfedv1.LabelMemberObject] == m.Name
}

// Ports are the peer and client ports a member advertises: 2380 and 2379
// for PodIP and LoadBalancer exposure, the node ports for NodePort.
type Ports struct {
	Peer   int32
	Client int32
}

// PodPorts are the ports etcd listens on in the pod.
var PodPorts = Ports{Peer: PeerPort, Client: ClientPort}

// PeerURL is the member's advertised peer URL with the given ports.
func PeerURL(m *etcdfedv1.EtcdMember, p Ports) string { return URL(m, p.Peer) }

// ClientURL is the member's advertised client URL with the given ports.
func ClientURL(m *etcdfedv1.EtcdMember, p Ports) string { return URL(m, p.Client) }
