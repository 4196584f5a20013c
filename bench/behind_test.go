package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPaceStopsAtItsDeadline: an open-loop pacer behind its schedule stops sending once the
// clock has passed its Deadline, both where it waits for each record (a slow schedule) and
// where it sends late records in a burst without waiting (a fast one).
func TestPaceStopsAtItsDeadline(t *testing.T) {
	// 100 records/s (a wait per record), each send taking 50 ms: record i goes at i*50 ms,
	// and record 21, at 1.05 s, is the first past a deadline of 1 s.
	clock := newFakeClock()
	p := NewPacer(clock.Now(), 100)
	p.Deadline = clock.Now().Add(time.Second)
	n, err := Pace(context.Background(), clock, p, func(i int64, _ time.Time) bool { return i == 1000 },
		func(int64, time.Time) { clock.Advance(50 * time.Millisecond) })
	if !errors.Is(err, ErrPastDeadline) || n != 21 {
		t.Errorf("slow schedule: Pace sent %d records, %v; want 21, ErrPastDeadline", n, err)
	}

	// 10^9 records/s, each send taking 1 µs: every record after the first is late and goes
	// without a wait. 10 ms after the start, about 10,000 have gone; the stop (bounded at 2
	// million records either way) is checked every deadlineEvery of them.
	clock = newFakeClock()
	p = NewPacer(clock.Now(), 1e9)
	p.Deadline = clock.Now().Add(10 * time.Millisecond)
	n, err = Pace(context.Background(), clock, p, func(i int64, _ time.Time) bool { return i == 2_000_000 },
		func(int64, time.Time) { clock.Advance(time.Microsecond) })
	if !errors.Is(err, ErrPastDeadline) || n < 10_000 || n > 10_001+deadlineEvery {
		t.Errorf("fast schedule: Pace sent %d records, %v; want about 10,000, ErrPastDeadline", n, err)
	}

	// A pacer that keeps up never meets its deadline.
	clock = newFakeClock()
	p = NewPacer(clock.Now(), 1000)
	p.Deadline = clock.Now().Add(100 * time.Millisecond)
	if n, err := Pace(context.Background(), clock, p, func(i int64, _ time.Time) bool { return i == 100 },
		func(int64, time.Time) {}); err != nil || n != 100 {
		t.Errorf("on schedule: Pace sent %d records, %v; want 100, nil", n, err)
	}
}

// slowSends makes every send of d take step on clock: a system that takes 1/step records a
// second.
func slowSends(d *memDriver, clock *fakeClock, step time.Duration) {
	d.sendHook = func(int64) { clock.Advance(step) }
}

// TestPacedRunThatFallsBehindStops: a produce or e2e run at 1000 records/s for 1 s against a
// system that takes 50 records/s stops sending 5 s (the grace) after its end, instead of
// taking 20 s to send every record due in it; it reports the records it never sent, its
// throughput over the records it did send, and fails with ErrFellBehind.
func TestPacedRunThatFallsBehindStops(t *testing.T) {
	if g := behindGrace(time.Second); g != 5*time.Second {
		t.Fatalf("grace of a 1 s run %v, want 5 s", g)
	}
	if g := behindGrace(10 * time.Minute); g != time.Minute {
		t.Fatalf("grace of a 10 min run %v, want 1 min", g)
	}
	for _, mode := range []string{ModeProduce, ModeE2E} {
		t.Run(mode, func(t *testing.T) {
			clock := newFakeClock()
			d := newMemDriver()
			slowSends(d, clock, 20*time.Millisecond)
			run := runFor(mode)
			c := Config{Topic: "b", CreateTopic: true, Rate: 1000, Duration: time.Second, RecordSize: 64, Clock: clock}
			r, err := run(context.Background(), d, c)
			if !errors.Is(err, ErrFellBehind) {
				t.Fatalf("run that fell behind: error %v, want ErrFellBehind", err)
			}
			// Record i goes at i*20 ms; record 301, at 6.02 s, is past the deadline of 6 s.
			if r.Records != 301 || r.Unsent != 699 {
				t.Errorf("%d records measured, %d unsent; want 301 and 699 (of the 1000 due)", r.Records, r.Unsent)
			}
			d.mu.Lock()
			sent := len(d.mu.topics["b"])
			d.mu.Unlock()
			if sent != 301 {
				t.Errorf("%d records sent, want 301", sent)
			}
			if !near(r.RecordsPerSec, 50, 0.02) {
				t.Errorf("%v records/s over %v s: want the 50 a second actually sent", r.RecordsPerSec, r.Seconds)
			}
			var sum strings.Builder
			r.WriteSummary(&sum)
			if want := "fell behind: 699 records due in the run were never sent; the rate was not sustained"; !strings.Contains(sum.String(), want) {
				t.Errorf("summary does not say %q:\n%s", want, sum.String())
			}
			if !strings.Contains(err.Error(), "699 records due in the run were never sent") {
				t.Errorf("error %q does not say how many records were not sent", err)
			}
			var m map[string]any
			if b, err := json.Marshal(r); err != nil || json.Unmarshal(b, &m) != nil || m["unsent"] != 699.0 {
				t.Errorf("JSON unsent = %v, want 699", m["unsent"])
			}
		})
	}
}

// TestPacedRunBehindWithinGraceCompletes: a run that falls behind for a while (a 3 s stall at
// its end) sends every record due in it within the grace: nothing unsent, no error, no
// "unsent" key, and the stall shows in the latency.
func TestPacedRunBehindWithinGraceCompletes(t *testing.T) {
	clock := newFakeClock()
	d := newMemDriver()
	d.sendHook = func(n int64) {
		if n == 900 {
			clock.Advance(3 * time.Second)
		}
	}
	r, err := Produce(context.Background(), d, Config{Rate: 1000, Duration: time.Second, RecordSize: 8, Clock: clock})
	if err != nil || r.Unsent != 0 || r.Records != 1000 {
		t.Fatalf("run behind by 3 s: %d records, %d unsent, %v; want 1000, 0, nil", r.Records, r.Unsent, err)
	}
	if r.LatencyMs.Max < 3000 {
		t.Errorf("max latency %v ms, want the 3 s stall", r.LatencyMs.Max)
	}
	b, _ := json.Marshal(r)
	if strings.Contains(string(b), `"unsent"`) {
		t.Errorf("JSON of a run that kept up has unsent: %s", b)
	}
	var sum strings.Builder
	r.WriteSummary(&sum)
	if strings.Contains(sum.String(), "fell behind") {
		t.Errorf("summary of a run that caught up says it fell behind:\n%s", sum.String())
	}
}

// TestProbeThatFallsBehindIsNotSustained: a probe of the maximum rate that left records unsent
// fell behind, however fast it delivered the rest; its run is not an error for the search.
func TestProbeThatFallsBehindIsNotSustained(t *testing.T) {
	c, err := Config{RateOfMax: 0.5}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if sustained(Result{RecordsPerSec: 1000, Unsent: 1}, c, 1000) {
		t.Error("a probe with records unsent counted as sustained")
	}
	// Open-loop probes that fall behind (the memDriver at 50 records/s, probes at up to the
	// flat-out rate) end in a result, not an error, and the search goes on down.
	clock := newFakeClock()
	d := newMemDriver()
	slowSends(d, clock, 20*time.Millisecond)
	c = Config{Topic: "p", CreateTopic: true, RecordSize: 64, RateOfMax: 0.5, Clock: clock,
		ProbeDuration: time.Second, Duration: time.Second}
	c, err = c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var probes []Result
	run := func(ctx context.Context, d Driver, c Config) (Result, error) {
		if c.Rate == 0 {
			// The flat-out probe: 10,000 records/s, far more than open-loop sends keep up.
			return Result{RecordsPerSec: 10_000}, nil
		}
		r, err := produce(ctx, d, c)
		probes = append(probes, r)
		return r, err
	}
	// Every probe (10,000 records/s halved down to 625) falls behind: the search ends in
	// finding no sustained rate, not in the first probe's failure.
	_, err = atRateOfMax(context.Background(), d, c, run, true)
	if err == nil || !strings.Contains(err.Error(), "no open-loop rate") {
		t.Fatalf("search with probes that fall behind: %v, want no rate sustained", err)
	}
	if len(probes) != sustainSteps {
		t.Fatalf("%d open-loop probes, want %d", len(probes), sustainSteps)
	}
	for i, r := range probes {
		if r.Unsent == 0 {
			t.Errorf("probe %d at %.0f records/s: nothing unsent, want it stopped at its deadline", i, r.TargetRate)
		}
	}
}

// TestSummaryShowsClampedLatencies: latencies above the histograms' 60 s are counted as 60 s;
// the summary says so, so that a max of 60030 ms is not read as the worst latency.
func TestSummaryShowsClampedLatencies(t *testing.T) {
	r := Result{Driver: "mem", Mode: ModeProduce, LatencyMs: Latency{P99: 60030.975, Max: 60030.975}, LatencyClamped: 42}
	var sum strings.Builder
	r.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "42 records took more than 60 s and are counted as 60 s") {
		t.Errorf("summary does not say latencies were clamped:\n%s", sum.String())
	}
	var rep strings.Builder
	Summarize([]Result{r, r}).WriteSummary(&rep)
	if !strings.Contains(rep.String(), "84 records took more than 60 s") {
		t.Errorf("repeated summary does not say latencies were clamped:\n%s", rep.String())
	}
	sum.Reset()
	r.LatencyClamped = 0
	r.WriteSummary(&sum)
	if strings.Contains(sum.String(), "more than 60 s") {
		t.Errorf("summary without clamped latencies mentions them:\n%s", sum.String())
	}
}

// TestScheduleDeadline: an open-loop run stops at the end of its schedule plus the grace,
// whether a Duration or Records bounds it: a run of N records at R records/s is scheduled
// over N/R. A run without a rate, or with a schedule too long to express, has no deadline.
func TestScheduleDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want time.Duration // after the start; 0: none
	}{
		{"duration", Config{Rate: 1000, Duration: time.Second}, 6 * time.Second},
		{"records", Config{Rate: 1000, Records: 1000}, 6 * time.Second},
		{"records, long schedule", Config{Rate: 1000, Records: 100_000}, 110 * time.Second},
		{"records after a warm-up", Config{Rate: 500, Records: 1000, Warmup: 3 * time.Second}, 10 * time.Second},
		{"one record", Config{Rate: 1, Records: 1}, 6 * time.Second},
		{"records flat out", Config{Records: 1000}, 0},
		{"duration flat out", Config{Duration: time.Second}, 0},
		{"records beyond a Duration", Config{Rate: 1e-12, Records: 1 << 40}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Clock = newFakeClock()
			c, err := tc.c.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			sc := newSchedule(c)
			var got time.Duration
			if !sc.deadline.IsZero() {
				got = sc.deadline.Sub(sc.start)
			}
			if got != tc.want {
				t.Errorf("deadline %v after the start, want %v", got, tc.want)
			}
		})
	}
}

// TestPacedRunOfRecordsThatFallsBehindStops: a paced run of --records falls behind as a run
// of a duration does: 1000 records at 1000 records/s against a system that takes 50 a second
// stop 5 s (the grace) after the 1 s their schedule lasts, instead of taking 20 s to send
// them all; the records never sent are reported and fail the run. With several producers
// sharing the records, the records sent and unsent still add up to the records asked.
func TestPacedRunOfRecordsThatFallsBehindStops(t *testing.T) {
	for _, mode := range []string{ModeProduce, ModeE2E} {
		for _, producers := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d producers", mode, producers), func(t *testing.T) {
				clock := newFakeClock()
				d := newMemDriver()
				slowSends(d, clock, 20*time.Millisecond)
				run := runFor(mode)
				c := Config{Topic: "b", CreateTopic: true, Rate: 1000, Records: 1000, Producers: producers, RecordSize: 64, Clock: clock}
				r, err := run(context.Background(), d, c)
				if !errors.Is(err, ErrFellBehind) {
					t.Fatalf("run of records that fell behind: error %v, want ErrFellBehind", err)
				}
				d.mu.Lock()
				sent := int64(len(d.mu.topics["b"]))
				d.mu.Unlock()
				if r.Records != sent || r.Records+r.Unsent != 1000 {
					t.Errorf("%d records measured, %d sent, %d unsent: want the sent measured and 1000 in all", r.Records, sent, r.Unsent)
				}
				// Sends go one after the other on the clock, 20 ms each, until the first one
				// past the deadline of 6 s.
				if sent < 300 || sent > 300+int64(producers) {
					t.Errorf("%d records sent, want the 301 (one per producer past the deadline) 6 s of sends take", sent)
				}
				if producers == 1 && (r.Records != 301 || r.Unsent != 699) {
					t.Errorf("%d records, %d unsent; want 301 and 699", r.Records, r.Unsent)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("%d records due in the run were never sent", r.Unsent)) {
					t.Errorf("error %q does not say how many records were not sent", err)
				}
			})
		}
	}
}

// TestPacedRunOfRecordsBehindWithinGraceCompletes: a paced run of records that falls behind
// for less than the grace (a 3 s stall) sends them all, with nothing unsent and no error.
func TestPacedRunOfRecordsBehindWithinGraceCompletes(t *testing.T) {
	clock := newFakeClock()
	d := newMemDriver()
	d.sendHook = func(n int64) {
		if n == 900 {
			clock.Advance(3 * time.Second)
		}
	}
	r, err := Produce(context.Background(), d, Config{Rate: 1000, Records: 1000, Producers: 2, RecordSize: 8, Clock: clock})
	if err != nil || r.Unsent != 0 || r.Records != 1000 {
		t.Fatalf("run behind by 3 s: %d records, %d unsent, %v; want 1000, 0, nil", r.Records, r.Unsent, err)
	}
}

// TestPacedRunOfRecordsAgainstAStallStopsOnTime is the same on the real clock, end to end: a
// system that takes 20 records a second gets 1000 records at 1000 records/s, which would take
// it 50 s; the run ends about 5 s in (its 1 s schedule plus the grace), having fallen behind.
func TestPacedRunOfRecordsAgainstAStallStopsOnTime(t *testing.T) {
	d := newMemDriver()
	d.sendHook = func(int64) { time.Sleep(50 * time.Millisecond) } // the system's speed, not a wait for a condition
	r, err := Produce(context.Background(), d, Config{Rate: 1000, Records: 1000, RecordSize: 8})
	if !errors.Is(err, ErrFellBehind) || r.Records+r.Unsent != 1000 || r.Unsent < 800 {
		t.Fatalf("run against a stall: %d records, %d unsent, %v; want ErrFellBehind, about 120 sent and the rest unsent", r.Records, r.Unsent, err)
	}
}

// TestPacedRunOfRecordsIsMeasuredOverItsSchedule: 10 records at 10 records/s are due over 1 s,
// the last at 0.9 s; acknowledged at once, the run still took its second, and delivered 10
// records/s, not the 11 of its records over 0.9 s (or, for one record, a rate of one over
// its latency).
func TestPacedRunOfRecordsIsMeasuredOverItsSchedule(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		records int64
		rate    float64
	}{
		{ModeProduce, 10, 10},
		{ModeProduce, 1, 1},
		{ModeE2E, 10, 10},
	} {
		t.Run(fmt.Sprintf("%s/%d at %v", tc.mode, tc.records, tc.rate), func(t *testing.T) {
			run := runFor(tc.mode)
			c := Config{Topic: "s", CreateTopic: true, Rate: tc.rate, Records: tc.records, RecordSize: 64, Clock: newFakeClock()}
			r, err := run(context.Background(), newMemDriver(), c)
			if err != nil || r.Records != tc.records {
				t.Fatalf("%d records, %v", r.Records, err)
			}
			want := float64(tc.records) / tc.rate
			if r.Seconds != want || r.RecordsPerSec != tc.rate {
				t.Errorf("%v records/s over %v s, want %v over %v", r.RecordsPerSec, r.Seconds, tc.rate, want)
			}
		})
	}
}

// TestPacedRunOfRecordsSendsTheFirstDue: the records of a paced run of Records from several
// producers are the first Records due, whichever producer's they are: 2000 records at 1000
// records/s from three producers (333 a second each, due in turn) are those due in the
// run's first 2 s, not 2.3 s of them, with producers claiming records in chunks of 256
// (768, 768 and 464), and the run's rate is the one it was given.
func TestPacedRunOfRecordsSendsTheFirstDue(t *testing.T) {
	const records, rate, producers = 2000, 1000.0, 3
	c, err := Config{Records: records, Rate: rate, Producers: producers, Clock: newFakeClock()}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	sc := newSchedule(c)
	type prod struct {
		pacer Pacer
		q     *quota
		next  int64 // index of the producer's next record
		done  bool
	}
	var ps []*prod
	for k := range producers {
		pacer := NewPacer(sc.start, rate/producers)
		pacer.Start = pacer.Start.Add(pacer.Interval * time.Duration(k) / producers) // as startProducers
		ps = append(ps, &prod{pacer: pacer, q: newQuota(sc, pacer)})
	}
	// The producers ask for their records in the order they are due, as on a real clock.
	var sent int64
	var last time.Time
	for {
		var p *prod
		for _, x := range ps {
			if !x.done && (p == nil || x.pacer.Due(x.next).Before(p.pacer.Due(p.next))) {
				p = x
			}
		}
		if p == nil {
			break
		}
		due := p.pacer.Due(p.next)
		if p.q.stop(due) {
			p.done = true
			continue
		}
		sent++
		p.next++
		last = due
	}
	end := sc.start.Add(scheduleLength(records, rate))
	if sent != records || !last.Before(end) {
		t.Errorf("%d records sent, the last due %v after the start; want %d, all due before %v", sent, last.Sub(sc.start), records, end.Sub(sc.start))
	}
}

// runFor is the run of a produce or an e2e mode.
func runFor(mode string) func(context.Context, Driver, Config) (Result, error) {
	if mode == ModeE2E {
		return E2E
	}
	return Produce
}
