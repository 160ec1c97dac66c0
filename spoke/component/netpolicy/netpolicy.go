// Package netpolicy is the spoke component for a member's NetworkPolicy
// (spec.expose.networkPolicy): the member's pod admits its peer port from
// the ring's members only and its client and metrics ports from the
// declared sources only. Build renders it from the member and the
// addresses the ring's DNS zone publishes (PeerAddresses), Decide says
// what to do about the one that exists. Both are pure; the spoke's
// netpolicy reconciler reads and writes.
package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Name of the member's NetworkPolicy: the EtcdMember's.
func Name(m *etcdfedv1.EtcdMember) string { return m.Name }

// PeerAddresses are the A and AAAA addresses the ring's DNS zones in this
// namespace publish (the zones whose spec.cluster.uid is the member's
// ring), sorted and without duplicates: every member's published address,
// which is where a peer connects from with PodIP and (through the node's
// masquerade) NodePort exposure. Records that are not addresses are
// skipped, as are zones of other rings.
func PeerAddresses(m *etcdfedv1.EtcdMember, zones []etcdfedv1.EtcdDNSZone) []netip.Addr {
	var out []netip.Addr
	for _, z := range zones {
		if z.Spec.Cluster.UID != m.Spec.Cluster.UID {
			continue
		}
		for _, r := range z.Spec.Records {
			if r.Type != "A" && r.Type != "AAAA" {
				continue
			}
			for _, d := range r.Data {
				if a, err := netip.ParseAddr(strings.TrimSpace(d)); err == nil && a.IsValid() && !a.IsUnspecified() {
					out = append(out, a.Unmap())
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}

// Build renders the member's NetworkPolicy, nil when the spec asks for
// none. Ingress only: the peer port (2380) from the ring's own pods in
// this namespace, each peer address (/32, /128) and peerSourceRanges; the
// client (2379) and metrics (2381) ports from clientSourceRanges. Any
// other port or source is refused once the policy selects the pod.
func Build(m *etcdfedv1.EtcdMember, peers []netip.Addr) *networkingv1.NetworkPolicy {
	np := m.Spec.Expose.NetworkPolicy
	if np == nil {
		return nil
	}
	tcp := corev1.ProtocolTCP
	port := func(p int32) networkingv1.NetworkPolicyPort {
		v := intstr.FromInt32(p)
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &v}
	}
	peerFrom := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
		etcdfedv1.LabelClusterUID: m.Spec.Cluster.UID,
		etcdfedv1.LabelComponent:  spec.ComponentPod,
	}}}}
	var cidrs []string
	for _, a := range peers {
		cidrs = append(cidrs, netip.PrefixFrom(a, a.BitLen()).String())
	}
	cidrs = append(cidrs, np.PeerSourceRanges...)
	for _, c := range sortedUnique(cidrs) {
		peerFrom = append(peerFrom, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	var clientFrom []networkingv1.NetworkPolicyPeer
	for _, c := range sortedUnique(np.ClientSourceRanges) {
		clientFrom = append(clientFrom, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(m),
			Namespace: m.Namespace,
			Labels:    spec.Labels(m, spec.ComponentNetworkPolicy, m.Spec.Incarnation),
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: spec.PodSelector(m)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: []networkingv1.NetworkPolicyPort{port(spec.PeerPort)}, From: peerFrom},
				{Ports: []networkingv1.NetworkPolicyPort{port(spec.ClientPort), port(spec.MetricsPort)}, From: clientFrom},
			},
		},
	}
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// Action is what to do about the member's NetworkPolicy.
type Action string

const (
	// Keep: nothing to write.
	Keep Action = "Keep"
	// Create the NetworkPolicy.
	Create Action = "Create"
	// Update it to what Build gives now (Decision.Object).
	Update Action = "Update"
	// Delete the member's NetworkPolicy: the spec no longer asks for one.
	Delete Action = "Delete"
	// Conflict: a NetworkPolicy of that name exists that the member does
	// not own. It is left alone.
	Conflict Action = "Conflict"
)

// Decision is Decide's answer.
type Decision struct {
	Action  Action
	Object  *networkingv1.NetworkPolicy
	Message string
}

// Decide says what to do given the desired policy (Build; nil: none) and
// the one that exists (nil if none). Pure: cur is not changed.
func Decide(m *etcdfedv1.EtcdMember, desired, cur *networkingv1.NetworkPolicy) Decision {
	if cur != nil && !spec.OwnedBy(m, cur.Labels) {
		return Decision{Action: Conflict, Message: fmt.Sprintf("NetworkPolicy %s exists but is not this member's (cluster UID %q): it is left alone", cur.Name, cur.Labels[etcdfedv1.LabelClusterUID])}
	}
	switch {
	case desired == nil && cur == nil:
		return Decision{Action: Keep}
	case desired == nil:
		return Decision{Action: Delete, Message: "spec.expose.networkPolicy is unset"}
	case cur == nil:
		return Decision{Action: Create, Object: desired}
	}
	merged := cur.DeepCopy()
	merged.Labels = desired.Labels
	merged.Spec = desired.Spec
	if equality.Semantic.DeepEqual(cur, merged) {
		return Decision{Action: Keep}
	}
	return Decision{Action: Update, Object: merged}
}
