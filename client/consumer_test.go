package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

var consumerCodecs = []batch.Codec{batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd}

// consumerModes are the two record lifetimes: for as long as the application keeps them (the
// default), and until the next Poll (ConsumerConfig.ReuseRecordBuffers).
var consumerModes = []struct {
	name  string
	reuse bool
}{{"default", false}, {"reuse", true}}

// consumerFixture is an in-process broker, a raw connection to produce with (tests do not
// depend on the Producer) and a deadline for the whole test.
type consumerFixture struct {
	t    testing.TB
	b    *broker.Broker
	conn *client.Conn
	ctx  context.Context
}

func newConsumerFixture(t *testing.T) *consumerFixture {
	t.Helper()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	conn, err := client.Dial(ctx, b.Addr().String(), "consumer-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &consumerFixture{t: t, b: b, conn: conn, ctx: ctx}
}

func (f *consumerFixture) tcp() string  { return f.b.Addr().String() }
func (f *consumerFixture) unix() string { return "unix://" + f.b.UnixAddr().String() }

func (f *consumerFixture) createTopic(name string, partitions int32) {
	f.t.Helper()
	var resp wire.CreateTopicsResponse
	req := &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{{Topic: name, NumPartitions: partitions, ReplicationFactor: -1}}}
	if err := f.conn.Call(f.ctx, req, &resp); err != nil {
		f.t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != wire.NoError {
		f.t.Fatalf("create %s: %v", name, code)
	}
}

// produce appends recs as one batch compressed with codec and returns its base offset.
func (f *consumerFixture) produce(topic string, partition int32, codec batch.Codec, recs []batch.Record) int64 {
	f.t.Helper()
	opts := batch.DefaultBuilderOptions()
	opts.Compression = codec
	bl := batch.NewBuilder(opts)
	for i := range recs {
		bl.Append(&recs[i])
	}
	bt, err := bl.Build()
	if err != nil {
		f.t.Fatal(err)
	}
	var resp wire.ProduceResponse
	// acks=all: answered once committed (on the single test broker, fsynced), so the records
	// are below the high watermark, which is what consumers and ListOffsets see, when it returns.
	req := &wire.ProduceRequest{Acks: wire.AcksAll, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
		{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: partition, Records: bt}}},
	}}
	if err := f.conn.Call(f.ctx, req, &resp); err != nil {
		f.t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != wire.NoError {
		f.t.Fatalf("produce %s-%d: %v", topic, partition, p.ErrorCode)
	}
	return p.BaseOffset
}

// produceValues appends one uncompressed batch of values and returns its base offset.
func (f *consumerFixture) produceValues(topic string, partition int32, values ...string) int64 {
	f.t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)}
	}
	return f.produce(topic, partition, batch.None, recs)
}

// produceSameLength appends n batches of perBatch records, compressed with codec, whose values
// ("batch-BB-record-RR") have the same length in every batch: a reused buffer then puts
// another batch's value exactly where a held one was.
func (f *consumerFixture) produceSameLength(topic string, codec batch.Codec, n, perBatch int) {
	f.t.Helper()
	for b := range n {
		recs := make([]batch.Record, perBatch)
		for i := range recs {
			recs[i] = batch.Record{Timestamp: 1, Value: fmt.Appendf(nil, "batch-%02d-record-%02d", b, i)}
		}
		f.produce(topic, 0, codec, recs)
	}
}

// topicOfBatches creates a one-partition topic holding n uncompressed batches of 10 values.
func (f *consumerFixture) topicOfBatches(name string, n int) client.TopicPartition {
	f.t.Helper()
	f.createTopic(name, 1)
	for range n {
		f.produceValues(name, 0, consumerValues(10, "v")...)
	}
	return client.TopicPartition{Topic: name}
}

// consumer starts a consumer on the TCP address unless cfg names brokers; Close runs at the
// end of the test (a crashed consumer ignores it).
func (f *consumerFixture) consumer(cfg client.ConsumerConfig, tps ...client.TopicPartition) *client.Consumer {
	f.t.Helper()
	if len(cfg.Brokers) == 0 {
		cfg.Brokers = []string{f.tcp()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.FetchMaxWait == 0 {
		cfg.FetchMaxWait = 100 * time.Millisecond
	}
	c, err := client.NewConsumer(f.ctx, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close(context.Background()) })
	if len(tps) > 0 {
		if err := c.Assign(tps); err != nil {
			f.t.Fatal(err)
		}
	}
	return c
}

// watchQueued samples c's queue every millisecond until reached(responses queued, most
// queued for one partition) has held for hold, failing the test as soon as either count
// exceeds max, or at the fixture's deadline (what names the state awaited).
func (f *consumerFixture) watchQueued(t *testing.T, c *client.Consumer, max int, hold time.Duration, what string, reached func(responses, buffered int) bool) {
	t.Helper()
	var since time.Time
	for {
		responses, buffered := c.QueuedForTest()
		if responses > max || buffered > max {
			t.Fatalf("%s: %d responses queued, %d for one partition; want at most %d", what, responses, buffered, max)
		}
		switch {
		case !reached(responses, buffered):
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		}
		if !since.IsZero() && time.Since(since) >= hold {
			return
		}
		if f.ctx.Err() != nil {
			t.Fatalf("%s: not reached (%d responses queued, %d for one partition)", what, responses, buffered)
		}
		time.Sleep(time.Millisecond)
	}
}

// pollN polls until it has n records, failing the test on an error or the deadline. It
// returns copies, valid whatever the consumer's ReuseRecordBuffers.
func (f *consumerFixture) pollN(c *client.Consumer, n int) []client.Record {
	f.t.Helper()
	var out []client.Record
	for len(out) < n {
		recs, err := c.Poll(f.ctx)
		if err != nil {
			f.t.Fatalf("poll after %d of %d records: %v", len(out), n, err)
		}
		for _, r := range recs {
			out = append(out, cloneRecord(r))
		}
	}
	if len(out) > n {
		f.t.Fatalf("polled %d records, want %d", len(out), n)
	}
	return out
}

// cloneRecord copies r's bytes, keeping null and empty apart.
func cloneRecord(r client.Record) client.Record {
	r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
	if r.Headers != nil {
		hs := make([]client.Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = client.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
		}
		r.Headers = hs
	}
	return r
}

// pollNone checks that nothing arrives within a short wait.
func (f *consumerFixture) pollNone(c *client.Consumer, wait time.Duration) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, wait)
	defer cancel()
	if recs, err := c.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		f.t.Fatalf("Poll = %d records (%v), want nothing", len(recs), err)
	}
}

// committed reads a group's committed offset for tp straight from the broker (-1: none).
func (f *consumerFixture) committed(group string, tp client.TopicPartition) int64 {
	f.t.Helper()
	var resp wire.OffsetFetchResponse
	req := &wire.OffsetFetchRequest{GroupID: group, Topics: []wire.OffsetFetchRequestTopic{{Topic: tp.Topic, Partitions: []int32{tp.Partition}}}}
	if err := f.conn.Call(f.ctx, req, &resp); err != nil {
		f.t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// waitCommitted polls the broker until group's committed offset for tp is want.
func (f *consumerFixture) waitCommitted(group string, tp client.TopicPartition, want int64) {
	f.t.Helper()
	for got := f.committed(group, tp); got != want; got = f.committed(group, tp) {
		if f.ctx.Err() != nil {
			f.t.Fatalf("committed offset of %s for %s is %d, want %d", group, tp, got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func consumerOffsets(recs []client.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

func consumerOffsetRange(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func consumerValues(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// sameNullableBytes compares contents and null-ness.
func sameNullableBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// consumerRoundTripRecords builds varied records: keys and values null, empty and long; headers with
// null values; timestamps out of order within a batch.
func consumerRoundTripRecords(p int32, batchNo, n int, base time.Time) []batch.Record {
	recs := make([]batch.Record, n)
	for i := range recs {
		r := &recs[i]
		r.Timestamp = base.Add(time.Duration(batchNo*1000+i*7-(i%3)*5) * time.Millisecond).UnixMilli()
		switch i % 4 {
		case 0:
			r.Key = []byte(fmt.Sprintf("key-%d-%d-%d", p, batchNo, i))
		case 1: // null key
		case 2:
			r.Key = []byte{}
		case 3:
			r.Key = bytes.Repeat([]byte{byte(i)}, 300)
		}
		switch i % 5 {
		case 0: // null value
		case 1:
			r.Value = []byte{}
		default:
			r.Value = []byte(strings.Repeat(fmt.Sprintf("value %d/%d/%d ", p, batchNo, i), 1+i%9))
		}
		if i%2 == 0 {
			r.Headers = []batch.Header{{Key: []byte("trace"), Value: []byte(fmt.Sprint(i))}, {Key: []byte("null"), Value: nil}}
		}
	}
	return recs
}

func checkConsumedRecord(t *testing.T, got client.Record, tp client.TopicPartition, offset int64, want batch.Record) {
	t.Helper()
	if got.Topic != tp.Topic || got.Partition != tp.Partition || got.Offset != offset {
		t.Fatalf("record at %s/%d is %s-%d/%d", tp, offset, got.Topic, got.Partition, got.Offset)
	}
	if got.Timestamp.UnixMilli() != want.Timestamp || !sameNullableBytes(got.Key, want.Key) || !sameNullableBytes(got.Value, want.Value) {
		t.Fatalf("%s/%d: got ts %d key %q value %q; want ts %d key %q value %q", tp, offset,
			got.Timestamp.UnixMilli(), got.Key, got.Value, want.Timestamp, want.Key, want.Value)
	}
	if len(got.Headers) != len(want.Headers) {
		t.Fatalf("%s/%d: %d headers, want %d", tp, offset, len(got.Headers), len(want.Headers))
	}
	for i, h := range want.Headers {
		if got.Headers[i].Key != string(h.Key) || !sameNullableBytes(got.Headers[i].Value, h.Value) {
			t.Fatalf("%s/%d: header %d = %q=%q, want %q=%q", tp, offset, i, got.Headers[i].Key, got.Headers[i].Value, h.Key, h.Value)
		}
	}
}

// Records come back exactly, over both transports, for every codec, across partitions, in
// order per partition.
func TestConsumerRoundTrip(t *testing.T) {
	f := newConsumerFixture(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	const partitions, batches = 3, 3
	for _, tr := range []struct{ name, addr string }{{"tcp", f.tcp()}, {"unix", f.unix()}} {
		for _, codec := range consumerCodecs {
			t.Run(tr.name+"/"+codec.String(), func(t *testing.T) {
				topic := "rt-" + tr.name + "-" + codec.String()
				f.createTopic(topic, partitions)
				want := map[client.TopicPartition][]batch.Record{}
				total := 0
				for p := range int32(partitions) {
					tp := client.TopicPartition{Topic: topic, Partition: p}
					for b := range batches {
						recs := consumerRoundTripRecords(p, b, 5+int(p)*7+b*3, base)
						if off := f.produce(topic, p, codec, recs); off != int64(len(want[tp])) {
							t.Fatalf("produced at %d, want %d", off, len(want[tp]))
						}
						want[tp] = append(want[tp], recs...)
						total += len(recs)
					}
				}
				c := f.consumer(client.ConsumerConfig{Config: client.Config{Brokers: []string{tr.addr}}, AutoOffsetReset: client.OffsetResetEarliest})
				tps, err := c.PartitionsFor(f.ctx, topic)
				if err != nil || len(tps) != partitions {
					t.Fatalf("PartitionsFor = %v, %v", tps, err)
				}
				if err := c.Assign(tps); err != nil {
					t.Fatal(err)
				}
				next := map[client.TopicPartition]int64{}
				for _, r := range f.pollN(c, total) {
					tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
					off := next[tp]
					checkConsumedRecord(t, r, tp, off, want[tp][off])
					next[tp]++
				}
				for tp, w := range want {
					if pos, err := c.Position(f.ctx, tp); err != nil || pos != int64(len(w)) {
						t.Fatalf("Position(%s) = %d, %v; want %d", tp, pos, err, len(w))
					}
				}
			})
		}
	}
}

// Seek, SeekToBeginning, SeekToEnd and SeekToTimestamp; a batch that starts before the
// position yields only the records at and after it, compressed or not.
func TestConsumerSeek(t *testing.T) {
	f := newConsumerFixture(t)
	for _, mode := range consumerModes {
		for _, codec := range []batch.Codec{batch.None, batch.Zstd} {
			t.Run(mode.name+"/"+codec.String(), func(t *testing.T) {
				topic := "seek-" + mode.name + "-" + codec.String()
				f.createTopic(topic, 1)
				tp := client.TopicPartition{Topic: topic}
				recs := make([]batch.Record, 10)
				for i := range recs {
					recs[i] = batch.Record{Timestamp: int64(1_000_000 + i*100), Value: []byte(fmt.Sprint(i))}
				}
				f.produce(topic, 0, codec, recs) // one batch: offsets 0-9, timestamps 1000000, 1000100, ...

				c := f.consumer(client.ConsumerConfig{ReuseRecordBuffers: mode.reuse}, tp)
				// No group and auto.offset.reset=latest (the default): the end.
				if pos, err := c.Position(f.ctx, tp); err != nil || pos != 10 {
					t.Fatalf("initial Position = %d, %v; want 10", pos, err)
				}
				check := func(what string, wantFrom int64) {
					t.Helper()
					got := f.pollN(c, int(10-wantFrom))
					if !slices.Equal(consumerOffsets(got), consumerOffsetRange(wantFrom, 10)) {
						t.Fatalf("%s: offsets %v, want %d..9", what, consumerOffsets(got), wantFrom)
					}
					if string(got[0].Value) != fmt.Sprint(wantFrom) {
						t.Fatalf("%s: first value %q", what, got[0].Value)
					}
				}
				if err := c.Seek(tp, 4); err != nil {
					t.Fatal(err)
				}
				check("Seek(4) inside the batch", 4)
				if err := c.SeekToBeginning(nil); err != nil {
					t.Fatal(err)
				}
				check("SeekToBeginning", 0)
				if err := c.SeekToTimestamp([]client.TopicPartition{tp}, time.UnixMilli(1_000_250)); err != nil {
					t.Fatal(err)
				}
				check("SeekToTimestamp(1000250)", 3)
				if err := c.SeekToTimestamp(nil, time.UnixMilli(1_000_000)); err != nil {
					t.Fatal(err)
				}
				check("SeekToTimestamp(first)", 0)
				if err := c.SeekToTimestamp(nil, time.UnixMilli(9_000_000)); err != nil {
					t.Fatal(err)
				}
				if pos, err := c.Position(f.ctx, tp); err != nil || pos != 10 {
					t.Fatalf("after SeekToTimestamp(past the last record) Position = %d, %v; want the end, 10", pos, err)
				}
				if err := c.Seek(tp, 2); err != nil {
					t.Fatal(err)
				}
				if err := c.SeekToEnd(nil); err != nil {
					t.Fatal(err)
				}
				// Resolved now, before "new" is produced (left to the Poll below, the lookup
				// could come after it and land past it).
				if pos, err := c.Position(f.ctx, tp); err != nil || pos != 10 {
					t.Fatalf("after SeekToEnd Position = %d, %v; want the end, 10", pos, err)
				}
				f.pollNone(c, 150*time.Millisecond)
				f.produceValues(topic, 0, "new")
				if got := f.pollN(c, 1); got[0].Offset != 10 || string(got[0].Value) != "new" {
					t.Fatalf("after SeekToEnd: %d %q", got[0].Offset, got[0].Value)
				}
				if err := c.Seek(client.TopicPartition{Topic: topic, Partition: 5}, 0); !errors.Is(err, client.ErrNotAssigned) {
					t.Fatalf("Seek of an unassigned partition: %v", err)
				}
			})
		}
	}
}

// Poll returns at most MaxPollRecords; records left in a response come with the next Poll,
// and while the application holds one response the next ones are already fetched (prefetch),
// ResponsesAhead per partition at most.
func TestConsumerPrefetchAndMaxPollRecords(t *testing.T) {
	f := newConsumerFixture(t)
	tp := f.topicOfBatches("pre", 4)
	// One batch per fetch: each batch is ~150 bytes, so a 1-byte partition limit returns
	// exactly the first batch whole.
	c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest, MaxPartitionFetchBytes: 1, MaxPollRecords: 4}, tp)
	got := f.pollN(c, 4)
	if !slices.Equal(consumerOffsets(got), consumerOffsetRange(0, 4)) {
		t.Fatalf("first poll: %v", consumerOffsets(got))
	}
	// The application now "processes" records 0-3 without polling. Poll started on the first
	// response, so the next ones are fetched meanwhile, and no more than ResponsesAhead.
	f.watchQueued(t, c, client.ResponsesAhead, 50*time.Millisecond, "responses fetched ahead while the application held the records",
		func(responses, _ int) bool { return responses == client.ResponsesAhead })
	rest := f.pollN(c, 36)
	if !slices.Equal(consumerOffsets(rest), consumerOffsetRange(4, 40)) {
		t.Fatalf("rest: %v", consumerOffsets(rest))
	}
}

// A response that ends in an error (here OFFSET_OUT_OF_RANGE) is not fetched past: what
// comes next depends on what Poll makes of it (a reset moves the position), so the fetcher
// waits for Poll instead of fetching the same offset again.
func TestConsumerNoPrefetchPastAnError(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("past", 1)
	tp := client.TopicPartition{Topic: "past"}
	f.produceValues("past", 0, consumerValues(10, "v")...)
	c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest})
	if err := c.Assign([]client.TopicPartition{tp}); err != nil {
		t.Fatal(err)
	}
	if pos, err := c.Position(f.ctx, tp); err != nil || pos != 0 { // starts the fetcher, as Poll would
		t.Fatalf("Position = %d, %v", pos, err)
	}
	if err := c.Seek(tp, 1000); err != nil { // past the log end: OFFSET_OUT_OF_RANGE
		t.Fatal(err)
	}
	// Responses since the seek (the earlier ones are dropped): the out-of-range one, and no more.
	f.watchQueued(t, c, 1, 100*time.Millisecond, "the out-of-range response", func(_, buffered int) bool { return buffered == 1 })
	// Poll applies auto.offset.reset and reads from the beginning.
	if got := f.pollN(c, 10); !slices.Equal(consumerOffsets(got), consumerOffsetRange(0, 10)) {
		t.Fatalf("after the reset: %v", consumerOffsets(got))
	}
}

// Seeks without a Poll in between do not pile up responses: each seek drops what was fetched
// for the old position, so the queue never holds more than ResponsesAhead, and Poll then
// reads from the last position.
func TestConsumerSeeksWithoutPollDropResponses(t *testing.T) {
	f := newConsumerFixture(t)
	tp := f.topicOfBatches("seeks", 4)
	for _, mode := range consumerModes {
		t.Run(mode.name, func(t *testing.T) {
			c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: mode.reuse, MaxPartitionFetchBytes: 1}, tp)
			if pos, err := c.Position(f.ctx, tp); err != nil || pos != 0 { // starts the fetcher, as Poll would
				t.Fatalf("Position = %d, %v", pos, err)
			}
			for i := range 20 {
				if err := c.Seek(tp, int64(i%4*10)); err != nil {
					t.Fatal(err)
				}
				f.watchQueued(t, c, client.ResponsesAhead, 0, fmt.Sprintf("a response after seek %d", i),
					func(_, buffered int) bool { return buffered > 0 })
			}
			if got := f.pollN(c, 10); !slices.Equal(consumerOffsets(got), consumerOffsetRange(30, 40)) {
				t.Fatalf("after the last seek (to 30): %v", consumerOffsets(got))
			}
			// Unassigning drops what was fetched for the partition too.
			if err := c.Seek(tp, 0); err != nil {
				t.Fatal(err)
			}
			f.watchQueued(t, c, client.ResponsesAhead, 0, "responses before unassigning",
				func(responses, _ int) bool { return responses == client.ResponsesAhead })
			if err := c.Assign(nil); err != nil {
				t.Fatal(err)
			}
			if responses, _ := c.QueuedForTest(); responses != 0 {
				t.Fatalf("%d responses queued after unassigning the partition", responses)
			}
		})
	}
}

// CommitSync commits what Poll returned; a new consumer in the group resumes exactly after.
func TestConsumerCommitSyncAndResume(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("resume", 2)
	for p := range int32(2) {
		f.produceValues("resume", p, consumerValues(25, "v")...)
	}
	tp0, tp1 := client.TopicPartition{Topic: "resume"}, client.TopicPartition{Topic: "resume", Partition: 1}
	cfg := client.ConsumerConfig{GroupID: "g-resume", EnableAutoCommit: new(false), AutoOffsetReset: client.OffsetResetEarliest, MaxPollRecords: 7}
	a := f.consumer(cfg, tp0)
	got := f.pollN(a, 7)
	if err := a.CommitSync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if c := f.committed("g-resume", tp0); c != 7 {
		t.Fatalf("committed %d, want 7", c)
	}
	if f.committed("g-resume", tp1) != -1 {
		t.Fatal("an unassigned partition was committed")
	}
	if err := a.CommitSync(f.ctx); err != nil { // nothing new: no request
		t.Fatal(err)
	}
	if err := a.Close(f.ctx); err != nil { // auto-commit is off: Close commits nothing
		t.Fatal(err)
	}
	b := f.consumer(cfg, tp0, tp1)
	if pos, err := b.Position(f.ctx, tp0); err != nil || pos != 7 {
		t.Fatalf("resumed Position = %d, %v; want 7", pos, err)
	}
	seen := map[int32][]int64{}
	for _, r := range f.pollN(b, 18+25) {
		seen[r.Partition] = append(seen[r.Partition], r.Offset)
	}
	if !slices.Equal(seen[0], consumerOffsetRange(7, 25)) || !slices.Equal(seen[1], consumerOffsetRange(0, 25)) {
		t.Fatalf("after resume: %v (first consumer had %v)", seen, consumerOffsets(got))
	}
	// CommitOffsets commits explicit offsets, assigned or not.
	if err := b.CommitOffsets(f.ctx, map[client.TopicPartition]int64{tp0: 3, {Topic: "resume", Partition: 1}: 11}); err != nil {
		t.Fatal(err)
	}
	if f.committed("g-resume", tp0) != 3 || f.committed("g-resume", tp1) != 11 {
		t.Fatal("CommitOffsets did not commit")
	}
	// Without a group there is nothing to commit to.
	nog := f.consumer(client.ConsumerConfig{}, tp0)
	if err := nog.CommitSync(f.ctx); !errors.Is(err, client.ErrNoGroup) {
		t.Fatalf("CommitSync without a group: %v", err)
	}
}

// CommitAsync's callback fires with the offsets, in call order.
func TestConsumerCommitAsync(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("async", 1)
	f.produceValues("async", 0, consumerValues(10, "v")...)
	tp := client.TopicPartition{Topic: "async"}
	c := f.consumer(client.ConsumerConfig{GroupID: "g-async", EnableAutoCommit: new(false), AutoOffsetReset: client.OffsetResetEarliest, MaxPollRecords: 6}, tp)
	type result struct {
		offsets map[client.TopicPartition]int64
		err     error
	}
	results := make(chan result, 2)
	cb := func(offsets map[client.TopicPartition]int64, err error) { results <- result{offsets, err} }
	f.pollN(c, 6)
	c.CommitAsync(cb)
	f.pollN(c, 4)
	c.CommitAsync(cb)
	for _, want := range []int64{6, 10} {
		select {
		case r := <-results:
			if r.err != nil || r.offsets[tp] != want {
				t.Fatalf("callback: %v %v, want %s=%d", r.offsets, r.err, tp, want)
			}
		case <-f.ctx.Done():
			t.Fatal("CommitAsync callback did not fire")
		}
	}
	if got := f.committed("g-async", tp); got != 10 {
		t.Fatalf("committed %d, want 10", got)
	}
	// After Close the callback still fires, with ErrConsumerClosed.
	if err := c.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	c.CommitAsync(cb)
	if r := <-results; !errors.Is(r.err, client.ErrConsumerClosed) {
		t.Fatalf("CommitAsync after Close: %v", r.err)
	}
}

// With auto-commit, Close commits the positions of what Poll returned.
func TestConsumerAutoCommitOnClose(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("close", 1)
	f.produceValues("close", 0, consumerValues(10, "v")...)
	tp := client.TopicPartition{Topic: "close"}
	c := f.consumer(client.ConsumerConfig{GroupID: "g-close", AutoOffsetReset: client.OffsetResetEarliest, MaxPollRecords: 4, AutoCommitInterval: time.Hour}, tp)
	f.pollN(c, 4)
	if got := f.committed("g-close", tp); got != -1 {
		t.Fatalf("committed %d before the interval", got)
	}
	if err := c.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.committed("g-close", tp); got != 4 {
		t.Fatalf("committed %d after Close, want 4", got)
	}
	if _, err := c.Poll(f.ctx); !errors.Is(err, client.ErrConsumerClosed) {
		t.Fatalf("Poll after Close: %v", err)
	}
}

// Failure mode 1, auto-commit: the background commit covers records Poll returned that the
// application had not processed yet. A crash then loses them: the next consumer in the group
// starts after them.
func TestConsumerAutoCommitLosesUnprocessedRecordsOnCrash(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("loss", 1)
	f.produceValues("loss", 0, consumerValues(10, "a")...)
	f.produceValues("loss", 0, consumerValues(10, "b")...)
	tp := client.TopicPartition{Topic: "loss"}
	cfg := client.ConsumerConfig{GroupID: "g-loss", AutoOffsetReset: client.OffsetResetEarliest, MaxPollRecords: 10, AutoCommitInterval: 5 * time.Millisecond}

	var processed []int64
	a := f.consumer(cfg, tp)
	recs := f.pollN(a, 10)
	for _, r := range recs[:5] { // the application gets through half of them...
		processed = append(processed, r.Offset)
	}
	// ...while auto-commit commits all ten that Poll returned (and not the prefetched rest).
	f.waitCommitted("g-loss", tp, 10)
	a.CrashForTest()

	b := f.consumer(cfg, tp)
	for _, r := range f.pollN(b, 10) {
		processed = append(processed, r.Offset)
	}
	want := append(consumerOffsetRange(0, 5), consumerOffsetRange(10, 20)...)
	if !slices.Equal(processed, want) {
		t.Fatalf("processed %v, want %v", processed, want)
	}
	t.Logf("records 5-9 were never processed: at-most-once for what a crash interrupts")
}

// Failure mode 2, process then commit: the application commits only after processing. A crash
// between processing and the commit redelivers the uncommitted records: nothing is lost, some
// are processed twice.
func TestConsumerProcessThenCommitRedeliversOnCrash(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("dup", 1)
	f.produceValues("dup", 0, consumerValues(20, "v")...)
	tp := client.TopicPartition{Topic: "dup"}
	cfg := client.ConsumerConfig{GroupID: "g-dup", EnableAutoCommit: new(false), AutoOffsetReset: client.OffsetResetEarliest, MaxPollRecords: 10}

	times := map[int64]int{}
	a := f.consumer(cfg, tp)
	for _, r := range f.pollN(a, 10) {
		times[r.Offset]++
	}
	if err := a.CommitSync(f.ctx); err != nil { // 0-9 processed, then committed
		t.Fatal(err)
	}
	for _, r := range f.pollN(a, 10) {
		times[r.Offset]++ // 10-19 processed...
	}
	a.CrashForTest() // ...and the process dies before CommitSync.
	if got := f.committed("g-dup", tp); got != 10 {
		t.Fatalf("committed %d, want 10", got)
	}

	b := f.consumer(cfg, tp)
	for _, r := range f.pollN(b, 10) {
		times[r.Offset]++
	}
	if err := b.CommitSync(f.ctx); err != nil {
		t.Fatal(err)
	}
	for o := range int64(20) {
		want := 1
		if o >= 10 {
			want = 2
		}
		if times[o] != want {
			t.Fatalf("offset %d processed %d times, want %d (all: %v)", o, times[o], want, times)
		}
	}
	t.Logf("records 10-19 were processed twice: at-least-once")
}

// OFFSET_OUT_OF_RANGE is handled by auto.offset.reset: earliest, latest, or an error naming
// the partition.
func TestConsumerOffsetOutOfRange(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("oor", 1)
	f.produceValues("oor", 0, consumerValues(10, "v")...)
	tp := client.TopicPartition{Topic: "oor"}

	for _, mode := range consumerModes {
		t.Run(mode.name+"/earliest", func(t *testing.T) {
			c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: mode.reuse}, tp)
			if err := c.Seek(tp, 100); err != nil {
				t.Fatal(err)
			}
			if got := f.pollN(c, 10); !slices.Equal(consumerOffsets(got), consumerOffsetRange(0, 10)) {
				t.Fatalf("offsets %v, want 0..9", consumerOffsets(got))
			}
		})
		t.Run(mode.name+"/latest", func(t *testing.T) {
			c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetLatest, ReuseRecordBuffers: mode.reuse}, tp)
			if err := c.Seek(tp, 100); err != nil {
				t.Fatal(err)
			}
			// Fetched at 100, out of range, reset to the end (10) when a Poll meets the
			// response: on a loaded machine that can take more than one short Poll, which
			// returns nothing either way. Until then the position stays at 100.
			deadline := time.Now().Add(10 * time.Second)
			for {
				f.pollNone(c, 50*time.Millisecond)
				pos, err := c.Position(f.ctx, tp)
				if err == nil && pos == 10 {
					break
				}
				if err != nil || pos != 100 || time.Now().After(deadline) {
					t.Fatalf("Position = %d, %v; want 10 (100 until the reset)", pos, err)
				}
			}
		})
		t.Run(mode.name+"/none", func(t *testing.T) {
			c := f.consumer(client.ConsumerConfig{AutoOffsetReset: client.OffsetResetNone, GroupID: "g-none-" + mode.name, EnableAutoCommit: new(false), ReuseRecordBuffers: mode.reuse}, tp)
			_, err := c.Poll(f.ctx)
			if !errors.Is(err, client.ErrNoOffset) || !strings.Contains(err.Error(), "oor-0") {
				t.Fatalf("no committed offset with none: %v", err)
			}
			if err := c.Seek(tp, 100); err != nil {
				t.Fatal(err)
			}
			for range 2 { // sticky until the next seek
				if _, err := c.Poll(f.ctx); !errors.Is(err, wire.ErrOffsetOutOfRange) || !strings.Contains(err.Error(), "oor-0") ||
					!strings.Contains(err.Error(), "offset 100") || !strings.Contains(err.Error(), "[0, 10)") {
					t.Fatalf("out of range with none: %v", err)
				}
			}
			if err := c.Seek(tp, 8); err != nil {
				t.Fatal(err)
			}
			if got := f.pollN(c, 2); !slices.Equal(consumerOffsets(got), []int64{8, 9}) {
				t.Fatalf("after seeking back into range: %v", consumerOffsets(got))
			}
		})
		t.Run(mode.name+"/committed offset out of range", func(t *testing.T) {
			cfg := client.ConsumerConfig{GroupID: "g-stale-" + mode.name, AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: mode.reuse}
			c := f.consumer(cfg, tp)
			if err := c.CommitOffsets(f.ctx, map[client.TopicPartition]int64{tp: 500}); err != nil {
				t.Fatal(err)
			}
			d := f.consumer(cfg, tp)
			if got := f.pollN(d, 10); got[0].Offset != 0 {
				t.Fatalf("first offset %d, want 0", got[0].Offset)
			}
		})
	}
}

// Poll returns the context's error when nothing arrives, and wakes for records produced while
// it waits (long poll).
func TestConsumerPollWaitsForNewRecords(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("wait", 1)
	tp := client.TopicPartition{Topic: "wait"}
	c := f.consumer(client.ConsumerConfig{FetchMaxWait: 5 * time.Second}, tp)
	var wg sync.WaitGroup
	wg.Add(1)
	var got []client.Record
	go func() {
		defer wg.Done()
		got, _ = c.Poll(f.ctx)
	}()
	if pos, err := c.Position(f.ctx, tp); err != nil || pos != 0 {
		t.Fatalf("Position = %d, %v", pos, err)
	}
	f.produceValues("wait", 0, "late")
	wg.Wait()
	if len(got) != 1 || string(got[0].Value) != "late" {
		t.Fatalf("got %v", got)
	}
	empty := f.consumer(client.ConsumerConfig{})
	if _, err := empty.Poll(f.ctx); !errors.Is(err, client.ErrNoAssignment) {
		t.Fatalf("Poll with no assignment: %v", err)
	}
	if _, err := client.NewConsumer(f.ctx, client.ConsumerConfig{Config: client.Config{Brokers: []string{f.tcp()}}, EnableAutoCommit: new(true)}); !errors.Is(err, client.ErrConsumerConfig) {
		t.Fatalf("auto-commit without a group: %v", err)
	}
	if _, err := client.NewConsumer(f.ctx, client.ConsumerConfig{Config: client.Config{Brokers: []string{f.tcp()}}, AutoOffsetReset: "smallest"}); !errors.Is(err, client.ErrConsumerConfig) {
		t.Fatalf("bad auto.offset.reset: %v", err)
	}
}
