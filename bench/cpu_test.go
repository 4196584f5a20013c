package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/crc32"
	"strings"
	"testing"
	"time"
)

// burn does about a millisecond of CPU work and returns the process CPU time it took.
func burn() time.Duration {
	before, _ := processCPU()
	buf := make([]byte, 1<<20)
	for range 8 {
		buf[0] = byte(crc32.ChecksumIEEE(buf))
	}
	after, _ := processCPU()
	return after - before
}

func TestCPUMeter(t *testing.T) {
	if _, ok := processCPU(); !ok {
		t.Skip("no process CPU time on this system")
	}
	var m cpuMeter
	burn()
	m.mark() // before begin: ignored
	if s := m.seconds(); s != 0 {
		t.Fatalf("%v s before the window began", s)
	}
	m.begin()
	var spent time.Duration
	for spent < 20*time.Millisecond {
		spent += burn()
	}
	m.mark()
	got := m.seconds()
	if got < spent.Seconds()/2 {
		t.Errorf("window %v s, but %v of CPU was spent in it", got, spent)
	}
	m.begin() // a second begin does not restart the window
	m.mark()
	if again := m.seconds(); again < got {
		t.Errorf("window shrank from %v to %v s", got, again)
	}
}

// TestProduceCPUWindow: the CPU a run reports is the measured part's, not the warm-up's.
func TestProduceCPUWindow(t *testing.T) {
	if _, ok := processCPU(); !ok {
		t.Skip("no process CPU time on this system")
	}
	for _, tc := range []struct {
		name              string
		warmBurn, runBurn int // milliseconds of burn per warm-up and per measured record
	}{{"warm-up busy", 10, 0}, {"measurement busy", 0, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			d := newMemDriver()
			var warmCPU, runCPU time.Duration // written by the one producer's sends
			d.sendHook = func(n int64) {
				clock.Advance(time.Millisecond)
				if n <= 20 {
					for range tc.warmBurn {
						warmCPU += burn()
					}
				} else {
					for range tc.runBurn {
						runCPU += burn()
					}
				}
			}
			r, err := Produce(context.Background(), d, Config{Records: 100, Warmup: 20 * time.Millisecond,
				RecordSize: 8, Clock: clock, FlatOutClockEvery: 1})
			if err != nil {
				t.Fatal(err)
			}
			if r.CPUSeconds <= 0 {
				t.Fatalf("no CPU time reported: %+v", r)
			}
			if warmCPU > 0 && r.CPUSeconds > warmCPU.Seconds()/2 {
				t.Errorf("reported %v s; the warm-up alone burnt %v", r.CPUSeconds, warmCPU)
			}
			if runCPU > 0 && r.CPUSeconds < runCPU.Seconds()/2 {
				t.Errorf("reported %v s; the measured records burnt %v", r.CPUSeconds, runCPU)
			}
		})
	}
}

func TestCPUInSummaryAndJSON(t *testing.T) {
	r := Result{Mode: ModeProduce, Records: 1000, Bytes: 2e9, Seconds: 2, CPUSeconds: 3}
	var sum strings.Builder
	r.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "cpu: 3.00 s, 1.50 cores, 1.50 s per GB") {
		t.Errorf("summary:\n%s", sum.String())
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil || m["cpu_seconds"] != 3.0 {
		t.Errorf("cpu_seconds in %s: %v", buf.Bytes(), err)
	}
	rep := Summarize([]Result{r, {Mode: ModeProduce, Records: 1000, Bytes: 2e9, Seconds: 2, CPUSeconds: 5}, r})
	if rep.CPUSeconds != 3 || rep.Spread["cpu_seconds"] != [2]float64{3, 5} {
		t.Errorf("runs: cpu %v, spread %v", rep.CPUSeconds, rep.Spread["cpu_seconds"])
	}
	none := Result{Mode: ModeProduce, Seconds: 1}
	sum.Reset()
	none.WriteSummary(&sum)
	if strings.Contains(sum.String(), "cpu:") {
		t.Errorf("a run without CPU time prints a cpu line:\n%s", sum.String())
	}
}

func TestConsumeAndE2EReportCPU(t *testing.T) {
	if _, ok := processCPU(); !ok {
		t.Skip("no process CPU time on this system")
	}
	ctx := context.Background()
	d := newMemDriver()
	if _, err := Produce(ctx, d, Config{Records: 2000, RecordSize: 1000, Topic: "c"}); err != nil {
		t.Fatal(err)
	}
	r, err := Consume(ctx, d, Config{Records: 2000, Topic: "c", IdleTimeout: time.Second})
	if err != nil || r.CPUSeconds <= 0 {
		t.Errorf("consume: cpu %v s, %v", r.CPUSeconds, err)
	}
	e, err := E2E(ctx, d, Config{Topic: "e", Duration: 100 * time.Millisecond, Rate: 2000, RecordSize: 64})
	if err != nil || e.CPUSeconds <= 0 {
		t.Errorf("e2e: cpu %v s, %v", e.CPUSeconds, err)
	}
}

func TestCompareTableShowsCPUPerGB(t *testing.T) {
	var out strings.Builder
	WriteCompareTable(&out, []CompareRow{
		{System: "a", Ratio: 1, Result: Result{RecordsPerSec: 1000, MBPerSec: 1, Bytes: 2e9, CPUSeconds: 5}},
		{System: "b", Ratio: 0.5, Result: Result{RecordsPerSec: 500, MBPerSec: 0.5}},
		{System: "c", Error: "boom"},
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "CPU s/GB") {
		t.Fatalf("table:\n%s", out.String())
	}
	if f := strings.Fields(lines[1]); len(f) != 6 || f[4] != "2.50" {
		t.Errorf("row a: %q, want 2.50 CPU s per GB", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) != 6 || f[4] != "-" {
		t.Errorf("row b without CPU time: %q", lines[2])
	}
	if !strings.Contains(lines[3], "error: boom") {
		t.Errorf("error row: %q", lines[3])
	}
}

// markSoon reads the CPU time at most once per cpuMarkEvery of the caller's clock, so that a
// run's window can end with its last record without a getrusage per Poll.
func TestCPUMarkSoon(t *testing.T) {
	if _, ok := processCPU(); !ok {
		t.Skip("no process CPU time on this system")
	}
	var m cpuMeter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.markSoon(t0) // before begin: nothing
	if m.seconds() != 0 {
		t.Fatal("window before begin")
	}
	m.begin()
	burnFor := func(d time.Duration) {
		for spent := time.Duration(0); spent < d; {
			spent += burn()
		}
	}
	burnFor(5 * time.Millisecond)
	m.markSoon(t0.Add(time.Hour))
	first := m.seconds()
	if first <= 0 {
		t.Fatalf("window %v s after a mark", first)
	}
	burnFor(5 * time.Millisecond)
	m.markSoon(t0.Add(time.Hour + cpuMarkEvery/2)) // too soon: no reading
	if got := m.seconds(); got != first {
		t.Errorf("a mark %v after the last read the clock: %v -> %v s", cpuMarkEvery/2, first, got)
	}
	m.markSoon(t0.Add(time.Hour + cpuMarkEvery))
	if got := m.seconds(); got <= first {
		t.Errorf("a mark %v after the last did not read the clock: %v -> %v s", cpuMarkEvery, first, got)
	}
}

// A broker in its own process: its CPU time over the window counts in seconds and is reported
// apart by brokerSeconds.
func TestCPUMeterBrokerProcess(t *testing.T) {
	if _, ok := processCPU(); !ok {
		t.Skip("no process CPU time here")
	}
	broker := 10 * time.Second
	m := cpuMeter{broker: func() (time.Duration, bool) { return broker, true }}
	m.begin()
	broker += 1500 * time.Millisecond
	m.mark()
	if got := m.brokerSeconds(); got != 1.5 {
		t.Fatalf("brokerSeconds %v, want 1.5", got)
	}
	if got := m.seconds(); got < 1.5 || got > 3 {
		t.Fatalf("seconds %v, want the broker's 1.5 plus this process's little", got)
	}
	var none cpuMeter
	none.begin()
	none.mark()
	if none.brokerSeconds() != 0 {
		t.Fatal("broker seconds without a broker process")
	}
}
