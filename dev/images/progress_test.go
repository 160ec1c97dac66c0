package images

import (
	"sync/atomic"
	"testing"
	"time"
)

// A step that runs says so until it ends, and not after: `make images`
// printed nothing for 6.5 minutes of a cold go build on a new machine.
func TestProgressSaysUntilStopped(t *testing.T) {
	var said atomic.Int32
	stop := progress(5*time.Millisecond, func(d time.Duration) {
		if d <= 0 {
			t.Errorf("progress said %s since the start", d)
		}
		said.Add(1)
	})
	for deadline := time.Now().Add(10 * time.Second); said.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("progress every 5ms said %d lines in 10s", said.Load())
		}
	}
	stop()
	n := said.Load()
	time.Sleep(30 * time.Millisecond)
	if after := said.Load(); after != n {
		t.Errorf("progress said %d more lines after it was stopped", after-n)
	}
}
