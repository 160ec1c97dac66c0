// Package service is the spoke component for a member's exposure: a
// NodePort or LoadBalancer Service named after the member (PodIP exposure
// has none). Build renders it, Merge folds it into the Service that exists
// (keeping allocated node ports), Exposure reads the advertised ports and
// the load balancer's address back, and Reconcile observes and acts.
package service

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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

// Result is the member's Service after Reconcile.
type Result struct {
	// Service as observed after acting; nil when there is none.
	Service *corev1.Service
	// Conflict is set when a Service of that name is not the member's.
	Conflict string
}

// Reconcile creates or updates the member's Service. With PodIP exposure a
// Service left from an earlier exposure is deleted once no pod exists that
// may still advertise its ports.
func Reconcile(ctx context.Context, c client.Client, scheme *runtime.Scheme, m *etcdfedv1.EtcdMember, podExists bool) (Result, error) {
	log := ctrl.LoggerFrom(ctx)
	key := types.NamespacedName{Namespace: m.Namespace, Name: spec.ServiceName(m)}
	cur := &corev1.Service{}
	if err := c.Get(ctx, key, cur); apierrors.IsNotFound(err) {
		cur = nil
	} else if err != nil {
		return Result{}, fmt.Errorf("get Service: %w", err)
	}
	if cur != nil && !spec.OwnedBy(m, cur.Labels) {
		return Result{Conflict: fmt.Sprintf("Service %s exists but is not this member's (cluster UID %q): it is left alone", key.Name, cur.Labels[etcdfedv1.LabelClusterUID])}, nil
	}
	desired := Build(m)
	switch {
	case desired == nil && cur == nil:
		return Result{}, nil
	case desired == nil:
		if podExists {
			return Result{Service: cur}, nil
		}
		log.Info("Deleting Service of an earlier exposure", "service", key.Name)
		if err := c.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); err != nil && !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("delete Service: %w", err)
		}
		return Result{}, nil
	case cur == nil:
		if err := controllerutil.SetControllerReference(m, desired, scheme); err != nil {
			return Result{}, fmt.Errorf("set owner of Service: %w", err)
		}
		log.Info("Creating Service", "service", key.Name, "type", desired.Spec.Type)
		if err := c.Create(ctx, desired, client.FieldOwner(spec.FieldOwner)); err != nil {
			return Result{}, fmt.Errorf("create Service: %w", err)
		}
		return Result{Service: desired}, nil
	}
	if Merge(cur, desired) {
		log.Info("Updating Service", "service", key.Name, "type", cur.Spec.Type)
		if err := c.Update(ctx, cur, client.FieldOwner(spec.FieldOwner)); err != nil {
			return Result{}, fmt.Errorf("update Service: %w", err)
		}
	}
	return Result{Service: cur}, nil
}
