package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// spec.etcd.timing (rule 15): Auto, Manual or unset, beside explicit
// values or not; anything else refused.
func TestTimingValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ctx := context.Background()
	ns := testenv.NamespaceT(t, apiserver, "timing")
	for _, tc := range []struct {
		name string
		etcd etcdfedv1.EtcdConfig
		want string // "" accepted
	}{
		{name: "unset"},
		{name: "Auto", etcd: etcdfedv1.EtcdConfig{Timing: etcdfedv1.TimingAuto}},
		{name: "Manual", etcd: etcdfedv1.EtcdConfig{Timing: etcdfedv1.TimingManual}},
		{name: "Auto with explicit values", etcd: etcdfedv1.EtcdConfig{Timing: etcdfedv1.TimingAuto, HeartbeatIntervalMillis: ptr.To[int32](250), ElectionTimeoutMillis: ptr.To[int32](2500)}},
		{name: "another word", etcd: etcdfedv1.EtcdConfig{Timing: "Fast"}, want: `spec.etcd.timing: Unsupported value: "Fast": supported values: "Auto", "Manual"`},
		{name: "timingFloor Disk under Auto", etcd: etcdfedv1.EtcdConfig{TimingFloor: etcdfedv1.TimingFloorDisk}},
		{name: "timingFloor EtcdDefaults under Manual", etcd: etcdfedv1.EtcdConfig{Timing: etcdfedv1.TimingManual, TimingFloor: etcdfedv1.TimingFloorEtcdDefaults}},
		{name: "timingFloor Disk under Manual", etcd: etcdfedv1.EtcdConfig{Timing: etcdfedv1.TimingManual, TimingFloor: etcdfedv1.TimingFloorDisk},
			want: "timingFloor Disk is a floor of timing Auto"},
		{name: "another floor", etcd: etcdfedv1.EtcdConfig{TimingFloor: "Fast"}, want: `spec.etcd.timingFloor: Unsupported value: "Fast": supported values: "EtcdDefaults", "Disk"`},
		{name: "explicit values still checked under Auto", etcd: etcdfedv1.EtcdConfig{Timing: etcdfedv1.TimingAuto, HeartbeatIntervalMillis: ptr.To[int32](500)},
			want: "electionTimeoutMillis must be at least 5 times heartbeatIntervalMillis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := validCluster(ns)
			ec.Spec.Etcd = tc.etcd
			err := apiserver.Client.Create(ctx, ec)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantInvalid(t, err, tc.want)
		})
	}
}

// EtcdSpoke status.roundTrips is bounded and checked by the apiserver (the
// hub checks again, hub/reports: a spoke may write past the schema of an
// older CRD); EtcdCluster status.roundTrips and status.timing as the hub
// writes them are accepted.
func TestRoundTripsStatusValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ctx := context.Background()
	ns := testenv.NamespaceT(t, apiserver, "roundtrips")
	good := etcdfedv1.PeerRoundTrip{Cluster: "member-2", MedianMicros: 800, P99Micros: 1500, Samples: 20, ObservedAt: ptr.To(metav1.Now().Rfc3339Copy())}
	for _, tc := range []struct {
		name string
		rts  func() []etcdfedv1.PeerRoundTrip
		want string
	}{
		{name: "good", rts: func() []etcdfedv1.PeerRoundTrip { return []etcdfedv1.PeerRoundTrip{good} }},
		{name: "negative", rts: func() []etcdfedv1.PeerRoundTrip {
			r := good
			r.MedianMicros = -1
			return []etcdfedv1.PeerRoundTrip{r}
		}, want: "status.roundTrips[0].medianMicros: Invalid value: -1"},
		{name: "over a minute", rts: func() []etcdfedv1.PeerRoundTrip {
			r := good
			r.P99Micros = etcdfedv1.MaxRoundTripMicros + 1
			return []etcdfedv1.PeerRoundTrip{r}
		}, want: "status.roundTrips[0].p99Micros: Invalid value: 60000001"},
		{name: "no samples", rts: func() []etcdfedv1.PeerRoundTrip {
			r := good
			r.Samples = 0
			return []etcdfedv1.PeerRoundTrip{r}
		}, want: "status.roundTrips[0].samples: Invalid value: 0"},
		{name: "no cluster", rts: func() []etcdfedv1.PeerRoundTrip {
			r := good
			r.Cluster = ""
			return []etcdfedv1.PeerRoundTrip{r}
		}, want: "status.roundTrips[0].cluster"},
		{name: "a peer twice", rts: func() []etcdfedv1.PeerRoundTrip { return []etcdfedv1.PeerRoundTrip{good, good} }, want: "Duplicate value"},
		{name: "too many", rts: func() []etcdfedv1.PeerRoundTrip {
			var out []etcdfedv1.PeerRoundTrip
			for i := range etcdfedv1.MaxRoundTrips + 1 {
				r := good
				r.Cluster = fmt.Sprintf("member-%d", i)
				out = append(out, r)
			}
			return out
		}, want: "status.roundTrips: Too many: 129: must have at most 128 items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{GenerateName: "spoke-", Namespace: ns}}
			if err := apiserver.Client.Create(ctx, sp); err != nil {
				t.Fatal(err)
			}
			sp.Status.RoundTrips = tc.rts()
			err := apiserver.Client.Status().Update(ctx, sp)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantInvalid(t, err, tc.want)
		})
	}

	t.Run("EtcdCluster status as the hub writes it", func(t *testing.T) {
		ec := validCluster(ns)
		if err := apiserver.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
		at := metav1.Now().Rfc3339Copy()
		ec.Status.RoundTrips = []etcdfedv1.RoundTrip{{From: "member-1", To: "member-2", MedianMicros: 300, P99Micros: 500, ObservedAt: &at}}
		ec.Status.Timing = &etcdfedv1.TimingStatus{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, Source: etcdfedv1.TimingSourceAuto,
			Message: "max p99 round trip between voters 0.5 ms (member-1 to member-2)"}
		if err := apiserver.Client.Status().Update(ctx, ec); err != nil {
			t.Fatalf("refused: %v", err)
		}
		ec.Status.RoundTrips[0].P99Micros = -5
		wantInvalid(t, apiserver.Client.Status().Update(ctx, ec), "status.roundTrips[0].p99Micros: Invalid value: -5")
	})
}
