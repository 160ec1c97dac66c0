package etcdtest

import (
	"context"
	"testing"
	"time"
)

// MakeFollower on the leader hands leadership to another member.
func TestMakeFollowerMovesLeadership(t *testing.T) {
	c := Start(t, Options{Members: 3, Name: "follow"})
	ctx := context.Background()
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeFollower(ctx, leader); err != nil {
		t.Fatal(err)
	}
	now, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now == leader {
		t.Fatalf("%s still leads after MakeFollower", leader.Name)
	}
	t.Logf("leadership moved from %s to %s", leader.Name, now.Name)
}
