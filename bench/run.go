package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// Run modes.
const (
	ModeProduce = "produce"
	ModeConsume = "consume"
	ModeE2E     = "e2e"
)

// e2eHeader is what an e2e producer writes at the front of each value: the scheduled send time
// (ns since the run's base, big-endian) and the run's nonce, so that records of other runs in
// the same topic are ignored.
const e2eHeader = 16

// Config describes a run. Zero values take the defaults noted.
type Config struct {
	Name        string // workload name, for reports
	Topic       string // topic name; with Topics > 1, the prefix of "<Topic>-<i>" (default "bench")
	Topics      int    // default 1
	Partitions  int    // per topic, default 1
	CreateTopic bool   // create the topics first (an existing topic is used as is)

	Records  int64         // measured records in all; 0: run for Duration
	Duration time.Duration // measured time when Records is 0 (default 10 s)
	Warmup   time.Duration // before the measurement; records due in it are not counted

	RecordSize  int    // default 1024
	Payload     string // random (default), text or file
	PayloadFile string

	Producers int     // default 1
	Rate      float64 // records/s for all producers together; 0 flat out (produce only)
	// RateOfMax, in (0, 1], replaces Rate by that fraction of the maximum rate, which probes
	// of the same run find first (see atRateOfMax: flat out, then for e2e a search for the
	// highest open-loop rate sustained). It answers "latency at half the maximum rate" in one
	// command, as the OpenMessaging Benchmark's rate discovery does.
	RateOfMax float64
	// ProbeDuration is each probe's measured time. Default: the run's Duration, since a rate
	// the system holds for a few seconds (while the page cache absorbs the writes) but not for
	// as long as the run lasts is not its maximum, and half of it need not be half of anything
	// the run can keep up; 3 s for a run bounded by Records.
	ProbeDuration time.Duration
	// Settle, if set, runs after each probe of RateOfMax, so that what a probe left behind
	// does not fall into the next probe or the measured run: the command writes dirty pages
	// back and pauses, as between repeated runs. A flat-out probe leaves gigabytes of
	// writeback and deleted segments to the disk; on the 2-vCPU test VM an e2e run started
	// right after the probes had p99 36-119 ms at 95-104 k records/s, against 1-2 ms for the
	// same rate on a quiet machine.
	Settle      func(context.Context) error
	Acks        int    // -1 all, 1 leader (default when zero: see AcksSet), 0 none
	AcksSet     bool   // Acks was given (so that 0 means acks=0)
	Compression string // none (default), gzip, snappy, lz4, zstd
	BatchSize   int    // default 16384
	LingerMs    int    // default 5 (negative: 0)
	// NoSharedMemory keeps Sluice producers over a unix socket off shared memory
	// (ProducerOptions.NoSharedMemory).
	NoSharedMemory bool
	// Idempotence is the Sluice producers' enable.idempotence (ProducerOptions.Idempotence).
	Idempotence *bool

	// brokerCPU reads the CPU time of the driver's broker process, if it runs in one
	// (BrokerCPUReader); set by Produce, Consume and E2E.
	brokerCPU func() (time.Duration, bool)

	Group string // consumer group for consume runs (none by default)
	// FetchBytes is the consumers' fetch size per partition (ConsumerOptions.FetchBytes; 0:
	// the driver's default), as kafka-consumer-perf-test's --fetch-size.
	FetchBytes int
	// NoFileReads makes Sluice consumers over a unix socket fetch every record through the
	// socket instead of reading the broker's files (ConsumerOptions.NoFileReads).
	NoFileReads bool
	// IdleTimeout ends a consume run that asked for all records (Records 0) when nothing has
	// arrived for this long, and fails an e2e or counted consume run that waits longer than
	// this for the records it expects (default 5 s).
	IdleTimeout time.Duration

	Clock Clock // default the real clock
	// FollowerLagEvery samples every follower's lag behind its leader this often during a
	// produce or e2e run (the driver must be a ReplicaPositionReader), into
	// Result.FollowerLag; 0 for none.
	FollowerLagEvery time.Duration
	// FlatOutClockEvery: flat out, a producer reads the clock once every this many records
	// (default 16; 1 for every record), and only those records' latencies are measured.
	// Two clock reads per record (send and acknowledgement) were 18 % of a 100 B run's CPU on
	// a kvm-clock VM, on the producer's critical path: reading once per 16 records took five
	// alternated runs from 3.87 to 5.46 M records/s (medians), the harness no longer competing
	// with the system for the same two cores. The others carry the last reading as their send
	// time, a few microseconds stale.
	FlatOutClockEvery int
	Progress          io.Writer     // a progress line per ProgressInterval; nil for none
	ProgressInterval  time.Duration // default 1 s
}

func (c Config) withDefaults() (Config, error) {
	if c.Topic == "" {
		c.Topic = "bench"
	}
	if c.Topics <= 0 {
		c.Topics = 1
	}
	if c.Partitions <= 0 {
		c.Partitions = 1
	}
	if c.Records <= 0 && c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.RecordSize == 0 {
		c.RecordSize = 1024
	}
	if c.FlatOutClockEvery <= 0 {
		c.FlatOutClockEvery = 16
	}
	if c.Producers <= 0 {
		c.Producers = 1
	}
	if !c.AcksSet && c.Acks == 0 {
		c.Acks = 1
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 16384
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = newRealClock()
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = time.Second
	}
	if c.ProbeDuration <= 0 {
		c.ProbeDuration = 3 * time.Second
		if c.Records <= 0 {
			c.ProbeDuration = c.Duration
		}
	}
	switch {
	case c.RecordSize < 0:
		return c, fmt.Errorf("bench: record size %d: must be positive", c.RecordSize)
	case !validRate(c.Rate):
		return c, fmt.Errorf("bench: rate %v: want a finite number, not negative", c.Rate)
	case c.Rate > maxPacedRate*float64(c.Producers):
		// Each pacer's interval would round to 0 ns: the run would go flat out while
		// claiming a target.
		return c, fmt.Errorf("bench: rate %v: above %g records/s per producer (%d), which a pacer cannot time; leave the rate out to run flat out", c.Rate, maxPacedRate, c.Producers)
	case !validFraction(c.RateOfMax):
		return c, fmt.Errorf("bench: rate of max %v: want a fraction in (0, 1]", c.RateOfMax)
	case c.RateOfMax > 0 && c.Rate > 0:
		return c, errors.New("bench: give a rate or a rate of max, not both")
	case c.Acks != -1 && c.Acks != 0 && c.Acks != 1:
		return c, fmt.Errorf("bench: acks %d: want -1 (all), 0 or 1", c.Acks)
	case c.Warmup < 0:
		return c, errors.New("bench: warm-up cannot be negative")
	case c.FetchBytes < 0:
		return c, errors.New("bench: fetch size cannot be negative")
	}
	// Checked before any broker starts: the producer would refuse it only once one has.
	if _, err := batch.ParseCodec(c.Compression); err != nil {
		return c, fmt.Errorf("bench: compression %q: want none, gzip, snappy, lz4 or zstd", c.Compression)
	}
	return c, nil
}

// checkProducers refuses a produce or e2e run with fewer producers than topics: producer k
// writes to topic k % Topics, so some topics would get no records (see Workload.Config).
func (c Config) checkProducers() error {
	if c.Topics > c.Producers {
		return fmt.Errorf("bench: %d topics, %d producers: fewer producers than topics would leave topics empty", c.Topics, c.Producers)
	}
	return nil
}

// maxPacedRate is the highest rate one producer's pacer can time: one record a nanosecond.
const maxPacedRate = 1e9

// validRate reports whether r is a rate a run can keep: finite and not negative (0: none).
// Written so that NaN fails too: it compares false with everything, and a NaN rate would run
// flat out while claiming a target.
func validRate(r float64) bool { return r >= 0 && !math.IsInf(r, 0) }

// validFraction reports whether f is a fraction of the maximum rate in [0, 1] (0: none); NaN
// fails.
func validFraction(f float64) bool { return f >= 0 && f <= 1 }

// atRateOfMax runs c at c.RateOfMax of its maximum rate, which probes on the same system find
// first, each on a topic of its own ("<topic>-probe-<k>", created if missing: consumers read
// from the beginning, and none must wade through another run's backlog), after the same
// warm-up. The first probe runs flat out. For a produce run that is the maximum. An e2e run's
// flat-out figure is only an upper bound, since a consumer that lags is measured on its
// throughput, not on keeping up (on the 2-core test machine: 440–530 k records/s flat out,
// while open-loop runs at 220–250 k sometimes fell behind). So search continues for e2e:
// open-loop probes bisect between 0 and that bound, sustainSteps of them, and the maximum is
// the highest rate sustained.
func atRateOfMax(ctx context.Context, d Driver, c Config, run func(context.Context, Driver, Config) (Result, error), search bool) (Result, error) {
	say := func(format string, args ...any) {
		if c.Progress != nil {
			fmt.Fprintf(c.Progress, format+"\n", args...)
		}
	}
	step := 0
	probe := func(rate float64) (Result, error) {
		p := c
		p.RateOfMax, p.Rate, p.Records, p.Duration, p.Progress = 0, rate, 0, c.ProbeDuration, nil
		p.Topic, p.CreateTopic = fmt.Sprintf("%s-probe-%d", c.Topic, step), true
		p.FollowerLagEvery = 0 // the measured run's lag only
		step++
		r, err := run(ctx, d, p)
		// Deleted whatever happened: a failed probe's topic left on a long-lived broker would
		// be reused by the next run's probe, whose consumer would read it from the beginning.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		deleteTopics(dctx, d, p, say)
		cancel()
		if err != nil {
			return r, fmt.Errorf("bench: probe of the maximum rate: %w", err)
		}
		if c.Settle != nil {
			if err := c.Settle(ctx); err != nil {
				return r, err
			}
		}
		return r, nil
	}
	say("probing the maximum rate: %s flat out", c.ProbeDuration)
	pr, err := probe(0)
	if err != nil {
		return Result{}, err
	}
	maxRate := pr.RecordsPerSec
	if maxRate <= 0 {
		return Result{}, errors.New("bench: probe of the maximum rate measured nothing")
	}
	say("flat out: %.0f records/s (%.2f MB/s)", pr.RecordsPerSec, pr.MBPerSec)
	if search {
		lo, hi := 0.0, maxRate
		for rate := hi; step <= sustainSteps; rate = (lo + hi) / 2 {
			r, err := probe(rate)
			if err != nil {
				return Result{}, err
			}
			ok := sustained(r, c, rate)
			verdict := "fell behind"
			if ok {
				verdict = "sustained"
			}
			say("open-loop at %.0f records/s: %.0f delivered, p50 %.2f ms: %s", rate, r.RecordsPerSec, r.LatencyMs.P50, verdict)
			if ok {
				lo = rate
			} else {
				hi = rate
			}
			if ok && rate == maxRate {
				break // the flat-out rate is sustained open-loop too
			}
		}
		if lo == 0 {
			return Result{}, fmt.Errorf("bench: no open-loop rate down to %.0f records/s was sustained", hi)
		}
		maxRate = lo
	}
	c.Rate, c.RateOfMax = c.RateOfMax*maxRate, 0
	say("maximum %.0f records/s; measuring at %.0f records/s", maxRate, c.Rate)
	r, err := run(ctx, d, c)
	r.MaxRate = maxRate
	return r, err
}

// deleteTopics deletes c's topics if d can; a failure is only reported (the run's figures do
// not depend on it).
func deleteTopics(ctx context.Context, d Driver, c Config, say func(string, ...any)) {
	td, ok := driverAs[TopicDeleter](d)
	if !ok {
		return
	}
	for i := range c.Topics {
		if err := td.DeleteTopic(ctx, c.TopicName(i)); err != nil {
			say("could not delete probe topic %s: %v", c.TopicName(i), err)
		}
	}
}

// sustainSteps is how many open-loop probes the search for an e2e run's maximum makes: the
// maximum is found to within 2^-sustainSteps of the flat-out bound (3 %).
const sustainSteps = 5

// sustained reports whether an open-loop run at rate kept up: its records were delivered
// within 3 % of the time they were due over (its backlog grew by less than 3 % of the probe's
// length, 90 ms in 3 s), and its median record waited no more than 5 ms beyond two lingers
// (a short probe can end before a slowly growing queue shows in the delivered rate: one
// delivered 98 % of 504 k records/s with a median of 8 ms, and the run at half that rate
// then fell seconds behind). A probe that stopped at its deadline with records never sent
// (Result.Unsent) fell behind, whatever its figures.
func sustained(r Result, c Config, rate float64) bool {
	maxP50 := 5 + 2*float64(max(c.LingerMs, 0))
	return r.Unsent == 0 && r.RecordsPerSec >= 0.97*rate && r.LatencyMs.P50 <= maxP50
}

// TopicName is the name of topic i of the run.
func (c Config) TopicName(i int) string {
	if c.Topics <= 1 {
		return c.Topic
	}
	return c.Topic + "-" + strconv.Itoa(i)
}

func (c Config) producerOptions(topic string) ProducerOptions {
	return ProducerOptions{Topic: topic, Acks: c.Acks, Compression: c.Compression, BatchSize: c.BatchSize, LingerMs: c.LingerMs, NoSharedMemory: c.NoSharedMemory, Idempotence: c.Idempotence}
}

func createTopics(ctx context.Context, d Driver, c Config) error {
	if !c.CreateTopic {
		return nil
	}
	for i := range c.Topics {
		if err := d.CreateTopic(ctx, c.TopicName(i), c.Partitions); err != nil {
			return fmt.Errorf("create topic %s: %w", c.TopicName(i), err)
		}
	}
	return nil
}

// stats is what one producer or consumer measures. Acknowledgement callbacks update it from
// any goroutine; mu guards every field (one lock per record, not a lock and four atomics).
type stats struct {
	mu                     sync.Mutex
	records, bytes, errs   int64      // measured
	tickRecords, tickBytes int64      // since the last progress line, warm-up included
	hist                   *Histogram // measured latencies
	tick                   *Histogram // since the last progress line
	firstErr               error
	lastSent               time.Time // the send time of the last latency measured (ack)
	// lag is an open-loop producer's own lateness (send time minus due time) of its measured
	// records: how much of their latency the harness caused. Not guarded by mu: the
	// producer's goroutine owns it until its loop returns.
	lag *Histogram
	// unsent counts an open-loop producer's measured records that were due in the run but
	// never sent: it fell behind and stopped at the schedule's deadline. Owned like lag.
	unsent int64
}

func newStats() *stats {
	return &stats{hist: NewHistogram(), tick: NewHistogram(), lag: NewHistogram()}
}

// record counts one record of n bytes with latency lat (lat < 0: none).
func (s *stats) record(measured bool, n int, lat time.Duration, err error) {
	s.mu.Lock()
	s.recordLocked(measured, n, lat, err)
	s.mu.Unlock()
}

func (s *stats) recordLocked(measured bool, n int, lat time.Duration, err error) {
	if err != nil {
		s.errs++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	s.tickRecords++
	s.tickBytes += int64(n)
	if measured {
		s.records++
		s.bytes += int64(n)
	}
	if lat < 0 {
		return
	}
	s.tick.Record(lat)
	if measured {
		s.hist.Record(lat)
	}
}

// ack counts one acknowledged record of n bytes sent at sent. Its latency is measured (with a
// clock read) unless sampled is set and another record with the same send time was measured
// last: flat out, records between clock readings share one (see Config.FlatOutClockEvery), and
// the first of them acknowledged stands for the rest. Its latency is never understated (every
// record of the group was sent at or after the shared reading), but where acknowledgements
// come back out of send order (several brokers) the sample leans to the group's fastest. One lock for all of it: at millions of
// acknowledgements a second, each lock and unlock is a barrier that shows in the profile.
func (s *stats) ack(measured bool, n int, sent time.Time, sampled bool, clock Clock, err error) {
	s.mu.Lock()
	lat := time.Duration(-1)
	if err == nil && (!sampled || !sent.Equal(s.lastSent)) {
		s.lastSent = sent
		lat = clock.Now().Sub(sent)
	}
	s.recordLocked(measured, n, lat, err)
	s.mu.Unlock()
}

// add counts n measured records of b bytes in all, without latencies.
func (s *stats) add(n, b int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records += n
	s.bytes += b
	s.tickRecords += n
	s.tickBytes += b
}

// counts returns the measured records and errors so far.
func (s *stats) counts() (records, errs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records, s.errs
}

// merge sums every stats into a Result and its histogram.
func merge(all []*stats) (Result, *Histogram) {
	var r Result
	h := NewHistogram()
	for _, s := range all {
		s.mu.Lock()
		r.Records += s.records
		r.Bytes += s.bytes
		r.Errors += s.errs
		r.Unsent += s.unsent
		h.Merge(s.hist)
		if r.FirstError == "" && s.firstErr != nil {
			r.FirstError = s.firstErr.Error()
		}
		s.mu.Unlock()
	}
	r.LatencyMs = h.Latency()
	r.LatencySpectrum = h.Spectrum()
	r.LatencyClamped = h.Clamped()
	return r, h
}

// mergeLag summarises the producers' lateness; call it only when their loops have returned.
func mergeLag(producers []*stats) Latency {
	h := NewHistogram()
	for _, s := range producers {
		h.Merge(s.lag)
	}
	return h.Latency()
}

// Interval is one progress interval of a run: the rates over it and, where the run measures
// latency, the latency quantiles of the records completed in it.
type Interval struct {
	T             float64 `json:"t"`                // seconds from the start of the run to the end of the interval
	Warmup        bool    `json:"warmup,omitempty"` // the interval began in the warm-up
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	P50Ms         float64 `json:"p50_ms,omitempty"`
	P99Ms         float64 `json:"p99_ms,omitempty"`
	MaxMs         float64 `json:"max_ms,omitempty"`
}

// progress samples the run every c.ProgressInterval until stop is closed: it prints a line to
// c.Progress (if set) and returns the intervals through *out when it ends, the last one
// partial.
func progress(c Config, all func() []*stats, start, measureStart time.Time, latency bool, stop <-chan struct{}, wg *sync.WaitGroup, out *[]Interval) {
	defer wg.Done()
	t := time.NewTicker(c.ProgressInterval)
	defer t.Stop()
	last := c.Clock.Now()
	h := NewHistogram()
	sample := func(final bool) {
		now := c.Clock.Now()
		begin := last
		last = now
		var n, b int64
		h.Reset()
		for _, s := range all() {
			s.mu.Lock()
			n += s.tickRecords
			b += s.tickBytes
			s.tickRecords, s.tickBytes = 0, 0
			h.Merge(s.tick)
			s.tick.Reset()
			s.mu.Unlock()
		}
		secs := now.Sub(begin).Seconds()
		if final && (n == 0 || secs <= 0) {
			return
		}
		iv := Interval{T: now.Sub(start).Seconds(), Warmup: begin.Before(measureStart),
			RecordsPerSec: float64(n) / secs, MBPerSec: float64(b) / secs / 1e6}
		if latency && h.Count() > 0 {
			iv.P50Ms, iv.P99Ms = float64(h.Quantile(50))/1e6, float64(h.Quantile(99))/1e6
			iv.MaxMs = float64(h.Quantile(100)) / 1e6
		}
		*out = append(*out, iv)
		if c.Progress == nil || final {
			return
		}
		line := fmt.Sprintf("%6.1fs %10.0f records/s %9.2f MB/s", iv.T, iv.RecordsPerSec, iv.MBPerSec)
		if latency {
			line += fmt.Sprintf("  p50 %.3f ms  p99 %.3f ms", iv.P50Ms, iv.P99Ms)
		}
		if iv.Warmup {
			line += " (warm-up)"
		}
		fmt.Fprintln(c.Progress, line)
	}
	for {
		select {
		case <-stop:
			sample(true)
			return
		case <-t.C:
			sample(false)
		}
	}
}

// schedule is what the producers of a run share: when the measurement starts and ends.
type schedule struct {
	start, measureStart, end time.Time // end is zero in Records mode
	// deadline (an open-loop run; zero for none) is when producers that fell behind stop
	// sending the records due in the run: its end plus behindGrace, a run of Records ending
	// with its schedule (length after measureStart).
	deadline time.Time
	// length is the length of the schedule of an open-loop run of Records (scheduleLength), 0
	// for other runs: the least time its measurement lasts (measured).
	length       time.Duration
	records      int64
	measuredSent atomic.Int64 // measured records claimed by producers (Records mode)
	// cpu's window begins when a producer sends its first measured record.
	cpu cpuMeter
}

// quotaChunk is how many measured records a producer claims at a time in Records mode: the
// shared counter is an atomic add, a full barrier that waits for the record just written to
// reach the cache, too dear to pay per record at millions of records a second.
const quotaChunk = 256

// claim takes up to n of the measured records left; 0 when none are.
func (s *schedule) claim(n int64) int64 {
	for {
		sent := s.measuredSent.Load()
		take := min(n, s.records-sent)
		if take <= 0 {
			return 0
		}
		if s.measuredSent.CompareAndSwap(sent, sent+take) {
			return take
		}
	}
}

// quota is one producer's view of the schedule: its stop reports whether to stop before
// sending a record due at due. Owned by the producer's goroutine.
type quota struct {
	sc    *schedule
	left  int64 // measured records claimed and not yet sent
	chunk int64 // records claimed at a time (0: quotaChunk)
}

// newQuota returns the quota of a producer paced by pacer. Open-loop, a producer claims no
// more records at a time than it sends in a millisecond (one at a time below 1,000 records/s):
// the producers' records are due in turn, and the last ones must go to the producers whose
// records are due first. With chunks of quotaChunk, 2000 records at 1000 records/s from three
// producers went 768, 768 and 464: the run lasted 2.3 s instead of 2 and reported 869
// records/s, though it never fell behind. A paced producer claims at most a thousand times a
// second, so the shared counter costs nothing that shows.
func newQuota(sc *schedule, pacer Pacer) *quota {
	q := &quota{sc: sc}
	if pacer.OpenLoop() {
		q.chunk = min(max(int64(time.Millisecond/pacer.Interval), 1), quotaChunk)
	}
	return q
}

func (q *quota) stop(due time.Time) bool {
	sc := q.sc
	if due.Before(sc.measureStart) {
		return false
	}
	if sc.records <= 0 {
		return !due.Before(sc.end)
	}
	if q.left == 0 {
		chunk := q.chunk
		if chunk <= 0 {
			chunk = quotaChunk
		}
		if q.left = sc.claim(chunk); q.left == 0 {
			return true
		}
	}
	q.left--
	return false
}

// unsent is how many of the run's measured records this producer leaves unsent when its pacer
// stopped at the deadline after sending n records. Of a Duration: those due before the end
// from n on, less any still in the warm-up. Of Records: those it claimed and did not send,
// and all that no producer has claimed yet, which it claims so that no other producer counts
// (or sends) them too: the producers' figures add up to exactly the records never sent.
func (q *quota) unsent(pacer Pacer, n int64) int64 {
	sc := q.sc
	if sc.records > 0 {
		left := q.left + sc.claim(math.MaxInt64)
		if !pacer.Due(n).Before(sc.measureStart) {
			left++ // record n: stop took it from the quota, then the deadline kept it back
		}
		q.left = 0
		return left
	}
	return pacer.dueBefore(sc.end) - max(n, pacer.dueBefore(sc.measureStart))
}

func newSchedule(c Config) *schedule {
	s := &schedule{start: c.Clock.Now(), records: c.Records}
	s.cpu.broker = c.brokerCPU
	s.measureStart = s.start.Add(c.Warmup)
	d := c.Duration
	if c.Records > 0 {
		d = scheduleLength(c.Records, c.Rate)
		s.length = d
	} else {
		s.end = s.measureStart.Add(d)
	}
	if c.Rate > 0 && d > 0 {
		s.deadline = s.measureStart.Add(d + behindGrace(d))
	}
	return s
}

// measured is how long the measurement of a run lasted that ended (its last acknowledgement or
// receipt) d after the end of the warm-up. An open-loop run of Records is measured over its
// whole schedule at least, as a run of a Duration is: its last record is due 1/Rate before the
// schedule ends, so a run of a few records timed to its last acknowledgement alone claimed a
// rate above the one it was given (one record at 1 record/s, acknowledged in 7 ms: 147
// records/s; ten at 10 records/s: 11).
func (s *schedule) measured(d time.Duration) time.Duration { return max(d, s.length) }

// scheduleLength is how long an open-loop run of records at rate (records/s, all producers
// together) is scheduled to last: records/rate, the time the run of a Duration would be given.
// 0 without a rate, or for a schedule of over a century (half what a time.Duration holds,
// leaving room for the grace), which has no deadline.
func scheduleLength(records int64, rate float64) time.Duration {
	secs := float64(records) / rate
	if !(rate > 0) || secs*float64(time.Second) >= float64(math.MaxInt64/2) {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// behindGrace is how long after the end of an open-loop run of a duration its producers may
// still send records that were due in it; then they stop, and the records never sent are
// reported (Result.Unsent) and fail the run (ErrFellBehind). Without a bound, a run at a rate
// the system cannot keep up sent every record due in its duration however late: 2 s at 10^9
// records/s ran for minutes and wrote tens of GB. The OpenMessaging Benchmark stops its
// producers at the test's end and reports the publish rate reached; here a record's latency
// runs from its due time, so a record sent late still counts honestly, and a short backlog at
// the end (a stall of a second or two: a GC, a segment roll, an fsync that waited behind
// writeback) is left to drain rather than turned into records missing. The grace is 5 s,
// enough for such stalls on a short run, or a tenth of the duration on a run longer than
// 50 s: so a long run sends for at most 10 % longer than asked, and one that completes kept
// at least 1/1.1 (91 %) of its rate over the whole run. Half the duration (a more lenient
// bound) would let a system a third too slow complete every record and only look slow in its
// latencies. A run of Records at a rate gets the same rule, with the length of its schedule
// as its duration (scheduleLength: N records at R records/s last N/R): a run of --records
// against a broker that stalls used to run for as long as the stall.
func behindGrace(d time.Duration) time.Duration { return max(5*time.Second, d/10) }

// ErrFellBehind fails an open-loop run whose producers stopped at the deadline with records
// due in the run never sent (Result.Unsent): the rate asked for was not sustained. The run's
// Result is complete, its throughput over the records actually sent.
var ErrFellBehind = errors.New("bench: fell behind")

// fellBehind returns the error of a run that has unsent records, nil if none.
func (r Result) fellBehind() error {
	if r.Unsent <= 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrFellBehind, r.unsentDetail())
}

// producerLoop sends one producer's records. value returns the value of record i, due at due.
// Acknowledgements go to the Ack of the producer's options; open-loop, the lateness of each
// measured send goes to st.lag, and the measured records it never sent, if it stopped at the
// schedule's deadline, to st.unsent.
func producerLoop(ctx context.Context, c Config, p Producer, sc *schedule, pacer Pacer, st *stats,
	value func(i int64, due time.Time) []byte) error {
	lag := st.lag
	q := newQuota(sc, pacer)
	// The run's CPU window begins with the first measured send of any producer: here, after
	// the pacer's wait, not in q.stop, which Pace asks before waiting for the due time.
	measuring := false
	send := func(i int64, due time.Time) {
		if !measuring && !due.Before(sc.measureStart) {
			measuring = true
			sc.cpu.begin()
		}
		p.Send(ctx, nil, value(i, due), due)
	}
	if pacer.OpenLoop() {
		send = func(i int64, due time.Time) {
			if !due.Before(sc.measureStart) {
				if !measuring {
					measuring = true
					sc.cpu.begin()
				}
				lag.Record(c.Clock.Now().Sub(due))
			}
			p.Send(ctx, nil, value(i, due), due)
		}
	}
	if pacer.OpenLoop() {
		pacer.Deadline = sc.deadline
	}
	n, err := Pace(ctx, c.Clock, pacer, func(_ int64, due time.Time) bool { return q.stop(due) }, send)
	if errors.Is(err, ErrPastDeadline) {
		st.unsent = q.unsent(pacer, n)
		err = nil
	}
	if ferr := p.Flush(ctx); err == nil {
		err = ferr
	}
	return err
}

// sentCounts are the producers' RequestCounter figures, summed.
type sentCounts struct{ requests, batches, shared int64 }

// startProducers opens c.Producers producers (producer k on topic k % Topics) and runs their
// loops; wait returns when all have flushed and closed, with what they sent and the first
// error.
func startProducers(ctx context.Context, d Driver, c Config, sc *schedule, value func(k int) func(int64, time.Time) []byte) (all []*stats, wait func() (sentCounts, error), err error) {
	prods := make([]Producer, 0, c.Producers)
	closeAll := func() {
		for _, p := range prods {
			p.Close()
		}
	}
	for k := range c.Producers {
		st := newStats()
		opts := c.producerOptions(c.TopicName(k % c.Topics))
		sampled := c.Rate <= 0 && c.FlatOutClockEvery > 1
		opts.Ack = func(sent time.Time, n int, err error) {
			st.ack(!sent.Before(sc.measureStart), n, sent, sampled, c.Clock, err)
		}
		p, err := d.NewProducer(ctx, opts)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("new producer: %w", err)
		}
		prods = append(prods, p)
		all = append(all, st)
	}
	perRate := c.Rate / float64(c.Producers)
	errs := make(chan error, c.Producers)
	for k, p := range prods {
		st := all[k]
		pacer := NewPacer(sc.start, perRate)
		pacer.Pacers = c.Producers
		pacer.ClockEvery = c.FlatOutClockEvery
		pacer.Start = pacer.Start.Add(pacer.Interval * time.Duration(k) / time.Duration(c.Producers)) // spread the producers' schedules
		go func() { errs <- producerLoop(ctx, c, p, sc, pacer, st, value(k)) }()
	}
	wait = func() (sentCounts, error) {
		var first error
		for range prods {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		var sent sentCounts
		for _, p := range prods {
			if err := p.Close(); err != nil && first == nil {
				first = err
			}
			if rc, ok := p.(RequestCounter); ok { // after Close: every request is written
				reqs, batches := rc.SentRequests()
				sent.requests += reqs
				sent.batches += batches
			}
			if sc, ok := p.(SharedRequestCounter); ok {
				sent.shared += sc.SharedRequests()
			}
		}
		return sent, first
	}
	return all, wait, nil
}

// Produce runs producers against d and reports the measured part of the run. An open-loop run
// that fell behind (Result.Unsent) returns its Result with ErrFellBehind.
func Produce(ctx context.Context, d Driver, c Config) (Result, error) {
	r, err := produce(ctx, d, c)
	return r, errors.Join(err, r.fellBehind())
}

// produce is Produce without ErrFellBehind: probes of the maximum rate that fall behind are
// only not sustained.
func produce(ctx context.Context, d Driver, c Config) (Result, error) {
	c, err := c.withDefaults()
	if err != nil {
		return Result{}, err
	}
	c.brokerCPU = brokerCPUOf(d)
	if err := c.checkProducers(); err != nil {
		return Result{}, err
	}
	if err := checkFollowerLag(d, c); err != nil {
		return Result{}, err
	}
	if c.RateOfMax > 0 {
		return atRateOfMax(ctx, d, c, produce, false)
	}
	payload, err := NewPayload(c.Payload, c.RecordSize, c.PayloadFile)
	if err != nil {
		return Result{}, err
	}
	if err := createTopics(ctx, d, c); err != nil {
		return Result{}, err
	}
	sc := newSchedule(c)
	all, wait, err := startProducers(ctx, d, c, sc, func(k int) func(int64, time.Time) []byte {
		pl := payload.Clone(k)
		return func(int64, time.Time) []byte { return pl.Next() }
	})
	if err != nil {
		return Result{}, err
	}
	stopLag := startFollowerLag(ctx, d, c, sc.measureStart)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var timeline []Interval // written by progress until wg.Wait
	wg.Add(1)
	go progress(c, func() []*stats { return all }, sc.start, sc.measureStart, true, stop, &wg, &timeline)
	sent, err := wait()
	end := c.Clock.Now()
	sc.cpu.mark()
	close(stop)
	wg.Wait()
	lag := stopLag()
	r, _ := merge(all)
	r.FollowerLag = lag
	r.ProduceRequests, r.Batches, r.SharedRequests = sent.requests, sent.batches, sent.shared
	if c.Rate > 0 {
		r.SendLagMs = mergeLag(all)
	}
	r.CPUSeconds, r.BrokerCPUSeconds = sc.cpu.seconds(), sc.cpu.brokerSeconds()
	setBrokerFigures(&r, d)
	r.Name, r.Driver, r.Mode, r.TargetRate, r.Timeline = c.Name, d.Name(), ModeProduce, c.Rate, timeline
	r.Settings = runSettings(c, d, r)
	r.WarmupSeconds = c.Warmup.Seconds()
	r.finish(sc.measured(end.Sub(sc.measureStart)).Seconds())
	return r, err
}

// errConsumeRate refuses a rate for a consume run: it reads as fast as it can, and a rate
// quietly ignored would make the figures look like a paced run's.
var errConsumeRate = errors.New("bench: a consume run has no rate (--rate, --rate-of-max): it reads flat out")

// errConsumeWarmup refuses a warm-up for a consume run, which has none: it would be ignored.
var errConsumeWarmup = errors.New("bench: a consume run has no warm-up (--warmup): it measures from its first records' poll")

// CheckConsume refuses what a consume run cannot do (a rate, a warm-up), so a command can say
// so before it starts anything.
func (c Config) CheckConsume() error {
	if c.Rate > 0 || c.RateOfMax > 0 {
		return errConsumeRate
	}
	if c.Warmup > 0 {
		return errConsumeWarmup
	}
	return nil
}

// DefaultFillRecords is how many records FillAndConsume writes when c.Records is not set.
const DefaultFillRecords = 100000

// FillAndConsume fills the run's topics of a fresh broker with c.Records records
// (DefaultFillRecords if 0) by a producer flat out, reports that fill on log, releases the
// producer's memory and then consumes them (Consume): a consume run on a broker started for it.
func FillAndConsume(ctx context.Context, d Driver, c Config, log io.Writer) (Result, error) {
	if err := c.CheckConsume(); err != nil {
		return Result{}, err
	}
	if c.Records == 0 {
		c.Records = DefaultFillRecords
	}
	fill := c
	fill.Warmup, fill.Progress, fill.Rate, fill.RateOfMax = 0, nil, 0, 0
	fr, err := Produce(ctx, d, fill)
	if err != nil {
		return Result{}, fmt.Errorf("fill the topic: %w", err)
	}
	if log != nil {
		fmt.Fprintf(log, "filled %s: ", c.Topic)
		fr.WriteSummary(log)
	}
	ReleaseMemory() // the producer's buffers are not the consumer's to collect
	return Consume(ctx, d, c)
}

// errIdle is the cause that ends a consumer's context when nothing arrived for IdleTimeout.
var errIdle = errors.New("bench: idle")

// idleContext returns a child of ctx that ends with errIdle when the timer fires, d from now
// unless the caller resets it.
func idleContext(ctx context.Context, d time.Duration) (context.Context, *time.Timer) {
	ictx, cancel := context.WithCancelCause(ctx)
	return ictx, time.AfterFunc(d, func() { cancel(errIdle) })
}

// Consume reads c.Records records (all there are, if 0: until nothing arrives for
// c.IdleTimeout) from every topic of the run, one consumer per topic, from the beginning.
// Throughput runs from the start of the poll that brought the first records to the last record.
func Consume(ctx context.Context, d Driver, c Config) (Result, error) {
	if err := c.CheckConsume(); err != nil {
		return Result{}, err
	}
	c, err := c.withDefaults()
	if err != nil {
		return Result{}, err
	}
	c.brokerCPU = brokerCPUOf(d)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var consumers []Consumer
	// closeAll closes the consumers. A group's consumers commit as they close: a commit that
	// failed is the run's error, since the group's next run would read those records again.
	// Without a group nothing depends on Close.
	closeAll := func() error {
		var errs []error
		for _, cs := range consumers {
			if err := cs.Close(); err != nil && c.Group != "" {
				errs = append(errs, fmt.Errorf("bench: close consumer of group %s: %w", c.Group, err))
			}
		}
		consumers = nil
		return errors.Join(errs...)
	}
	defer func() { _ = closeAll() }() // on the early returns; the run's end closes them itself
	for i := range c.Topics {
		cs, err := d.NewConsumer(ctx, ConsumerOptions{Topic: c.TopicName(i), Group: c.Group, FetchBytes: c.FetchBytes, NoFileReads: c.NoFileReads})
		if err != nil {
			return Result{}, fmt.Errorf("new consumer: %w", err)
		}
		consumers = append(consumers, cs)
		if _, ok := cs.(Rewinder); !ok && c.Group != "" && c.Records > 0 {
			return Result{}, fmt.Errorf("%w (driver %s)", ErrGroupRecords, d.Name())
		}
	}
	var (
		received    atomic.Int64
		first, last atomic.Int64                    // ns since start
		cpu         = cpuMeter{broker: c.brokerCPU} // from the first record received
	)
	start := c.Clock.Now()
	first.Store(-1)
	all := make([]*stats, len(consumers))
	errs := make(chan error, len(consumers))
	for i, cs := range consumers {
		all[i] = newStats()
		go func() {
			st := all[i]
			rw, _ := cs.(Rewinder)
			// One idle timer per consumer, pushed back by each poll that brings records: a
			// context with a timeout per poll cost 5 % of the harness's CPU at 3 GB/s.
			pctx, idle := idleContext(ctx, c.IdleTimeout)
			defer func() { idle.Stop() }()
			for {
				if ctx.Err() != nil {
					// The run is over (or failed): poll no more. A Poll now could still return
					// records already fetched, which the run would not count.
					errs <- nil
					return
				}
				polled := c.Clock.Now()
				msgs, err := cs.Poll(pctx)
				if err != nil {
					if ctx.Err() != nil {
						errs <- nil
						return
					}
					if context.Cause(pctx) == errIdle {
						if c.Records > 0 {
							errs <- fmt.Errorf("bench: nothing received for %v, %d of %d records", c.IdleTimeout, received.Load(), c.Records)
						} else {
							errs <- nil // idle: everything there was has been read
						}
						return
					}
					errs <- err
					return
				}
				if len(msgs) == 0 {
					continue
				}
				if !idle.Reset(c.IdleTimeout) {
					// The timer fired as these records arrived: they came in time, so the run
					// goes on with a fresh context (the old one is cancelled).
					pctx, idle = idleContext(ctx, c.IdleTimeout)
				}
				done := false // this poll brought the last records the run wants
				if c.Records > 0 {
					// A poll brings whole fetches: count only the records still wanted, so
					// that the run reports the --records it was asked for, and give the rest
					// back, so that a group commits only what was counted (Rewinder).
					take := int(takeUpTo(&received, int64(len(msgs)), c.Records))
					if take < len(msgs) {
						if rw != nil {
							rw.Rewind(take)
						}
						msgs, done = msgs[:take], true
					}
					if len(msgs) == 0 {
						cancel() // another consumer took the last of them
						errs <- nil
						return
					}
				} else {
					received.Add(int64(len(msgs)))
				}
				now := int64(c.Clock.Now().Sub(start))
				// The run's time starts with the poll that brought its first records: their
				// fetch is part of reading them (from their arrival, a run of one poll took no
				// time at all).
				if first.CompareAndSwap(-1, int64(polled.Sub(start))) {
					cpu.begin()
				}
				last.Store(now)
				cpu.markSoon(start.Add(time.Duration(now)))
				var b int64
				for _, m := range msgs {
					b += int64(len(m.Value))
				}
				st.add(int64(len(msgs)), b)
				if done || c.Records > 0 && received.Load() >= c.Records {
					cancel()
					errs <- nil
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var timeline []Interval // written by progress until wg.Wait
	wg.Add(1)
	go progress(c, func() []*stats { return all }, start, start, false, stop, &wg, &timeline)
	var firstErr error
	for range consumers {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	if c.Records > 0 {
		cpu.mark() // the run ended with the last record it wanted, not after a wait
	}
	close(stop)
	wg.Wait()
	r, _ := merge(all)
	r.CPUSeconds, r.BrokerCPUSeconds = cpu.seconds(), cpu.brokerSeconds()
	setBrokerFigures(&r, d)
	r.FileReadBytes = fileReadBytes(consumers)
	r.Name, r.Driver, r.Mode, r.Timeline = c.Name, d.Name(), ModeConsume, timeline
	r.Settings = runSettings(c, d, r)
	secs := 0.0
	if f := first.Load(); f >= 0 {
		secs = time.Duration(last.Load() - f).Seconds()
	}
	r.finish(secs)
	if r.Records == 0 && firstErr == nil {
		firstErr = errors.New("bench: no records to consume")
	}
	return r, errors.Join(firstErr, closeAll())
}

// ErrGroupRecords refuses a consume run of Records in a group on a driver whose consumers
// cannot leave the end of a poll uncommitted (Rewinder): the group's next run would silently
// skip the records this one polled but did not count.
var ErrGroupRecords = errors.New("bench: a consume run of --records in a group needs a consumer that commits only the records it counted, and this driver's commits every record it polls")

// takeUpTo adds up to n to *count without taking it past limit, and returns how much it added.
func takeUpTo(count *atomic.Int64, n, limit int64) int64 {
	for {
		had := count.Load()
		take := min(n, limit-had)
		if take <= 0 {
			return 0
		}
		if count.CompareAndSwap(had, had+take) {
			return take
		}
	}
}

// E2E runs producers at c.Rate and one consumer per topic in the same process; each value
// carries its scheduled send time, and latency runs from it to the record's receipt.
// Throughput counts the measured records received, from the end of the warm-up to the last.
// A run that fell behind (Result.Unsent) returns its Result with ErrFellBehind.
func E2E(ctx context.Context, d Driver, c Config) (Result, error) {
	r, err := e2e(ctx, d, c)
	return r, errors.Join(err, r.fellBehind())
}

// e2e is E2E without ErrFellBehind (see produce).
func e2e(ctx context.Context, d Driver, c Config) (Result, error) {
	c, err := c.withDefaults()
	if err != nil {
		return Result{}, err
	}
	c.brokerCPU = brokerCPUOf(d)
	if err := checkFollowerLag(d, c); err != nil {
		return Result{}, err
	}
	if c.RateOfMax > 0 {
		return atRateOfMax(ctx, d, c, e2eFlatOut, true)
	}
	if c.Rate <= 0 {
		return Result{}, errors.New("bench: e2e needs a rate (records/s) or a rate of max")
	}
	return e2eFlatOut(ctx, d, c)
}

// e2eFlatOut is E2E that also runs without a rate: producers flat out, latency from each
// record's send. Only the probe of atRateOfMax runs it so; its latency is a backlog's.
func e2eFlatOut(ctx context.Context, d Driver, c Config) (Result, error) {
	c, err := c.withDefaults()
	if err != nil {
		return Result{}, err
	}
	c.brokerCPU = brokerCPUOf(d)
	if err := c.checkProducers(); err != nil {
		return Result{}, err
	}
	if c.RecordSize < e2eHeader {
		return Result{}, fmt.Errorf("bench: e2e records must be at least %d bytes", e2eHeader)
	}
	payload, err := NewPayload(c.Payload, c.RecordSize, c.PayloadFile)
	if err != nil {
		return Result{}, err
	}
	if err := createTopics(ctx, d, c); err != nil {
		return Result{}, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var consumers []Consumer
	defer func() {
		for _, cs := range consumers {
			cs.Close()
		}
	}()
	for i := range c.Topics {
		cs, err := d.NewConsumer(cctx, ConsumerOptions{Topic: c.TopicName(i), FetchBytes: c.FetchBytes, NoFileReads: c.NoFileReads})
		if err != nil {
			return Result{}, fmt.Errorf("new consumer: %w", err)
		}
		consumers = append(consumers, cs)
	}
	nonce := rand.Uint64()
	sc := newSchedule(c)
	base := sc.start
	var (
		received atomic.Int64 // measured records received
		lastRecv atomic.Int64 // ns since base
		all      []*stats     // consumers' stats: e2e latency
	)
	cerrs := make(chan error, len(consumers))
	for range consumers {
		st := newStats()
		all = append(all, st)
	}
	for i, cs := range consumers {
		st := all[i]
		go func() {
			for {
				msgs, err := cs.Poll(cctx)
				if err != nil {
					if cctx.Err() != nil {
						err = nil
					}
					cerrs <- err
					return
				}
				now := c.Clock.Now().Sub(base)
				var got int64
				st.mu.Lock() // once per Poll, not per record
				for _, m := range msgs {
					if len(m.Value) < e2eHeader || binary.BigEndian.Uint64(m.Value[8:]) != nonce {
						continue // another run's record
					}
					due := time.Duration(binary.BigEndian.Uint64(m.Value))
					measured := !base.Add(due).Before(sc.measureStart)
					st.recordLocked(measured, len(m.Value), now-due, nil)
					if measured {
						got++
					}
				}
				st.mu.Unlock()
				if got > 0 {
					received.Add(got)
					lastRecv.Store(int64(now))
					sc.cpu.markSoon(base.Add(now))
				}
			}
		}()
	}
	pstats, wait, err := startProducers(ctx, d, c, sc, func(int) func(int64, time.Time) []byte {
		buf := make([]byte, c.RecordSize)
		pl := payload.Clone(0)
		return func(_ int64, due time.Time) []byte {
			copy(buf[e2eHeader:], pl.Next()[e2eHeader:])
			binary.BigEndian.PutUint64(buf, uint64(due.Sub(base)))
			binary.BigEndian.PutUint64(buf[8:], nonce)
			return buf
		}
	})
	if err != nil {
		return Result{}, err
	}
	consumerStats := all
	stopLag := startFollowerLag(ctx, d, c, sc.measureStart)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var timeline []Interval // written by progress until wg.Wait
	wg.Add(1)
	go progress(c, func() []*stats { return consumerStats }, sc.start, sc.measureStart, true, stop, &wg, &timeline)
	counts, perr := wait()
	var sent int64
	var perrs int64
	for _, s := range pstats {
		n, errs := s.counts()
		sent += n
		perrs += errs
	}
	// Wait for every acknowledged measured record to arrive, or until nothing arrives for
	// IdleTimeout.
	var werr error
	for lastCount, idleSince := int64(-1), time.Now(); received.Load() < sent && ctx.Err() == nil; {
		if n := received.Load(); n != lastCount {
			lastCount, idleSince = n, time.Now()
		} else if time.Since(idleSince) > c.IdleTimeout {
			werr = fmt.Errorf("bench: e2e: %d of %d records received", n, sent)
			break
		}
		time.Sleep(time.Millisecond)
	}
	if werr == nil {
		sc.cpu.mark() // every record arrived, just now: no idle wait to leave out
	}
	cancel()
	var cerr error
	for range consumers {
		if err := <-cerrs; err != nil && cerr == nil {
			cerr = err
		}
	}
	close(stop)
	wg.Wait()
	r, _ := merge(consumerStats)
	r.FollowerLag = stopLag()
	pr, _ := merge(pstats)
	if c.Rate > 0 {
		r.SendLagMs = mergeLag(pstats)
	}
	r.Errors += perrs
	r.Unsent = pr.Unsent
	r.ProduceRequests, r.Batches, r.SharedRequests = counts.requests, counts.batches, counts.shared
	if r.FirstError == "" {
		r.FirstError = pr.FirstError
	}
	r.CPUSeconds, r.BrokerCPUSeconds = sc.cpu.seconds(), sc.cpu.brokerSeconds()
	setBrokerFigures(&r, d)
	r.Name, r.Driver, r.Mode, r.TargetRate, r.Timeline = c.Name, d.Name(), ModeE2E, c.Rate, timeline
	r.Settings = runSettings(c, d, r)
	r.WarmupSeconds = c.Warmup.Seconds()
	r.finish(sc.measured(time.Duration(lastRecv.Load()) - sc.measureStart.Sub(base)).Seconds())
	return r, errors.Join(perr, werr, cerr)
}
