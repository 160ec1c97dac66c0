package etcdlog_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcdfed/etcdfed/spoke/etcdlog"
)

// TestReaderReadsAtMostOncePerInterval: within the interval the last read
// is returned; a new pod, another run (previous) or the end of the
// interval reads again; Forget starts over. pods/log is served by
// client-go's fake clientset here (the real one is exercised end to end
// in test/multicluster).
func TestReaderReadsAtMostOncePerInterval(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ring", Name: "main-0", UID: "u1"}}
	cs := fake.NewClientset(pod)
	r := &etcdlog.Reader{Pods: cs.CoreV1(), Interval: 20 * time.Second, Now: func() time.Time { return now }}
	ctx := context.Background()

	first, next := r.Read(ctx, "ring/main-0", pod, false)
	if first.Err != nil || !first.At.Equal(now) || next != 20*time.Second {
		t.Fatalf("first read: %+v, next %s", first, next)
	}
	if first.Diagnosis.Lines == 0 {
		t.Errorf("the read returned no lines")
	}
	now = now.Add(5 * time.Second)
	again, next := r.Read(ctx, "ring/main-0", pod, false)
	if !again.At.Equal(first.At) || next != 15*time.Second {
		t.Errorf("within the interval: read at %s (want the first, %s), next %s", again.At, first.At, next)
	}
	prev, _ := r.Read(ctx, "ring/main-0", pod, true)
	if !prev.At.Equal(now) || !prev.Previous {
		t.Errorf("the previous run was not read: %+v", prev)
	}
	other := pod.DeepCopy()
	other.UID = "u2"
	if res, _ := r.Read(ctx, "ring/main-0", other, true); !res.At.Equal(now) || res.Pod != "u2" {
		t.Errorf("a new pod was not read: %+v", res)
	}
	now = now.Add(21 * time.Second)
	if res, _ := r.Read(ctx, "ring/main-0", other, true); !res.At.Equal(now) {
		t.Errorf("after the interval: read at %s, want %s", res.At, now)
	}
	r.Forget("ring/main-0")
	now = now.Add(time.Second)
	if res, _ := r.Read(ctx, "ring/main-0", other, true); !res.At.Equal(now) {
		t.Errorf("after Forget: read at %s, want %s", res.At, now)
	}
}
