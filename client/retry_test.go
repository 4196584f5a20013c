package client

import (
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
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

// InvalidateMetadata (after a failed produce) never puts back metadata older than a refresh
// stored after it loaded the snapshot it invalidates: that would undo the refresh (the
// senders route batches to the old leaders again, and the producer's refresh, comparing
// before and after, sees no leader moved and backs the next one off). A stress test: each
// refresh here stores metadata marked with its number while invalidations race it, and the
// marker must still be there after each of them. It cannot fail with the compare-and-swap;
// without it, it failed within the first few dozen refreshes on two cores. The invalidating
// goroutine yields after each invalidation: with a single P (GOMAXPROCS=1, as -cpu 1 or a
// one-CPU container sets it) a tight loop gives the P up only to preemption, every 10 ms, and
// the refreshes' 60,000 yields to it then took ten minutes.
func TestInvalidateMetadataKeepsLaterRefresh(t *testing.T) {
	c := &Client{}
	c.meta.Store(&metadata{brokers: map[int32]wire.MetadataBroker{}})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				c.InvalidateMetadata()
				runtime.Gosched()
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for i := range int32(20_000) {
		c.meta.Store(&metadata{fetched: time.Now(), brokers: map[int32]wire.MetadataBroker{i: {NodeID: i}}}) // as RefreshMetadata
		for range 3 {
			runtime.Gosched() // let invalidations that loaded the previous snapshot store it
			if _, ok := c.meta.Load().brokers[i]; !ok {
				t.Fatalf("refresh %d undone by an invalidation of the metadata before it", i)
			}
		}
	}
}
