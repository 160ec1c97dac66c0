package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Tolerance is one sample of the failure tolerance etcd's own view gives:
// the voters in its member list, how many of them answered a status call,
// and each one's state.
type Tolerance struct {
	Voters, Healthy int
	// Detail is each voter's answer: name[id]=ok|down, sorted.
	Detail string
}

// Tolerated is how many more voters may fail before the ring loses its
// quorum: healthy voters minus the quorum of all voters (negative: no
// quorum).
func (t Tolerance) Tolerated() int { return t.Healthy - (t.Voters/2 + 1) }

// ErrRaced says the member list changed during a sample: a voter removed
// meanwhile would count as down, so there is no sample.
var ErrRaced = errors.New("the member list changed during the sample")

// SampleTolerance takes one consistent sample of etcd's own view: the
// member list, every voter's status call (side by side, one second each),
// and the member list again; a membership change in between is ErrRaced.
func SampleTolerance(ctx context.Context, c *clientv3.Client) (Tolerance, error) {
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := c.MemberList(lctx)
	if err != nil {
		return Tolerance{}, err
	}
	type answer struct {
		name string
		id   uint64
		ok   bool
	}
	var wg sync.WaitGroup
	answers := make(chan answer, len(list.Members))
	var t Tolerance
	for _, mem := range list.Members {
		if mem.IsLearner || len(mem.ClientURLs) == 0 {
			continue
		}
		t.Voters++
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			defer scancel()
			_, serr := c.Status(sctx, mem.ClientURLs[0])
			answers <- answer{mem.Name, mem.ID, serr == nil}
		}()
	}
	wg.Wait()
	close(answers)
	var parts []string
	for a := range answers {
		state := "down"
		if a.ok {
			t.Healthy++
			state = "ok"
		}
		parts = append(parts, fmt.Sprintf("%s[%x]=%s", a.name, a.id, state))
	}
	slices.Sort(parts)
	t.Detail = strings.Join(parts, " ")
	again, err := c.MemberList(lctx)
	if err != nil {
		return Tolerance{}, err
	}
	if !sameMembers(list.Members, again.Members) {
		return Tolerance{}, ErrRaced
	}
	return t, nil
}

// sameMembers: the same IDs, each a learner or not alike.
func sameMembers(a, b []*etcdserverpb.Member) bool {
	key := func(ms []*etcdserverpb.Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%x/%v", m.ID, m.IsLearner))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
