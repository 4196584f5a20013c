package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// svgs are the page's charts, each checked to be well-formed XML on its own (so that it also
// renders when cut out of the page) and drawn at the page's width.
func svgs(t *testing.T, page string) []string {
	t.Helper()
	all := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(page, -1)
	for i, svg := range all {
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("chart %d is not well-formed XML: %v\n%s", i, err, svg)
			}
		}
		if !strings.Contains(svg, `width="100%"`) || !strings.Contains(svg, `preserveAspectRatio="xMidYMid meet"`) || !strings.Contains(svg, `viewBox="0 0 `) {
			t.Errorf("chart %d does not take the page's width: %.200s", i, svg)
		}
	}
	return all
}

func write(t *testing.T, p Page) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The header has every setting the caller gave, the version and the machine, escaped.
func TestPageHeader(t *testing.T) {
	page := write(t, Page{
		Title:     "run <1>",
		Version:   "v0.9.0; commit: abc",
		Generated: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC),
		Verdict:   "3 faults: 0 lost",
		Settings:  []Setting{{"workload", "produce <all>"}, {"record size", "1024 B"}, {"acks", "all"}},
		Machine:   Machine{Cores: 8, MemoryBytes: 16 << 30, OS: "linux", Arch: "amd64", Kernel: "Linux 6.1.0", Dir: "/data", Filesystem: "xfs"},
	})
	for _, want := range []string{
		"<h1>run &lt;1&gt;</h1>",
		`<p class="verdict">3 faults: 0 lost</p>`,
		"<th>workload</th><td>produce &lt;all&gt;</td>",
		"<th>record size</th><td>1024 B</td>",
		"<th>acks</th><td>all</td>",
		"<th>cores</th><td>8</td>",
		"<th>memory</th><td>16.0 GiB</td>",
		"<th>kernel</th><td>Linux 6.1.0 (amd64)</td>",
		"<th>filesystem</th><td>xfs (/data)</td>",
		"<th>sluice</th><td>v0.9.0; commit: abc</td>",
		"<th>generated</th><td>2026-12-02T04:00:00Z</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "<all>") {
		t.Error("a setting reached the page unescaped")
	}
	if failed := write(t, Page{Verdict: "1 lost", Failed: true}); !strings.Contains(failed, `<p class="verdict failed">1 lost</p>`) {
		t.Error("a failed verdict is not drawn as one")
	}
}

// Each band is drawn, labelled, in its kind's colour, and each kind is in the legend once.
func TestTimeChartBands(t *testing.T) {
	var pts []Point
	for i := range 50 {
		pts = append(pts, Point{T: float64(i) * 0.1, V: float64(i % 7)}) // 100 ms points
	}
	bands := []Band{
		{Start: 0.5, End: 1.5, Kind: "kill-leader", Label: "kill-leader n1", Detail: "kill -9 <leader>"},
		{Start: 2, End: 2.6, Kind: "partition", Label: "partition n2"},
		{Start: 3.5, End: 4.5, Kind: "kill-leader", Label: "kill-leader n3"},
	}
	page := write(t, Page{Sections: []Section{{Heading: "rate", Charts: []Chart{
		TimeChart{YLabel: "sends/s", Bands: bands, Series: []Series{{Name: "acknowledged/s", Points: pts}, {Name: "failed/s", Points: []Point{{1, 0}, {2, math.NaN()}, {3, 2}}}}},
	}}}})
	charts := svgs(t, page)
	if len(charts) != 1 {
		t.Fatalf("%d charts, want 1", len(charts))
	}
	svg := charts[0]
	got := regexp.MustCompile(`<g class="band" data-kind="([^"]*)"><title>[^<]*</title><rect [^>]*fill="(#[0-9a-f]+)"`).FindAllStringSubmatch(svg, -1)
	if len(got) != len(bands) {
		t.Fatalf("%d bands drawn, want %d", len(got), len(bands))
	}
	if got[0][1] != "kill-leader" || got[1][1] != "partition" || got[2][1] != "kill-leader" {
		t.Errorf("bands drawn in the order %v", got)
	}
	if got[0][2] != got[2][2] || got[0][2] == got[1][2] {
		t.Errorf("band colours %s, %s, %s: want one per kind", got[0][2], got[1][2], got[2][2])
	}
	for _, label := range []string{">kill-leader n1<", ">partition n2<", ">kill-leader n3<", "kill -9 &lt;leader&gt;"} {
		if !strings.Contains(svg, label) {
			t.Errorf("the chart lacks the band text %s", label)
		}
	}
	for _, entry := range []string{">kill-leader<", ">partition<", ">acknowledged/s<", ">failed/s<"} {
		if n := strings.Count(svg, entry); n != 1 {
			t.Errorf("legend entry %s appears %d times, want 1", entry, n)
		}
	}
	// 50 points finer than a second: one line of them all; the gap splits failed/s into dots.
	line := regexp.MustCompile(`<polyline [^>]*points="([^"]*)"`).FindStringSubmatch(svg)
	if line == nil || len(strings.Fields(line[1])) != 50 {
		t.Errorf("the first series is not one line of 50 points: %v", line)
	}
	if n := strings.Count(svg, "<circle"); n != 2 {
		t.Errorf("%d dots, want the 2 points the gap leaves alone", n)
	}
}

// The spectrum's x axis is HdrHistogram's: ticks 0%, 90%, 99%, 99.9%, 99.99% evenly spaced, and
// further where the histogram's count resolves further.
func TestSpectrumChart(t *testing.T) {
	h := hdrhistogram.New(1, 60_000_000, 3)
	for i := range 100_000 {
		_ = h.RecordValue(int64(1000 + i%1000)) // 1 to 2 ms
	}
	_ = h.RecordValue(250_000) // one stall of 250 ms
	pts := Spectrum(h, 1e-3)
	if pts[0].Percentile != 0 || pts[0].Value < 0.99 || pts[0].Value > 1.01 {
		t.Errorf("first point %+v, want 0%% at 1 ms", pts[0])
	}
	last := pts[len(pts)-1]
	if last.Value < 249 || last.Value > 251 || last.Percentile < 99.999 || last.Percentile >= 100 {
		t.Errorf("last point %+v, want the 250 ms maximum at 1-1/count", last)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Percentile <= pts[i-1].Percentile || pts[i].Value < pts[i-1].Value {
			t.Fatalf("spectrum not increasing at %d: %+v then %+v", i, pts[i-1], pts[i])
		}
	}
	if len(pts) < 5*spectrumStepsPerDecade {
		t.Errorf("%d points over 5 decades, want %d a decade", len(pts), spectrumStepsPerDecade)
	}

	page := write(t, Page{Sections: []Section{{Charts: []Chart{
		TimeChart{YLabel: "ms", LogY: true, Series: []Series{{Points: []Point{{0.5, 1}, {1, 2}}}}},
		SpectrumChart{YLabel: "latency ms", Series: []SpectrumSeries{{Name: "ack", Points: pts}, {Name: "quantiles", Points: []Quantile{{50, 1}, {99, 2}, {100, 250}}}}},
	}}}})
	charts := svgs(t, page)
	if len(charts) != 2 {
		t.Fatalf("%d charts, want 2", len(charts))
	}
	for i, svg := range charts {
		if !strings.Contains(svg, `viewBox="0 0 600 `) {
			t.Errorf("chart %d of two side by side is not half the row's width: %.120s", i, svg)
		}
	}
	spec := charts[1]
	ticks := regexp.MustCompile(`text-anchor="middle">([0-9.]+%)</text>`).FindAllStringSubmatch(spec, -1)
	var labels []string
	for _, m := range ticks {
		labels = append(labels, m[1])
	}
	if got, want := strings.Join(labels, " "), "0% 90% 99% 99.9% 99.99% 99.999%"; got != want {
		t.Errorf("spectrum ticks %q, want %q (100,001 values resolve 5 decades)", got, want)
	}
	// The ticks are evenly spaced: one decade of 1/(1-p) each.
	xs := regexp.MustCompile(`<line x1="([0-9.]+)" y1="[0-9.]+" x2="[0-9.]+" y2="[0-9.]+" stroke="#ddd"/><text x="[0-9.]+" y="[0-9.]+" font-size="11" text-anchor="middle">[0-9.]+%`).FindAllStringSubmatch(spec, -1)
	if len(xs) != 6 {
		t.Fatalf("%d x ticks", len(xs))
	}
	if n := strings.Count(spec, "<polyline"); n != 2 {
		t.Errorf("%d spectrum lines, want 2", n)
	}

	// A short histogram still shows the ticks up to 99.99%.
	small := hdrhistogram.New(1, 60_000_000, 3)
	_ = small.RecordValue(5)
	_ = small.RecordValue(7)
	one := write(t, Page{Sections: []Section{{Charts: []Chart{SpectrumChart{Series: []SpectrumSeries{{Points: Spectrum(small, 1)}}}}}}})
	for _, tick := range []string{">0%<", ">90%<", ">99%<", ">99.9%<", ">99.99%<"} {
		if !strings.Contains(one, tick) {
			t.Errorf("a two-value spectrum lacks the %s tick", tick)
		}
	}
	if Spectrum(hdrhistogram.New(1, 10, 1), 1) != nil {
		t.Error("an empty histogram has a spectrum")
	}
}

// A section whose charts have nothing to draw is left out, and so is an empty chart beside a
// drawn one (which then takes the whole row).
func TestEmptyCharts(t *testing.T) {
	page := write(t, Page{Sections: []Section{
		{Heading: "nothing", Charts: []Chart{TimeChart{Series: []Series{{Points: []Point{{1, math.NaN()}}}}}, SpectrumChart{}}},
		{Heading: "one", Charts: []Chart{TimeChart{LogY: true, Series: []Series{{Points: []Point{{1, 0}}}}}, TimeChart{Series: []Series{{Points: []Point{{1, 3}}}}}}},
	}})
	if strings.Contains(page, "nothing") {
		t.Error("a section with nothing to draw is on the page")
	}
	charts := svgs(t, page)
	if len(charts) != 1 || !strings.Contains(charts[0], `viewBox="0 0 1200 `) {
		t.Errorf("want one chart on the whole row, got %d", len(charts))
	}
}

func TestPercentileLabel(t *testing.T) {
	for x, want := range []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"} {
		if got := percentileLabel(float64(x)); got != want {
			t.Errorf("percentileLabel(%d) = %q, want %q", x, got, want)
		}
		if x > 0 {
			if got := decadesOf(percentileAt(float64(x))); math.Abs(got-float64(x)) > 1e-9 {
				t.Errorf("decadesOf(percentileAt(%d)) = %v", x, got)
			}
		}
	}
}

func TestNiceStep(t *testing.T) {
	for _, c := range []struct {
		span float64
		n    int
		want float64
	}{{10, 5, 2}, {1, 4, 0.5}, {1700, 5, 500}, {3, 8, 0.5}, {0, 5, 1}} {
		if got := niceStep(c.span, c.n); got != c.want {
			t.Errorf("niceStep(%v, %d) = %v, want %v", c.span, c.n, got, c.want)
		}
	}
}
