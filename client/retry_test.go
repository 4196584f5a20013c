package client

import (
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
