package report

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// The charts are inline SVG whose width is the page's (width 100% and a viewBox, the aspect
// ratio kept so that text is not stretched). A chart alone in its row is drawn on a viewBox
// rowWidth wide; two side by side on one half as wide each, so that their text is as large as
// a lone chart's.

// Chart geometry, in SVG user units.
const (
	rowWidth                  = 1200
	chartHeight               = 320
	padLeft, padRight, padBot = 64, 36, 36
	legendRowH                = 16
	fontSize                  = 11
	charWidth                 = 6.5 // about, at fontSize, for laying the legend out
	latencyFloor              = 0.001
	maxLegendRows             = 4
	minBandLabelWidth         = 9 // user units: a vertical label fits in a band this wide
	gapBetweenLegendItems     = 18
	legendSwatchW             = 14
	legendTextOffset          = legendSwatchW + 4
	xTicks                    = 10
	yTicks                    = 5
)

// Palette is the series colours, in order, for series that do not name one.
var Palette = [...]string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// bandPalette is the bands' fill colours (drawn translucent), one per kind in order.
var bandPalette = [...]string{"#ff7f0e", "#9467bd", "#2ca02c", "#d62728", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#1f77b4", "#7f7f7f"}

// Chart is one chart of a Section: a TimeChart or a SpectrumChart.
type Chart interface {
	// empty says there is nothing to draw (no point at all); the page leaves the chart out.
	empty() bool
	// svg draws the chart on a viewBox width wide.
	svg(width float64) string
}

// plot is the rectangle a chart draws its data in, and its axes.
type plot struct {
	left, top, w, h float64
	x, y            axis
}

func (p plot) px(v float64) float64 { return p.left + p.x.frac(v)*p.w }
func (p plot) py(v float64) float64 { return p.top + (1-clamp01(p.y.frac(v)))*p.h }

// clamp01 clamps a fraction to the plot, so that a value off the axis is drawn at its edge.
func clamp01(f float64) float64 { return math.Min(math.Max(f, 0), 1) }

// axis maps data values onto [0, 1].
type axis struct {
	min, max float64
	log      bool // min and max are decades; values are log10'd (floored at latencyFloor)
}

func (a axis) frac(v float64) float64 {
	if a.log {
		v = math.Log10(math.Max(v, latencyFloor))
	}
	if a.max == a.min {
		return 0
	}
	return (v - a.min) / (a.max - a.min)
}

// niceStep is a 1, 2 or 5 times a power of ten step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsInf(span, 0) || math.IsNaN(span) {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// linearAxis is 0 to a nice value above peak, with its ticks.
func linearAxis(peak float64, n int) (axis, []float64) {
	if !(peak > 0) {
		peak = 1
	}
	step := niceStep(peak, n)
	a := axis{min: 0, max: math.Ceil(peak/step) * step}
	var ticks []float64
	for v := 0.0; v <= a.max+step/1e6; v += step {
		ticks = append(ticks, v)
	}
	return a, ticks
}

// logAxis spans the decades around lo..hi, a tick per decade.
func logAxis(lo, hi float64) (axis, []float64) {
	lo, hi = math.Max(lo, latencyFloor), math.Max(hi, latencyFloor)
	a := axis{min: math.Floor(math.Log10(lo)), max: math.Ceil(math.Log10(hi)), log: true}
	if a.max == a.min {
		a.max++
	}
	var ticks []float64
	for e := a.min; e <= a.max; e++ {
		ticks = append(ticks, math.Pow(10, e))
	}
	return a, ticks
}

// legendItem is one entry of a chart's legend: a line (a series) or a swatch (a band kind).
type legendItem struct {
	label  string
	color  string
	dashed bool
	band   bool
}

// layoutLegend places items in rows across width, at most maxLegendRows rows (the rest are
// left out, said by an ellipsis); it returns each item's position and the rows' height.
func layoutLegend(items []legendItem, width float64) (pos [][2]float64, height float64) {
	if len(items) == 0 {
		return nil, 0
	}
	x, row := float64(padLeft), 0
	for _, it := range items {
		w := legendTextOffset + charWidth*float64(len(it.label))
		if x+w > width-padRight && x > padLeft {
			x, row = padLeft, row+1
		}
		if row >= maxLegendRows {
			break
		}
		pos = append(pos, [2]float64{x, float64(row)*legendRowH + 12})
		x += w + gapBetweenLegendItems
	}
	return pos, float64(min(row+1, maxLegendRows))*legendRowH + 4
}

func drawLegend(b *strings.Builder, items []legendItem, pos [][2]float64) {
	for i, p := range pos {
		it := items[i]
		if it.band {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%d" height="10" fill="%s" fill-opacity="0.3" stroke="%s"/>`,
				p[0], p[1]-9, legendSwatchW, it.color, it.color)
		} else {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`,
				p[0], p[1]-4, p[0]+legendSwatchW, p[1]-4, it.color, dashAttr(it.dashed))
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%d">%s</text>`, p[0]+legendTextOffset, p[1], fontSize, esc(it.label))
	}
	if len(pos) < len(items) {
		last := pos[len(pos)-1]
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%d">…</text>`, last[0]+legendTextOffset+charWidth*float64(len(items[len(pos)-1].label))+6, last[1], fontSize)
	}
}

func dashAttr(dashed bool) string {
	if dashed {
		return ` stroke-dasharray="5 3"`
	}
	return ""
}

// svgOpen starts a chart: page-wide, its aspect ratio kept.
func svgOpen(b *strings.Builder, width, height float64, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="100%%" viewBox="0 0 %.0f %.0f" preserveAspectRatio="xMidYMid meet" font-family="sans-serif" role="img">`, width, height)
	if title != "" {
		fmt.Fprintf(b, `<title>%s</title>`, esc(title))
	}
}

// frame draws the plot's border, the x ticks with their labels and the y ticks.
func frame(b *strings.Builder, p plot, xTickVals []float64, xLabel func(float64) string, xTitle string, yTickVals []float64, yLabel func(float64) string, yTitle string) {
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`, p.left, p.top, p.w, p.h)
	bottom := p.top + p.h
	for _, v := range xTickVals {
		x := p.px(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" font-size="%d" text-anchor="middle">%s</text>`,
			x, p.top, x, bottom, x, bottom+14, fontSize, esc(xLabel(v)))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%d" text-anchor="middle">%s</text>`, p.left+p.w/2, bottom+30, fontSize, esc(xTitle))
	for _, v := range yTickVals {
		y := p.py(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" font-size="%d" text-anchor="end">%s</text>`,
			p.left, y, p.left+p.w, y, p.left-4, y+4, fontSize, esc(yLabel(v)))
	}
	mid := p.top + p.h/2
	fmt.Fprintf(b, `<text x="12" y="%.1f" font-size="%d" transform="rotate(-90 12 %.1f)" text-anchor="middle">%s</text>`, mid, fontSize, mid, esc(yTitle))
}

// polyline draws one series of points (NaN y: a gap); a lone point is a dot.
func polyline(b *strings.Builder, pts [][2]float64, color string, dashed bool) {
	var run [][2]float64
	flush := func() {
		switch {
		case len(run) == 1:
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, run[0][0], run[0][1], color)
		case len(run) > 1:
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="`, color, dashAttr(dashed))
			for i, q := range run {
				if i > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(b, "%.1f,%.1f", q[0], q[1])
			}
			b.WriteString(`"/>`)
		}
		run = run[:0]
	}
	for _, q := range pts {
		if math.IsNaN(q[1]) || math.IsInf(q[1], 0) || math.IsNaN(q[0]) {
			flush()
			continue
		}
		run = append(run, q)
	}
	flush()
}

// esc escapes text for SVG and HTML alike (numeric references for quotes, valid XML).
func esc(s string) string { return template.HTMLEscapeString(s) }

// fmtNum prints a tick value without trailing noise.
func fmtNum(v float64) string { return fmt.Sprintf("%g", math.Round(v*1e6)/1e6) }
