package bench

import (
	"strings"
	"testing"
)

func TestSummarizeTakesMediansAndSpreads(t *testing.T) {
	run := func(rps, p99 float64, records int64, errs int64, first string) Result {
		return Result{Driver: "d", Mode: ModeE2E, Records: records, Bytes: records * 10, Seconds: 1, ProduceRequests: records / 10, Batches: records / 2,
			RecordsPerSec: rps, MBPerSec: rps / 1e5, LatencyMs: Latency{P50: 1, P99: p99, Max: p99 * 2},
			Errors: errs, FirstError: first, RSSPeakMB: 50, Timeline: []Interval{{}}}
	}
	odd := Summarize([]Result{run(300, 9, 30, 0, ""), run(100, 1, 10, 2, "boom"), run(200, 5, 20, 1, "later")})
	if odd.RecordsPerSec != 200 || odd.LatencyMs.P99 != 5 || odd.LatencyMs.Max != 10 || odd.Records != 20 || odd.Bytes != 200 ||
		odd.ProduceRequests != 2 || odd.Batches != 10 {
		t.Errorf("medians of three: %+v", odd.Result)
	}
	if got := odd.Spread["records_per_sec"]; got != [2]float64{100, 300} {
		t.Errorf("records/s spread %v, want [100 300]", got)
	}
	if got := odd.Spread["latency_ms.p99"]; got != [2]float64{1, 9} {
		t.Errorf("p99 spread %v, want [1 9]", got)
	}
	if _, ok := odd.Spread["max_rate"]; ok {
		t.Error("a figure no run has (max_rate) must not get a spread")
	}
	if odd.Errors != 3 || odd.FirstError != "boom" || len(odd.Runs) != 3 || odd.Timeline != nil || odd.Driver != "d" || odd.Mode != ModeE2E {
		t.Errorf("errors %d %q, %d runs, timeline %v", odd.Errors, odd.FirstError, len(odd.Runs), odd.Timeline)
	}
	even := Summarize([]Result{run(100, 1, 10, 0, ""), run(400, 4, 40, 0, "")})
	if even.RecordsPerSec != 250 || even.LatencyMs.P99 != 2.5 || even.Records != 25 {
		t.Errorf("medians of two (the mean of the middle two): %+v", even.Result)
	}
	var b strings.Builder
	odd.WriteSummary(&b)
	for _, want := range []string{"run 3: 200 records/s", "median of 3 runs: 200 records/s [100–300]", "p99 5.000 [1.000–9.000]", "errors: 3", "requests: 2, 5.0 batches each"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSummarizeCompare(t *testing.T) {
	row := func(sys string, rps, ratio float64, err string) CompareRow {
		return CompareRow{System: sys, Result: Result{Driver: sys, RecordsPerSec: rps}, Ratio: ratio, Error: err}
	}
	runs := [][]CompareRow{
		{row("a", 100, 1, ""), row("b", 50, 0.5, ""), row("c", 0, 0, "no start")},
		{row("a", 300, 1, ""), row("b", 60, 0.2, ""), row("c", 30, 0.1, "")},
		{row("a", 200, 1, ""), row("b", 100, 0.5, ""), row("c", 0, 0, "no start")},
	}
	got := SummarizeCompare(runs)
	if len(got) != 3 || got[0].System != "a" || got[1].System != "b" || got[2].System != "c" {
		t.Fatalf("rows %+v: want a, b, c in the order of the runs", got)
	}
	if got[0].Result.RecordsPerSec != 200 || got[0].Ratio != 1 || got[0].Error != "" {
		t.Errorf("a: %+v", got[0])
	}
	// b's ratio is the median of its own runs' ratios (0.5), not 60/200.
	if got[1].Result.RecordsPerSec != 60 || got[1].Ratio != 0.5 {
		t.Errorf("b: %+v", got[1])
	}
	if got[2].Result.RecordsPerSec != 30 || !strings.Contains(got[2].Error, "2 of 3 runs failed; first: no start") {
		t.Errorf("c: %+v", got[2])
	}
}

// TestSummarizeKeepsEveryQuantile: each quantile of the latency and of the send lag has a
// median (a figure left out of the list would read as 0 in the summary).
func TestSummarizeKeepsEveryQuantile(t *testing.T) {
	r := Result{LatencyMs: Latency{P50: 1, P95: 2, P99: 3, P999: 4, Max: 5}, SendLagMs: Latency{P50: 6, P95: 7, P99: 8, P999: 9, Max: 10}}
	s := Summarize([]Result{r, r, r})
	if s.LatencyMs != r.LatencyMs || s.SendLagMs != r.SendLagMs {
		t.Errorf("medians of three equal runs: latency %+v, send lag %+v; want %+v, %+v", s.LatencyMs, s.SendLagMs, r.LatencyMs, r.SendLagMs)
	}
}
