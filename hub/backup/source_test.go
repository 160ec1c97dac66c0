package backup

import (
	"errors"
	"testing"

	"github.com/etcdfed/etcdfed/hub/planner"
)

func TestPickSource(t *testing.T) {
	m := func(id uint64, name string, healthy bool) planner.ListEntry {
		return planner.ListEntry{ID: id, Name: name, Healthy: healthy, ClientURLs: []string{"https://" + name + ":2379"}}
	}
	learner := m(9, "main-3", true)
	learner.IsLearner = true
	unstarted := planner.ListEntry{ID: 8, PeerURLs: []string{"https://main-4:2380"}}
	for _, tc := range []struct {
		name  string
		etcd  planner.Etcd
		avoid []string
		want  string // member name, "" for ErrNoSource
	}{
		{"followers preferred, first by name", planner.Etcd{Reachable: true, LeaderID: 1, Members: []planner.ListEntry{m(1, "main-0", true), m(3, "main-2", true), m(2, "main-1", true)}}, nil, "main-1"},
		{"unhealthy follower skipped", planner.Etcd{Reachable: true, LeaderID: 1, Members: []planner.ListEntry{m(1, "main-0", true), m(2, "main-1", false), m(3, "main-2", true)}}, nil, "main-2"},
		{"never the leader while a follower is healthy", planner.Etcd{Reachable: true, LeaderID: 2, Members: []planner.ListEntry{m(1, "main-0", false), m(2, "main-1", true), m(3, "main-2", true)}}, nil, "main-2"},
		{"leader when no follower is healthy", planner.Etcd{Reachable: true, LeaderID: 2, Members: []planner.ListEntry{m(1, "main-0", false), m(2, "main-1", true), m(3, "main-2", false)}}, nil, "main-1"},
		{"one-member cluster", planner.Etcd{Reachable: true, LeaderID: 1, Members: []planner.ListEntry{m(1, "solo-0", true)}}, nil, "solo-0"},
		{"learners and unstarted members never", planner.Etcd{Reachable: true, LeaderID: 1, Members: []planner.ListEntry{m(1, "main-0", true), learner, unstarted}}, nil, "main-0"},
		{"member being replaced avoided", planner.Etcd{Reachable: true, LeaderID: 1, Members: []planner.ListEntry{m(1, "main-0", true), m(2, "main-1", true), m(3, "main-2", true)}}, []string{"main-1"}, "main-2"},
		{"nobody healthy", planner.Etcd{Reachable: true, LeaderID: 0, Members: []planner.ListEntry{m(1, "main-0", false), m(2, "main-1", false)}}, nil, ""},
		{"etcd unreachable", planner.Etcd{Error: "no answer within 2s"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PickSource(tc.etcd, tc.avoid...)
			if tc.want == "" {
				if !errors.Is(err, ErrNoSource) {
					t.Fatalf("PickSource = %+v, %v; want ErrNoSource", got, err)
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("PickSource = %q, %v; want %q", got.Name, err, tc.want)
			}
		})
	}
}
