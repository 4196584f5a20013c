package chaos

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// writeHistory records a small run to dir/history.jsonl: 3 s of sends, 10 each 100 ms, all
// acknowledged after 2 ms except during the faults (kill-leader 0.5-1.0 s: failures;
// partition 2.0-2.4 s: acknowledged after 300 ms), and the two faults with their heals.
func writeHistory(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_800_000_000, 0)
	rec := NewRecorder(f, start)
	ms := func(v float64) int64 { return int64(v * float64(time.Millisecond)) }
	rec.Record(Event{T: ms(500), Type: EvFault, ID: 1, Fault: "kill-leader", Targets: []int32{2}, Detail: "kill -9 of n2, leader of chaos-0/1"})
	rec.Record(Event{T: ms(1000), Type: EvHeal, ID: 1, Fault: "kill-leader", Targets: []int32{2}})
	rec.Record(Event{T: ms(2000), Type: EvFault, ID: 2, Fault: "partition", Targets: []int32{1}, Detail: "n1 isolated"})
	rec.Record(Event{T: ms(2400), Type: EvHeal, ID: 2, Fault: "partition", Targets: []int32{1}})
	seq := int64(0)
	for bin := range 30 {
		for i := range 10 {
			at := float64(bin)*100 + float64(i)*10 + 5
			e := Event{Type: EvSend, Topic: "chaos-0", Partition: int32(i % 2), Writer: 1, Seq: seq, Start: ms(at), T: ms(at + 2), Outcome: OK, Offset: seq}
			switch {
			case at >= 500 && at < 1000:
				e.Outcome, e.Offset, e.Err = Failed, -1, "NOT_LEADER_OR_FOLLOWER"
			case at >= 2000 && at < 2400:
				e.T = ms(at + 300)
			}
			rec.Record(e)
			seq++
		}
	}
	rec.Record(Event{T: ms(3000), Type: EvRead, Topic: "chaos-0", Reader: FinalReader, Offsets: []int64{0}, Values: []string{"1:0"}})
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func testSummary() Summary {
	return Summary{
		Version: "sluice (devel); commit: abc", Verdict: "2 faults in 3s: 250 acknowledged, 2 lost, 1 duplicated, 0 inconsistent, 0 divergent; longest outage 0.5 s (kill-leader)",
		Passed: false, Seed: 42, Brokers: 3, Faults: []string{"kill-leader", "partition"}, Interval: time.Second, Duration: 3 * time.Second, Elapsed: 3 * time.Second,
		Workload: Workload{Topics: 1, Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2, Writers: 1, Rate: 100, RecordSize: 100, MaxInFlight: 1, Readers: 2,
			RereadInterval: Duration(10 * time.Second), DeliveryTimeout: Duration(30 * time.Second)},
		Command:   "sluice chaos run --seed 42 --faults kill-leader,partition",
		Failures:  []string{"broker 2 did not come back <after> 30s"},
		StartedAt: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC),
		Result: &Result{
			Sends: 300, Acknowledged: 250, Failed: 50, Lost: 2, Duplicated: 1, Faults: 2,
			Anomalies: []Anomaly{
				{Kind: "lost", TopicPartition: TopicPartition{"chaos-0", 1}, Offset: 17, Value: "1:17", Detail: "acknowledged at 17, the final read has 1:18 there"},
				{Kind: "duplicated", TopicPartition: TopicPartition{"chaos-0", 0}, Offset: 30, Value: "1:30", Detail: "also at 31"},
				{Kind: "lost", TopicPartition: TopicPartition{"chaos-0", 1}, Offset: 19, Value: "1:19", Detail: "past the end\nof the log"},
				{Kind: "../escape", Offset: 1},
			},
			Longest: Outage{Start: 500 * time.Millisecond, End: time.Second, Fault: "kill-leader", FaultID: 1},
			LongestByFault: map[string]Outage{
				"kill-leader": {Start: 500 * time.Millisecond, End: time.Second, Fault: "kill-leader", FaultID: 1},
				"partition":   {Start: 2000 * time.Millisecond, End: 2300 * time.Millisecond, Fault: "partition", FaultID: 2},
			},
			Outages: []Outage{
				{TopicPartition: TopicPartition{"chaos-0", 1}, Start: 500 * time.Millisecond, End: time.Second, Fault: "kill-leader", FaultID: 1},
				{TopicPartition: TopicPartition{"chaos-1", 0}, Start: 2000 * time.Millisecond, End: 2300 * time.Millisecond, Fault: "partition", FaultID: 2},
			},
		},
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The run's directory: the summary as it was given, one line per anomaly in its kind's file,
// the outages, and the timeline.
func TestWriteReportFiles(t *testing.T) {
	dir := t.TempDir()
	writeHistory(t, dir)
	s := testSummary()
	if err := WriteReport(dir, s); err != nil {
		t.Fatal(err)
	}
	raw := readFile(t, filepath.Join(dir, SummaryFile))
	if !strings.Contains(raw, "\n  \"version\": ") {
		t.Errorf("summary.json is not indented:\n%.200s", raw)
	}
	var back Summary
	if err := json.Unmarshal([]byte(raw), &back); err != nil {
		t.Fatal(err)
	}
	if back.Seed != 42 || back.Verdict != s.Verdict || back.Result.Lost != 2 || back.Result.LongestByFault["partition"].FaultID != 2 || back.Workload.RecordSize != 100 {
		t.Errorf("summary.json read back: %+v", back)
	}
	lost := readFile(t, filepath.Join(dir, ChecksDir, "lost.txt"))
	want := "chaos-0/1 offset 17 value 1:17: acknowledged at 17, the final read has 1:18 there\n" +
		`chaos-0/1 offset 19 value 1:19: past the end\nof the log` + "\n"
	if lost != want {
		t.Errorf("lost.txt:\n%s\nwant:\n%s", lost, want)
	}
	if dup := readFile(t, filepath.Join(dir, ChecksDir, "duplicated.txt")); strings.Count(dup, "\n") != 1 || !strings.Contains(dup, "offset 30") {
		t.Errorf("duplicated.txt: %q", dup)
	}
	if _, err := os.Stat(filepath.Join(dir, ChecksDir, "___escape.txt")); err != nil {
		t.Errorf("a kind with a path in it is not kept inside checks/: %v", err)
	}
	outages := readFile(t, filepath.Join(dir, ChecksDir, OutagesFile))
	if want := "chaos-0-1 0.500 s to 1.000 s: 0.500 s without an acknowledged write (kill-leader, fault 1)\n" +
		"chaos-1-0 2.000 s to 2.300 s: 0.300 s without an acknowledged write (partition, fault 2)\n"; outages != want {
		t.Errorf("outages.txt:\n%s\nwant:\n%s", outages, want)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("a temporary file is left: %s", e.Name())
		}
	}

	// No history: the other files are written all the same, and the error names the history.
	bare := t.TempDir()
	err := WriteReport(bare, s)
	if err == nil || !strings.Contains(err.Error(), HistoryFile) {
		t.Errorf("WriteReport without a history: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bare, SummaryFile)); err != nil {
		t.Error("summary.json not written beside a missing history")
	}
}

func svgCharts(t *testing.T, page string) []string {
	t.Helper()
	all := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(page, -1)
	for i, svg := range all {
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("chart %d is not well-formed XML: %v", i, err)
			}
		}
	}
	return all
}

// The timeline has the verdict, the settings and the machine on top, a band per fault on each
// chart over time, writes per 100 ms bin, the latency spectrum and the outage table.
func TestWriteReportTimeline(t *testing.T) {
	for _, fromHistory := range []bool{false, true} {
		dir := t.TempDir()
		writeHistory(t, dir)
		s := testSummary()
		if !fromHistory {
			s.Injected = []FaultRecord{
				{ID: 1, Kind: "kill-leader", Targets: []int32{2}, Start: 500 * time.Millisecond, End: time.Second, Detail: "kill -9 of n2, leader of chaos-0/1"},
				{ID: 2, Kind: "partition", Targets: []int32{1}, Start: 2 * time.Second, End: 2400 * time.Millisecond, Detail: "n1 isolated"},
			}
		}
		if err := WriteReport(dir, s); err != nil {
			t.Fatal(err)
		}
		page := readFile(t, filepath.Join(dir, TimelineFile))
		for _, want := range []string{
			`<p class="verdict failed">2 faults in 3s: 250 acknowledged, 2 lost`,
			"<th>seed</th><td>42</td>", "<th>brokers</th><td>3</td>", "<th>faults</th><td>kill-leader, partition</td>",
			"<th>interval</th><td>1s</td>", "<th>record size</th><td>100 B</td>", "<th>replication factor</th><td>3, min.insync.replicas 2</td>",
			"<th>cores</th>", "<th>kernel</th>", "<th>sluice</th><td>sluice (devel); commit: abc</td>",
			"<td>kill-leader</td><td>0.500</td><td>0.500</td><td>1.000</td><td>1</td><td>1</td>",
			"<td>partition</td><td>0.300</td>",
			`<td>lost</td><td class="err">2</td><td>checks/lost.txt</td>`,
			`<td class="err">broker 2 did not come back &lt;after&gt; 30s</td>`,
			"<th>replay</th><td>sluice chaos run --seed 42 --faults kill-leader,partition</td>",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("from history %v: the page lacks %s", fromHistory, want)
			}
		}
		charts := svgCharts(t, page)
		if len(charts) != 3 {
			t.Fatalf("%d charts, want writes, latency over time and the spectrum", len(charts))
		}
		for i, svg := range charts[:2] {
			if n := strings.Count(svg, `<g class="band" data-kind="kill-leader">`); n != 1 {
				t.Errorf("chart %d has %d kill-leader bands, want 1", i, n)
			}
			if n := strings.Count(svg, `<g class="band" data-kind="partition">`); n != 1 {
				t.Errorf("chart %d has %d partition bands, want 1", i, n)
			}
			if !strings.Contains(svg, ">kill-leader n2<") {
				t.Errorf("chart %d lacks the fault's label", i)
			}
		}
		for _, tick := range []string{">0%<", ">90%<", ">99%<", ">99.9%<", ">99.99%<"} {
			if !strings.Contains(charts[2], tick) {
				t.Errorf("the spectrum lacks the %s tick", tick)
			}
		}
	}
}

// Bins are 1/600 of the run in multiples of 100 ms; each holds its sends' rates and the OK
// sends' latency quantiles.
func TestTimelineBins(t *testing.T) {
	for run, want := range map[time.Duration]time.Duration{
		3 * time.Second: 100 * time.Millisecond, 10 * time.Minute: time.Second, time.Hour: 6 * time.Second, 61 * time.Second: 200 * time.Millisecond,
	} {
		if got := binWidth(run); got != want {
			t.Errorf("binWidth(%s) = %s, want %s", run, got, want)
		}
	}
	dir := t.TempDir()
	writeHistory(t, dir)
	f, err := os.Open(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl := newTimeline()
	if err := ReadHistory(f, tl.add); err != nil {
		t.Fatal(err)
	}
	b := tl.bin(3 * time.Second)
	if len(b.acked) != 30 {
		t.Fatalf("%d bins, want 30", len(b.acked))
	}
	check := func(i int, acked, failed, p50, p99 float64) {
		t.Helper()
		near := func(a, b float64) bool { return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-6 }
		if !near(b.acked[i].V, acked) || !near(b.failed[i].V, failed) || !near(b.p50[i].V, p50) || !near(b.p99[i].V, p99) {
			t.Errorf("bin %d: %v/s acked, %v/s failed, p50 %v, p99 %v; want %v, %v, %v, %v", i,
				b.acked[i].V, b.failed[i].V, b.p50[i].V, b.p99[i].V, acked, failed, p50, p99)
		}
		if math.Abs(b.acked[i].T-(float64(i)+0.5)*0.1) > 1e-9 {
			t.Errorf("bin %d at %v s, want its middle", i, b.acked[i].T)
		}
	}
	check(0, 100, 0, 2, 2)
	check(7, 0, 100, math.NaN(), math.NaN())
	// The partition's sends complete 300 ms late: bin 23 holds those sent in bin 20.
	check(20, 0, 0, math.NaN(), math.NaN())
	check(23, 100, 0, 300, 300)
	if tl.hist.TotalCount() != 250 {
		t.Errorf("spectrum of %d sends, want the 250 acknowledged", tl.hist.TotalCount())
	}
}
