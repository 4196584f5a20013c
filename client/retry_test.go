package client

import (
	"math"
	"testing"
	"time"
)

// retryDelay doubles RetryBackoff per failure after the first, stops at RetryBackoffMax, and
// jitters each wait by at most 20 % either way.
func TestRetryDelay(t *testing.T) {
	cfg := ConsumerConfig{RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: time.Second}
	for _, tc := range []struct {
		failures int
		base     time.Duration
	}{
		{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {60, time.Second},
	} {
		lo, hi := tc.base*8/10, tc.base*12/10
		seen := map[time.Duration]bool{}
		for range 200 {
			d := cfg.retryDelay(tc.failures)
			if d < lo || d > hi {
				t.Fatalf("%d failures: %v, want %v to %v", tc.failures, d, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("%d failures: %d distinct waits in 200, want jitter", tc.failures, len(seen))
		}
	}
}

// retryBackoff's edges: no base is no wait however many failures (at once: the doubling
// stops), and the largest ceilings neither overflow into a negative wait nor loop.
func TestRetryBackoffEdges(t *testing.T) {
	for _, tc := range []struct {
		name          string
		base, ceiling time.Duration
		failures      int
		jitter        float64
		lo, hi        time.Duration
	}{
		{"no base", 0, time.Second, math.MaxInt32, 0.5, 0, 0},
		{"no base, no ceiling", 0, 0, math.MaxInt, 0.999, 0, 0},
		{"ceiling below base", time.Second, 100 * time.Millisecond, 1, 0.5, 100 * time.Millisecond, 100 * time.Millisecond},
		{"largest ceiling", time.Nanosecond, math.MaxInt64, math.MaxInt, 0.999, math.MaxInt64 / 2, math.MaxInt64},
		{"odd ceiling", 3, 1001, math.MaxInt, 0.5, 1001, 1001},
		{"first failure", 100 * time.Millisecond, time.Second, 1, 0.5, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		if d := retryBackoff(tc.base, tc.ceiling, tc.failures, tc.jitter); d < tc.lo || d > tc.hi {
			t.Errorf("%s: %v, want %v to %v", tc.name, d, tc.lo, tc.hi)
		}
	}
}
