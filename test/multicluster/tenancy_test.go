package multicluster

import (
	"context"
	"testing"
)

// TestTenantsSideBySide: two EtcdClusters named alike in two namespaces of
// the hub, each with its own domain, form side by side over the same three
// member clusters (names that carry the ring's namespace and name), the
// first untouched by the second; a third with the first one's domain is
// refused with a condition naming its owner, and writes nothing, until
// the first is deleted: then it forms.
func TestTenantsSideBySide(t *testing.T) {
	topo := hubTopology(t)
	ctx := context.Background()
	rings := TenantsSideBySideSpec(ctx, TenantsSideBySideInput{T: t, Topology: topo, Name: "same",
		Namespaces: [2]string{"tenant-a", "tenant-b"}, Domains: [2]string{"same.tenant-a.test", "same.tenant-b.test"}})
	t.Run("a second ring with the first one's domain is refused until the first is deleted", func(t *testing.T) {
		DomainRefusedSpec(ctx, DomainRefusedInput{T: t, Topology: topo, Owner: rings[0], Namespace: "tenant-c", Name: "copy", ThenDeleteOwner: true})
	})
	DeleteEtcdClusterSpec(ctx, t, topo, rings[1])
}
