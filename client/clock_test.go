package client

import (
	"testing"
	"time"
)

func TestRecordClockTracksTheWallClock(t *testing.T) {
	var c recordClock
	for i := range 200 {
		before := time.Now()
		got := c.now()
		after := time.Now()
		// Monotonic comparisons, and the wall readings within a millisecond of time.Now's.
		if got.Before(before) || got.After(after) {
			t.Fatalf("reading %d: %v not between %v and %v", i, got, before, after)
		}
		if d := got.Sub(before.Round(0)); d < -time.Millisecond || d > time.Millisecond+after.Sub(before) {
			t.Fatalf("reading %d: wall time %v off time.Now's %v by %v", i, got.Round(0), before.Round(0), d)
		}
		if i%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestRecordClockRereadsItsBase(t *testing.T) {
	var c recordClock
	stale := time.Now().Add(-2 * recordClockRefresh)
	c.base.Store(&stale)
	got := c.now()
	if b := c.base.Load(); b == nil || b.Before(stale.Add(recordClockRefresh)) {
		t.Fatalf("base not re-read: %v", b)
	}
	if time.Since(got) > time.Second {
		t.Fatalf("reading %v came from the stale base", got)
	}
}

func BenchmarkRecordClock(b *testing.B) {
	var c recordClock
	var t time.Time
	for b.Loop() {
		t = c.now()
	}
	_ = t
}

func BenchmarkTimeNow(b *testing.B) {
	var t time.Time
	for b.Loop() {
		t = time.Now()
	}
	_ = t
}
