package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// TimeChart is values over a run's time: one line per Series, and Bands shading spans of it (a
// warm-up, a fault from its injection to its heal), each kind in its colour with a legend.
// Points come at whatever resolution the caller has; x is seconds since the run's start.
type TimeChart struct {
	Title  string // for the chart's <title>; the Section's heading is what the page shows
	YLabel string
	// LogY draws y on a log scale, a tick per decade (latencies: a stall is often a thousand
	// times the median); values at or below 0 are gaps.
	LogY bool
	// XMax is where the time axis ends (0: at the last point or band).
	XMax   float64
	Series []Series
	Bands  []Band
}

// Series is one line of a TimeChart. Color "" takes Palette's colour for its index.
type Series struct {
	Name   string // in the legend ("" leaves it out)
	Color  string
	Dashed bool
	Points []Point
}

// Point is one value at time T (seconds since the run's start). A NaN V is a gap.
type Point struct {
	T float64 `json:"t"`
	V float64 `json:"v"`
}

// Band is a span of a run drawn behind the lines: Kind picks its colour and its legend
// entry, Label is written on it (and Detail, with Label, is its tooltip).
type Band struct {
	Start, End float64 // seconds since the run's start; End before Start is taken as Start
	Kind       string
	Label      string
	Detail     string
	Color      string // "" for the kind's colour in bandPalette, in order of first appearance
}

func (c TimeChart) empty() bool {
	for _, s := range c.Series {
		for _, p := range s.Points {
			if c.drawable(p.V) {
				return false
			}
		}
	}
	return true
}

func (c TimeChart) drawable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!c.LogY || v > 0)
}

// bandColors assigns each band kind its colour, in order of first appearance.
func bandColors(bands []Band) (kinds []string, colors map[string]string) {
	colors = map[string]string{}
	for _, b := range bands {
		if _, ok := colors[b.Kind]; ok {
			continue
		}
		c := b.Color
		if c == "" {
			c = bandPalette[len(kinds)%len(bandPalette)]
		}
		kinds = append(kinds, b.Kind)
		colors[b.Kind] = c
	}
	return kinds, colors
}

func (c TimeChart) svg(width float64) string {
	xmax := c.XMax
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !c.drawable(p.V) {
				continue
			}
			lo, hi = math.Min(lo, p.V), math.Max(hi, p.V)
			if c.XMax == 0 {
				xmax = math.Max(xmax, p.T)
			}
		}
	}
	if c.XMax == 0 {
		for _, b := range c.Bands {
			xmax = math.Max(xmax, math.Max(b.Start, b.End))
		}
	}
	if !(xmax > 0) {
		xmax = 1
	}
	var ya axis
	var yt []float64
	if c.LogY {
		ya, yt = logAxis(lo, hi)
	} else {
		ya, yt = linearAxis(hi, yTicks)
	}

	kinds, colors := bandColors(c.Bands)
	var items []legendItem
	for i, s := range c.Series {
		if s.Name != "" {
			items = append(items, legendItem{label: s.Name, color: seriesColor(s, i), dashed: s.Dashed})
		}
	}
	for _, k := range kinds {
		items = append(items, legendItem{label: k, color: colors[k], band: true})
	}
	pos, legendH := layoutLegend(items, width)
	p := plot{left: padLeft, top: legendH + 6, w: width - padLeft - padRight, x: axis{min: 0, max: xmax}, y: ya}
	p.h = chartHeight - p.top - padBot

	var b strings.Builder
	svgOpen(&b, width, chartHeight, c.Title)
	drawLegend(&b, items, pos)
	c.drawBands(&b, p, colors)
	step := niceStep(xmax, xTicks*int(width)/rowWidth)
	var xt []float64
	for t := 0.0; t <= xmax+step/1e6; t += step {
		xt = append(xt, t)
	}
	frame(&b, p, xt, fmtNum, "seconds", yt, fmtNum, c.YLabel)
	for i, s := range c.Series {
		pts := make([][2]float64, 0, len(s.Points))
		for _, q := range s.Points {
			v := q.V
			if !c.drawable(v) {
				v = math.NaN()
			}
			pts = append(pts, [2]float64{p.px(q.T), p.py(v)})
		}
		polyline(&b, pts, seriesColor(s, i), s.Dashed)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// drawBands shades each band over the plot's height, its label written upwards at its left
// edge where the band is wide enough to hold it (the legend and the tooltip name it anyway).
func (c TimeChart) drawBands(b *strings.Builder, p plot, colors map[string]string) {
	bands := slices.Clone(c.Bands)
	slices.SortStableFunc(bands, func(x, y Band) int {
		switch {
		case x.Start < y.Start:
			return -1
		case x.Start > y.Start:
			return 1
		}
		return 0
	})
	for _, bd := range bands {
		x0 := p.left + clamp01(p.x.frac(bd.Start))*p.w
		x1 := p.left + clamp01(p.x.frac(math.Max(bd.End, bd.Start)))*p.w
		w := math.Max(x1-x0, 1)
		color := colors[bd.Kind]
		tip := bd.Label
		if bd.Detail != "" {
			tip += ": " + bd.Detail
		}
		tip += fmt.Sprintf(" (%s s to %s s)", fmtNum(bd.Start), fmtNum(bd.End))
		fmt.Fprintf(b, `<g class="band" data-kind="%s"><title>%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.18"/>`,
			esc(bd.Kind), esc(tip), x0, p.top, w, p.h, color)
		if bd.Label != "" && w >= minBandLabelWidth {
			tx, ty := x0+fontSize-2, p.top+4
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%d" fill="#444" text-anchor="end" transform="rotate(-90 %.1f %.1f)">%s</text>`,
				tx, ty, fontSize-1, tx, ty, esc(bd.Label))
		}
		b.WriteString(`</g>`)
	}
}

func seriesColor(s Series, i int) string {
	if s.Color != "" {
		return s.Color
	}
	return Palette[i%len(Palette)]
}
