package backup

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/etcdfed/etcdfed/hub/planner"
)

// ErrNoSource: no member can serve a snapshot.
var ErrNoSource = errors.New("backup: no healthy member to take a snapshot from")

// PickSource chooses the member to stream a snapshot from: a healthy,
// started voter that is not the leader (streaming a large database costs
// disk and network the leader needs for heartbeats), the first by name so
// the choice is stable; the leader only when no follower is healthy (a
// one-member cluster, or followers down: a backup then matters most).
// Members named in avoid (one being removed or replaced) are never chosen.
func PickSource(e planner.Etcd, avoid ...string) (planner.ListEntry, error) {
	if !e.Reachable {
		return planner.ListEntry{}, fmt.Errorf("%w: etcd does not answer: %s", ErrNoSource, e.Error)
	}
	var followers, leaders []planner.ListEntry
	var skipped []string
	for _, m := range e.Members {
		switch {
		case m.IsLearner, !m.Started(), len(m.ClientURLs) == 0:
			skipped = append(skipped, describeMember(m)+" (learner or not started)")
		case !m.Healthy:
			skipped = append(skipped, describeMember(m)+" (unhealthy)")
		case contains(avoid, m.Name):
			skipped = append(skipped, describeMember(m)+" (being changed)")
		case m.ID == e.LeaderID:
			leaders = append(leaders, m)
		default:
			followers = append(followers, m)
		}
	}
	sort.Slice(followers, func(i, j int) bool { return followers[i].Name < followers[j].Name })
	switch {
	case len(followers) > 0:
		return followers[0], nil
	case len(leaders) > 0:
		return leaders[0], nil
	}
	return planner.ListEntry{}, fmt.Errorf("%w (skipped: %s)", ErrNoSource, strings.Join(skipped, ", "))
}

func describeMember(m planner.ListEntry) string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("%x", m.ID)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
