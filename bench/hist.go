package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: values are recorded in microseconds, from 1 µs to 60 s, with 3 significant
// digits. Larger values are recorded as the maximum (and counted in Histogram.Clamped).
const (
	histMinMicros = 1
	histMaxMicros = 60_000_000
	histSigFigs   = 3
)

// Histogram is a latency histogram. It is not safe for concurrent use: each producer owns one,
// and the report merges them.
type Histogram struct {
	h       *hdrhistogram.Histogram
	clamped int64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)}
}

// Record adds one latency. Negative values count as 0.
func (h *Histogram) Record(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	if us > histMaxMicros {
		us = histMaxMicros
		h.clamped++
	}
	_ = h.h.RecordValue(us) // cannot fail: us is within the bounds
}

// Merge adds every value of o to h.
func (h *Histogram) Merge(o *Histogram) {
	h.h.Merge(o.h)
	h.clamped += o.clamped
}

// Reset empties h.
func (h *Histogram) Reset() {
	h.h.Reset()
	h.clamped = 0
}

// Count is the number of values recorded.
func (h *Histogram) Count() int64 { return h.h.TotalCount() }

// Clamped is the number of values above 60 s, recorded as 60 s.
func (h *Histogram) Clamped() int64 { return h.clamped }

// Quantile returns the value at quantile q (0 < q <= 100, a percentile, as HDR takes it).
func (h *Histogram) Quantile(q float64) time.Duration {
	return time.Duration(h.h.ValueAtQuantile(q)) * time.Microsecond
}

// Latency is the summary of a histogram in milliseconds, as the JSON report has it.
type Latency struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// Latency summarises h. The maximum is the highest value recorded (to HDR's precision).
func (h *Histogram) Latency() Latency {
	if h.Count() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		P50:  ms(h.h.ValueAtQuantile(50)),
		P95:  ms(h.h.ValueAtQuantile(95)),
		P99:  ms(h.h.ValueAtQuantile(99)),
		P999: ms(h.h.ValueAtQuantile(99.9)),
		Max:  ms(h.h.Max()),
	}
}
