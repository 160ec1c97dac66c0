package clusterstatus

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func TestRenderDistance(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := metav1.NewTime(now.Add(-2 * time.Minute))
	rt := func(from, to string, median, p99 int64) etcdfedv1.RoundTrip {
		return etcdfedv1.RoundTrip{From: from, To: to, MedianMicros: median, P99Micros: p99, ObservedAt: &at}
	}
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "main"},
		Spec:       etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.example.com"}},
		Status: etcdfedv1.EtcdClusterStatus{
			RoundTrips: []etcdfedv1.RoundTrip{rt("c1", "c2", 300, 450), rt("c1", "c3", 160_000, 201_000), rt("c2", "c1", 310, 500), rt("c3", "c1", 150_000, 199_000)},
			Timing: &etcdfedv1.TimingStatus{HeartbeatIntervalMillis: 250, ElectionTimeoutMillis: 2500, Source: etcdfedv1.TimingSourceAuto,
				Message: "max p99 round trip between voters 201 ms (c1 to c3)"},
		},
	}
	var b bytes.Buffer
	if err := Render(&b, ec, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Timing: heartbeat 250 ms, election timeout 2500 ms (Auto): max p99 round trip between voters 201 ms (c1 to c3)",
		"FROM \\ TO  c1            c2            c3",
		"c1         -             0.3/0.5 (2m)  160/201 (2m)",
		"c2         0.3/0.5 (2m)  -             ?",
		"c3         150/199 (2m)  ?             -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
