package pod

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
	"github.com/etcdfed/etcdfed/spoke/restore"
)

// Container and volume names.
const (
	ContainerEtcd    = "etcd"
	ContainerWaitDNS = "wait-dns"
	// ContainerPrepareData prepares the data directory before etcd: it
	// refuses data of another cluster (spec.bootstrap.clusterID) and
	// restores an empty one from a snapshot (spec.bootstrap.restore).
	ContainerPrepareData = "prepare-data"
	// ContainerInstallHelper copies the helper binary into VolumeHelper,
	// where the etcd container's preStop hook runs it (etcd's image holds
	// no etcdfed-init).
	ContainerInstallHelper = "install-helper"
	VolumeData             = "data"
	VolumeTLS              = "tls"
	// VolumeHelper is an emptyDir holding the helper binary for the etcd
	// container's preStop hook.
	VolumeHelper = "helper"
	// VolumeStoreCredentials is the restore's store credentials Secret.
	VolumeStoreCredentials = "store-credentials"
)

// HelperCommand is the helper binary the init containers run, found on the
// helper image's PATH (/usr/local/bin/etcdfed-init in etcdfed's images; the
// local node agent runs bin/etcdfed-init). It holds only what the init
// containers need (cmd/etcdfed-init).
const HelperCommand = "etcdfed-init"

// HelperMountPath is where VolumeHelper is mounted (both containers);
// HelperPath is the helper binary in it.
const (
	HelperMountPath = "/etcdfed/helper"
	HelperPath      = HelperMountPath + "/" + HelperCommand
)

// EnvCAHash carries spec.tls.caHash into the etcd container while the
// ring's CA is rotated, so that a change of it changes the pod.
const EnvCAHash = "ETCDFED_CA_HASH"

// ZoneLabel is the node label the pod's node affinity uses.
const ZoneLabel = corev1.LabelTopologyZone

// AnnotationSpecHash records the hash of the rendered pod spec (bootstrap
// flags left out). A pod whose hash differs from the one Build gives now
// was built from another EtcdMember spec, or by another spoke version.
const AnnotationSpecHash = "etcdfed.dev/pod-spec-hash"

// AnnotationMemberSpecHash records the hash of the EtcdMember spec the pod
// was built from (bootstrap left out, see MemberSpecHash). Only when it
// differs did the hub change the member, which is what may replace a
// running pod; a new spoke version rendering the same spec differently
// never does.
const AnnotationMemberSpecHash = "etcdfed.dev/member-spec-hash"

// DefaultWaitDNSTimeout bounds one run of the wait-dns init container; the
// kubelet restarts it after that, so the pod keeps waiting with a fresh log.
const DefaultWaitDNSTimeout = 10 * time.Minute

// Params are the inputs of Build besides the EtcdMember.
type Params struct {
	// HelperImage runs the init containers (HelperCommand).
	HelperImage string
	// WaitDNSTimeout is passed to wait-dns; 0 means DefaultWaitDNSTimeout.
	WaitDNSTimeout time.Duration
	// ClaimName is the data volume of the member's current incarnation.
	ClaimName string
	// Advertised are the ports in the member's advertised URLs.
	Advertised spec.Ports
	// LoadBalancerAddress is the load balancer's ingress IP or hostname;
	// with LoadBalancer exposure it is what the member's DNS name must
	// resolve to before etcd starts.
	LoadBalancerAddress string
}

// Build renders the member's pod. The caller sets the owner reference.
func Build(m *etcdfedv1.EtcdMember, p Params) *corev1.Pod {
	if p.WaitDNSTimeout == 0 {
		p.WaitDNSTimeout = DefaultWaitDNSTimeout
	}
	tpl := m.Spec.PodTemplate
	labels := map[string]string{}
	maps.Copy(labels, tpl.Labels)
	maps.Copy(labels, spec.Labels(m, spec.ComponentPod, m.Spec.Incarnation))
	annotations := map[string]string{}
	maps.Copy(annotations, tpl.Annotations)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.PodName(m),
			Namespace:   m.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name:            ContainerWaitDNS,
				Image:           p.HelperImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{
					HelperCommand, "wait-dns",
					"--name", m.Spec.DNSName,
					"--address", "$(" + EnvExpectedAddress + ")",
					"--timeout", p.WaitDNSTimeout.String(),
				},
				Env: []corev1.EnvVar{expectedAddressEnv(m, p.LoadBalancerAddress)},
			}, {
				Name:            ContainerInstallHelper,
				Image:           p.HelperImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{HelperCommand, "install", HelperPath},
				VolumeMounts:    []corev1.VolumeMount{{Name: VolumeHelper, MountPath: HelperMountPath}},
			}},
			Containers: []corev1.Container{{
				Name:            ContainerEtcd,
				Image:           m.Spec.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         append([]string{EtcdCommand}, EtcdArgs(m, p.Advertised)...),
				Env:             []corev1.EnvVar{fieldEnv(EnvPodIP, "status.podIP")},
				Ports: []corev1.ContainerPort{
					{Name: "peer", ContainerPort: spec.PeerPort, Protocol: corev1.ProtocolTCP},
					{Name: "client", ContainerPort: spec.ClientPort, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: spec.MetricsPort, Protocol: corev1.ProtocolTCP},
				},
				VolumeMounts: volumeMounts(m),
				Lifecycle:    &corev1.Lifecycle{PreStop: preStop(m, p.Advertised)},
			}},
			Volumes:                       volumes(m, p.ClaimName),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(spec.TerminationGraceSeconds(m)),
			NodeSelector:                  maps.Clone(tpl.NodeSelector),
			Tolerations:                   tpl.Tolerations,
			PriorityClassName:             tpl.PriorityClassName,
			Affinity:                      affinity(m),
			EnableServiceLinks:            ptr.To(false),
			AutomountServiceAccountToken:  ptr.To(false),
		},
	}
	if c, v := prepareDataContainer(m, p); c != nil {
		// After the DNS wait, right before etcd.
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, *c)
		pod.Spec.Volumes = append(pod.Spec.Volumes, v...)
	}
	harden(m, &pod.Spec)
	if h := m.Spec.TLS.CAHash; h != "" {
		// etcd reads its trusted CA file only when it starts: a changed CA
		// trust (a CA rotation step) is a new pod.
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: EnvCAHash, Value: h})
	}
	pod.Annotations[AnnotationSpecHash] = SpecHash(&pod.Spec)
	pod.Annotations[AnnotationMemberSpecHash] = MemberSpecHash(m)
	if token := m.Annotations[etcdfedv1.AnnotationRestart]; token != "" {
		// The hub's last restart request this pod answers (Decide).
		pod.Annotations[etcdfedv1.AnnotationRestart] = token
	}
	return pod
}

// harden sets what a real kubelet needs of the pod beyond its commands:
// the etcd container's probes and resources, the helpers' resources, and
// the security contexts (security.go).
func harden(m *etcdfedv1.EtcdMember, ps *corev1.PodSpec) {
	ps.SecurityContext = podSecurityContext()
	for i := range ps.InitContainers {
		c := &ps.InitContainers[i]
		c.Resources = spec.HelperResources()
		c.SecurityContext = containerSecurityContext()
	}
	for i := range ps.Containers {
		c := &ps.Containers[i]
		if c.Name != ContainerEtcd {
			continue
		}
		c.StartupProbe, c.LivenessProbe, c.ReadinessProbe = probes(m)
		c.Resources = spec.EtcdResources(m)
		c.SecurityContext = containerSecurityContext()
	}
}

// prepareDataContainer is the init container that prepares the data
// directory: it refuses data of another cluster than
// spec.bootstrap.clusterID, and restores an empty one from
// spec.bootstrap.restore (with the volume of the store's credentials).
// nil when there is neither.
func prepareDataContainer(m *etcdfedv1.EtcdMember, p Params) (*corev1.Container, []corev1.Volume) {
	b := m.Spec.Bootstrap
	if b == nil || (b.Restore == nil && b.ClusterID == "") {
		return nil, nil
	}
	in := restore.Input{DataDir: DataDir, ClusterID: b.ClusterID}
	var vols []corev1.Volume
	c := &corev1.Container{
		Name:            ContainerPrepareData,
		Image:           p.HelperImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		VolumeMounts:    []corev1.VolumeMount{{Name: VolumeData, MountPath: DataMountPath}},
		// Why it failed (a refused snapshot, data of another cluster) is
		// the last lines of its log.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if r := b.Restore; r != nil {
		in.Store, in.Object, in.SHA256, in.RevisionBump = r.Store, r.Object, r.SHA256, r.RevisionBump
		in.Name, in.PeerURL, in.InitialCluster, in.Token = m.Spec.MemberName, spec.PeerURL(m, p.Advertised), b.InitialCluster, b.Token
		if name := r.Store.CredentialsSecretName; name != "" {
			in.CredentialsDir = StoreCredentialsMountPath
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeStoreCredentials, MountPath: StoreCredentialsMountPath, ReadOnly: true})
			vols = append(vols, corev1.Volume{Name: VolumeStoreCredentials, VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: ptr.To[int32](0o400)},
			}})
		}
	}
	c.Command = append([]string{HelperCommand, "prepare-data"}, restore.Args(in)...)
	return c, vols
}

// MemberSpecHash hashes the EtcdMember spec without the fields whose
// change restarts nothing: spec.bootstrap (the hub switches it from new to
// existing and records the cluster ID once the ring formed; etcd reads
// those flags only at its first start) and spec.disruption (a drain's
// grant opens the member's PodDisruptionBudget, nothing else). The hub
// rolls every other change out one member at a time.
func MemberSpecHash(m *etcdfedv1.EtcdMember) string {
	s := m.Spec.DeepCopy()
	s.Bootstrap, s.Disruption = nil, nil
	return hashJSON(s)
}

// SpecHash hashes a pod spec with the bootstrap flags left out: etcd reads
// --initial-cluster* only at its first start, so they never make a running
// pod outdated.
func SpecHash(ps *corev1.PodSpec) string {
	c := ps.DeepCopy()
	for i := range c.Containers {
		if c.Containers[i].Name == ContainerEtcd {
			c.Containers[i].Command = slices.DeleteFunc(c.Containers[i].Command, func(a string) bool {
				return strings.HasPrefix(a, "--initial-cluster")
			})
		}
	}
	return hashJSON(c)
}

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // API types always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// expectedAddressEnv is what the member's DNS name must resolve to: the pod
// IP (PodIP), the node IP (NodePort) or the load balancer's address.
func expectedAddressEnv(m *etcdfedv1.EtcdMember, lbAddress string) corev1.EnvVar {
	switch spec.ExposeType(m) {
	case etcdfedv1.ExposeNodePort:
		return fieldEnv(EnvExpectedAddress, "status.hostIP")
	case etcdfedv1.ExposeLoadBalancer:
		return corev1.EnvVar{Name: EnvExpectedAddress, Value: lbAddress}
	default:
		return fieldEnv(EnvExpectedAddress, "status.podIP")
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path},
	}}
}

// preStop is the etcd container's preStop hook: when the member leads,
// leadership moves to another voter before etcd receives SIGTERM (a pod
// deletion, a drain, a roll, a move), so that etcd's own shutdown, which
// first stops serving clients and only then transfers leadership, never
// leaves the ring without a leader that serves. Bounded to a third of the
// grace (at most 10 s): SIGTERM follows within the grace either way.
// Kubelet expands no $(VAR) in a hook: the endpoint is the member's
// advertised client URL, whose DNS name its certificate carries.
func preStop(m *etcdfedv1.EtcdMember, adv spec.Ports) *corev1.LifecycleHandler {
	timeout := min(time.Duration(spec.TerminationGraceSeconds(m))*time.Second/3, 10*time.Second)
	cmd := []string{HelperPath, "prestop", "--endpoint", spec.ClientURL(m, adv), "--timeout", timeout.String()}
	if spec.TLSEnabled(m) {
		cmd = append(cmd, "--ca", CAFile, "--cert", CertFile, "--key", KeyFile)
	}
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}
}

func volumeMounts(m *etcdfedv1.EtcdMember) []corev1.VolumeMount {
	vm := []corev1.VolumeMount{{Name: VolumeData, MountPath: DataMountPath}, {Name: VolumeHelper, MountPath: HelperMountPath, ReadOnly: true}}
	if spec.TLSEnabled(m) {
		vm = append(vm, corev1.VolumeMount{Name: VolumeTLS, MountPath: TLSMountPath, ReadOnly: true})
	}
	return vm
}

func volumes(m *etcdfedv1.EtcdMember, claim string) []corev1.Volume {
	v := []corev1.Volume{{Name: VolumeData, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}, {Name: VolumeHelper, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("128Mi"))},
	}}}
	if spec.TLSEnabled(m) {
		v = append(v, corev1.Volume{Name: VolumeTLS, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: m.Spec.TLS.SecretName, DefaultMode: ptr.To[int32](0o400)},
		}})
	}
	return v
}

// affinity pins the pod to the member's zone and prefers a node without
// another member of the same EtcdCluster.
func affinity(m *etcdfedv1.EtcdMember) *corev1.Affinity {
	a := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
					etcdfedv1.LabelClusterUID: m.Spec.Cluster.UID,
					etcdfedv1.LabelComponent:  spec.ComponentPod,
				}},
			},
		}},
	}}
	if m.Spec.Zone != "" {
		a.NodeAffinity = &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{m.Spec.Zone},
					}},
				}},
			},
		}
	}
	return a
}
