package etcdops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdfed/etcdfed/hub/planner"
)

// DefragTimeout bounds one member's defragmentation as the hub waits for
// it. etcd goes on with a defragmentation whose caller gave up; the
// planner then waits for the member to answer again.
const DefragTimeout = 25 * time.Second

// statusErrors reports whether a status answer carries errors other than
// alarms. etcd lists every raised alarm in each member's status errors
// ("memberID:... alarm:NOSPACE"); the hub reads alarms from the alarm list
// instead, so an alarm alone does not make every member unhealthy.
func statusErrors(errs []string) bool {
	for _, e := range errs {
		if !strings.Contains(e, "alarm:") {
			return true
		}
	}
	return false
}

// alarms reads the raised alarms; ok is false when etcd did not answer.
func (c *Client) alarms(ctx context.Context) ([]planner.Alarm, bool) {
	ctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := c.c.AlarmList(ctx)
	if err != nil {
		return nil, false
	}
	var out []planner.Alarm
	for _, a := range resp.Alarms {
		if a.Alarm == pb.AlarmType_NONE {
			continue
		}
		out = append(out, planner.Alarm{MemberID: a.MemberID, Type: a.Alarm.String()})
	}
	return out, true
}

// Defragment defragments the member reached at clientURLs (the first that
// answers) and returns how long etcd took.
func (c *Client) Defragment(ctx context.Context, clientURLs []string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, DefragTimeout)
	defer cancel()
	var errs []error
	for _, u := range clientURLs {
		start := time.Now()
		if _, err := c.c.Defragment(ctx, u); err != nil {
			errs = append(errs, fmt.Errorf("defragment %s: %w", u, err))
			continue
		}
		return time.Since(start), nil
	}
	if len(errs) == 0 {
		return 0, errors.New("defragment: the member has no client URL")
	}
	return 0, errors.Join(errs...)
}

// CompactCurrent compacts to the current revision and waits until the
// member that took the request has freed the compacted revisions in its
// database (physical). A revision already compacted is success. It
// returns the revision.
func (c *Client) CompactCurrent(ctx context.Context) (int64, error) {
	rev, _, err := c.CompactKeeping(ctx, 0)
	return rev, err
}

// CompactKeeping compacts to the current revision minus keep (the last
// keep revisions stay readable), as a physical compaction like
// CompactCurrent. It returns the revision compacted to and whether there
// was one to compact to (none when the ring has at most keep+1
// revisions). A revision already compacted is success.
func (c *Client) CompactKeeping(ctx context.Context, keep int64) (int64, bool, error) {
	if keep < 0 {
		return 0, false, fmt.Errorf("compact keeping %d revisions: a negative count", keep)
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	// A serializable read would do, but the revision must be one the
	// cluster agrees on: a linearizable Get of a key that need not exist.
	resp, err := c.c.Get(ctx, "\x00etcdfed-compact-probe", clientv3.WithCountOnly())
	if err != nil {
		return 0, false, fmt.Errorf("read the current revision: %w", err)
	}
	rev := resp.Header.Revision - keep
	if rev <= 1 {
		return rev, false, nil
	}
	if _, err := c.c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return rev, false, fmt.Errorf("compact to revision %d: %w", rev, err)
	}
	return rev, true, nil
}

// DisarmNoSpace disarms every NOSPACE alarm.
func (c *Client) DisarmNoSpace(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	resp, err := c.c.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("list alarms: %w", err)
	}
	var errs []error
	for _, a := range resp.Alarms {
		if a.Alarm != pb.AlarmType_NOSPACE {
			continue
		}
		if _, err := c.c.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			errs = append(errs, fmt.Errorf("disarm NOSPACE of %x: %w", a.MemberID, err))
		}
	}
	return errors.Join(errs...)
}
