package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/report"
)

func TestHTMLReport(t *testing.T) {
	timeline := func(scale float64) []Interval {
		return []Interval{
			{T: 1, Warmup: true, RecordsPerSec: 1000 * scale, MBPerSec: 1 * scale, P50Ms: 1, P99Ms: 5, MaxMs: 9},
			{T: 2, RecordsPerSec: 2000 * scale, MBPerSec: 2 * scale, P50Ms: 1.2, P99Ms: 4, MaxMs: 7},
			{T: 3, RecordsPerSec: 1500 * scale, MBPerSec: 1.5 * scale, P50Ms: 0.9, P99Ms: 250, MaxMs: 400},
		}
	}
	results := []Result{
		{Driver: "sluice-tcp", Mode: ModeProduce, Records: 3000, RecordsPerSec: 1750, MBPerSec: 1.75, Timeline: timeline(1), WarmupSeconds: 1,
			Seconds: 2, Bytes: 3e9, CPUSeconds: 3, Limits: []Bound{{ProbeTCPStream, 2.5, 0.0007}, {ProbeDiskWrite, 0.5, 0.0035}},
			LatencyMs: Latency{P50: 1, P95: 3, P99: 5, P999: 8, Max: 400},
			Settings:  []report.Setting{{Key: "record size", Value: "1024 B (random)"}, {Key: "acks", Value: "all"}}},
		{Driver: `<script>alert("x")</script>`, Mode: ModeProduce, Records: 300, Errors: 2, FirstError: "boom", Timeline: timeline(0.1),
			LatencyMs: Latency{P50: 1, P95: 2, P99: 3, P999: 4, Max: 5},
			Settings:  []report.Setting{{Key: "record size", Value: "1024 B (random)"}, {Key: "acks", Value: "1"}}},
	}
	var buf bytes.Buffer
	h := ReportHeader{Version: "v1.2.3", Machine: report.Machine{Cores: 2, OS: "linux", Arch: "amd64"}}
	if err := WriteHTMLReport(&buf, h, results); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if strings.Contains(page, "<script>") {
		t.Fatal("a driver name reached the page unescaped")
	}
	if !strings.Contains(page, "<td>1.50</td><td>1.00</td>") {
		t.Error("the first run's CPU (1.50 cores, 1.00 s per GB) is not in the table")
	}
	if !strings.Contains(page, "<td>0.00 of sequential write 0.50 GB/s</td>") {
		t.Error("the first run's nearest limit (the disk write) is not in the table")
	}
	svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 3 {
		t.Fatalf("%d charts, want throughput, latency and its distribution", len(svgs))
	}
	for i, svg := range svgs {
		// Each chart is well-formed XML on its own (so it also renders when cut out of the page).
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("chart %d is not well-formed: %v", i, err)
			}
		}
	}
	// Throughput: one line per result. Latency: p99 and p50 per result, on decades 0.1..1000 ms.
	if n := strings.Count(svgs[0], "<polyline"); n != 2 {
		t.Errorf("throughput chart has %d lines, want 2", n)
	}
	if n := strings.Count(svgs[1], "<polyline"); n != 4 {
		t.Errorf("latency chart has %d lines, want 4", n)
	}
	for _, tick := range []string{">0.1<", ">1<", ">10<", ">100<", ">1000<"} {
		if !strings.Contains(svgs[1], tick) {
			t.Errorf("latency chart lacks the %s tick", tick)
		}
	}
	if !strings.Contains(svgs[0], "warm-up") {
		t.Error("the warm-up is not marked")
	}
	// The distribution: one line per run (from the quantiles, the results having no spectrum).
	if n := strings.Count(svgs[2], "<polyline"); n != 2 {
		t.Errorf("latency distribution has %d lines, want 2", n)
	}
	for _, want := range []string{"<td>v1.2.3</td>", "<th>record size</th><td>1024 B (random)</td>", "<th>acks</th><td>all / 1</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the header lacks %s", want)
		}
	}
	if !strings.Contains(page, `title="boom"`) {
		t.Error("the first error is not in the table")
	}

	// A consume run has no latency: no latency chart.
	buf.Reset()
	tl := timeline(1)
	for i := range tl {
		tl[i].P50Ms, tl[i].P99Ms, tl[i].MaxMs = 0, 0, 0
	}
	if err := WriteHTMLReport(&buf, ReportHeader{Title: "consume"}, []Result{{Driver: "sluice-unix", Mode: ModeConsume, Timeline: tl}}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "<svg"); n != 1 {
		t.Errorf("consume report has %d charts, want 1", n)
	}
}
