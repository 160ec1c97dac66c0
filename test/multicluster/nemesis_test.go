package multicluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/nemesis"
)

// TestNemesis (issue 24; `make nemesis`): a ring of five members over
// three member clusters (2/2/1), graces of 30 s, run through
// NEMESIS_SCHEDULES (default 20) fault schedules drawn from NEMESIS_SEED
// (default: from the clock; printed first, with the line that replays
// it) with NEMESIS_PROFILE (full, the default, ci, or wan: full with
// distance between units among the faults): partitions of any
// shape between the hub, the clusters and their zones, one-way cuts,
// member clusters killed and returned, the hub killed or stopped, each
// held within or beyond the graces, some schedules with
// quorumLossRecovery Automatic. After each schedule every fault is healed
// and the ring must be whole; each schedule's workload must be
// linearizable with nothing acknowledged lost and every watch complete,
// and the members must never have answered as two rings. NEMESIS_ONLY
// (e.g. 3,7) runs only those schedules of the seed.
func TestNemesis(t *testing.T) {
	if os.Getenv("ETCDFED_NEMESIS") == "" {
		t.Skip("the nemesis (minutes per schedule): run `make nemesis` (ETCDFED_NEMESIS=1, NEMESIS_SEED, NEMESIS_SCHEDULES, NEMESIS_PROFILE, NEMESIS_ONLY)")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NEMESIS_SEED"); s != "" {
		var err error
		if seed, err = nemesisSeed(s); err != nil {
			t.Fatal(err)
		}
	}
	profile, err := nemesis.ProfileNamed(os.Getenv("NEMESIS_PROFILE"))
	if err != nil {
		t.Fatal(err)
	}
	n := 20
	if s := os.Getenv("NEMESIS_SCHEDULES"); s != "" {
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("NEMESIS_SCHEDULES %q: want a positive number", s)
		}
	}
	var only []int
	for _, f := range strings.FieldsFunc(os.Getenv("NEMESIS_ONLY"), func(r rune) bool { return r == ',' || r == ' ' }) {
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 {
			t.Fatalf("NEMESIS_ONLY %q: want schedule indexes, e.g. 3,7", os.Getenv("NEMESIS_ONLY"))
		}
		only = append(only, i)
	}
	if len(only) == 0 {
		for i := range n {
			only = append(only, i)
		}
	}
	var at string
	if d := os.Getenv(DistanceEnv); d != "" {
		at = " DISTANCE='" + d + "'"
	}
	line := fmt.Sprintf("nemesis seed %d, profile %s, schedules %v (replay: make nemesis NEMESIS_SEED=%d NEMESIS_PROFILE=%s NEMESIS_SCHEDULES=%d%s; one schedule: NEMESIS_ONLY=<index>)",
		seed, profile.Name, only, seed, profile.Name, n, at)
	fmt.Fprintln(os.Stderr, line)
	t.Log(line)

	topo := hubTopology(t)
	ctx := context.Background()
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "nemesis", Name: "nem", Domain: "nem.etcd.test", Replicas: 5, WantZones: "2/2/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: profile.Grace}
			s.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: profile.Grace}
		}})
	deleteIfFailed(t, topo, etcd)
	sum := NemesisSpec(ctx, NemesisSpecInput{T: t, Topology: topo, Etcd: etcd, Replicas: 5, Seed: seed, Profile: profile, Schedules: only})
	fmt.Fprintf(os.Stderr, "%s\n%s\n", line, sum)
	if t.Failed() {
		t.Logf("the logs of the hub, the spokes, the apiservers and every pod are kept in %s", filepath.Join(hubFx.state, "logs"))
		return
	}
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
