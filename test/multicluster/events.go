package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
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

// EventQuery picks some of the hub's events on an EtcdCluster; the zero
// query picks them all. The times allow a second of slack: an event's
// time is the hub's clock, rounded by the apiserver to the microsecond,
// and a test's start is taken a moment after what it starts.
type EventQuery struct {
	// Reasons: any of these (every reason when empty).
	Reasons []string
	// Since: last seen at Since or later (a repeated event counts when
	// it repeated since).
	Since time.Time
	// RecordedSince: first recorded at RecordedSince or later.
	RecordedSince time.Time
	// NoteHas: the note contains every one of these.
	NoteHas []string
	// NotePrefix: the note starts with it.
	NotePrefix string
}

// Match reports whether q picks e.
func (q EventQuery) Match(e HubEvent) bool {
	switch {
	case len(q.Reasons) > 0 && !slices.Contains(q.Reasons, e.Reason),
		!q.Since.IsZero() && e.Last.Before(q.Since.Add(-time.Second)),
		!q.RecordedSince.IsZero() && e.First.Before(q.RecordedSince.Add(-time.Second)),
		!strings.HasPrefix(e.Note, q.NotePrefix):
		return false
	}
	for _, w := range q.NoteHas {
		if !strings.Contains(e.Note, w) {
			return false
		}
	}
	return true
}

// String says what q picks, for messages.
func (q EventQuery) String() string {
	s := "an event"
	if len(q.Reasons) > 0 {
		s = "event " + strings.Join(q.Reasons, " or ")
	}
	if q.NotePrefix != "" {
		s += fmt.Sprintf(" starting %q", q.NotePrefix)
	}
	if len(q.NoteHas) > 0 {
		s += fmt.Sprintf(" naming %q", q.NoteHas)
	}
	if !q.Since.IsZero() {
		s += " seen since " + q.Since.Format(time.TimeOnly)
	}
	if !q.RecordedSince.IsZero() {
		s += " recorded since " + q.RecordedSince.Format(time.TimeOnly)
	}
	return s
}

// ListHubEvents is the harness's one reader of events: the hub's events
// on the EtcdCluster m that q picks, oldest first.
func ListHubEvents(ctx context.Context, hub *Cluster, m *ManagedEtcd, q EventQuery) ([]HubEvent, error) {
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
		if q.Match(ev) {
			out = append(out, ev)
		}
	}
	slices.SortStableFunc(out, func(a, b HubEvent) int { return a.First.Compare(b.First) })
	return out, nil
}

// HubEventNotes lists the notes of the events q picks, oldest first.
func HubEventNotes(ctx context.Context, hub *Cluster, m *ManagedEtcd, q EventQuery) ([]string, error) {
	evs, err := ListHubEvents(ctx, hub, m, q)
	return eventNotes(evs), err
}

func eventNotes(evs []HubEvent) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Note)
	}
	return out
}

// eventsByReason maps each reason to its events' notes, oldest first.
func eventsByReason(evs []HubEvent) map[string][]string {
	out := map[string][]string{}
	for _, e := range evs {
		out[e.Reason] = append(out[e.Reason], e.Note)
	}
	return out
}

// WaitForHubEventInput names the events to wait for.
type WaitForHubEventInput struct {
	Hub   *Cluster
	Etcd  *ManagedEtcd
	Query EventQuery
	// Timeout: a minute when zero.
	Timeout time.Duration
}

// WaitForHubEvent waits until the hub has recorded an event Query picks on
// the EtcdCluster, and returns the oldest such. It fails naming what it
// waited for and the notes of the events of the same reasons seen last.
func WaitForHubEvent(ctx context.Context, in WaitForHubEventInput) (HubEvent, error) {
	var got HubEvent
	same := EventQuery{Reasons: in.Query.Reasons}
	err := poll(ctx, orDefault(in.Timeout, time.Minute), in.Query.String(), func(ctx context.Context) (string, error) {
		evs, err := ListHubEvents(ctx, in.Hub, in.Etcd, same)
		if err != nil {
			return "", err
		}
		for _, e := range evs {
			if in.Query.Match(e) {
				got = e
				return "", nil
			}
		}
		return fmt.Sprintf("%d events of the same reasons: %q", len(evs), eventNotes(evs)), nil
	})
	return got, err
}

// waitForHubEventNote waits (a minute) for an event with reason whose note
// names every one of want, and returns its note.
func waitForHubEventNote(ctx context.Context, hub *Cluster, m *ManagedEtcd, reason string, want ...string) (string, error) {
	e, err := WaitForHubEvent(ctx, WaitForHubEventInput{Hub: hub, Etcd: m, Query: EventQuery{Reasons: []string{reason}, NoteHas: want}})
	return e.Note, err
}

// logHubEvents logs the events q picks, in time order, with their time
// since start.
func logHubEvents(ctx context.Context, t testing.TB, hub *Cluster, m *ManagedEtcd, start time.Time, q EventQuery) {
	t.Helper()
	evs, err := ListHubEvents(ctx, hub, m, q)
	if err != nil {
		t.Error(err)
		return
	}
	for _, e := range evs {
		t.Logf("event at +%.1fs %s: %s", e.First.Sub(start).Seconds(), e.Reason, e.Note)
	}
}
