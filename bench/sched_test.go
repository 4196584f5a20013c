package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPacerSchedulesFixedIntervals(t *testing.T) {
	clock := newFakeClock()
	start := clock.Now()
	p := NewPacer(start, 1000) // 1 ms apart
	var dues []time.Time
	n, err := Pace(context.Background(), clock, p, func(i int64, _ time.Time) bool { return i == 50 },
		func(i int64, due time.Time) {
			dues = append(dues, due)
			if i == 10 {
				clock.Advance(30 * time.Millisecond) // a slow send must not shift the schedule
			}
		})
	if err != nil || n != 50 {
		t.Fatalf("Pace: %d, %v; want 50, nil", n, err)
	}
	for i, due := range dues {
		if want := start.Add(time.Duration(i) * time.Millisecond); !due.Equal(want) {
			t.Fatalf("record %d due at +%v, want +%v", i, due.Sub(start), want.Sub(start))
		}
	}
	if NewPacer(start, 0).OpenLoop() {
		t.Error("rate 0 must be flat out")
	}
}

// TestOpenLoopLatencyShowsStalls: a sender that stalls for 100 ms once, at 1000 records/s.
// Measured from the scheduled time, every record due during the stall is late (about 100 of
// them, from 100 ms down to 1 ms); measured from the actual send, only one record would be.
func TestOpenLoopLatencyShowsStalls(t *testing.T) {
	clock := newFakeClock()
	d := newMemDriver()
	const stall = 100 * time.Millisecond
	d.sendHook = func(n int64) {
		if n == 11 { // the 11th send (record 10) takes 100 ms to be acknowledged
			clock.Advance(stall)
		}
	}
	r, err := Produce(context.Background(), d, Config{Records: 1000, Rate: 1000, RecordSize: 10, Clock: clock, CreateTopic: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 1000 || r.Bytes != 10_000 {
		t.Fatalf("records %d bytes %d, want 1000 and 10000", r.Records, r.Bytes)
	}
	if !near(r.LatencyMs.Max, 100, 0.01) {
		t.Errorf("max %v ms, want 100 (the stall)", r.LatencyMs.Max)
	}
	// 10% of the records (due during the stall) are late: p95 must show it.
	if r.LatencyMs.P95 < 40 || r.LatencyMs.P50 != 0 {
		t.Errorf("p50 %v ms, p95 %v ms: want 0 and >= 40 (the records due during the stall)", r.LatencyMs.P50, r.LatencyMs.P95)
	}
	// The schedule still fits 1000 records/s: 1000 records due over 1 s.
	if !near(r.Seconds, 1, 0.01) {
		t.Errorf("seconds %v, want 1", r.Seconds)
	}
	// The records due during the stall were sent late, by up to 99 ms (record 11, due 1 ms
	// after record 10 began its 100 ms send); that lateness is part of their latency, and
	// the lag report says so.
	if !near(r.SendLagMs.Max, 99, 0.01) || r.SendLagMs.P50 != 0 {
		t.Errorf("send lag %+v, want max 99 ms, p50 0", r.SendLagMs)
	}
}

// TestProbeTopicDeleteFailureIsOnlyReported: a probe topic that cannot be deleted is said in
// the progress output; the run's figures do not depend on it.
func TestProbeTopicDeleteFailureIsOnlyReported(t *testing.T) {
	d := undeletable{newMemDriver()}
	var progress strings.Builder
	c := Config{Topic: "u", CreateTopic: true, RecordSize: 16, RateOfMax: 0.5, Progress: &progress,
		ProbeDuration: 100 * time.Millisecond, Duration: 100 * time.Millisecond}
	r, err := Produce(context.Background(), d, c)
	if err != nil || r.Records == 0 {
		t.Fatalf("run: %d records, %v", r.Records, err)
	}
	if !strings.Contains(progress.String(), "could not delete probe topic u-probe-0: no") {
		t.Errorf("progress does not report the failed delete:\n%s", progress.String())
	}
}

// TestFailedProbeTopicIsDeleted: a probe that ends in an error (here its context is
// cancelled mid-probe) still has its topic deleted, so that a long-lived broker does not keep
// it for the next run's probe to read.
func TestFailedProbeTopicIsDeleted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := newMemDriver()
	d.sendHook = func(n int64) {
		if n == 50 {
			cancel()
		}
	}
	c := Config{Topic: "f", CreateTopic: true, RecordSize: 16, RateOfMax: 0.5, ProbeDuration: time.Minute, Duration: time.Minute}
	if _, err := Produce(ctx, d, c); err == nil {
		t.Fatal("a cancelled probe: want an error")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, kept := d.mu.topics["f-probe-0"]; kept || !slices.Contains(d.mu.deleted, "f-probe-0") {
		t.Errorf("the failed probe's topic was not deleted (deleted: %v)", d.mu.deleted)
	}
}

// undeletable is a memDriver whose topics cannot be deleted.
type undeletable struct{ *memDriver }

func (undeletable) DeleteTopic(context.Context, string) error { return errors.New("no") }

// TestFlatOutHasNoSendLag: without a schedule there is nothing to be late for.
func TestFlatOutHasNoSendLag(t *testing.T) {
	clock := newFakeClock()
	d := newMemDriver()
	d.sendHook = func(int64) { clock.Advance(time.Millisecond) }
	r, err := Produce(context.Background(), d, Config{Records: 50, RecordSize: 8, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if r.SendLagMs != (Latency{}) {
		t.Errorf("flat out: send lag %+v, want none", r.SendLagMs)
	}
	var m map[string]any
	var buf strings.Builder
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(buf.String()), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["send_lag_ms"]; ok {
		t.Errorf("flat-out JSON has send_lag_ms: %s", buf.String())
	}
}

// TestRealSleeperNeverWakesEarly: whatever the mix of waits (spent on the alarm and Go's
// timer, or on the timer alone), SleepUntil returns only once the due time has come.
func TestRealSleeperNeverWakesEarly(t *testing.T) {
	c := newRealClock()
	s := c.NewSleeper(time.Millisecond)
	defer s.Close()
	ctx := context.Background()
	waits := []time.Duration{0, -time.Millisecond, time.Microsecond, 30 * time.Microsecond, 150 * time.Microsecond, time.Millisecond, 3 * time.Millisecond}
	for i := range 200 {
		due := c.Now().Add(waits[i%len(waits)])
		if err := s.SleepUntil(ctx, due); err != nil {
			t.Fatal(err)
		}
		if now := c.Now(); now.Before(due) {
			t.Fatalf("wait %d (%v): woke %v early", i, waits[i%len(waits)], due.Sub(now))
		}
	}
}

// TestSleeperAlarmOnlyWhenWaitsAreRare: the alarm costs a system call per wait, so a sleeper
// has one only when the process's pacers together wait at most once every alarmMin, which
// every open-loop pacer does since fast schedules are waited for in groups (Pacer.minWait).
func TestSleeperAlarmOnlyWhenWaitsAreRare(t *testing.T) {
	c := newRealClock()
	for _, tc := range []struct {
		pacer   Pacer
		minWait time.Duration
		alarm   bool
	}{
		{NewPacer(time.Time{}, 1000), 0, true},
		{Pacer{Interval: time.Millisecond, Pacers: 4}, 0, true},
		{Pacer{Interval: 160 * time.Microsecond, Pacers: 16}, 1600 * time.Microsecond, true},
		{NewPacer(time.Time{}, 100_000), 100 * time.Microsecond, true},
		{NewPacer(time.Time{}, 0), 0, false},
	} {
		if got := tc.pacer.minWait(); got != tc.minWait {
			t.Errorf("pacer %+v: minWait %v, want %v", tc.pacer, got, tc.minWait)
		}
		s := c.NewSleeper(tc.pacer.processWaits()).(*realSleeper)
		want := tc.alarm && alarmsWork
		if got := s.alarm != nil; got != want {
			t.Errorf("pacer %+v: alarm %v, want %v", tc.pacer, got, want)
		}
		s.Close()
	}
}

// TestFastScheduleWaitsInGroups: at 100,000 records/s (10 µs apart) the pacer waits once per
// 100 µs of schedule, never sends a record before it is due, and sends none later than the
// group's wait; a late record goes at once, without a wait.
func TestFastScheduleWaitsInGroups(t *testing.T) {
	clock := &sleepCountingClock{fakeClock: newFakeClock()}
	p := NewPacer(clock.Now(), 100_000)
	const n = 10_000
	var maxLag time.Duration
	sent, err := Pace(context.Background(), clock, p, func(i int64, _ time.Time) bool { return i == n },
		func(i int64, due time.Time) {
			lag := clock.Now().Sub(due)
			if lag < 0 {
				t.Fatalf("record %d sent %v before it was due", i, -lag)
			}
			maxLag = max(maxLag, lag)
			if i == 5000 {
				clock.Advance(time.Millisecond) // a stall: the next 100 records are late
			}
		})
	if err != nil || sent != n {
		t.Fatalf("Pace: %d, %v", sent, err)
	}
	if maxLag > time.Millisecond || maxLag < 990*time.Microsecond {
		t.Errorf("largest lag %v, want the stall's 1 ms less 10 µs", maxLag)
	}
	// 10,000 records over 100 ms of schedule: about one wait per 100 µs, less the
	// millisecond the stall skipped.
	if clock.sleeps < 850 || clock.sleeps > 1000 {
		t.Errorf("%d waits for %d records, want about one per ten", clock.sleeps, n)
	}

	// Without the stall, every record goes within the group's wait of its due time.
	clock = &sleepCountingClock{fakeClock: newFakeClock()}
	p = NewPacer(clock.Now(), 100_000)
	maxLag = 0
	if _, err := Pace(context.Background(), clock, p, func(i int64, _ time.Time) bool { return i == n },
		func(_ int64, due time.Time) { maxLag = max(maxLag, clock.Now().Sub(due)) }); err != nil {
		t.Fatal(err)
	}
	if maxLag >= p.minWait() {
		t.Errorf("largest lag %v, want under the group's %v", maxLag, p.minWait())
	}
}

// sleepCountingClock counts the waits of its sleepers.
type sleepCountingClock struct {
	*fakeClock
	sleeps int
}

func (c *sleepCountingClock) NewSleeper(time.Duration) Sleeper { return countingSleeper{c} }

type countingSleeper struct{ c *sleepCountingClock }

func (s countingSleeper) SleepUntil(ctx context.Context, t time.Time) error {
	s.c.sleeps++
	return fakeSleeper{s.c.fakeClock}.SleepUntil(ctx, t)
}

func (s countingSleeper) Close() error { return nil }

// alarmsWork: this system can make an alarm (no timerfd elsewhere than Linux, nor under a
// sandbox that refuses it).
var alarmsWork = func() bool {
	a, err := newAlarm()
	if err != nil {
		return false
	}
	a.close()
	return runtime.GOOS == "linux"
}()

// TestSleeperGoesOnWhenTheAlarmFails: an alarm that cannot be set is dropped, and the wait
// still ends at its due time, on Go's timer alone.
func TestSleeperGoesOnWhenTheAlarmFails(t *testing.T) {
	c := newRealClock()
	a := &failingAlarm{}
	s := &realSleeper{alarm: a}
	due := c.Now().Add(2 * time.Millisecond)
	if err := s.SleepUntil(context.Background(), due); err != nil {
		t.Fatalf("SleepUntil with a failing alarm: %v", err)
	}
	if c.Now().Before(due) {
		t.Error("woke before the due time")
	}
	if s.alarm != nil || !a.closed {
		t.Errorf("alarm kept (%v) or not closed (%v) after it failed", s.alarm != nil, a.closed)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

type failingAlarm struct{ closed bool }

func (a *failingAlarm) set(time.Duration) error { return errors.New("refused") }
func (a *failingAlarm) close() error            { a.closed = true; return nil }

// TestRealSleeperCancels: a wait ends with the context, long before its due time.
func TestRealSleeperCancels(t *testing.T) {
	c := newRealClock()
	s := c.NewSleeper(time.Second)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(10 * time.Millisecond)
		cancel()
	}()
	done := make(chan error, 1)
	go func() { done <- s.SleepUntil(ctx, c.Now().Add(time.Hour)) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("SleepUntil after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("SleepUntil did not return after its context was cancelled")
	}
}

func TestProduceWarmupExcluded(t *testing.T) {
	clock := newFakeClock()
	d := newMemDriver()
	d.sendHook = func(int64) { clock.Advance(time.Millisecond) } // flat out: 1 ms per record
	// A clock reading per record, so that the warm-up ends at exactly 20 records.
	r, err := Produce(context.Background(), d, Config{Records: 100, Warmup: 20 * time.Millisecond, RecordSize: 8, Clock: clock, FlatOutClockEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 100 || r.Bytes != 800 {
		t.Errorf("measured %d records, %d bytes; want 100, 800", r.Records, r.Bytes)
	}
	if got := len(d.mu.topics["bench"]); got != 120 {
		t.Errorf("%d records sent, want 120 (20 in the warm-up)", got)
	}
	if !near(r.Seconds, 0.1, 0.01) || !near(r.RecordsPerSec, 1000, 0.01) {
		t.Errorf("%v s, %v records/s; want 0.1 s and 1000 records/s", r.Seconds, r.RecordsPerSec)
	}
	if !near(r.LatencyMs.P50, 1, 0.01) {
		t.Errorf("p50 %v ms, want 1 (send to ack)", r.LatencyMs.P50)
	}
}

// TestFlatOutReadsTheClockEverySixteenRecords: flat out, one record in 16 is sent with a
// fresh clock reading and has its latency measured; the others are sent at that reading and
// counted, and the measured records are still exactly the ones asked for.
func TestFlatOutReadsTheClockEverySixteenRecords(t *testing.T) {
	clock := &countingClock{fakeClock: newFakeClock()}
	d := newMemDriver()
	d.sendHook = func(int64) { clock.Advance(10 * time.Microsecond) } // acknowledged 10 µs after the send
	r, err := Produce(context.Background(), d, Config{Records: 1600, RecordSize: 8, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 1600 || len(d.mu.topics["bench"]) != 1600 {
		t.Fatalf("measured %d records, sent %d; want 1600 and 1600", r.Records, len(d.mu.topics["bench"]))
	}
	// 100 readings by the pacer and 100 by the acknowledgements (and a few by the run itself),
	// not 3200.
	if n := clock.reads.Load(); n < 200 || n > 220 {
		t.Errorf("%d clock readings for 1600 records, want about 200", n)
	}
	// The measured records are the freshly stamped ones: 10 µs from send to acknowledgement.
	if r.LatencyMs.P50 != 0.01 || r.LatencyMs.Max != 0.01 {
		t.Errorf("latency %+v, want 10 µs throughout", r.LatencyMs)
	}
}

// countingClock counts readings of a fakeClock.
type countingClock struct {
	*fakeClock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.fakeClock.Now()
}

func TestConsumeAndE2EInMemory(t *testing.T) {
	ctx := context.Background()
	d := newMemDriver()
	if _, err := Produce(ctx, d, Config{Records: 500, RecordSize: 32, Producers: 2, Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	r, err := Consume(ctx, d, Config{Records: 500, Topic: "t", IdleTimeout: time.Second})
	if err != nil || r.Records != 500 || r.Bytes != 500*32 {
		t.Fatalf("consume: %+v, %v; want 500 records", r, err)
	}
	if _, err := Consume(ctx, d, Config{Records: 501, Topic: "t", IdleTimeout: 50 * time.Millisecond}); err == nil {
		t.Error("consume of more records than there are: want an error")
	}
	r, err = Consume(ctx, d, Config{Topic: "t", IdleTimeout: 50 * time.Millisecond}) // all
	if err != nil || r.Records != 500 {
		t.Fatalf("consume all: %d records, %v", r.Records, err)
	}

	e, err := E2E(ctx, d, Config{Topic: "e", Duration: 100 * time.Millisecond, Warmup: 20 * time.Millisecond, Rate: 1000, RecordSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if e.Records < 95 || e.Records > 101 || e.Mode != ModeE2E {
		t.Errorf("e2e: %d records, want about 100 (warm-up excluded)", e.Records)
	}
	if e.LatencyMs.Max <= 0 || e.LatencyMs.P99 > 1000 {
		t.Errorf("e2e latency %+v", e.LatencyMs)
	}
	if e.Batches < e.Records || e.ProduceRequests != (e.Batches+3)/4 { // memProducer's counts, warm-up included
		t.Errorf("e2e: %d produce requests, %d batches for %d measured records", e.ProduceRequests, e.Batches, e.Records)
	}
	if _, err := E2E(ctx, d, Config{Topic: "e", Records: 10}); err == nil {
		t.Error("e2e without a rate: want an error")
	}
}

func TestRealClockIsMonotonicAndNearWallTime(t *testing.T) {
	c := newRealClock()
	prev := c.Now()
	for range 10000 {
		now := c.Now()
		if now.Before(prev) {
			t.Fatalf("clock went back: %v after %v", now, prev)
		}
		prev = now
	}
	if d := time.Since(prev); d < 0 || d > time.Second {
		t.Fatalf("realClock is %v away from time.Now", d)
	}
	if prev.Sub(c.base) <= 0 {
		t.Fatal("realClock did not advance over 10,000 readings")
	}
}

// TestRateOfMax runs produce and e2e at half the maximum rate of a driver that takes about
// 100 k records/s at most (a 1 ms pause every 100 sends): the probe must find that maximum,
// and the measured run must be scheduled at half of it and keep up.
func TestRateOfMax(t *testing.T) {
	for _, mode := range []string{ModeProduce, ModeE2E} {
		t.Run(mode, func(t *testing.T) {
			d := newMemDriver()
			d.sendHook = func(n int64) {
				if n%100 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			c := Config{Topic: "r", CreateTopic: true, RecordSize: 64, RateOfMax: 0.5,
				ProbeDuration: 300 * time.Millisecond, Duration: 300 * time.Millisecond}
			var progress strings.Builder
			c.Progress = &progress
			settles, settledLate := 0, false
			c.Settle = func(context.Context) error {
				settles++
				d.mu.Lock()
				settledLate = settledLate || len(d.mu.topics["r"]) > 0
				d.mu.Unlock()
				return nil
			}
			run := runFor(mode)
			// Wrapped as an embedded system's driver is (WithClose): the probes' topics must
			// still be deleted through it.
			r, err := run(context.Background(), WithClose(d, func() error { return nil }), c)
			if err != nil {
				t.Fatal(err)
			}
			// Sleep overshoots, so the maximum is below 100 k/s; the race detector slows it more.
			if r.MaxRate < 2000 || r.MaxRate > 100_000 {
				t.Errorf("max rate %.0f records/s: want at most 100 k (the driver's limit)", r.MaxRate)
			}
			if math.Abs(r.TargetRate-0.5*r.MaxRate) > 1 {
				t.Errorf("target %.0f records/s: want half the probed %.0f", r.TargetRate, r.MaxRate)
			}
			want := r.TargetRate * c.Duration.Seconds()
			if float64(r.Records) < 0.9*want || float64(r.Records) > 1.1*want {
				t.Errorf("measured %d records: want about %.0f (the target rate for %s)", r.Records, want, c.Duration)
			}
			d.mu.Lock()
			sent, measured, deleted := d.mu.sent, len(d.mu.topics["r"]), d.mu.deleted
			_, probeKept := d.mu.topics["r-probe-0"]
			d.mu.Unlock()
			if int64(measured) != r.Records || sent <= int64(measured) {
				t.Errorf("%d records sent, %d on the run's topic (%d measured): the probes need topics of their own", sent, measured, r.Records)
			}
			// The system settles after every probe, and never once the run has begun.
			if settles != len(deleted) || settledLate {
				t.Errorf("%d settles for %d probes (one during the run: %v): want one after each probe", settles, len(deleted), settledLate)
			}
			// Every probe's topic is deleted once the probe is done; the run's is kept.
			if probeKept || len(deleted) == 0 || slices.Contains(deleted, "r") {
				t.Errorf("deleted topics %v (probe-0 kept: %v): want every probe's and not the run's", deleted, probeKept)
			}
			for i, name := range deleted {
				if want := fmt.Sprintf("r-probe-%d", i); name != want {
					t.Errorf("deleted[%d] = %q, want %q", i, name, want)
				}
			}
			if !strings.Contains(progress.String(), "probing the maximum rate") || !strings.Contains(progress.String(), "measuring at") {
				t.Errorf("progress does not tell the probe from the run:\n%s", progress.String())
			}
			if searched := strings.Contains(progress.String(), "open-loop at"); searched != (mode == ModeE2E) {
				t.Errorf("open-loop search ran: %v, want it for e2e only:\n%s", searched, progress.String())
			}
			var sum strings.Builder
			r.WriteSummary(&sum)
			if !strings.Contains(sum.String(), "0.50 of the probed maximum") {
				t.Errorf("summary: %s", sum.String())
			}
		})
	}
	if _, err := E2E(context.Background(), newMemDriver(), Config{Rate: 10, RateOfMax: 0.5}); err == nil {
		t.Error("a rate and a rate of max: want an error")
	}
	if _, err := Produce(context.Background(), newMemDriver(), Config{RateOfMax: 2}); err == nil {
		t.Error("rate of max 2: want an error")
	}
	// A codec no producer knows is refused before the run, not by the first producer made.
	if _, err := Produce(context.Background(), newMemDriver(), Config{Records: 1, Compression: "brotli"}); err == nil ||
		!strings.Contains(err.Error(), `compression "brotli"`) {
		t.Errorf("compression brotli: %v, want it refused by name", err)
	}
}

// TestQuotasShareTheRecordsExactly: producers claim measured records in chunks, and together
// send exactly Records of them, however the chunks fall; warm-up records are not counted.
func TestQuotasShareTheRecordsExactly(t *testing.T) {
	for _, records := range []int64{1, quotaChunk - 1, quotaChunk, 10*quotaChunk + 7} {
		start := time.Unix(0, 0)
		sc := &schedule{start: start, measureStart: start.Add(time.Second), records: records}
		const producers = 3
		counts := make(chan int64, producers)
		for range producers {
			go func() {
				q := &quota{sc: sc}
				if q.stop(start) { // due in the warm-up: never stops, never counts
					counts <- -1
					return
				}
				var n int64
				for !q.stop(sc.measureStart) {
					n++
				}
				counts <- n
			}()
		}
		var total int64
		for range producers {
			total += <-counts
		}
		if total != records {
			t.Errorf("records %d: producers sent %d measured records", records, total)
		}
	}
}

// TestRateOfMaxSearch: when a system delivers less open-loop than flat out (here at most 400
// records/s open-loop, 1000 flat out), the e2e search bisects down to the highest rate it
// sustains, each probe on a fresh topic, and the measured run goes at the fraction of that.
func TestRateOfMaxSearch(t *testing.T) {
	var rates []float64
	topics := map[string]bool{}
	run := func(_ context.Context, _ Driver, c Config) (Result, error) {
		if topics[c.Topic] {
			t.Errorf("topic %s used twice", c.Topic)
		}
		topics[c.Topic] = true
		rates = append(rates, c.Rate)
		if c.Rate == 0 {
			return Result{RecordsPerSec: 1000}, nil
		}
		r := Result{RecordsPerSec: min(c.Rate, 400), TargetRate: c.Rate}
		if c.Rate > 380 { // delivered within 3 %, but queueing
			r.LatencyMs.P50 = 40
		}
		return r, nil
	}
	c, err := Config{Topic: "s", RateOfMax: 0.5}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r, err := atRateOfMax(context.Background(), newMemDriver(), c, run, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 1000, 500, 250, 375, 437.5, 187.5} // flat out, 5 probes, the run
	if !slices.Equal(rates, want) {
		t.Errorf("rates run %v, want %v", rates, want)
	}
	if r.MaxRate != 375 || r.TargetRate != 187.5 || !topics["s"] {
		t.Errorf("max %v, target %v, topics %v", r.MaxRate, r.TargetRate, topics)
	}
	// Delivering 400 of 410 records/s is within 3 %, but a median wait of 40 ms is a queue.
	if sustained(Result{RecordsPerSec: 400, LatencyMs: Latency{P50: 40}}, c, 410) || !sustained(Result{RecordsPerSec: 400, LatencyMs: Latency{P50: 3}}, c, 410) {
		t.Error("sustained: want the median wait to count")
	}
	// A produce run takes the flat-out rate as it is.
	rates = nil
	clear(topics)
	r, err = atRateOfMax(context.Background(), newMemDriver(), c, run, false)
	if err != nil || r.MaxRate != 1000 || !slices.Equal(rates, []float64{0, 500}) {
		t.Errorf("produce: max %v, rates %v, %v", r.MaxRate, rates, err)
	}
}

// The probes of --rate-of-max measure, by default, as long as the run will: a maximum held only
// while the page cache absorbs a few seconds of writes is not one the run can keep up with. A
// run bounded by a record count has no length to match (3 s), and a length asked for is kept.
func TestProbeDurationDefault(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want time.Duration
	}{
		{Config{Topic: "p", RateOfMax: 0.5}, 10 * time.Second},                           // the run's default duration
		{Config{Topic: "p", RateOfMax: 0.5, Duration: 7 * time.Second}, 7 * time.Second}, // the run's
		{Config{Topic: "p", RateOfMax: 0.5, Records: 1000}, 3 * time.Second},             // no length to match
		{Config{Topic: "p", RateOfMax: 0.5, Duration: 7 * time.Second, ProbeDuration: time.Second}, time.Second},
	} {
		c, err := tc.c.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if c.ProbeDuration != tc.want {
			t.Errorf("%+v: probes of %v, want %v", tc.c, c.ProbeDuration, tc.want)
		}
	}
}

// Rates that compare false with everything (NaN) or have no interval (infinity, or above a
// record a nanosecond per producer) are refused, as pflag parses --rate NaN and --rate Inf
// without complaint.
func TestConfigRefusesRatesThatAreNotNumbers(t *testing.T) {
	for _, c := range []Config{
		{Topic: "r", Rate: math.NaN()},
		{Topic: "r", Rate: math.Inf(1)},
		{Topic: "r", RateOfMax: math.NaN()},
		{Topic: "r", RateOfMax: math.Inf(1)},
		{Topic: "r", Rate: 2e9},               // one producer's interval would be 0
		{Topic: "r", Rate: 5e9, Producers: 4}, // 1.25e9 each
	} {
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("rate %v, rate of max %v: accepted", c.Rate, c.RateOfMax)
		}
	}
}

// FillAndConsume fills a fresh topic with the run's records (a default count without one),
// reports the fill, then consumes exactly those; a rate is refused before anything is written.
func TestFillAndConsume(t *testing.T) {
	ctx := context.Background()
	d := newMemDriver()
	var log strings.Builder
	r, err := FillAndConsume(ctx, d, Config{Records: 300, RecordSize: 40, Topic: "f", IdleTimeout: time.Second}, &log)
	if err != nil || r.Records != 300 || r.Bytes != 300*40 || r.Mode != ModeConsume {
		t.Fatalf("fill and consume: %+v, %v; want 300 consumed records of 40 bytes", r, err)
	}
	if !strings.Contains(log.String(), "filled f: ") || !strings.Contains(log.String(), "300 records") {
		t.Errorf("fill report %q", log.String())
	}
	r, err = FillAndConsume(ctx, d, Config{RecordSize: 8, Topic: "g", IdleTimeout: time.Second}, nil)
	if err != nil || r.Records != DefaultFillRecords {
		t.Fatalf("without a record count: %d records, %v; want %d", r.Records, err, DefaultFillRecords)
	}
	for _, c := range []Config{
		{Records: 10, Topic: "h", Rate: 100},
		{Records: 10, Topic: "h", RateOfMax: 0.5},
	} {
		if _, err := FillAndConsume(ctx, d, c, nil); !errors.Is(err, errConsumeRate) {
			t.Errorf("rate %v, rate of max %v: %v, want errConsumeRate", c.Rate, c.RateOfMax, err)
		}
		if _, err := Consume(ctx, d, c); !errors.Is(err, errConsumeRate) {
			t.Errorf("Consume with rate %v, rate of max %v: %v, want errConsumeRate", c.Rate, c.RateOfMax, err)
		}
	}
	// A warm-up would be ignored: a consume run measures from its first record.
	w := Config{Records: 10, Topic: "h", Warmup: time.Second}
	if _, err := FillAndConsume(ctx, d, w, nil); !errors.Is(err, errConsumeWarmup) {
		t.Errorf("FillAndConsume with a warm-up: %v, want errConsumeWarmup", err)
	}
	if _, err := Consume(ctx, d, w); !errors.Is(err, errConsumeWarmup) {
		t.Errorf("Consume with a warm-up: %v, want errConsumeWarmup", err)
	}
	d.mu.Lock()
	_, created := d.mu.topics["h"]
	d.mu.Unlock()
	if created {
		t.Error("a refused run filled its topic")
	}
}

// TestPaceBehindScheduleStopsWhenCancelled: an open-loop producer far behind its schedule
// sends without waiting, and must still stop soon after ctx ends (Ctrl-C in a run at a rate
// the system cannot keep up with).
func TestPaceBehindScheduleStopsWhenCancelled(t *testing.T) {
	clock := newFakeClock()
	start := clock.Now()
	clock.Advance(time.Hour) // every record of the first hour is overdue
	p := NewPacer(start, 1e9)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int64, 1)
	go func() {
		n, _ := Pace(ctx, clock, p, func(int64, time.Time) bool { return false }, func(i int64, _ time.Time) {
			if i == 5000 {
				cancel()
			}
		})
		done <- n
	}()
	select {
	case n := <-done:
		if n > 5000+2048 {
			t.Errorf("Pace sent %d records after its context ended at record 5000", n-5000)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Pace behind schedule did not stop when its context ended")
	}
}

// TestConsumeCountsOnlyTheRecordsAsked: a poll brings whole fetches, more than --records when
// the topic holds more; the run reports exactly the records it was asked for, with their bytes.
func TestConsumeCountsOnlyTheRecordsAsked(t *testing.T) {
	ctx := context.Background()
	d := newMemDriver()
	if _, err := Produce(ctx, d, Config{Records: 500, RecordSize: 32, Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	r, err := Consume(ctx, d, Config{Records: 100, Topic: "t", IdleTimeout: time.Second})
	if err != nil || r.Records != 100 || r.Bytes != 100*32 {
		t.Fatalf("consume 100 of 500: %d records, %d bytes, %v; want 100 records of 32 bytes", r.Records, r.Bytes, err)
	}
	// Two topics, one consumer each, 50 records asked in all.
	c := Config{Records: 300, RecordSize: 16, Topic: "m", Topics: 2, Producers: 2}
	if _, err := Produce(ctx, d, c); err != nil {
		t.Fatal(err)
	}
	c.Records, c.IdleTimeout = 50, time.Second
	if r, err = Consume(ctx, d, c); err != nil || r.Records != 50 || r.Bytes != 50*16 {
		t.Fatalf("consume 50 from two topics: %d records, %d bytes, %v; want 50", r.Records, r.Bytes, err)
	}
}

// slowFirstPoll is a driver whose consumer's first poll takes a second (of the fake clock) and
// brings every record: the fetch a real first poll waits for.
type slowFirstPoll struct {
	*memDriver
	clock *fakeClock
}

func (d slowFirstPoll) NewConsumer(ctx context.Context, o ConsumerOptions) (Consumer, error) {
	c, err := d.memDriver.NewConsumer(ctx, o)
	return &slowFirstConsumer{Consumer: c, clock: d.clock}, err
}

type slowFirstConsumer struct {
	Consumer
	clock  *fakeClock
	polled bool
}

func (c *slowFirstConsumer) Poll(ctx context.Context) ([]Message, error) {
	if !c.polled {
		c.polled = true
		c.clock.Advance(time.Second)
	}
	return c.Consumer.Poll(ctx)
}

// TestConsumeTimesTheFirstPoll: a consume run's time starts with the poll that brought its
// first records, so a run whose records all came in one poll took that poll's time, not none.
func TestConsumeTimesTheFirstPoll(t *testing.T) {
	ctx := context.Background()
	d := newMemDriver()
	if _, err := Produce(ctx, d, Config{Records: 100, RecordSize: 32, Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	r, err := Consume(ctx, slowFirstPoll{d, clock}, Config{Records: 100, Topic: "t", IdleTimeout: time.Second, Clock: clock})
	if err != nil || r.Records != 100 {
		t.Fatalf("consume: %d records, %v", r.Records, err)
	}
	if r.Seconds < 0.99 || r.Seconds > 1.01 {
		t.Errorf("a run read in one poll of 1 s took %v s, want 1", r.Seconds)
	}
}
