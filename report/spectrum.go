package report

import (
	"math"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// SpectrumChart is a latency distribution as HdrHistogram plots it, the percentile spectrum:
// x is the percentile on a log scale of 1/(1-p), so that 90%, 99%, 99.9% and 99.99% are evenly
// spaced and the tail, where a system's stalls live, gets as much room as the body; y is the
// latency at that percentile, on a linear scale.
type SpectrumChart struct {
	Title  string
	YLabel string // "latency ms"
	Series []SpectrumSeries
}

// SpectrumSeries is one distribution. Color "" takes Palette's colour for its index.
type SpectrumSeries struct {
	Name   string
	Color  string
	Dashed bool
	Points []Quantile
}

// Quantile is the value at a percentile (0 to 100).
type Quantile struct {
	Percentile float64 `json:"p"`
	Value      float64 `json:"v"`
}

// Spectrum samples h's percentile spectrum, 20 points per decade of 1/(1-p) from 0% up to the
// last percentile its count resolves (1 - 1/count), which is given h's maximum; values are
// scaled by scale (1e-3 for a histogram of microseconds drawn in milliseconds). An empty
// histogram has no points.
func Spectrum(h *hdrhistogram.Histogram, scale float64) []Quantile {
	n := h.TotalCount()
	if n == 0 {
		return nil
	}
	top := math.Min(math.Log10(float64(n)), spectrumMaxDecades)
	var q []Quantile
	for i := 0; float64(i)/spectrumStepsPerDecade < top; i++ {
		p := percentileAt(float64(i) / spectrumStepsPerDecade)
		q = append(q, Quantile{p, float64(h.ValueAtQuantile(p)) * scale})
	}
	return append(q, Quantile{percentileAt(top), float64(h.Max()) * scale})
}

// Spectrum sampling: points per decade, and the decades the x axis always shows (to 99.99%, the
// ticks a reader looks for) and at most shows (99.99999%).
const (
	spectrumStepsPerDecade = 20
	spectrumMinDecades     = 4
	spectrumMaxDecades     = 7
)

// percentileAt is the percentile at x decades of 1/(1-p): 0 → 0, 1 → 90, 2 → 99.
func percentileAt(x float64) float64 { return 100 * (1 - math.Pow(10, -x)) }

// decadesOf is x for a percentile; 100 (the maximum) is +Inf, drawn at the axis's end.
func decadesOf(p float64) float64 {
	if p >= 100 {
		return math.Inf(1)
	}
	return math.Log10(100 / (100 - math.Max(p, 0)))
}

// percentileLabel is the tick label of x decades: "0%", "90%", "99%", "99.9%", ...
func percentileLabel(x float64) string {
	switch d := int(math.Round(x)); {
	case d <= 0:
		return "0%"
	case d == 1:
		return "90%"
	default:
		return strings.TrimSuffix("99."+strings.Repeat("9", d-2), ".") + "%"
	}
}

func (c SpectrumChart) empty() bool {
	for _, s := range c.Series {
		if len(s.Points) > 0 {
			return false
		}
	}
	return true
}

func (c SpectrumChart) svg(width float64) string {
	xmax, hi := float64(spectrumMinDecades), 0.0
	for _, s := range c.Series {
		for _, q := range s.Points {
			if x := decadesOf(q.Percentile); !math.IsInf(x, 0) {
				xmax = math.Max(xmax, math.Ceil(x-0.01)) // a point just past a decade is drawn at its end
			}
			if !math.IsNaN(q.Value) && !math.IsInf(q.Value, 0) {
				hi = math.Max(hi, q.Value)
			}
		}
	}
	xmax = math.Min(xmax, spectrumMaxDecades)
	ya, yt := linearAxis(hi, yTicks)

	var items []legendItem
	for i, s := range c.Series {
		if s.Name != "" {
			items = append(items, legendItem{label: s.Name, color: spectrumColor(s, i), dashed: s.Dashed})
		}
	}
	pos, legendH := layoutLegend(items, width)
	p := plot{left: padLeft, top: legendH + 6, w: width - padLeft - padRight, x: axis{min: 0, max: xmax}, y: ya}
	p.h = chartHeight - p.top - padBot

	var b strings.Builder
	svgOpen(&b, width, chartHeight, c.Title)
	drawLegend(&b, items, pos)
	var xt []float64
	for d := 0.0; d <= xmax; d++ {
		xt = append(xt, d)
	}
	frame(&b, p, xt, percentileLabel, "percentile", yt, fmtNum, c.YLabel)
	for i, s := range c.Series {
		pts := make([][2]float64, 0, len(s.Points))
		for _, q := range s.Points {
			x := math.Min(decadesOf(q.Percentile), xmax)
			pts = append(pts, [2]float64{p.px(x), p.py(q.Value)})
		}
		polyline(&b, pts, spectrumColor(s, i), s.Dashed)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func spectrumColor(s SpectrumSeries, i int) string {
	if s.Color != "" {
		return s.Color
	}
	return Palette[i%len(Palette)]
}
