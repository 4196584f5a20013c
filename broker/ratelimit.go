package broker

import (
	"context"
	"time"
)

// tokenBucket limits a byte rate: wait(n) returns once n bytes fit in the rate, sleeping as
// needed. The bucket holds at most burst bytes of unused allowance, so an idle stretch does not
// let a burst of more than that through afterwards; a wait for more than burst is let through
// once the bucket is full and leaves it in debt, which the next waits pay off. One goroutine
// (the scrub's) uses it: it has no lock.
type tokenBucket struct {
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func newTokenBucket(bytesPerSec, burst int64) *tokenBucket {
	return &tokenBucket{rate: float64(bytesPerSec), burst: float64(burst), tokens: float64(burst), at: time.Now()}
}

// wait takes n bytes from the bucket, first sleeping until the bucket is full or holds n,
// or returns ctx's error if ctx ends first.
func (tb *tokenBucket) wait(ctx context.Context, n int) error {
	now := time.Now()
	tb.tokens = min(tb.burst, tb.tokens+now.Sub(tb.at).Seconds()*tb.rate)
	tb.at = now
	if need := min(float64(n), tb.burst) - tb.tokens; need > 0 {
		t := time.NewTimer(time.Duration(need / tb.rate * float64(time.Second)))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now = time.Now()
		tb.tokens = min(tb.burst, tb.tokens+now.Sub(tb.at).Seconds()*tb.rate)
		tb.at = now
	}
	tb.tokens -= float64(n)
	return nil
}
