package bench

import (
	"math"
	"testing"
	"time"
)

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

func TestHistogramMergeAndPercentiles(t *testing.T) {
	// Two producers' histograms: 1..500 ms and 501..1000 ms, one value each.
	a, b := NewHistogram(), NewHistogram()
	for ms := 1; ms <= 1000; ms++ {
		h := a
		if ms > 500 {
			h = b
		}
		h.Record(time.Duration(ms) * time.Millisecond)
	}
	if got := a.Latency().P99; !near(got, 495, 0.002) {
		t.Errorf("first half alone: p99 %v ms, want 495", got)
	}
	a.Merge(b)
	if a.Count() != 1000 {
		t.Fatalf("merged count %d, want 1000", a.Count())
	}
	l := a.Latency()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", l.P50, 500}, {"p95", l.P95, 950}, {"p99", l.P99, 990}, {"p99.9", l.P999, 999}, {"max", l.Max, 1000},
	} {
		if !near(c.got, c.want, 0.002) { // 3 significant digits
			t.Errorf("%s = %v ms, want %v", c.name, c.got, c.want)
		}
	}
}

func TestHistogramBounds(t *testing.T) {
	h := NewHistogram()
	if (h.Latency() != Latency{}) {
		t.Errorf("empty histogram: %+v, want zeros", h.Latency())
	}
	h.Record(-time.Second)  // a clock step: counts as 0
	h.Record(2 * time.Hour) // beyond 60 s: clamped and counted
	if h.Count() != 2 || h.Clamped() != 1 {
		t.Fatalf("count %d clamped %d, want 2 and 1", h.Count(), h.Clamped())
	}
	if l := h.Latency(); !near(l.Max, 60_000, 0.001) || l.P50 != 0 {
		t.Errorf("latency %+v: want p50 0 and max 60000 ms", l)
	}
	h.Reset()
	if h.Count() != 0 || h.Clamped() != 0 {
		t.Errorf("after Reset: count %d clamped %d", h.Count(), h.Clamped())
	}
}
