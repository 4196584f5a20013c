package bench

import (
	"fmt"
	"io"
	"slices"
)

// Repeated is one workload run several times: each figure is the median over the runs (the
// middle run's, or the mean of the middle two), Spread holds each figure's lowest and highest,
// and Runs every run whole. Absolute figures on a shared machine vary from run to run, so a
// figure worth quoting is a median with its spread; the JSON keeps Result's keys at the top
// level, so scripts that read one run read the medians the same way. Peak RSS is the
// process's high-water mark since the run began (ReleaseMemory starts it again before each
// run, on Linux), so it includes what earlier runs left resident.
type Repeated struct {
	Result
	Spread map[string][2]float64 `json:"spread"`
	Runs   []Result              `json:"runs"`
}

// figures are the Result fields a Repeated takes the median of, by their JSON names.
var figures = []struct {
	name string
	get  func(*Result) *float64
}{
	{"seconds", func(r *Result) *float64 { return &r.Seconds }},
	{"records_per_sec", func(r *Result) *float64 { return &r.RecordsPerSec }},
	{"mb_per_sec", func(r *Result) *float64 { return &r.MBPerSec }},
	{"target_rate", func(r *Result) *float64 { return &r.TargetRate }},
	{"max_rate", func(r *Result) *float64 { return &r.MaxRate }},
	{"latency_ms.p50", func(r *Result) *float64 { return &r.LatencyMs.P50 }},
	{"latency_ms.p95", func(r *Result) *float64 { return &r.LatencyMs.P95 }},
	{"latency_ms.p99", func(r *Result) *float64 { return &r.LatencyMs.P99 }},
	{"latency_ms.p999", func(r *Result) *float64 { return &r.LatencyMs.P999 }},
	{"latency_ms.max", func(r *Result) *float64 { return &r.LatencyMs.Max }},
	{"send_lag_ms.p50", func(r *Result) *float64 { return &r.SendLagMs.P50 }},
	{"send_lag_ms.p95", func(r *Result) *float64 { return &r.SendLagMs.P95 }},
	{"send_lag_ms.p99", func(r *Result) *float64 { return &r.SendLagMs.P99 }},
	{"send_lag_ms.p999", func(r *Result) *float64 { return &r.SendLagMs.P999 }},
	{"send_lag_ms.max", func(r *Result) *float64 { return &r.SendLagMs.Max }},
	{"cpu_seconds", func(r *Result) *float64 { return &r.CPUSeconds }},
	{"broker_cpu_seconds", func(r *Result) *float64 { return &r.BrokerCPUSeconds }},
	{"broker_rss_peak_mb", func(r *Result) *float64 { return &r.BrokerRSSPeakMB }},
	{"rss_peak_mb", func(r *Result) *float64 { return &r.RSSPeakMB }},
	{"heap_inuse_mb", func(r *Result) *float64 { return &r.HeapInuseMB }},
}

// Summarize returns the medians and spreads of runs (at least one run) of one workload.
// Counts (records, bytes, requests, batches) are medians too; errors, clamped latencies and
// unsent records are summed, and the first error kept.
func Summarize(runs []Result) Repeated {
	out := Repeated{Spread: map[string][2]float64{}, Runs: runs}
	if len(runs) == 0 {
		return out
	}
	first := runs[0]
	out.Result = Result{Name: first.Name, Driver: first.Driver, Cluster: first.Cluster, Mode: first.Mode, WarmupSeconds: first.WarmupSeconds}
	vals := make([]float64, len(runs))
	for _, f := range figures {
		for i := range runs {
			vals[i] = *f.get(&runs[i])
		}
		med, lo, hi := medianSpread(vals)
		*f.get(&out.Result) = med
		if hi > 0 {
			out.Spread[f.name] = [2]float64{lo, hi}
		}
	}
	counts := make([]float64, len(runs))
	for _, count := range []func(*Result) *int64{
		func(r *Result) *int64 { return &r.Records },
		func(r *Result) *int64 { return &r.Bytes },
		func(r *Result) *int64 { return &r.ProduceRequests },
		func(r *Result) *int64 { return &r.Batches },
		func(r *Result) *int64 { return &r.SharedRequests },
		func(r *Result) *int64 { return &r.FileReadBytes },
	} {
		for i := range runs {
			counts[i] = float64(*count(&runs[i]))
		}
		med, _, _ := medianSpread(counts)
		*count(&out.Result) = int64(med)
	}
	summarizeBounds(&out, runs)
	summarizeFollowerLag(&out, runs)
	for _, r := range runs {
		out.Errors += r.Errors
		out.LatencyClamped += r.LatencyClamped
		out.Unsent += r.Unsent
		if out.FirstError == "" {
			out.FirstError = r.FirstError
		}
	}
	return out
}

// medianSpread returns the median, lowest and highest of vals (which it sorts).
func medianSpread(vals []float64) (med, lo, hi float64) {
	slices.Sort(vals)
	n := len(vals)
	med = vals[n/2]
	if n%2 == 0 {
		med = (vals[n/2-1] + vals[n/2]) / 2
	}
	return med, vals[0], vals[n-1]
}

// WriteSummary prints each run's line, then the medians with their spread.
func (r Repeated) WriteSummary(w io.Writer) {
	for i, run := range r.Runs {
		fmt.Fprintf(w, "run %d: %.0f records/s, %.2f MB/s, p99 %.3f ms", i+1, run.RecordsPerSec, run.MBPerSec, run.LatencyMs.P99)
		if run.Unsent > 0 {
			fmt.Fprintf(w, " (fell behind: %d records never sent)", run.Unsent)
		}
		fmt.Fprintln(w)
	}
	name := r.Driver
	if r.Name != "" {
		name = r.Name + " on " + r.Driver
	}
	sp := func(key string, format string) string {
		s, ok := r.Spread[key]
		if !ok {
			return ""
		}
		return fmt.Sprintf(" ["+format+"–"+format+"]", s[0], s[1])
	}
	fmt.Fprintf(w, "%s %s, median of %d runs: %.0f records/s%s, %.2f MB/s%s\n", name, r.Mode, len(r.Runs),
		r.RecordsPerSec, sp("records_per_sec", "%.0f"), r.MBPerSec, sp("mb_per_sec", "%.2f"))
	if r.MaxRate > 0 {
		fmt.Fprintf(w, "target %.0f records/s, %.2f of the probed maximum %.0f%s\n", r.TargetRate, r.TargetRate/r.MaxRate, r.MaxRate, sp("max_rate", "%.0f"))
	}
	if r.Mode != ModeConsume {
		l := r.LatencyMs
		fmt.Fprintf(w, "latency ms: p50 %.3f%s  p99 %.3f%s  p99.9 %.3f%s  max %.3f%s\n",
			l.P50, sp("latency_ms.p50", "%.3f"), l.P99, sp("latency_ms.p99", "%.3f"),
			l.P999, sp("latency_ms.p999", "%.3f"), l.Max, sp("latency_ms.max", "%.3f"))
	}
	if line := r.clampedLine(); line != "" {
		fmt.Fprintln(w, line+" (over all runs)")
	}
	if l := r.SendLagMs; l != (Latency{}) {
		fmt.Fprintf(w, "harness send lag ms (included above): p50 %.3f%s  p99 %.3f%s  max %.3f%s\n",
			l.P50, sp("send_lag_ms.p50", "%.3f"), l.P99, sp("send_lag_ms.p99", "%.3f"), l.Max, sp("send_lag_ms.max", "%.3f"))
	}
	if r.Unsent > 0 {
		fmt.Fprintf(w, "%s (over all runs)\n", r.unsentText())
	}
	if r.Errors > 0 {
		fmt.Fprintf(w, "errors: %d in all (first: %s)\n", r.Errors, r.FirstError)
	}
	if line := r.requestsLine(); line != "" {
		fmt.Fprintln(w, line+" (of the medians; each run whole)")
	}
	if line := r.cpuLine(); line != "" {
		fmt.Fprintf(w, "%s (of the medians; cpu seconds%s)\n", line, sp("cpu_seconds", "%.2f"))
	}
	if line := r.limitsLine(sp); line != "" {
		fmt.Fprintln(w, line+", each ratio from its own run and the probes before it")
	}
	fmt.Fprintf(w, "memory: peak RSS %.1f MB%s, Go heap in use %.1f MB%s\n", r.RSSPeakMB, sp("rss_peak_mb", "%.1f"), r.HeapInuseMB, sp("heap_inuse_mb", "%.1f"))
}

// SummarizeCompare returns, for each system of repeated compare runs, the medians of its
// results and of its ratio to the first system (each run's ratio is from that run). A system
// that failed in any run keeps that run's error and is summarized over the runs that did not.
func SummarizeCompare(runs [][]CompareRow) []CompareRow {
	var order []string
	by := map[string][]CompareRow{}
	for _, rows := range runs {
		for _, row := range rows {
			if _, ok := by[row.System]; !ok {
				order = append(order, row.System)
			}
			by[row.System] = append(by[row.System], row)
		}
	}
	out := make([]CompareRow, 0, len(order))
	for _, sys := range order {
		var results []Result
		var ratios []float64
		row := CompareRow{System: sys}
		for _, r := range by[sys] {
			if r.Error != "" {
				if row.Error == "" {
					row.Error = r.Error
				}
				continue
			}
			results = append(results, r.Result)
			ratios = append(ratios, r.Ratio)
		}
		if len(results) > 0 {
			row.Result = Summarize(results).Result
			row.Ratio, _, _ = medianSpread(ratios)
			if row.Error != "" {
				row.Error = fmt.Sprintf("%d of %d runs failed; first: %s", len(by[sys])-len(results), len(by[sys]), row.Error)
			}
		}
		out = append(out, row)
	}
	return out
}
