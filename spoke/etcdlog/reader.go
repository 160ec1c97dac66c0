package etcdlog

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Defaults of Reader.
const (
	DefaultInterval   = 20 * time.Second
	DefaultTimeout    = 3 * time.Second
	DefaultTailLines  = 300
	DefaultLimitBytes = 256 << 10
)

// Reader reads the tail of members' etcd logs through the apiserver
// (pods/log) and classifies them: bounded in lines and bytes, with a
// timeout, and at most once per Interval per member and pod. Safe for
// concurrent use.
type Reader struct {
	// Pods reads pods/log.
	Pods corev1client.PodsGetter
	// Container is the etcd container's name.
	Container string
	// Interval is the least time between two reads of one member's log;
	// 0: DefaultInterval.
	Interval time.Duration
	// Timeout bounds one read; 0: DefaultTimeout.
	Timeout time.Duration
	// TailLines and LimitBytes bound what one read asks for; 0: defaults.
	TailLines, LimitBytes int64
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	mu   sync.Mutex
	last map[string]Result
}

// Result is one read of a member's log.
type Result struct {
	// Diagnosis is valid when Err is nil.
	Diagnosis Diagnosis
	// Err says why the log could not be read.
	Err error
	// At is when the read was made; Pod and Previous what was read.
	At       time.Time
	Pod      types.UID
	Previous bool
}

// Read returns the diagnosis of pod's etcd log for the member key: read now
// when there is no read of this pod (and of the same run: previous says the
// last terminated one, for a container that is waiting to restart) younger
// than Interval, else the last one. It also returns how long until the next
// read may be made.
func (r *Reader) Read(ctx context.Context, key string, pod *corev1.Pod, previous bool) (Result, time.Duration) {
	now := r.now()
	interval := orDuration(r.Interval, DefaultInterval)
	r.mu.Lock()
	last, ok := r.last[key]
	r.mu.Unlock()
	if ok && last.Pod == pod.UID && last.Previous == previous {
		if age := now.Sub(last.At); age < interval {
			return last, interval - age
		}
	}
	res := Result{At: now, Pod: pod.UID, Previous: previous}
	data, err := r.fetch(ctx, pod, previous)
	if err != nil {
		res.Err = err
	} else {
		res.Diagnosis = Classify(data)
	}
	r.mu.Lock()
	if r.last == nil {
		r.last = map[string]Result{}
	}
	r.last[key] = res
	r.mu.Unlock()
	return res, interval
}

func (r *Reader) fetch(ctx context.Context, pod *corev1.Pod, previous bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, orDuration(r.Timeout, DefaultTimeout))
	defer cancel()
	tail, limit := r.TailLines, r.LimitBytes
	if tail <= 0 {
		tail = DefaultTailLines
	}
	if limit <= 0 {
		limit = DefaultLimitBytes
	}
	container := r.Container
	if container == "" {
		container = "etcd"
	}
	// Do, not DoRaw: DoRaw drops the message of an error Status (for
	// example the kubelet's answer the apiserver passes on).
	res := r.Pods.Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: container, TailLines: &tail, LimitBytes: &limit, Previous: previous,
	}).Do(ctx)
	if err := res.Error(); err != nil {
		return nil, fmt.Errorf("read the log of container %s of pod %s (pods/log): %w", container, pod.Name, err)
	}
	data, err := res.Raw()
	if err != nil {
		return nil, fmt.Errorf("read the log of container %s of pod %s (pods/log): %w", container, pod.Name, err)
	}
	return data, nil
}

// Forget drops what is known of a member.
func (r *Reader) Forget(key string) {
	r.mu.Lock()
	delete(r.last, key)
	r.mu.Unlock()
}

func (r *Reader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
