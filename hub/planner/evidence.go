package planner

import (
	"fmt"
	"time"
)

// unhealthyEvidence says which witnesses see a member unhealthy: etcd's
// own health as the hub read it, and the member's spoke in its cluster.
func unhealthyEvidence(m Member, em ListEntry) string {
	etcd := fmt.Sprintf("[%x] gives no healthy status", em.ID)
	if !em.LeaderlessSince.IsZero() {
		etcd = fmt.Sprintf("[%x] answers but has named no leader since %s", em.ID, em.LeaderlessSince.UTC().Format(time.RFC3339))
	}
	if em.Healthy {
		etcd = fmt.Sprintf("[%x] answers healthy", em.ID)
	}
	spoke := fmt.Sprintf("the spoke in %s reports it unhealthy", m.Domain.Cluster)
	switch {
	case m.Object == nil:
		spoke = fmt.Sprintf("no EtcdMember object in %s", m.Domain.Cluster)
	case m.Object.Healthy:
		spoke = fmt.Sprintf("the spoke in %s reports it healthy", m.Domain.Cluster)
	}
	return etcd + ", " + spoke
}
