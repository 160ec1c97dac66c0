package etcdcluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/version"
)

func (r *Reconciler) hubVersion() string {
	if r.Version != "" {
		return r.Version
	}
	return version.String()
}

// setSpokeVersions judges the version each spoke of the ring's clusters
// reports (EtcdSpoke status.version) against the hub's
// (version.CheckSkew): False names every spoke outside the supported skew,
// Unknown every one that cannot be compared. Clusters the ring may use or
// holds members in count; a spoke that reported no version yet does not.
// Left as it was when no spoke has reported one or the hub's version is
// not known.
func setSpokeVersions(s *snapshot, st *etcdfedv1.EtcdClusterStatus, gen int64) {
	if s.hubVersion == "" {
		return
	}
	var skewed, unknown, ok []string
	for _, cs := range s.clusters {
		if cs.spoke == nil || cs.spoke.Status.Version == "" || (!cs.eligible && !hasMembers(st, cs.name)) {
			continue
		}
		v := truncate(cs.spoke.Status.Version, 64)
		switch verdict, why := version.CheckSkew(s.hubVersion, v); verdict {
		case version.SkewUnsupported:
			skewed = append(skewed, fmt.Sprintf("the spoke of %s runs %s", cs.name, why))
		case version.SkewUnknown:
			unknown = append(unknown, fmt.Sprintf("the spoke of %s runs %s", cs.name, why))
		default:
			ok = append(ok, cs.name+" "+v)
		}
	}
	if len(skewed)+len(unknown)+len(ok) == 0 {
		return
	}
	c := metav1.Condition{Type: etcdfedv1.ConditionSpokeVersions, ObservedGeneration: gen}
	switch {
	case len(skewed) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, etcdfedv1.ReasonSpokeVersionSkewed
		c.Message = strings.Join(append(skewed, unknown...), "; ")
	case len(unknown) > 0:
		c.Status, c.Reason = metav1.ConditionUnknown, etcdfedv1.ReasonSpokeVersionUnknown
		c.Message = strings.Join(unknown, "; ")
	default:
		c.Status, c.Reason = metav1.ConditionTrue, etcdfedv1.ReasonSpokeVersionsSupported
		c.Message = fmt.Sprintf("hub %s; spokes: %s (supported: the hub's minor version or %d older)", s.hubVersion, strings.Join(ok, ", "), version.MaxSpokeMinorsBehind)
	}
	c.Message = truncate(c.Message, 1024)
	meta.SetStatusCondition(&st.Conditions, c)
}

// spokeVersionsSkewed: SpokeVersions is False.
func spokeVersionsSkewed(st *etcdfedv1.EtcdClusterStatus) bool {
	return meta.IsStatusConditionFalse(st.Conditions, etcdfedv1.ConditionSpokeVersions)
}

// spokeVersionEvent records a Warning when the skew begins, so that it
// reaches those who watch events and not conditions.
func (r *Reconciler) spokeVersionEvent(ec *etcdfedv1.EtcdCluster, before bool) {
	if before || !spokeVersionsSkewed(&ec.Status) {
		return
	}
	c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionSpokeVersions)
	r.event(ec, corev1.EventTypeWarning, etcdfedv1.ReasonSpokeVersionSkewed, "Observe", "%s", truncate(c.Message, maxEventNote))
}
