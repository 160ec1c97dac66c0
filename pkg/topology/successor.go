package topology

import (
	"cmp"
	"slices"
	"time"
)

// Successor is a voter leadership may be handed to when the leader must
// stop leading (a planned stop of its member: a deletion, a drain, a roll,
// a removal). The etcd container's preStop hook and the hub both choose
// among them with ChooseSuccessor, so that a member stopped by either
// hands leadership to the same kind of voter.
type Successor struct {
	ID uint64
	// Applied is how far the voter's log has come (its applied index, or
	// the raft index of its last status answer).
	Applied uint64
	// Away is how far the voter is from the leader (the round trip of its
	// status answer, or the measured round trip between their member
	// clusters). The caller says what an unknown distance counts as: 0
	// ranks it with the nearest (the hub uses it for a voter in the
	// leader's own member cluster, or when nothing is measured), a long
	// one behind every measured voter.
	Away time.Duration
}

// AppliedSlack is how far behind the most advanced voter's index another
// may be and still count as up to date: a busy ring applies entries
// while the indexes are read one after the other, so a strict order would
// pick whichever voter was read last.
const AppliedSlack = 64

// ChooseSuccessor picks the voter to hand leadership to: the most up to
// date (the least to catch up before it can lead: an index within
// AppliedSlack of the most advanced counts as equal), then the nearest to
// the leader (its clients, and the quorum the leader had, most likely
// stay near), then the lowest ID (deterministic). When none is up to date
// (they cannot all be: the most advanced is), the most advanced of the
// rest goes first.
func ChooseSuccessor(cands []Successor) (Successor, bool) {
	if len(cands) == 0 {
		return Successor{}, false
	}
	top := slices.MaxFunc(cands, func(a, b Successor) int { return cmp.Compare(a.Applied, b.Applied) }).Applied
	upToDate := func(s Successor) bool { return top-s.Applied <= AppliedSlack }
	return slices.MinFunc(cands, func(a, b Successor) int {
		if ua, ub := upToDate(a), upToDate(b); ua != ub {
			if ua {
				return -1
			}
			return 1
		} else if !ua && a.Applied != b.Applied {
			return cmp.Compare(b.Applied, a.Applied) // both behind: the less so
		}
		return cmp.Or(cmp.Compare(a.Away, b.Away), cmp.Compare(a.ID, b.ID))
	}), true
}
