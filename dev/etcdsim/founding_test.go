package etcdsim

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
)

// TestFoundingMembersStartLate: a ring whose founding members start one by
// one, as a new etcd cluster's members do in their own member clusters,
// has no leader until a quorum runs; each member's /metrics gives the peer
// view the spoke reads (spoke/etcdstatus), a stopped peer as lost.
func TestFoundingMembersStartLate(t *testing.T) {
	_, r := newSim(t, RingOptions{Name: "late", Seed: 3, HealthInterval: -1, Members: []MemberSpec{
		{Name: "a"}, {Name: "b", Stopped: true}, {Name: "c", Stopped: true},
	}})
	if r.Leader() != 0 {
		t.Fatalf("leader %x with one founding member of three running", r.Leader())
	}
	ms := r.Members()
	if ms[1].Running || ms[1].Name != "" || len(ms[1].ClientURLs) != 0 {
		t.Fatalf("a founding member not started listed as %+v", ms[1])
	}
	if _, err := r.StartMember(ms[1].ID, StartOptions{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return r.Leader() != 0 })
	ms = r.Members()
	if ms[1].Name != "b" || len(ms[1].ClientURLs) != 1 {
		t.Fatalf("started founding member listed as %+v", ms[1])
	}
	resp, err := http.Get(ms[0].ClientURLs[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	view, err := etcdstatus.ParsePeers(resp.Body, strconv.FormatUint(ms[0].ID, 16))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(view.Active, ",") != strconv.FormatUint(ms[1].ID, 16) || len(view.Lost) != 0 {
		t.Fatalf("peer view of a: %+v (b is %x, c never ran)", view, ms[1].ID)
	}
	if err := r.StopMember(ms[1].ID); err != nil {
		t.Fatal(err)
	}
	resp2, err := http.Get(ms[0].ClientURLs[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp2.Body.Close() }()
	if view, err = etcdstatus.ParsePeers(resp2.Body, strconv.FormatUint(ms[0].ID, 16)); err != nil {
		t.Fatal(err)
	}
	if len(view.Active) != 0 || strings.Join(view.Lost, ",") != strconv.FormatUint(ms[1].ID, 16) {
		t.Fatalf("peer view of a after b stopped: %+v", view)
	}
}
