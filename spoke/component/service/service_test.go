package service_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/service"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

func member(t etcdfedv1.ExposeType) *etcdfedv1.EtcdMember {
	return &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: "ring"},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "uid-1"},
			MemberName: "main-0",
			Expose:     etcdfedv1.ExposeSpec{Type: t, ServiceAnnotations: map[string]string{"lb": "internal"}},
		},
	}
}

func TestBuild(t *testing.T) {
	if service.Build(member("")) != nil || service.Build(member(etcdfedv1.ExposePodIP)) != nil {
		t.Error("PodIP exposure must have no Service")
	}
	s := service.Build(member(etcdfedv1.ExposeNodePort))
	if s.Name != "main-0" || s.Spec.Type != corev1.ServiceTypeNodePort || !s.Spec.PublishNotReadyAddresses ||
		s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || s.Annotations["lb"] != "internal" {
		t.Errorf("Service %+v", s)
	}
	if s.Spec.Selector[etcdfedv1.LabelComponent] != "pod" || s.Spec.Selector[etcdfedv1.LabelMember] != "main-0" || s.Spec.Selector[etcdfedv1.LabelClusterUID] != "uid-1" {
		t.Errorf("selector %v", s.Spec.Selector)
	}
	if len(s.Spec.Ports) != 2 || s.Spec.Ports[0].Port != 2380 || s.Spec.Ports[1].Port != 2379 {
		t.Errorf("ports %+v", s.Spec.Ports)
	}
}

func TestMergeKeepsNodePorts(t *testing.T) {
	m := member(etcdfedv1.ExposeNodePort)
	cur := service.Build(m)
	cur.Spec.ClusterIP = "10.0.0.9"
	cur.Spec.Ports[0].NodePort, cur.Spec.Ports[1].NodePort = 31380, 31379
	cur.Annotations["other"] = "kept"
	if service.Merge(cur, service.Build(m)) {
		t.Error("Merge of an unchanged Service reported a change")
	}
	m.Spec.Expose.Type = etcdfedv1.ExposeLoadBalancer
	if !service.Merge(cur, service.Build(m)) {
		t.Error("type change not reported")
	}
	if cur.Spec.Type != corev1.ServiceTypeLoadBalancer || cur.Spec.Ports[0].NodePort != 31380 || cur.Spec.ClusterIP != "10.0.0.9" || cur.Annotations["other"] != "kept" {
		t.Errorf("merged %+v", cur)
	}
}

func TestExposureOf(t *testing.T) {
	np := service.Build(member(etcdfedv1.ExposeNodePort))
	allocated := np.DeepCopy()
	allocated.Spec.Ports[0].NodePort, allocated.Spec.Ports[1].NodePort = 31380, 31379
	lb := service.Build(member(etcdfedv1.ExposeLoadBalancer))
	lbIP := lb.DeepCopy()
	lbIP.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	lbHost := lb.DeepCopy()
	lbHost.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "a1.elb.example.net"}}
	for _, tc := range []struct {
		name    string
		expose  etcdfedv1.ExposeType
		svc     *corev1.Service
		ports   spec.Ports
		address string
		waiting bool
	}{
		{"pod IP", etcdfedv1.ExposePodIP, nil, spec.PodPorts, "", false},
		{"node port, no service", etcdfedv1.ExposeNodePort, nil, spec.Ports{}, "", true},
		{"node port, unallocated", etcdfedv1.ExposeNodePort, np, spec.Ports{}, "", true},
		{"node port", etcdfedv1.ExposeNodePort, allocated, spec.Ports{Peer: 31380, Client: 31379}, "", false},
		{"lb pending", etcdfedv1.ExposeLoadBalancer, lb, spec.PodPorts, "", true},
		{"lb IP", etcdfedv1.ExposeLoadBalancer, lbIP, spec.PodPorts, "203.0.113.7", false},
		{"lb hostname", etcdfedv1.ExposeLoadBalancer, lbHost, spec.PodPorts, "a1.elb.example.net", false},
		{"lb but Service still NodePort", etcdfedv1.ExposeLoadBalancer, allocated, spec.PodPorts, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := service.ExposureOf(member(tc.expose), tc.svc)
			if e.Ports != tc.ports || e.LoadBalancerAddress != tc.address || (e.Waiting != "") != tc.waiting {
				t.Errorf("ExposureOf = %+v", e)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	np := member(etcdfedv1.ExposeNodePort)
	allocated := service.Build(np)
	allocated.Spec.Ports[0].NodePort, allocated.Spec.Ports[1].NodePort = 31380, 31379
	foreign := service.Build(np)
	foreign.Labels = map[string]string{"app": "other"}
	changed := allocated.DeepCopy()
	changed.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	for _, tc := range []struct {
		name      string
		m         *etcdfedv1.EtcdMember
		cur       *corev1.Service
		podExists bool
		want      service.Action
	}{
		{"PodIP, none", member(etcdfedv1.ExposePodIP), nil, true, service.Keep},
		{"PodIP, an earlier exposure's, pod exists", member(etcdfedv1.ExposePodIP), allocated, true, service.Keep},
		{"PodIP, an earlier exposure's, no pod", member(etcdfedv1.ExposePodIP), allocated, false, service.Delete},
		{"NodePort, none", np, nil, false, service.Create},
		{"NodePort, as built", np, allocated, true, service.Keep},
		{"NodePort, changed", np, changed, true, service.Update},
		{"someone else's", np, foreign, false, service.Conflict},
		{"someone else's, PodIP", member(etcdfedv1.ExposePodIP), foreign, false, service.Conflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before *corev1.Service
			if tc.cur != nil {
				before = tc.cur.DeepCopy()
			}
			d := service.Decide(tc.m, tc.cur, tc.podExists)
			if d.Action != tc.want {
				t.Fatalf("Decide = %s (%s); want %s", d.Action, d.Message, tc.want)
			}
			if tc.cur != nil && !equality.Semantic.DeepEqual(before, tc.cur) {
				t.Error("Decide changed the observed Service")
			}
			switch d.Action {
			case service.Update:
				if d.Object.Spec.Ports[0].NodePort != 31380 || d.Object.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
					t.Errorf("update to %+v", d.Object.Spec)
				}
			case service.Create:
				if d.Object == nil || d.Object.Name != "main-0" {
					t.Errorf("create %+v", d.Object)
				}
			}
		})
	}
}
