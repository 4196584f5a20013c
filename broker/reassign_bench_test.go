package broker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
)

// BenchmarkMovePartition is issue #27's measurement (BENCHMARKS.md, Moving replicas): a
// partition of SLUICE_MOVE_BYTES (256 MiB unless set; "5GiB" for the figure) on broker
// 0 at RF 1 moves to [0, 1], while an acks=all producer writes 500 records/s of 1 KiB to it,
// open loop. Two in-process brokers over real loopback TCP (no fault network between them),
// each a combined broker+controller with its own data directory. The timed part of each
// iteration is from AlterPartitionReassignments until every node's metadata shows the move
// done (broker 1 in the ISR, nothing adding or removing) and ListPartitionReassignments no
// longer lists it, so the benchmark's MB/s is the catch-up
// rate of the log's bytes on disk. The produce latency is reported before the move (3 s, the
// partition at RF 1) and during it, from each record's due time to its acknowledgement.
//
// "throttled" sets the leader and follower throttled rates of both brokers to
// SLUICE_MOVE_THROTTLE bytes/s (100 MB/s unless set) first; x-throttle is catch-up/throttle.
// SLUICE_MOVE_REPLICA_FETCH_MAX_BYTES and SLUICE_MOVE_REPLICA_FETCH_RESPONSE_MAX_BYTES set both
// brokers' replica.fetch.max.bytes and replica.fetch.response.max.bytes, and
// SLUICE_MOVE_WRITE_CACHING=true their write.caching.default (a follower's next fetch then
// does not wait for the fsync of what the last one appended);
// SLUICE_MOVE_CPUPROFILE and SLUICE_MOVE_TRACE write a CPU profile and an execution trace of
// the first unthrottled move alone (the fill and the baseline left out). Run with -benchtime 1x: each iteration fills a partition anew.
func BenchmarkMovePartition(b *testing.B) {
	size := envBytes(b, "SLUICE_MOVE_BYTES", 256<<20)
	throttle := envBytes(b, "SLUICE_MOVE_THROTTLE", 100_000_000)
	for _, tc := range []struct {
		name     string
		throttle int64
	}{{"unthrottled", 0}, {"throttled", throttle}} {
		b.Run(tc.name, func(b *testing.B) { benchMove(b, size, tc.throttle) })
	}
}

const (
	moveProduceRate  = 500 // records/s during the measurement
	moveRecordBytes  = 1024
	moveBaseline     = 3 * time.Second
	moveMaxLatencyUs = 120_000_000
)

func benchMove(b *testing.B, size, throttle int64) {
	cfgs := brokertest.ClusterConfigs(b, 2)
	for i := range cfgs {
		// The defaults, not ClusterConfigs' quick failure detection: a node starved of CPU
		// by the catch-up must not be fenced in the middle of it.
		cfgs[i].HeartbeatInterval, cfgs[i].SessionTimeout = 2*time.Second, 9*time.Second
		if n := envBytes(b, "SLUICE_MOVE_REPLICA_FETCH_MAX_BYTES", 0); n > 0 {
			cfgs[i].ReplicaFetchMaxBytes = int(n)
		}
		if n := envBytes(b, "SLUICE_MOVE_REPLICA_FETCH_RESPONSE_MAX_BYTES", 0); n > 0 {
			cfgs[i].ReplicaFetchResponseMaxBytes = int(n)
		}
		cfgs[i].WriteCaching = os.Getenv("SLUICE_MOVE_WRITE_CACHING") == "true"
	}
	bs := brokertest.OpenCluster(b, cfgs)
	bootstrap := []string{bs[0].Addr().String(), bs[1].Addr().String()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: bootstrap, Logger: quiet()}})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	until(b, 30*time.Second, "both brokers live", func() bool {
		return len(bs[0].Controller().Metadata().LiveBrokers()) == 2 && len(bs[1].Controller().Metadata().LiveBrokers()) == 2
	})
	if throttle > 0 {
		rate := strconv.FormatInt(throttle, 10)
		for id := range bs {
			set := map[string]string{client.LeaderThrottledRate: rate, client.FollowerThrottledRate: rate}
			if err := a.AlterBrokerConfigs(ctx, strconv.Itoa(id), set, nil); err != nil {
				b.Fatal(err)
			}
		}
		until(b, 10*time.Second, "the throttle in every node's metadata", func() bool {
			for i := range bs {
				for id := range bs {
					if bs[i].Controller().Metadata().BrokerConfigs(strconv.Itoa(id))[client.FollowerThrottledRate] != rate {
						return false
					}
				}
			}
			return true
		})
	}

	before, during := newLatencies(), newLatencies()
	var moved int64
	var elapsed time.Duration
	b.StopTimer()
	b.ResetTimer()
	for i := range b.N {
		topic := fmt.Sprintf("move%d", i)
		if err := a.CreateTopic(ctx, client.TopicSpec{Name: topic, Assignment: [][]int32{{0}}}); err != nil {
			b.Fatal(err)
		}
		until(b, 30*time.Second, topic+" led by broker 0", func() bool { return leader(bs[0], topic) == 0 })
		filling := time.Now()
		fillPartition(b, ctx, bootstrap, topic, size)
		filled := time.Since(filling)
		pp := startPaced(b, ctx, bootstrap, topic, before)
		<-time.After(moveBaseline)
		logBytes := dirBytes(b, filepath.Join(cfgs[0].DataDir, topic+"-0"))
		pp.switchTo(during)
		stopProfile := maybeProfile(b, throttle == 0 && i == 0)
		start := time.Now()
		b.StartTimer()
		if err := a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: topic, Partition: 0, Replicas: []int32{0, 1}}}); err != nil {
			b.Fatal(err)
		}
		until(b, 30*time.Minute, topic+" moved to [0 1]", func() bool {
			if !movedTo(bs, topic, []int32{0, 1}) {
				return false
			}
			moving, err := a.ListPartitionReassignments(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			return len(moving) == 0
		})
		b.StopTimer()
		took := time.Since(start)
		stopProfile()
		pp.switchTo(nil)
		pp.stop(b)
		moved += logBytes
		elapsed += took
		b.Logf("%s: filled in %v (%.1f MB/s); moved %d bytes in %v: %.1f MB/s; produce errors %d", topic, filled,
			float64(size)/filled.Seconds()/1e6, logBytes, took, float64(logBytes)/took.Seconds()/1e6, pp.errs.Load())
		if err := a.DeleteTopic(ctx, topic); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(moved / int64(b.N))
	rate := float64(moved) / elapsed.Seconds()
	b.ReportMetric(rate/1e6, "catchup-MB/s")
	if throttle > 0 {
		b.ReportMetric(rate/float64(throttle), "x-throttle")
	}
	before.report(b, "before")
	during.report(b, "during")
}

// latencies is one phase's produce latencies.
type latencies struct {
	mu   sync.Mutex
	hist *hdrhistogram.Histogram // µs
}

func newLatencies() *latencies {
	return &latencies{hist: hdrhistogram.New(1, moveMaxLatencyUs, 3)}
}

func (l *latencies) record(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.hist.RecordValue(min(max(d.Microseconds(), 1), moveMaxLatencyUs))
}

func (l *latencies) report(b *testing.B, phase string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ms := func(us int64) float64 { return float64(us) / 1000 }
	b.ReportMetric(ms(l.hist.ValueAtQuantile(50)), phase+"-p50-ms")
	b.ReportMetric(ms(l.hist.ValueAtQuantile(99)), phase+"-p99-ms")
	b.ReportMetric(ms(l.hist.Max()), phase+"-max-ms")
	b.ReportMetric(float64(l.hist.TotalCount()), phase+"-records")
}

// paced is an acks=all producer sending moveProduceRate records/s to partition 0 of its topic,
// open loop: each record's latency is from when it was due, so a stall counts in full for
// every record it held up. Latencies go to the phase current when the record was due (none
// when nil).
type paced struct {
	p     *client.Producer
	phase atomic.Pointer[latencies]
	errs  atomic.Int64
	quit  chan struct{}
	done  chan struct{}
}

func startPaced(b *testing.B, ctx context.Context, bootstrap []string, topic string, phase *latencies) *paced {
	p, err := client.NewProducer(ctx, client.ProducerConfig{Config: client.Config{Brokers: bootstrap, Logger: quiet()},
		Acks: client.AcksAll, Linger: -1})
	if err != nil {
		b.Fatal(err)
	}
	pp := &paced{p: p, quit: make(chan struct{}), done: make(chan struct{})}
	pp.phase.Store(phase)
	value := make([]byte, moveRecordBytes)
	go func() {
		defer close(pp.done)
		interval := time.Second / moveProduceRate
		due := time.Now()
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-pp.quit:
				return
			case <-t.C:
			}
			// Every record due by now, each timed from its own due time.
			for now := time.Now(); !due.After(now); due = due.Add(interval) {
				l, sent := pp.phase.Load(), due
				p.Send(ctx, &client.Record{Topic: topic, Partition: 0, PartitionSet: true, Value: value}, func(_ client.RecordMetadata, err error) {
					if err != nil {
						pp.errs.Add(1)
					}
					if l != nil {
						l.record(time.Since(sent))
					}
				})
			}
			t.Reset(time.Until(due))
		}
	}()
	return pp
}

func (pp *paced) switchTo(l *latencies) { pp.phase.Store(l) }

func (pp *paced) stop(b *testing.B) {
	close(pp.quit)
	<-pp.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pp.p.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// fillPartition writes size bytes of 1 KiB records to topic's partition 0 in 1 MiB batches
// (acks=1), as fast as one producer goes.
func fillPartition(b *testing.B, ctx context.Context, bootstrap []string, topic string, size int64) {
	p, err := client.NewProducer(ctx, client.ProducerConfig{Config: client.Config{Brokers: bootstrap, Logger: quiet()},
		Acks: client.AcksLeader, BatchSize: 1 << 20, BufferMemory: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, moveRecordBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var failed atomic.Pointer[error]
	for range size / moveRecordBytes {
		p.Send(ctx, &client.Record{Topic: topic, Partition: 0, PartitionSet: true, Value: value}, func(_ client.RecordMetadata, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if err := failed.Load(); err != nil {
		b.Fatalf("fill %s: %v", topic, *err)
	}
}

// movedTo reports whether every node's metadata has topic's partition 0 at replicas, all in
// the ISR, with no move in progress.
func movedTo(bs []*broker.Broker, topic string, replicas []int32) bool {
	for _, br := range bs {
		tm, ok := br.Controller().Metadata().Topic(topic)
		if !ok || len(tm.Partitions) == 0 {
			return false
		}
		pm := tm.Partitions[0]
		if pm.Reassigning() || !slices.Equal(pm.Replicas, replicas) || !slices.Equal(slices.Sorted(slices.Values(pm.ISR)), replicas) {
			return false
		}
	}
	return true
}

// leader is topic's partition 0's leader in br's metadata, or -1.
func leader(br *broker.Broker, topic string) int32 {
	tm, ok := br.Controller().Metadata().Topic(topic)
	if !ok || len(tm.Partitions) == 0 {
		return -1
	}
	return tm.Partitions[0].Leader
}

// dirBytes is the bytes of the segment files (*.log) in dir.
func dirBytes(b *testing.B, dir string) int64 {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		b.Fatalf("no segments in %s: %v", dir, err)
	}
	var n int64
	for _, path := range logs {
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// maybeProfile starts a CPU profile into $SLUICE_MOVE_CPUPROFILE and an execution trace into
// $SLUICE_MOVE_TRACE (each when set) when on, and returns their stop.
func maybeProfile(b *testing.B, on bool) func() {
	var stops []func()
	for _, p := range []struct {
		env   string
		start func(io.Writer) error
		stop  func()
	}{{"SLUICE_MOVE_CPUPROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile}, {"SLUICE_MOVE_TRACE", trace.Start, trace.Stop}} {
		path := os.Getenv(p.env)
		if !on || path == "" {
			continue
		}
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.start(f); err != nil {
			b.Fatal(err)
		}
		stops = append(stops, func() {
			p.stop()
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// until polls cond every 5 ms until it holds, failing after d.
func until(b *testing.B, d time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}

// envBytes reads a byte count from the environment: digits with an optional KiB, MiB or GiB
// suffix; def when unset.
func envBytes(b *testing.B, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a byte count such as 268435456, 256MiB or 5GiB", name, os.Getenv(name))
	}
	return n * mult
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
