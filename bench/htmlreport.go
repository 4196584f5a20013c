package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

// The HTML report: one self-contained page (no scripts, no external files) with the summary
// of each run and two charts drawn as inline SVG from the runs' timelines: throughput over
// time, and latency over time (p99 solid, p50 dashed, on a log scale, since a stall is often
// a thousand times the median). Warm-up intervals are shaded.

// Chart geometry, in SVG user units.
const (
	chartW, chartH                       = 760, 260
	padLeft, padRight, padTop, padBottom = 64, 16, 12, 36
	plotW, plotH                         = chartW - padLeft - padRight, chartH - padTop - padBottom
)

// latencyFloorMs is the smallest latency the log scale shows (1 µs).
const latencyFloorMs = 0.001

var seriesColors = [...]string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

type reportPage struct {
	Title      string
	Generated  string
	Results    []reportRow
	Throughput template.HTML
	Latency    template.HTML
}

type reportRow struct {
	Color string
	Result
}

// WriteHTMLReport writes a self-contained HTML page for results (one run, or the rows of a
// comparison). title may be empty.
func WriteHTMLReport(w io.Writer, title string, results []Result) error {
	if title == "" {
		title = "sluice bench report"
	}
	page := reportPage{Title: title, Generated: time.Now().UTC().Format(time.RFC3339)}
	for i, r := range results {
		page.Results = append(page.Results, reportRow{Color: seriesColors[i%len(seriesColors)], Result: r})
	}
	page.Throughput = throughputChart(results)
	page.Latency = latencyChart(results)
	return reportTemplate.Execute(w, page)
}

// axis maps data values onto the plot.
type axis struct {
	min, max float64
	log      bool
}

func (a axis) frac(v float64) float64 {
	if a.log {
		v = math.Log10(math.Max(v, latencyFloorMs))
	}
	if a.max == a.min {
		return 0
	}
	return (v - a.min) / (a.max - a.min)
}

func (a axis) x(v float64) float64 { return padLeft + a.frac(v)*plotW }
func (a axis) y(v float64) float64 { return padTop + (1-a.frac(v))*plotH }

// niceStep is a 1, 2 or 5 times a power of ten step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
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

func timeAxis(results []Result) axis {
	end := 0.0
	for _, r := range results {
		if n := len(r.Timeline); n > 0 {
			end = math.Max(end, r.Timeline[n-1].T)
		}
	}
	return axis{min: 0, max: math.Max(end, 1)}
}

// frame draws the plot's border, the x ticks (seconds) and the y ticks given as values with
// labels, plus the longest warm-up among results, shaded.
func frame(b *strings.Builder, xa, ya axis, yTicks []float64, yLabel func(float64) string, yTitle string, results []Result) {
	warm := 0.0
	for _, r := range results {
		warm = math.Max(warm, r.WarmupSeconds)
	}
	if warm > 0 {
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eee"/><text x="%.1f" y="%d" font-size="11" fill="#888">warm-up</text>`,
			xa.x(0), padTop, xa.x(warm)-xa.x(0), plotH, xa.x(0)+4, padTop+12)
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padLeft, padTop, plotW, plotH)
	step := niceStep(xa.max-xa.min, 8)
	for t := 0.0; t <= xa.max+step/1e6; t += step {
		x := xa.x(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" font-size="11" text-anchor="middle">%g</text>`,
			x, padTop, x, padTop+plotH, x, padTop+plotH+14, math.Round(t*1000)/1000)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="11" text-anchor="middle">seconds</text>`, padLeft+plotW/2, chartH-4)
	for _, v := range yTicks {
		y := ya.y(v)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`,
			padLeft, y, padLeft+plotW, y, padLeft-4, y+4, template.HTMLEscapeString(yLabel(v)))
	}
	fmt.Fprintf(b, `<text x="12" y="%d" font-size="11" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>`,
		padTop+plotH/2, padTop+plotH/2, template.HTMLEscapeString(yTitle))
}

// polyline draws one series; points with ok false are gaps, and a lone point is a dot.
func polyline(b *strings.Builder, xa, ya axis, ivs []Interval, value func(Interval) (float64, bool), color string, dashed bool) {
	var pts [][2]float64
	flush := func() {
		switch {
		case len(pts) == 1:
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, pts[0][0], pts[0][1], color)
		case len(pts) > 1:
			dash := ""
			if dashed {
				dash = ` stroke-dasharray="4 3"`
			}
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="`, color, dash)
			for i, p := range pts {
				if i > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(b, "%.1f,%.1f", p[0], p[1])
			}
			b.WriteString(`"/>`)
		}
		pts = pts[:0]
	}
	for _, iv := range ivs {
		v, ok := value(iv)
		if !ok {
			flush()
			continue
		}
		pts = append(pts, [2]float64{xa.x(iv.T), ya.y(v)})
	}
	flush()
}

func throughputChart(results []Result) template.HTML {
	xa := timeAxis(results)
	peak := 0.0
	for _, r := range results {
		for _, iv := range r.Timeline {
			peak = math.Max(peak, iv.MBPerSec)
		}
	}
	if peak == 0 {
		return ""
	}
	step := niceStep(peak, 5)
	ya := axis{min: 0, max: math.Ceil(peak/step) * step}
	var ticks []float64
	for v := 0.0; v <= ya.max+step/1e6; v += step {
		ticks = append(ticks, v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`, chartW, chartH, chartW, chartH)
	frame(&b, xa, ya, ticks, func(v float64) string { return fmt.Sprintf("%g", v) }, "MB/s", results)
	for i, r := range results {
		polyline(&b, xa, ya, r.Timeline, func(iv Interval) (float64, bool) { return iv.MBPerSec, true }, seriesColors[i%len(seriesColors)], false)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from numbers and escaped labels only
}

func latencyChart(results []Result) template.HTML {
	lo, hi := math.Inf(1), 0.0
	for _, r := range results {
		for _, iv := range r.Timeline {
			if iv.P99Ms > 0 {
				lo, hi = math.Min(lo, math.Max(iv.P50Ms, latencyFloorMs)), math.Max(hi, math.Max(iv.P99Ms, iv.MaxMs))
			}
		}
	}
	if hi == 0 {
		return "" // no run of these measured latency
	}
	ya := axis{min: math.Floor(math.Log10(lo)), max: math.Ceil(math.Log10(hi)), log: true}
	if ya.max == ya.min {
		ya.max++
	}
	var ticks []float64
	for e := ya.min; e <= ya.max; e++ {
		ticks = append(ticks, math.Pow(10, e))
	}
	xa := timeAxis(results)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`, chartW, chartH, chartW, chartH)
	frame(&b, xa, ya, ticks, func(v float64) string { return fmt.Sprintf("%g", v) }, "latency ms (log)", results)
	for i, r := range results {
		color := seriesColors[i%len(seriesColors)]
		polyline(&b, xa, ya, r.Timeline, func(iv Interval) (float64, bool) { return iv.P99Ms, iv.P99Ms > 0 }, color, false)
		polyline(&b, xa, ya, r.Timeline, func(iv Interval) (float64, bool) { return iv.P50Ms, iv.P50Ms > 0 }, color, true)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"f0":    func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"f2":    func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"div":   func(a, b float64) float64 { return a / b },
	"perGB": func(s float64, bytes int64) float64 { return s / (float64(bytes) / 1e9) },
	"f3":    func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"nearest": func(r Result) string {
		b, ok := r.Tightest()
		if !ok {
			return ""
		}
		return b.String()
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin-bottom: 24px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: middle; }
.err { color: #b00; }
</style></head><body>
<h1>{{.Title}}</h1>
<p>Generated {{.Generated}}. Figures exclude the warm-up; the charts show it shaded. Latency:
produce, from the (scheduled) send to the acknowledgement; e2e, from the scheduled send to receipt.
Send lag: how late after the scheduled time the harness itself sent (open-loop runs).</p>
<table>
<tr><th>run</th><th>mode</th><th>records</th><th>seconds</th><th>records/s</th><th>MB/s</th><th>target/s</th>
<th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th title="how late the harness sent the records (open-loop), included in the latency">send lag p99 ms</th><th>errors</th><th title="process CPU time (client, harness and any in-process broker) over the measured time">CPU cores</th><th>CPU s per GB</th><th>peak RSS MB</th><th title="the machine's limit, probed before the run (--limits), the run came nearest to">nearest limit</th></tr>
{{range .Results}}<tr><td><span class="swatch" style="background:{{.Color}}"></span>{{if .Name}}{{.Name}} on {{end}}{{.Driver}}</td>
<td>{{.Mode}}</td><td>{{.Records}}</td><td>{{f2 .Seconds}}</td><td>{{f0 .RecordsPerSec}}</td><td>{{f2 .MBPerSec}}</td>
<td{{if .Unsent}} class="err" title="fell behind: {{.Unsent}} records due in the run were never sent; the rate was not sustained"{{end}}>{{if .TargetRate}}{{f0 .TargetRate}}{{end}}{{if .Unsent}} (fell behind){{end}}</td>
{{if eq .Mode "consume"}}<td></td><td></td><td></td><td></td><td></td>{{else}}<td>{{f3 .LatencyMs.P50}}</td><td>{{f3 .LatencyMs.P95}}</td><td>{{f3 .LatencyMs.P99}}</td><td>{{f3 .LatencyMs.P999}}</td><td{{if .LatencyClamped}} class="err" title="{{.LatencyClamped}} records took more than 60 s, counted as 60 s"{{end}}>{{if .LatencyClamped}}&ge; {{end}}{{f3 .LatencyMs.Max}}</td>{{end}}
<td>{{if .TargetRate}}{{f3 .SendLagMs.P99}}{{end}}</td>
<td{{if .Errors}} class="err" title="{{.FirstError}}"{{end}}>{{.Errors}}</td>
<td>{{if and .CPUSeconds .Seconds}}{{f2 (div .CPUSeconds .Seconds)}}{{end}}</td><td>{{if and .CPUSeconds .Bytes}}{{f2 (perGB .CPUSeconds .Bytes)}}{{end}}</td><td>{{f2 .RSSPeakMB}}</td><td>{{nearest .Result}}</td></tr>
{{end}}</table>
{{if .Throughput}}<h2>Throughput</h2>
{{.Throughput}}{{end}}
{{if .Latency}}<h2>Latency per interval: p99 (solid), p50 (dashed)</h2>
{{.Latency}}{{end}}
</body></html>
`))
