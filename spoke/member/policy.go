package member

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/allowlist"
)

// PodPolicy is what this member cluster's operator lets EtcdMembers put
// into member pods, checked by the spoke itself (flags of cmd/spoke). The
// hub checks the same settings against its own tenancy policy before it
// writes them; this check keeps the member cluster's word when the hub, or
// whoever else can write EtcdMembers here, would put more: some
// annotations make the node or the cluster act on a pod (AppArmor and
// seccomp profiles, sidecar injection, the autoscaler's safe-to-evict).
type PodPolicy struct {
	// Annotations are the keys spec.podTemplate.annotations may hold: an
	// entry equal to the key or, ending in '/' or '.', a prefix of it;
	// allowlist.Any: every key. nil: not checked (every key).
	Annotations []string
}

// Check says what of m's pod settings the policy refuses, naming each
// and the spoke's flag that would allow it; nil when everything is
// allowed.
func (p PodPolicy) Check(m *etcdfedv1.EtcdMember) error {
	if p.Annotations == nil {
		return nil
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m.Spec.PodTemplate.Annotations)) {
		if !allowlist.AllowsKey(p.Annotations, k) {
			errs = append(errs, fmt.Errorf("spec.podTemplate.annotations key %q is not allowed in this member cluster (%s); its operator allows keys or prefixes with the spoke's --allowed-pod-annotations", k, allowlist.String(p.Annotations)))
		}
	}
	return errors.Join(errs...)
}
