package multicluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPollKeepsTheLastAnswer: a wait that times out says what the thing
// waited for last answered, even when the reads after it failed (as
// client-go's rate limiter fails a read it cannot finish before the
// deadline); with no answer at all, it says the last error.
func TestPollKeepsTheLastAnswer(t *testing.T) {
	ctx := context.Background()
	reads := 0
	err := poll(ctx, 2*time.Second, "the ring whole", func(context.Context) (string, error) {
		reads++
		if reads <= 2 {
			return "4 ready of 5 members", nil
		}
		return "", errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
	})
	if err == nil || !strings.Contains(err.Error(), "last: 4 ready of 5 members; the reads after it failed: client rate limiter") {
		t.Fatalf("a wait whose reads failed after an answer: %v, want the answer and the failure", err)
	}
	err = poll(ctx, 500*time.Millisecond, "the ring whole", func(context.Context) (string, error) {
		return "", errors.New("connection refused")
	})
	if err == nil || !strings.Contains(err.Error(), "last: connection refused") {
		t.Fatalf("a wait with no answer: %v, want the last error", err)
	}
	err = poll(ctx, time.Second, "the ring whole", func(context.Context) (string, error) { return "", nil })
	if err != nil {
		t.Fatalf("a condition met at once: %v", err)
	}
}
