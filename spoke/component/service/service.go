// Package service is the spoke component for a member's exposure: a
// NodePort or LoadBalancer Service named after the member (PodIP exposure
// has none). Build renders it, Merge folds it into the Service that exists
// (keeping allocated node ports), Decide says what to do about the Service
// that exists, and ExposureOf reads the advertised ports and the load
// balancer's address back. All are pure; spoke/member reads and writes.
package service

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Port names of the Service.
const (
	PortPeer   = "peer"
	PortClient = "client"
)

// Build renders the member's Service, or nil for PodIP exposure. Not-ready
// pods are published: peers must reach a member that is still joining (a
// learner is never ready) or bootstrapping (no quorum yet). Traffic stays on
// the node that runs the pod, whose IP the member advertises for NodePort.
func Build(m *etcdfedv1.EtcdMember) *corev1.Service {
	t := spec.ExposeType(m)
	if t == etcdfedv1.ExposePodIP {
		return nil
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.ServiceName(m),
			Namespace:   m.Namespace,
			Labels:      spec.Labels(m, spec.ComponentPeer, m.Spec.Incarnation),
			Annotations: maps.Clone(m.Spec.Expose.ServiceAnnotations),
		},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceType(t),
			Selector:                 spec.PodSelector(m),
			PublishNotReadyAddresses: true,
			ExternalTrafficPolicy:    corev1.ServiceExternalTrafficPolicyLocal,
			Ports: []corev1.ServicePort{
				{Name: PortPeer, Protocol: corev1.ProtocolTCP, Port: spec.PeerPort, TargetPort: intstr.FromInt32(spec.PeerPort)},
				{Name: PortClient, Protocol: corev1.ProtocolTCP, Port: spec.ClientPort, TargetPort: intstr.FromInt32(spec.ClientPort)},
			},
		},
	}
	if t == etcdfedv1.ExposeLoadBalancer {
		// CEL refuses them with another type; the apiserver too.
		svc.Spec.LoadBalancerSourceRanges = slices.Clone(m.Spec.Expose.LoadBalancerSourceRanges)
	}
	return svc
}

// Merge folds desired into cur, keeping what the apiserver allocated (cluster
// IPs, node ports) and annotations others set. It reports whether cur
// changed.
func Merge(cur, desired *corev1.Service) bool {
	before := cur.DeepCopy()
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	maps.Copy(cur.Labels, desired.Labels)
	if len(desired.Annotations) > 0 {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		maps.Copy(cur.Annotations, desired.Annotations)
	}
	cur.Spec.Type = desired.Spec.Type
	cur.Spec.Selector = desired.Spec.Selector
	cur.Spec.PublishNotReadyAddresses = desired.Spec.PublishNotReadyAddresses
	cur.Spec.ExternalTrafficPolicy = desired.Spec.ExternalTrafficPolicy
	cur.Spec.LoadBalancerSourceRanges = desired.Spec.LoadBalancerSourceRanges
	ports := make([]corev1.ServicePort, 0, len(desired.Spec.Ports))
	for _, p := range desired.Spec.Ports {
		for _, old := range cur.Spec.Ports {
			if old.Name == p.Name && old.Port == p.Port {
				p.NodePort = old.NodePort
			}
		}
		ports = append(ports, p)
	}
	cur.Spec.Ports = ports
	return !equality.Semantic.DeepEqual(before, cur)
}

// Exposure is what a member's exposure tells about its reachable address.
type Exposure struct {
	// Ports advertised in the member's URLs; zero until known.
	Ports spec.Ports
	// LoadBalancerAddress is the ingress IP or hostname (LoadBalancer only).
	LoadBalancerAddress string
	// Waiting says what is not known yet; empty when Ports (and for
	// LoadBalancer the address) are known.
	Waiting string
}

// ExposureOf reads the advertised ports and, for LoadBalancer, the address
// from the member's Service (nil for PodIP or when none exists yet).
func ExposureOf(m *etcdfedv1.EtcdMember, svc *corev1.Service) Exposure {
	switch spec.ExposeType(m) {
	case etcdfedv1.ExposeNodePort:
		if svc == nil || svc.Spec.Type != corev1.ServiceTypeNodePort {
			return Exposure{Waiting: "waiting for the NodePort Service"}
		}
		var p spec.Ports
		for _, sp := range svc.Spec.Ports {
			switch sp.Name {
			case PortPeer:
				p.Peer = sp.NodePort
			case PortClient:
				p.Client = sp.NodePort
			}
		}
		if p.Peer == 0 || p.Client == 0 {
			return Exposure{Waiting: "waiting for node ports to be allocated"}
		}
		return Exposure{Ports: p}
	case etcdfedv1.ExposeLoadBalancer:
		if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return Exposure{Ports: spec.PodPorts, Waiting: "waiting for the LoadBalancer Service"}
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				return Exposure{Ports: spec.PodPorts, LoadBalancerAddress: in.IP}
			}
			if in.Hostname != "" {
				return Exposure{Ports: spec.PodPorts, LoadBalancerAddress: in.Hostname}
			}
		}
		return Exposure{Ports: spec.PodPorts, Waiting: "waiting for the load balancer's ingress address"}
	default:
		return Exposure{Ports: spec.PodPorts}
	}
}

// Action is what to do about the member's Service.
type Action string

const (
	// Keep: nothing to write. Also with PodIP exposure and no Service, and
	// for a Service of an earlier exposure while a pod that may still
	// advertise its ports exists.
	Keep Action = "Keep"
	// Create the Service.
	Create Action = "Create"
	// Update the Service to what Build gives now (Decision.Object).
	Update Action = "Update"
	// Delete a Service left from an earlier exposure (now PodIP), once no
	// pod exists that may still advertise its ports.
	Delete Action = "Delete"
	// Conflict: a Service of that name exists that the member does not
	// own. It is left alone.
	Conflict Action = "Conflict"
)

// Decision is Decide's answer.
type Decision struct {
	Action Action
	// Object is the Service to create (Create) or the existing one with
	// Build's folded in by Merge (Update); nil otherwise.
	Object  *corev1.Service
	Message string
}

// Decide says what to do about the member's Service given the one that
// exists (nil if none) and whether a pod of the member's name exists. It
// is pure: cur is not changed.
func Decide(m *etcdfedv1.EtcdMember, cur *corev1.Service, podExists bool) Decision {
	if cur != nil && !spec.OwnedBy(m, cur.Labels) {
		return Decision{Action: Conflict, Message: fmt.Sprintf("Service %s exists but is not this member's (cluster UID %q): it is left alone", cur.Name, cur.Labels[etcdfedv1.LabelClusterUID])}
	}
	desired := Build(m)
	switch {
	case desired == nil && cur == nil:
		return Decision{Action: Keep}
	case desired == nil && podExists:
		return Decision{Action: Keep, Message: fmt.Sprintf("Service %s of an earlier exposure is kept while a pod exists that may advertise its ports", cur.Name)}
	case desired == nil:
		return Decision{Action: Delete, Message: fmt.Sprintf("Service %s is of an earlier exposure", cur.Name)}
	case cur == nil:
		return Decision{Action: Create, Object: desired}
	}
	merged := cur.DeepCopy()
	if Merge(merged, desired) {
		return Decision{Action: Update, Object: merged}
	}
	return Decision{Action: Keep}
}
