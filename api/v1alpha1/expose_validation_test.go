package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func withExpose(ns string, e etcdfedv1.ExposeSpec) *etcdfedv1.EtcdCluster {
	c := validCluster(ns)
	c.Spec.Expose = e
	return c
}

// TestExposeSourceRangesValidation: spec.expose.loadBalancerSourceRanges
// and spec.expose.networkPolicy take CIDRs only, the source ranges only
// with LoadBalancer exposure, and a network policy names at least one
// client source; the real apiserver refuses anything else at admission
// with a message that says what to write.
func TestExposeSourceRangesValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "expose")
	ctx := context.Background()
	lb := etcdfedv1.ExposeLoadBalancer
	for _, e := range []etcdfedv1.ExposeSpec{
		{},
		{Type: lb, LoadBalancerSourceRanges: []string{"203.0.113.0/24", "2001:db8::/48", "198.51.100.7/32"}},
		{NetworkPolicy: &etcdfedv1.MemberNetworkPolicy{ClientSourceRanges: []string{"10.0.0.0/8"}}},
		{Type: etcdfedv1.ExposeNodePort, NetworkPolicy: &etcdfedv1.MemberNetworkPolicy{PeerSourceRanges: []string{"10.8.0.0/16", "fd00::/64"}, ClientSourceRanges: []string{"0.0.0.0/0", "::/0"}}},
	} {
		if err := apiserver.Client.Create(ctx, withExpose(ns, e)); err != nil {
			t.Errorf("expose %+v rejected: %v", e, err)
		}
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("10.%d.0.0/16", i)
	}
	for _, tc := range []struct {
		name string
		e    etcdfedv1.ExposeSpec
		want string
	}{
		{"source ranges without LoadBalancer", etcdfedv1.ExposeSpec{LoadBalancerSourceRanges: []string{"203.0.113.0/24"}}, "loadBalancerSourceRanges needs type LoadBalancer"},
		{"source ranges with NodePort", etcdfedv1.ExposeSpec{Type: etcdfedv1.ExposeNodePort, LoadBalancerSourceRanges: []string{"203.0.113.0/24"}}, "loadBalancerSourceRanges needs type LoadBalancer"},
		{"an address, not a CIDR", etcdfedv1.ExposeSpec{Type: lb, LoadBalancerSourceRanges: []string{"203.0.113.7"}}, "each loadBalancerSourceRanges entry must be a CIDR"},
		{"a host name", etcdfedv1.ExposeSpec{Type: lb, LoadBalancerSourceRanges: []string{"example.com/24"}}, "each loadBalancerSourceRanges entry must be a CIDR"},
		{"too many ranges", etcdfedv1.ExposeSpec{Type: lb, LoadBalancerSourceRanges: many}, "must have at most 64 items"},
		{"a policy without client sources", etcdfedv1.ExposeSpec{NetworkPolicy: &etcdfedv1.MemberNetworkPolicy{PeerSourceRanges: []string{"10.8.0.0/16"}}}, "clientSourceRanges"},
		{"a bad client source", etcdfedv1.ExposeSpec{NetworkPolicy: &etcdfedv1.MemberNetworkPolicy{ClientSourceRanges: []string{"10.0.0.0/33"}}}, "each clientSourceRanges entry must be a CIDR"},
		{"a bad peer source", etcdfedv1.ExposeSpec{NetworkPolicy: &etcdfedv1.MemberNetworkPolicy{PeerSourceRanges: []string{"peers"}, ClientSourceRanges: []string{"10.0.0.0/8"}}}, "each peerSourceRanges entry must be a CIDR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalid(t, apiserver.Client.Create(ctx, withExpose(ns, tc.e)), tc.want)
		})
	}
}
