package multicluster

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HubEvent is one event the hub recorded on an EtcdCluster.
type HubEvent struct {
	Reason, Note string
	// First is when it was first recorded; Last when it was last seen
	// (the end of its series when it repeated, First otherwise).
	First, Last time.Time
}

// ListHubEvents is the harness's one reader of events: the hub's events
// on the EtcdCluster m, oldest first.
func ListHubEvents(ctx context.Context, hub *Cluster, m *ManagedEtcd) ([]HubEvent, error) {
	list, err := hub.Clientset.EventsV1().Events(m.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []HubEvent
	for _, e := range list.Items {
		if e.Regarding.Name != m.Name || e.Regarding.Kind != "EtcdCluster" {
			continue
		}
		ev := HubEvent{Reason: e.Reason, Note: e.Note, First: e.EventTime.Time, Last: e.EventTime.Time}
		if e.Series != nil {
			ev.Last = e.Series.LastObservedTime.Time
		}
		out = append(out, ev)
	}
	slices.SortStableFunc(out, func(a, b HubEvent) int { return a.First.Compare(b.First) })
	return out, nil
}
