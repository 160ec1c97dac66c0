package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func withLeader(ns string, l *etcdfedv1.LeaderSpec) *etcdfedv1.EtcdCluster {
	c := validCluster(ns)
	c.Spec.Leader = l
	return c
}

// TestLeaderValidation: spec.leader's placements and preferred places
// are accepted by the real apiserver as documented; contradictions
// (preferred places with Auto or None, Preferred without places, an
// entry that names nothing, an entry twice) and values out of range are
// refused at admission with a message that says what to write.
func TestLeaderValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "leader")
	ctx := context.Background()
	for _, l := range []*etcdfedv1.LeaderSpec{
		nil,
		{},
		{Placement: etcdfedv1.LeaderPlacementNone},
		{Placement: etcdfedv1.LeaderPlacementAuto},
		{Preferred: []etcdfedv1.LeaderPreference{{Zone: "a"}}},
		{Placement: etcdfedv1.LeaderPlacementPreferred, Preferred: []etcdfedv1.LeaderPreference{{Cluster: "c1"}, {Cluster: "c2", Zone: "b"}, {Zone: "b"}}},
		{Placement: etcdfedv1.LeaderPlacementAuto, SettleSeconds: ptr.To[int32](0), MinIntervalSeconds: ptr.To[int32](86400)},
		{Preferred: []etcdfedv1.LeaderPreference{{Zone: "a"}}, SettleSeconds: ptr.To[int32](3600), MinIntervalSeconds: ptr.To[int32](0)},
	} {
		if err := apiserver.Client.Create(ctx, withLeader(ns, l)); err != nil {
			t.Errorf("leader %+v rejected: %v", l, err)
		}
	}
	nine := make([]etcdfedv1.LeaderPreference, 9)
	for i := range nine {
		nine[i].Zone = string(rune('a' + i))
	}
	for _, tc := range []struct {
		name string
		l    *etcdfedv1.LeaderSpec
		want string
	}{
		{"preferred with Auto", &etcdfedv1.LeaderSpec{Placement: etcdfedv1.LeaderPlacementAuto, Preferred: []etcdfedv1.LeaderPreference{{Zone: "a"}}}, "spec.leader.preferred is only used with placement Preferred"},
		{"preferred with None", &etcdfedv1.LeaderSpec{Placement: etcdfedv1.LeaderPlacementNone, Preferred: []etcdfedv1.LeaderPreference{{Zone: "a"}}}, "spec.leader.preferred is only used with placement Preferred"},
		{"Preferred without places", &etcdfedv1.LeaderSpec{Placement: etcdfedv1.LeaderPlacementPreferred}, "spec.leader.placement Preferred needs at least one spec.leader.preferred entry"},
		{"an entry naming nothing", &etcdfedv1.LeaderSpec{Preferred: []etcdfedv1.LeaderPreference{{Zone: "a"}, {}}}, "a spec.leader.preferred entry names a cluster, a zone, or both"},
		{"an entry twice", &etcdfedv1.LeaderSpec{Preferred: []etcdfedv1.LeaderPreference{{Zone: "a"}, {Cluster: "c1"}, {Zone: "a"}}}, "spec.leader.preferred lists an entry twice"},
		{"unknown placement", &etcdfedv1.LeaderSpec{Placement: "Nearest"}, `supported values: "None", "Preferred", "Auto"`},
		{"nine entries", &etcdfedv1.LeaderSpec{Preferred: nine}, "must have at most 8 items"},
		{"negative settle", &etcdfedv1.LeaderSpec{Placement: etcdfedv1.LeaderPlacementAuto, SettleSeconds: ptr.To[int32](-1)}, "should be greater than or equal to 0"},
		{"settle over an hour", &etcdfedv1.LeaderSpec{Placement: etcdfedv1.LeaderPlacementAuto, SettleSeconds: ptr.To[int32](3601)}, "should be less than or equal to 3600"},
		{"interval over a day", &etcdfedv1.LeaderSpec{Placement: etcdfedv1.LeaderPlacementAuto, MinIntervalSeconds: ptr.To[int32](86401)}, "should be less than or equal to 86400"},
		{"zone too long", &etcdfedv1.LeaderSpec{Preferred: []etcdfedv1.LeaderPreference{{Zone: strings.Repeat("z", 64)}}}, "Too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalid(t, apiserver.Client.Create(ctx, withLeader(ns, tc.l)), tc.want)
		})
	}
}
