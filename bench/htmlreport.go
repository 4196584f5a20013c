package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/report"
)

// The HTML report: package report draws it; this file maps results onto its page. The page has
// the runs' settings and the machine at the top, the table of runs, throughput over time,
// latency over time (p99 solid, p50 dashed, on a log scale, since a stall is often a thousand
// times the median) beside each run's latency spectrum, the warm-up shaded as a band.

// ReportHeader is what the report says beyond the results: its title ("" for the default),
// the Sluice version and the machine (report.DetectMachine of the data directory).
type ReportHeader struct {
	Title   string
	Version string
	Machine report.Machine
}

// warmupColor is the warm-up band's: grey, not a colour a fault would take.
const warmupColor = "#999"

// WriteHTMLReport writes a self-contained HTML page for results (one run, or the rows of a
// comparison).
func WriteHTMLReport(w io.Writer, h ReportHeader, results []Result) error {
	if h.Title == "" {
		h.Title = "sluice bench report"
	}
	page := report.Page{
		Title: h.Title, Version: h.Version, Machine: h.Machine, Settings: commonSettings(results),
		Notes: []string{"Figures exclude the warm-up; the charts show it shaded. Latency: produce, from the (scheduled) send to the acknowledgement; " +
			"e2e, from the scheduled send to receipt. Send lag: how late after the scheduled time the harness itself sent (open-loop runs)."},
	}
	page.Sections = append(page.Sections, report.Section{Table: resultsTable(results)})
	bands := warmupBands(results)
	page.Sections = append(page.Sections, report.Section{Heading: "Throughput", Charts: []report.Chart{throughputChart(results, bands)}})
	page.Sections = append(page.Sections, report.Section{
		Heading: "Latency per interval: p99 (solid), p50 (dashed); and its distribution over the measured run",
		Charts:  []report.Chart{latencyChart(results, bands), spectrumChart(results)},
	})
	return report.Write(w, page)
}

func seriesColor(i int) string { return report.Palette[i%len(report.Palette)] }

// commonSettings are the results' settings, one line per key in the first result's order, the
// values of several results joined by " / " where they differ.
func commonSettings(results []Result) []report.Setting {
	var keys []string
	values := map[string][]string{}
	for _, r := range results {
		for _, s := range r.Settings {
			vs, seen := values[s.Key]
			if !seen {
				keys = append(keys, s.Key)
			}
			if !contains(vs, s.Value) {
				values[s.Key] = append(vs, s.Value)
			}
		}
	}
	out := make([]report.Setting, 0, len(keys))
	for _, k := range keys {
		out = append(out, report.Setting{Key: k, Value: strings.Join(values[k], " / ")})
	}
	return out
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// runSettings are the settings of one run that the report's header lists: what a reader needs
// to tell two pages' numbers apart.
func runSettings(c Config, d Driver, r Result) []report.Setting {
	workload := c.Name
	if workload == "" {
		workload = "flags"
	}
	size := c.Duration.String()
	if c.Records > 0 {
		size = strconv.FormatInt(c.Records, 10) + " records"
	}
	acks := strconv.Itoa(c.Acks)
	if c.Acks < 0 {
		acks = "all"
	}
	rate := "flat out"
	if c.Rate > 0 {
		rate = fmt.Sprintf("%.0f records/s", c.Rate)
	}
	// A unix socket is the only other transport, and a Sluice driver says so in its name
	// ("sluice-unix"); every peer is reached over TCP.
	transport := TransportTCP
	if strings.HasSuffix(d.Name(), "-"+TransportUnix) {
		transport = TransportUnix
	}
	rf, cluster := "1", "1 broker"
	if cd, ok := driverAs[*clusterDriver](d); ok {
		rf = strconv.Itoa(max(cd.shape.ReplicationFactor, 1))
		if cd.shape.ReplicationFactor == 0 {
			rf = "the broker's default"
		}
		cluster = r.Cluster
	}
	partitions := strconv.Itoa(c.Partitions)
	if c.Topics > 1 {
		partitions = fmt.Sprintf("%d topics × %d", c.Topics, c.Partitions)
	}
	return []report.Setting{
		{Key: "workload", Value: workload},
		{Key: "mode", Value: r.Mode},
		{Key: "run", Value: size + ", warm-up " + c.Warmup.String()},
		{Key: "record size", Value: strconv.Itoa(c.RecordSize) + " B (" + c.Payload + ")"},
		{Key: "producers", Value: strconv.Itoa(c.Producers)},
		{Key: "rate", Value: rate},
		{Key: "acks", Value: acks},
		{Key: "batch", Value: fmt.Sprintf("batch.size %d, linger.ms %d, compression %s", c.BatchSize, c.LingerMs, c.Compression)},
		{Key: "partitions", Value: partitions},
		{Key: "replication factor", Value: rf},
		{Key: "cluster", Value: cluster},
		{Key: "transport", Value: transport},
	}
}

// resultsTable is the table of runs: one row each.
func resultsTable(results []Result) *report.Table {
	cols := []report.Column{{Name: "run"}, {Name: "mode"}, {Name: "records"}, {Name: "seconds"}, {Name: "records/s"}, {Name: "MB/s"}, {Name: "target/s"},
		{Name: "p50 ms"}, {Name: "p95 ms"}, {Name: "p99 ms"}, {Name: "p99.9 ms"}, {Name: "max ms"},
		{Name: "send lag p99 ms", Title: "how late the harness sent the records (open-loop), included in the latency"},
		{Name: "errors"},
		{Name: "CPU cores", Title: "process CPU time (client, harness and any in-process broker) over the measured time"},
		{Name: "CPU s per GB"}, {Name: "peak RSS MB"},
		{Name: "nearest limit", Title: "the machine's limit, probed before the run (--limits), the run came nearest to"}}
	t := &report.Table{Columns: cols}
	f0 := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	f2 := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	f3 := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	for i, r := range results {
		name := r.Driver
		if r.Name != "" {
			name = r.Name + " on " + r.Driver
		}
		row := []report.Cell{{Text: name, Swatch: seriesColor(i)}, {Text: r.Mode}, {Text: strconv.FormatInt(r.Records, 10)}, {Text: f2(r.Seconds)},
			{Text: f0(r.RecordsPerSec)}, {Text: f2(r.MBPerSec)}}
		target := report.Cell{}
		if r.TargetRate > 0 {
			target.Text = f0(r.TargetRate)
		}
		if r.Unsent > 0 {
			target.Text += " (fell behind)"
			target.Bad, target.Title = true, r.unsentText()
		}
		row = append(row, target)
		if r.Mode == ModeConsume {
			row = append(row, report.Cell{}, report.Cell{}, report.Cell{}, report.Cell{}, report.Cell{})
		} else {
			l := r.LatencyMs
			maxCell := report.Cell{Text: f3(l.Max)}
			if r.LatencyClamped > 0 {
				maxCell = report.Cell{Text: "≥ " + f3(l.Max), Bad: true, Title: fmt.Sprintf("%d records took more than 60 s, counted as 60 s", r.LatencyClamped)}
			}
			row = append(row, report.Cell{Text: f3(l.P50)}, report.Cell{Text: f3(l.P95)}, report.Cell{Text: f3(l.P99)}, report.Cell{Text: f3(l.P999)}, maxCell)
		}
		lag := report.Cell{}
		if r.TargetRate > 0 {
			lag.Text = f3(r.SendLagMs.P99)
		}
		errs := report.Cell{Text: strconv.FormatInt(r.Errors, 10)}
		if r.Errors > 0 {
			errs.Bad, errs.Title = true, r.FirstError
		}
		cores, perGB := report.Cell{}, report.Cell{}
		if r.CPUSeconds > 0 && r.Seconds > 0 {
			cores.Text = f2(r.CPUSeconds / r.Seconds)
		}
		if r.CPUSeconds > 0 && r.Bytes > 0 {
			perGB.Text = f2(r.CPUSeconds / (float64(r.Bytes) / 1e9))
		}
		nearest := report.Cell{}
		if b, ok := r.Tightest(); ok {
			nearest.Text = b.String()
		}
		row = append(row, lag, errs, cores, perGB, report.Cell{Text: f2(r.RSSPeakMB)}, nearest)
		t.Rows = append(t.Rows, row)
	}
	return t
}

// warmupBands is the longest warm-up among results, as a band.
func warmupBands(results []Result) []report.Band {
	warm := 0.0
	for _, r := range results {
		warm = math.Max(warm, r.WarmupSeconds)
	}
	if warm <= 0 {
		return nil
	}
	return []report.Band{{Start: 0, End: warm, Kind: "warm-up", Label: "warm-up", Color: warmupColor}}
}

func throughputChart(results []Result, bands []report.Band) report.Chart {
	c := report.TimeChart{Title: "throughput", YLabel: "MB/s", Bands: bands}
	for i, r := range results {
		s := report.Series{Name: r.Driver, Color: seriesColor(i)}
		for _, iv := range r.Timeline {
			s.Points = append(s.Points, report.Point{T: iv.T, V: iv.MBPerSec})
		}
		c.Series = append(c.Series, s)
	}
	if len(results) == 1 {
		c.Series[0].Name = "" // the table's swatch names it
	}
	return c
}

func latencyChart(results []Result, bands []report.Band) report.Chart {
	c := report.TimeChart{Title: "latency per interval", YLabel: "latency ms (log)", LogY: true, Bands: bands}
	for i, r := range results {
		p99 := report.Series{Name: r.Driver + " p99", Color: seriesColor(i)}
		p50 := report.Series{Name: r.Driver + " p50", Color: seriesColor(i), Dashed: true}
		for _, iv := range r.Timeline {
			p99.Points = append(p99.Points, report.Point{T: iv.T, V: iv.P99Ms})
			p50.Points = append(p50.Points, report.Point{T: iv.T, V: iv.P50Ms})
		}
		c.Series = append(c.Series, p99, p50)
	}
	return c
}

// spectrumChart is each run's latency distribution over its measured time, from its spectrum
// (Result.LatencySpectrum) or, for a result without one (read back from an older JSON), from
// its quantiles.
func spectrumChart(results []Result) report.Chart {
	c := report.SpectrumChart{Title: "latency distribution", YLabel: "latency ms"}
	for i, r := range results {
		if r.Mode == ModeConsume {
			continue
		}
		pts := r.LatencySpectrum
		if len(pts) == 0 && r.LatencyMs != (Latency{}) {
			l := r.LatencyMs
			pts = []report.Quantile{{Percentile: 50, Value: l.P50}, {Percentile: 95, Value: l.P95}, {Percentile: 99, Value: l.P99},
				{Percentile: 99.9, Value: l.P999}, {Percentile: 100, Value: l.Max}}
		}
		c.Series = append(c.Series, report.SpectrumSeries{Name: r.Driver, Color: seriesColor(i), Points: pts})
	}
	return c
}

// Spectrum is h's percentile spectrum in milliseconds (report.Spectrum).
func (h *Histogram) Spectrum() []report.Quantile { return report.Spectrum(h.h, 1e-3) }
