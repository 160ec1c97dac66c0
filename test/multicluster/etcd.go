package multicluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EtcdMember is one member of a hand-written etcd cluster.
type EtcdMember struct {
	// Name is the etcd member name and the pod name.
	Name string
	// Cluster and Zone say where it runs.
	Cluster *Cluster
	Zone    string
}

// EtcdPodInput describes a TLS-free etcd member pod whose peer and client
// URLs are DNS names, in the shape the spoke renders.
type EtcdPodInput struct {
	Member EtcdMember
	// Namespace of the pod and its claim.
	Namespace string
	// Domain: the member advertises <name>.<domain>.
	Domain string
	// InitialCluster is every member's name.
	InitialCluster []string
	// State is "new" or "existing".
	State string
	// Token is --initial-cluster-token.
	Token string
	// Image of the container; default registry.k8s.io/etcd:3.6.16-0.
	Image string
}

// MemberHost is a member's DNS name.
func MemberHost(name, domain string) string { return name + "." + strings.TrimSuffix(domain, ".") }

// ClientURL is a member's client URL.
func ClientURL(name, domain string) string { return "http://" + MemberHost(name, domain) + ":2379" }

// EtcdPod returns the pod and its data claim.
func EtcdPod(in EtcdPodInput) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
	if in.Image == "" {
		in.Image = "registry.k8s.io/etcd:3.6.16-0"
	}
	var initial []string
	for _, n := range in.InitialCluster {
		initial = append(initial, n+"=http://"+MemberHost(n, in.Domain)+":2380")
	}
	host := MemberHost(in.Member.Name, in.Domain)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: in.Member.Name + "-data", Namespace: in.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("metrics")}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 2}
	}
	grace := int64(10)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: in.Member.Name, Namespace: in.Namespace, Labels: map[string]string{"app": "etcd", "member": in.Member.Name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{in.Member.Zone}}}}}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}},
			Containers: []corev1.Container{{
				Name:    "etcd",
				Image:   in.Image,
				Command: []string{"/usr/local/bin/etcd"},
				Args: []string{
					"--name=" + in.Member.Name,
					"--data-dir=/var/lib/etcd/data",
					"--listen-peer-urls=http://$(POD_IP):2380",
					"--listen-client-urls=http://$(POD_IP):2379",
					"--listen-metrics-urls=http://$(POD_IP):2381",
					"--initial-advertise-peer-urls=http://" + host + ":2380",
					"--advertise-client-urls=http://" + host + ":2379",
					"--initial-cluster=" + strings.Join(initial, ","),
					"--initial-cluster-state=" + in.State,
					"--initial-cluster-token=" + in.Token,
					"--unsafe-no-fsync",
				},
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Ports: []corev1.ContainerPort{
					{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}, {Name: "metrics", ContainerPort: 2381}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				ReadinessProbe: probe("/readyz", 1, 3),
				LivenessProbe:  probe("/livez", 5, 6),
				StartupProbe:   probe("/readyz", 1, 120),
			}},
		},
	}
	return pod, claim
}

// memberStatus is one endpoint's own view.
func memberStatus(ctx context.Context, c *clientv3.Client, endpoint string) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := c.Status(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	return st, nil
}
