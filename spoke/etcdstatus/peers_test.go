package etcdstatus_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
)

func TestParsePeers(t *testing.T) {
	const metrics = `# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
etcd_network_active_peers{Local="a1",Remote="b2"} 1
etcd_network_active_peers{Local="a1",Remote="c3"} 0
etcd_network_active_peers{Local="a1",Remote="d4"} 1
etcd_network_active_peers{Local="ff",Remote="c3"} 1
etcd_network_disconnected_peers_total{Local="a1",Remote="c3"} 2
etcd_network_active_peers{Local="a1",Remote="e5"} 0
`
	for _, tc := range []struct {
		name, self   string
		active, lost []string
	}{
		{"own series only", "a1", []string{"b2", "d4"}, []string{"c3", "e5"}},
		{"another local ID", "ff", []string{"c3"}, nil},
		{"no series of self: an empty view, not none", "99", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := etcdstatus.ParsePeers(strings.NewReader(metrics), tc.self)
			if err != nil {
				t.Fatal(err)
			}
			if v == nil || !slices.Equal(v.Active, tc.active) || !slices.Equal(v.Lost, tc.lost) {
				t.Errorf("view %+v, want active %v lost %v", v, tc.active, tc.lost)
			}
		})
	}
}

// TestReadPeersOfARealCluster reads the peer view of a real three-member
// etcd: both peers active, then, with one member killed, that member lost
// in the view of the others (what the hub's zone witness counts on).
func TestReadPeersOfARealCluster(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, Name: "peers"})
	ctx := context.Background()
	ids := map[string]string{} // name -> hex ID
	cli := c.NewClient()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Members {
		ids[m.Name] = strconv.FormatUint(m.ID, 16)
	}
	r := &etcdstatus.Reader{Timeout: 2 * time.Second}
	defer r.Close()
	read := func(i int) ([]string, []string) {
		t.Helper()
		v, err := r.Read(ctx, "ns/"+c.Members[i].Name, etcdstatus.Target{Endpoint: c.Members[i].ClientURL})
		if err != nil {
			t.Fatalf("Read %s: %v", c.Members[i].Name, err)
		}
		if v.Peers == nil {
			t.Fatalf("no peer view of %s", c.Members[i].Name)
		}
		return v.Peers.Active, v.Peers.Lost
	}
	want := []string{ids[c.Members[1].Name], ids[c.Members[2].Name]}
	slices.Sort(want)
	waitFor(t, "both peers active in member 0's view", func() string {
		if a, l := read(0); !slices.Equal(a, want) || len(l) > 0 {
			return "active " + strings.Join(a, ",") + " lost " + strings.Join(l, ",")
		}
		return ""
	})
	c.Members[2].Stop()
	gone := ids[c.Members[2].Name]
	for _, i := range []int{0, 1} {
		waitFor(t, "the killed member lost in the view of "+c.Members[i].Name, func() string {
			if a, l := read(i); slices.Contains(a, gone) || !slices.Contains(l, gone) {
				return "active " + strings.Join(a, ",") + " lost " + strings.Join(l, ",")
			}
			return ""
		})
	}
}

// waitFor polls check (which says what it saw, "" when done) for up to a
// minute.
func waitFor(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		if last = check(); last == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: still %s", what, last)
}
