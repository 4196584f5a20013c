package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// Helpers are prefixed prod so that they cannot clash with the consumer's tests.

func prodLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func prodBrokerConfig(dir, listen string) broker.Config { return brokertest.Config(dir, listen) }

func prodOpenBroker(t testing.TB, cfg broker.Config) *broker.Broker { return brokertest.Open(t, cfg) }

func prodCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func prodCreateTopic(t testing.TB, addr, name string, partitions int32) {
	t.Helper()
	ctx := prodCtx(t, 10*time.Second)
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: partitions}); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

func prodNew(t testing.TB, cfg client.ProducerConfig) *client.Producer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = prodLogger()
	}
	p, err := client.NewProducer(prodCtx(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// prodBatch is a stored batch and its records, copied out of the fetch response.
type prodBatch struct {
	size    int
	codec   batch.Codec
	records []batch.Record
}

// prodFetch reads a partition from offset 0 until it holds at least want records and has
// caught up with the high watermark.
func prodFetch(t testing.TB, addr, topic string, partition int32, want int) []prodBatch {
	t.Helper()
	ctx := prodCtx(t, 10*time.Second)
	conn, err := client.Dial(ctx, addr, "prod-test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out []prodBatch
	next, total := int64(0), 0
	for caughtUp := false; total < want || !caughtUp; {
		if ctx.Err() != nil {
			t.Fatalf("%s-%d: %d records after 10 s, want %d", topic, partition, total, want)
		}
		var resp wire.FetchResponse
		req := &wire.FetchRequest{ReplicaID: wire.ConsumerReplicaID, MaxWaitMs: 100, MinBytes: 1, MaxBytes: 8 << 20,
			Topics: []wire.FetchRequestTopic{{Topic: topic, Partitions: []wire.FetchRequestPartition{
				{Partition: partition, FetchOffset: next, PartitionMaxBytes: 8 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}}
		if err := conn.Call(ctx, req, &resp); err != nil {
			t.Fatal(err)
		}
		fp := resp.Topics[0].Partitions[0]
		if fp.ErrorCode != wire.NoError {
			t.Fatalf("fetch %s-%d: %v", topic, partition, fp.ErrorCode)
		}
		hw := fp.HighWatermark
		for rest := fp.Records; len(rest) > 0; {
			bt, r, err := batch.Next(rest)
			if err != nil {
				break // a partial batch at the end
			}
			rest = r
			if err := bt.Validate(); err != nil {
				t.Fatalf("stored batch: %v", err)
			}
			fb := prodBatch{size: len(bt), codec: bt.Compression()}
			it := bt.Iter(batch.IterOptions{})
			var rec batch.Record
			for it.Next(&rec) {
				if int64(rec.Offset) < next {
					continue
				}
				c := batch.Record{Offset: rec.Offset, Timestamp: rec.Timestamp, Key: prodClone(rec.Key), Value: prodClone(rec.Value)}
				for _, h := range rec.Headers {
					c.Headers = append(c.Headers, batch.Header{Key: prodClone(h.Key), Value: prodClone(h.Value)})
				}
				fb.records = append(fb.records, c)
			}
			if err := it.Err(); err != nil {
				t.Fatalf("iterate: %v", err)
			}
			next = int64(bt.NextOffset())
			total += len(fb.records)
			out = append(out, fb)
		}
		caughtUp = next >= hw
	}
	return out
}

// prodClone copies b keeping nil (null) apart from empty.
func prodClone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func prodRecords(bs []prodBatch) []batch.Record {
	var out []batch.Record
	for _, b := range bs {
		out = append(out, b.records...)
	}
	return out
}

func prodSameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// prodOutcomes collects callback results by record index.
type prodOutcomes struct {
	mu   sync.Mutex
	md   map[int]client.RecordMetadata
	errs map[int]error
	wg   sync.WaitGroup
}

func newProdOutcomes() *prodOutcomes {
	return &prodOutcomes{md: map[int]client.RecordMetadata{}, errs: map[int]error{}}
}

func (o *prodOutcomes) cb(i int) func(client.RecordMetadata, error) {
	o.wg.Add(1)
	return func(md client.RecordMetadata, err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if _, dup := o.md[i]; dup {
			panic(fmt.Sprintf("callback of record %d called twice", i))
		}
		o.md[i], o.errs[i] = md, err
		o.wg.Done()
	}
}

// wait waits for every callback, failing the test after d.
func (o *prodOutcomes) wait(t testing.TB, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("callbacks still missing after %v", d)
	}
}

func TestProducerRoundTrip(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	transports := []struct{ name, addr string }{
		{"tcp", b.Addr().String()},
		{"unix", "unix://" + b.UnixAddr().String()},
	}
	codecs := []batch.Codec{batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd}
	for _, tr := range transports {
		for _, codec := range codecs {
			for _, acks := range []client.Acks{client.AcksNone, client.AcksLeader, client.AcksAll} {
				t.Run(fmt.Sprintf("%s/%s/acks=%s", tr.name, codec, acks), func(t *testing.T) {
					prodRoundTrip(t, tr.addr, fmt.Sprintf("rt-%s-%s-%v", tr.name, codec, acks), codec, acks)
				})
			}
		}
	}
}

func prodRoundTrip(t *testing.T, addr, topic string, codec batch.Codec, acks client.Acks) {
	prodCreateTopic(t, addr, topic, 2)
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}},
		Acks:   acks, Compression: codec, Linger: 2 * time.Millisecond, BatchSize: 2048,
	})
	const n = 80
	base := time.Unix(1_700_000_000, 123_456_789) // sub-millisecond: the callback returns it exactly, the log in ms
	sent := make([]client.Record, n)
	before := time.Now().UnixMilli()
	out := newProdOutcomes()
	ctx := prodCtx(t, 10*time.Second)
	for i := range n {
		r := client.Record{Topic: topic, Partition: int32(i % 2), PartitionSet: true, Value: []byte(fmt.Sprintf("value-%d-%s", i, bytes.Repeat([]byte("x"), i*3)))}
		if i%5 != 0 {
			r.Key = []byte(fmt.Sprintf("key-%d", i))
		}
		switch i % 11 {
		case 3:
			r.Value = nil // null
		case 4:
			r.Value = []byte{} // empty
		}
		if i%3 == 0 {
			r.Headers = []client.Header{{Key: "h", Value: []byte(fmt.Sprint(i))}, {Key: "null", Value: nil}}
		}
		if i%4 != 0 {
			r.Timestamp = base.Add(time.Duration(i) * time.Millisecond)
		}
		sent[i] = r
		rec := r
		p.Send(ctx, &rec, out.cb(i))
		rec.Value = []byte("overwritten") // Send copied the record
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out.wait(t, 10*time.Second)
	after := time.Now().UnixMilli()
	for i := range n {
		if err := out.errs[i]; err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		md := out.md[i]
		if md.Topic != topic || md.Partition != int32(i%2) {
			t.Fatalf("record %d: metadata %+v", i, md)
		}
		if acks == client.AcksNone && md.Offset != -1 {
			t.Fatalf("acks=0: record %d has offset %d, want -1", i, md.Offset)
		}
	}
	for part := range int32(2) {
		got := prodRecords(prodFetch(t, addr, topic, part, n/2))
		if len(got) != n/2 {
			t.Fatalf("partition %d: %d records, want %d", part, len(got), n/2)
		}
		for j, rec := range got {
			i := int(part) + 2*j // in Send order
			want := sent[i]
			if int64(rec.Offset) != int64(j) {
				t.Fatalf("partition %d: record %d at offset %d", part, j, rec.Offset)
			}
			if acks != client.AcksNone && out.md[i].Offset != int64(rec.Offset) {
				t.Fatalf("record %d: callback offset %d, stored at %d", i, out.md[i].Offset, rec.Offset)
			}
			if !prodSameBytes(rec.Key, want.Key) || !prodSameBytes(rec.Value, want.Value) {
				t.Fatalf("record %d: key %q value %q, want %q %q", i, rec.Key, rec.Value, want.Key, want.Value)
			}
			if len(rec.Headers) != len(want.Headers) {
				t.Fatalf("record %d: %d headers, want %d", i, len(rec.Headers), len(want.Headers))
			}
			for h := range want.Headers {
				if string(rec.Headers[h].Key) != want.Headers[h].Key || !prodSameBytes(rec.Headers[h].Value, want.Headers[h].Value) {
					t.Fatalf("record %d header %d: %q=%q", i, h, rec.Headers[h].Key, rec.Headers[h].Value)
				}
			}
			if want.Timestamp.IsZero() {
				if rec.Timestamp < before || rec.Timestamp > after {
					t.Fatalf("record %d: timestamp %d not in [%d, %d]", i, rec.Timestamp, before, after)
				}
			} else if rec.Timestamp != want.Timestamp.UnixMilli() {
				t.Fatalf("record %d: timestamp %d, want %d", i, rec.Timestamp, want.Timestamp.UnixMilli())
			}
			if got := out.md[i].Timestamp.UnixMilli(); got != rec.Timestamp {
				t.Fatalf("record %d: callback timestamp %d, stored %d", i, got, rec.Timestamp)
			}
			if !want.Timestamp.IsZero() && !out.md[i].Timestamp.Equal(want.Timestamp) {
				t.Fatalf("record %d: callback timestamp %v, want the record's own %v", i, out.md[i].Timestamp, want.Timestamp)
			}
			wantKey, wantValue := len(want.Key), len(want.Value)
			if want.Key == nil {
				wantKey = -1
			}
			if want.Value == nil {
				wantValue = -1
			}
			if out.md[i].KeySize != wantKey || out.md[i].ValueSize != wantValue {
				t.Fatalf("record %d: callback sizes key %d value %d, want %d %d", i, out.md[i].KeySize, out.md[i].ValueSize, wantKey, wantValue)
			}
		}
	}
	for _, fb := range prodFetch(t, addr, topic, 0, 1) {
		if fb.codec != codec {
			t.Fatalf("stored batch codec %v, want %v", fb.codec, codec)
		}
	}
}

// Kafka's murmur2 vectors (UtilsTest.testMurmur2, and the Java implementation's outputs for
// "1".."12345", which cover every tail length), with the partitions Kafka's default
// partitioner derives from them: toPositive(hash) % n.
var murmur2Vectors = []struct {
	key   string
	hash  int32
	parts [3]int32 // for 3, 7 and 12 partitions
}{
	{"21", -973932308, [3]int32{0, 3, 0}},
	{"foobar", -790332482, [3]int32{0, 0, 6}},
	{"a-little-bit-long-string", -985981536, [3]int32{2, 1, 8}},
	{"a-little-bit-longer-string", -1486304829, [3]int32{2, 0, 11}},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, [3]int32{2, 3, 5}},
	{"abc", 479470107, [3]int32{0, 4, 3}},
	{"1", -1993445489, [3]int32{0, 2, 3}},
	{"12", 126087238, [3]int32{1, 4, 10}},
	{"123", -267702483, [3]int32{2, 3, 5}},
	{"1234", -1614185708, [3]int32{0, 0, 0}},
	{"12345", -1188365604, [3]int32{2, 3, 8}},
}

func TestMurmur2KafkaVectors(t *testing.T) {
	for _, v := range murmur2Vectors {
		if got := client.Murmur2([]byte(v.key)); got != v.hash {
			t.Errorf("Murmur2(%q) = %d, want %d", v.key, got, v.hash)
		}
		for i, n := range []int32{3, 7, 12} {
			if got := client.KeyPartition([]byte(v.key), n); got != v.parts[i] {
				t.Errorf("KeyPartition(%q, %d) = %d, want %d", v.key, n, got, v.parts[i])
			}
		}
	}
	// An empty key is a key (murmur2 of nothing), not a null key.
	if got := (client.DefaultPartitioner{}).Partition("t", []byte{}, 7); got == client.PartitionAny {
		t.Error("empty key treated as null")
	}
	if got := (client.DefaultPartitioner{}).Partition("t", nil, 7); got != client.PartitionAny {
		t.Errorf("null key: %d, want PartitionAny", got)
	}
}

func TestProducerKeyedRecordsLandWhereKafkaPutsThem(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "keyed", 7)
	p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: []string{addr}}})
	ctx := prodCtx(t, 10*time.Second)
	perPart := map[int32][]string{}
	for _, v := range murmur2Vectors {
		md, err := p.SendSync(ctx, &client.Record{Topic: "keyed", Partition: client.PartitionAny, Key: []byte(v.key), Value: []byte(v.key)})
		if err != nil {
			t.Fatal(err)
		}
		if md.Partition != v.parts[1] {
			t.Errorf("key %q went to partition %d, Kafka's default partitioner picks %d", v.key, md.Partition, v.parts[1])
		}
		perPart[md.Partition] = append(perPart[md.Partition], v.key)
	}
	for part, keys := range perPart {
		got := prodRecords(prodFetch(t, addr, "keyed", part, len(keys)))
		for i, rec := range got {
			if string(rec.Key) != keys[i] {
				t.Errorf("partition %d offset %d: key %q, want %q", part, i, rec.Key, keys[i])
			}
		}
	}
}

// KIP-480: keyless records stick to one partition until a new batch must be opened there, then
// move to another partition. With a long linger, batches close only when full, so every run of
// consecutive records on one partition is exactly one stored batch.
func TestProducerStickyPartitioning(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "sticky", 4)
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, Linger: time.Hour, BatchSize: 1024,
	})
	ctx := prodCtx(t, 10*time.Second)
	const n = 300
	out := newProdOutcomes()
	for i := range n {
		p.Send(ctx, &client.Record{Topic: "sticky", Partition: client.PartitionAny, Value: []byte(fmt.Sprintf("%03d-%s", i, bytes.Repeat([]byte("v"), 60)))}, out.cb(i))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out.wait(t, 10*time.Second)
	runs, used := 0, map[int32]int{}
	for i := range n {
		if err := out.errs[i]; err != nil {
			t.Fatal(err)
		}
		part := out.md[i].Partition
		if i == 0 || part != out.md[i-1].Partition {
			runs++
		}
		used[part]++
	}
	stored := 0
	for part, cnt := range used {
		bs := prodFetch(t, addr, "sticky", part, cnt)
		stored += len(bs)
		for j, fb := range bs[:len(bs)-1] {
			if fb.size > 1024 || fb.size < 1024-100 {
				t.Errorf("partition %d batch %d: %d bytes, want a full batch (<= 1024)", part, j, fb.size)
			}
		}
	}
	if len(used) < 2 {
		t.Fatalf("keyless records all went to one partition: %v", used)
	}
	if runs != stored {
		t.Fatalf("%d runs of consecutive records on one partition, %d stored batches: the sticky partition changed within a batch", runs, stored)
	}
}

func TestProducerBatchesFillUnderLoad(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := "unix://" + b.UnixAddr().String()
	prodCreateTopic(t, addr, "fill", 1)
	const batchSize = 16384
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, Acks: client.AcksLeader,
		// A linger that never expires mid-batch however slow the machine: batches close when
		// full, and Flush sends the last one.
		Linger: time.Hour, BatchSize: batchSize,
	})
	ctx := prodCtx(t, 15*time.Second)
	const n = 3000
	value := bytes.Repeat([]byte("r"), 100)
	var failed atomic.Int32
	cb := func(_ client.RecordMetadata, err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	for range n {
		p.Send(ctx, &client.Record{Topic: "fill", Value: value}, cb)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d records failed", failed.Load())
	}
	bs := prodFetch(t, addr, "fill", 0, n)
	if len(bs) < 2 {
		t.Fatalf("%d batches", len(bs))
	}
	for i, fb := range bs[:len(bs)-1] {
		// Full: the next ~110-byte record would not have fit.
		if fb.size > batchSize || fb.size < batchSize-120 {
			t.Errorf("batch %d of %d: %d bytes, %d records; want within one record of batch.size %d", i, len(bs), fb.size, len(fb.records), batchSize)
		}
	}
}

func TestProducerLoneRecordGoesAfterLinger(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "lone", 1)
	const linger = 100 * time.Millisecond
	p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: []string{addr}}, Linger: linger})
	ctx := prodCtx(t, 10*time.Second)
	if _, err := p.SendSync(ctx, &client.Record{Topic: "lone", Value: []byte("warm")}); err != nil {
		t.Fatal(err) // connection and metadata are ready before the measured record
	}
	done := make(chan error, 1)
	start := time.Now()
	p.Send(ctx, &client.Record{Topic: "lone", Value: []byte("lone")}, func(_ client.RecordMetadata, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a lone record was not sent without Flush")
	}
	if el := time.Since(start); el < linger {
		t.Fatalf("acknowledged after %v, before linger.ms %v", el, linger)
	}
	if got := prodRecords(prodFetch(t, addr, "lone", 0, 2)); string(got[1].Value) != "lone" {
		t.Fatalf("stored %q", got[1].Value)
	}
}

func TestProducerBufferFullBlocksThenFails(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "full", 1)
	const maxBlock = 300 * time.Millisecond
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, Acks: client.AcksLeader,
		BufferMemory: 4096, BatchSize: 1024, MaxBlock: maxBlock, Linger: time.Millisecond,
		RetryBackoff: 20 * time.Millisecond, DeliveryTimeout: time.Minute,
	})
	ctx := prodCtx(t, 10*time.Second)
	if _, err := p.SendSync(ctx, &client.Record{Topic: "full", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing can be delivered now, so the batches hold the buffer: the fifth needs memory.
	value := bytes.Repeat([]byte("m"), 200)
	var called atomic.Int32
	for i := range 100 {
		var sendErr atomic.Pointer[error] // callbacks of earlier records may run later, elsewhere
		start := time.Now()
		p.Send(ctx, &client.Record{Topic: "full", Value: value}, func(_ client.RecordMetadata, err error) {
			called.Add(1)
			sendErr.Store(&err) // Send reports its own errors before returning
		})
		if sendErr.Load() == nil {
			continue
		}
		err := *sendErr.Load()
		if el := time.Since(start); el < maxBlock {
			t.Fatalf("record %d failed after %v, before max.block.ms %v: %v", i, el, maxBlock, err)
		}
		if !errors.Is(err, client.ErrBufferFull) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("record %d: %v, want ErrBufferFull wrapping a timeout", i, err)
		}
		if i < 4*1024/250 {
			t.Fatalf("buffer full after only %d records", i)
		}
		// Close gives up on the undeliverable records within its context: each gets an error.
		closeCtx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := p.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with undeliverable records: %v, want its context's deadline", err)
		}
		if int(called.Load()) != i+1 {
			t.Fatalf("%d callbacks after Close, want %d", called.Load(), i+1)
		}
		return
	}
	t.Fatal("Send never blocked on a full buffer")
}

func TestProducerUnknownTopicAndBadRecords(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "two", 2)
	// The count below is of every producer's loops in the process: those of the producers
	// that earlier tests closed may still be on their way out (see prodWaitNoGoroutines).
	prodWaitNoGoroutines(t, "left by earlier tests")
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, MaxBlock: 200 * time.Millisecond, MaxRequestSize: 4096,
	})
	ctx := prodCtx(t, 10*time.Second)
	start := time.Now()
	if _, err := p.SendSync(ctx, &client.Record{Topic: "missing", Partition: client.PartitionAny}); !errors.Is(err, client.ErrUnknownTopic) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unknown topic: %v", err)
	} else if time.Since(start) < 200*time.Millisecond {
		t.Fatalf("gave up on metadata before max.block.ms: %v", time.Since(start))
	}
	if _, err := p.SendSync(ctx, &client.Record{Topic: "two", Partition: 2, PartitionSet: true}); !errors.Is(err, client.ErrInvalidPartition) {
		t.Fatalf("partition 2 of 2: %v", err)
	}
	if _, err := p.SendSync(ctx, &client.Record{Topic: "two", Partition: client.PartitionAny, Value: make([]byte, 5000)}); !errors.Is(err, client.ErrRecordTooLarge) {
		t.Fatalf("record over max.request.size: %v", err)
	}
	if _, err := p.SendSync(ctx, &client.Record{Topic: "two", Partition: 1, PartitionSet: true, Timestamp: time.UnixMilli(-5000)}); !errors.Is(err, client.ErrInvalidTimestamp) {
		t.Fatalf("a timestamp before 1970: %v", err)
	}
	// A linger as long as the delivery timeout would fail every record unsent.
	if _, err := client.NewProducer(ctx, client.ProducerConfig{Config: client.Config{Brokers: []string{addr}},
		Linger: 2 * time.Second, DeliveryTimeout: time.Second}); !errors.Is(err, client.ErrProducerConfig) {
		t.Fatalf("linger 2 s, delivery timeout 1 s: %v", err)
	}
	if _, err := p.SendSync(ctx, &client.Record{Topic: "two", Partition: 1, PartitionSet: true}); err != nil {
		t.Fatal(err) // starts the broker's sender and receiver
	}
	if n := prodGoroutines(); n != 3 {
		t.Fatalf("%d producer goroutines, want 3 (housekeeper, sender, receiver)", n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	prodWaitNoGoroutines(t, "after Close")
	if _, err := p.SendSync(ctx, &client.Record{Topic: "two"}); !errors.Is(err, client.ErrProducerClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// prodWaitNoGoroutines waits until no goroutine runs a producer's loops, failing the test
// after 5 s. Close waits for the loops' WaitGroup, and each loop's deferred Done runs just
// before the goroutine ends: for a moment it can still be in the stack dump (CI saw one).
func prodWaitNoGoroutines(t *testing.T, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		n := prodGoroutines()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d producer goroutines still running 5 s on (%s)", n, what)
		}
	}
}

// prodGoroutines counts the goroutines running the producer's loops.
func prodGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "client.(*brokerSender).run(") || strings.Contains(g, "client.(*brokerSender).receive(") ||
			strings.Contains(g, "client.(*Producer).housekeep(") {
			n++
		}
	}
	return n
}

// prodWhileDown shows that the broker is unreachable: a record cannot be acknowledged within
// 300 ms (during which the producer retries every retry.backoff.ms). The record stays queued
// and is delivered after the restart.
func prodWhileDown(t *testing.T, p *client.Producer, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if md, err := p.SendSync(ctx, &client.Record{Topic: topic, Partition: 0, PartitionSet: true, Value: []byte("probe")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("record acknowledged while the broker is down: %+v, %v", md, err)
	}
}

func TestProducerSurvivesBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := prodBrokerConfig(dir, prodFreeAddr(t))
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "restart", 3)
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, Linger: 2 * time.Millisecond, BatchSize: 1024,
		RetryBackoff: 20 * time.Millisecond, DeliveryTimeout: 20 * time.Second,
	})
	ctx := prodCtx(t, 20*time.Second)
	out := newProdOutcomes()
	const perPhase = 600
	send := func(from int) {
		for i := from; i < from+perPhase; i++ {
			p.Send(ctx, &client.Record{Topic: "restart", Partition: int32(i % 3), PartitionSet: true, Value: []byte(fmt.Sprintf("r%05d", i))}, out.cb(i))
		}
	}
	send(0) // some in flight when the broker goes down
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	send(perPhase) // buffered and retried while it is down
	prodWhileDown(t, p, "restart")
	b2, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close(context.Background()) })
	send(2 * perPhase)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out.wait(t, 10*time.Second)
	// Every acknowledged record is stored at the offset it was acknowledged with. Without
	// idempotence a retried batch may also be stored twice, so count is not checked.
	const n = 3 * perPhase
	byPart := map[int32][]batch.Record{}
	for part := range int32(3) {
		byPart[part] = prodRecords(prodFetch(t, addr, "restart", part, n/3))
	}
	acked := 0
	for i := range n {
		if err := out.errs[i]; err != nil {
			t.Errorf("record %d: %v", i, err)
			continue
		}
		acked++
		md := out.md[i]
		recs := byPart[md.Partition]
		if md.Partition != int32(i%3) || md.Offset < 0 || md.Offset >= int64(len(recs)) {
			t.Fatalf("record %d acknowledged at %d/%d, partition holds %d records", i, md.Partition, md.Offset, len(recs))
		}
		if got, want := string(recs[md.Offset].Value), fmt.Sprintf("r%05d", i); got != want {
			t.Fatalf("record %d acknowledged at %d/%d, which holds %q", i, md.Partition, md.Offset, got)
		}
	}
	if acked != n {
		t.Fatalf("%d of %d records acknowledged", acked, n)
	}
}

func TestProducerDeliveryTimeoutWithBrokerDown(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "down", 2)
	const deliveryTimeout = time.Second
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, Linger: time.Millisecond,
		RetryBackoff: 50 * time.Millisecond, DeliveryTimeout: deliveryTimeout,
	})
	ctx := prodCtx(t, 10*time.Second)
	if _, err := p.SendSync(ctx, &client.Record{Topic: "down", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := newProdOutcomes()
	const n = 50
	for i := range n {
		p.Send(ctx, &client.Record{Topic: "down", Partition: client.PartitionAny, Key: []byte{byte(i)}, Value: []byte("lost")}, out.cb(i))
	}
	out.wait(t, 10*time.Second)
	if el := time.Since(start); el < deliveryTimeout-100*time.Millisecond {
		t.Fatalf("records failed after %v, before delivery.timeout.ms %v", el, deliveryTimeout)
	}
	for i := range n {
		if err := out.errs[i]; !errors.Is(err, client.ErrDeliveryTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("record %d: %v, want a delivery timeout", i, err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush with nothing left: %v", err)
	}
	closeStart := time.Now()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// With nothing left to deliver, Close must not wait on the dead broker: a Close that
	// waited for a request or a reconnection would take request.timeout.ms (30 s). The bound
	// is far from both that and a loaded machine's slowest Close.
	if el := time.Since(closeStart); el > 10*time.Second {
		t.Fatalf("Close took %v", el)
	}
}

// MaxInFlight = 1 keeps each partition in order even when batches are retried.
func TestProducerMaxInFlightOneKeepsOrderAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := prodBrokerConfig(dir, prodFreeAddr(t))
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := "unix://" + b.UnixAddr().String()
	prodCreateTopic(t, addr, "ordered", 1)
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, MaxInFlight: 1, Linger: time.Millisecond,
		BatchSize: 512, RetryBackoff: 20 * time.Millisecond, DeliveryTimeout: 20 * time.Second,
	})
	ctx := prodCtx(t, 20*time.Second)
	out := newProdOutcomes()
	const n = 1200
	for i := range n {
		if i == n/3 {
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if i == n/2 {
			prodWhileDown(t, p, "ordered")
			b2, err := broker.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b2.Close(context.Background()) })
		}
		p.Send(ctx, &client.Record{Topic: "ordered", Partition: 0, PartitionSet: true, Value: []byte(fmt.Sprint(i))}, out.cb(i))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out.wait(t, 10*time.Second)
	for i := range n {
		if out.errs[i] != nil {
			t.Fatalf("record %d: %v", i, out.errs[i])
		}
	}
	// Without idempotence a batch whose answer was lost is stored again, but with one request
	// in flight no later record can overtake an earlier one: first appearances are in order.
	got := prodRecords(prodFetch(t, addr, "ordered", 0, n))
	next := 0
	for j, rec := range got {
		if string(rec.Value) == "probe" {
			continue
		}
		var v int
		if _, err := fmt.Sscan(string(rec.Value), &v); err != nil {
			t.Fatal(err)
		}
		switch {
		case v == next:
			next++
		case v > next:
			t.Fatalf("offset %d holds record %d before record %d was stored", j, v, next)
		}
	}
	if next != n {
		t.Fatalf("stored records 0..%d, want 0..%d", next-1, n-1)
	}
}

// A record sent without a callback leaves nothing to complete; the callbacks of the records
// around it still get their own offsets, whichever record of its batch comes first with one.
func TestProducerOffsetsWithSomeCallbacks(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "somecb", 1)
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, Acks: client.AcksLeader,
		Linger: time.Hour, BatchSize: 1024, // about 8 records a batch
	})
	ctx := prodCtx(t, 10*time.Second)
	const n = 100
	var mu sync.Mutex
	got := map[int]client.RecordMetadata{}
	for i := range n {
		var cb func(client.RecordMetadata, error)
		if i%5 == 3 || i%7 == 0 {
			cb = func(md client.RecordMetadata, err error) {
				if err != nil {
					t.Errorf("record %d: %v", i, err)
				}
				mu.Lock()
				got[i] = md
				mu.Unlock()
			}
		}
		p.Send(ctx, &client.Record{Topic: "somecb", Partition: 0, PartitionSet: true, Value: make([]byte, 90+i%10)}, cb)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		md, ok := got[i]
		if want := i%5 == 3 || i%7 == 0; ok != want {
			t.Fatalf("record %d: callback ran %v, want %v", i, ok, want)
		}
		if ok && (md.Offset != int64(i) || md.ValueSize != 90+i%10 || md.KeySize != -1) {
			t.Errorf("record %d: offset %d, value size %d, key size %d; want %d, %d, -1", i, md.Offset, md.ValueSize, md.KeySize, i, 90+i%10)
		}
	}
}

// Appending to an open batch allocates nothing: the Builder encodes in place and the callback
// goes into the batch's reused slice.
func TestProducerSendDoesNotAllocate(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "noalloc", 2)
	p := prodNew(t, client.ProducerConfig{
		Config: client.Config{Brokers: []string{addr}}, Linger: time.Hour, BatchSize: 512 << 10,
	})
	ctx := prodCtx(t, 10*time.Second)
	var acked atomic.Int64
	cb := func(client.RecordMetadata, error) { acked.Add(1) }
	rec := &client.Record{Topic: "noalloc", Partition: client.PartitionAny, Key: []byte("key"), Value: make([]byte, 100),
		Headers: []client.Header{{Key: "trace", Value: []byte("abc")}}}
	p.Send(ctx, rec, cb) // opens the batch
	if allocs := testing.AllocsPerRun(1000, func() { p.Send(ctx, rec, cb) }); allocs != 0 {
		t.Fatalf("Send allocates %.2f times per record", allocs)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if acked.Load() != 1002 {
		t.Fatalf("%d callbacks, want 1002", acked.Load())
	}
}

// prodBacklog makes a producer pile up batches: it creates topic (with configs), stops the
// broker, lets send queue records while it is down (the producer retries every
// retry.backoff.ms), restarts the broker and flushes. It returns the producer's counters from
// just before the restart and after the flush, and the broker's address.
func prodBacklog(t *testing.T, topic string, partitions int32, configs map[string]string, pcfg client.ProducerConfig, send func(p *client.Producer)) (before, after client.ProducerStats, addr string) {
	t.Helper()
	cfg := prodBrokerConfig(t.TempDir(), prodFreeAddr(t))
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr = b.Addr().String()
	ctx := prodCtx(t, 20*time.Second)
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: partitions, Configs: configs}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	pcfg.Brokers = []string{addr}
	pcfg.RetryBackoff, pcfg.DeliveryTimeout = 20*time.Millisecond, 20*time.Second
	p := prodNew(t, pcfg)
	for part := range partitions { // connection and metadata ready
		if _, err := p.SendSync(ctx, &client.Record{Topic: topic, Partition: part, PartitionSet: true, Value: []byte("warm")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	send(p)
	prodWhileDown(t, p, topic)
	before = p.Stats()
	b2, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close(context.Background()) })
	_ = p.Flush(ctx) // the callbacks tell each record's outcome
	return before, p.Stats(), addr
}

// prodCheckStored fails unless every record i of n was acknowledged at the offset of
// partition i%partitions that holds value(i).
func prodCheckStored(t *testing.T, out *prodOutcomes, addr, topic string, partitions int32, n int, value func(int) string) {
	t.Helper()
	out.wait(t, 10*time.Second)
	stored := map[int32][]batch.Record{}
	for part := range partitions {
		// Every record acknowledged to the partition: an acks=1 acknowledgement comes before
		// the fsync that lets consumers see the record, so the fetch waits for them.
		want := 0
		for i := range n {
			if out.errs[i] == nil && out.md[i].Partition == part {
				want++
			}
		}
		stored[part] = prodRecords(prodFetch(t, addr, topic, part, max(want, 1)))
	}
	for i := range n {
		if err := out.errs[i]; err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		md := out.md[i]
		recs := stored[md.Partition]
		if md.Partition != int32(i)%partitions || md.Offset < 0 || md.Offset >= int64(len(recs)) {
			t.Fatalf("record %d acknowledged at %d/%d; partition holds %d records", i, md.Partition, md.Offset, len(recs))
		}
		if got := string(recs[md.Offset].Value); got != value(i) {
			t.Fatalf("record %d acknowledged at %d/%d, which holds %q", i, md.Partition, md.Offset, got)
		}
	}
}

// Batches that piled up go in few requests, several of one partition in one request, and each
// record is acknowledged with the offset the broker stored it at.
func TestProducerBacklogGoesInFewRequests(t *testing.T) {
	for _, tc := range []struct {
		name           string
		maxRequestSize int
		maxInFlight    int
		compression    batch.Codec
		logAppendTime  bool
		// the least batches per request, on average over the requests after the restart
		minPerRequest float64
	}{
		{name: "1MiB", maxRequestSize: 1 << 20, minPerRequest: 5},
		// Batches of about 1 KiB: about 4 fit (one per partition would be 2); a batch closed
		// early by the linger is smaller, so more of those may share a request, and what
		// bounds a request is its size (checked below for every case).
		{name: "4KiB", maxRequestSize: 4096, minPerRequest: 3},
		{name: "maxInFlight1", maxRequestSize: 1 << 20, maxInFlight: 1, minPerRequest: 5},
		{name: "lz4", maxRequestSize: 1 << 20, compression: batch.LZ4, minPerRequest: 5},
		{name: "logAppendTime", maxRequestSize: 1 << 20, logAppendTime: true, minPerRequest: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic, n = "backlog", 500 // ~100-byte records: about 30 batches per partition
			value := func(i int) string { return fmt.Sprintf("%-100d", i) }
			var configs map[string]string
			if tc.logAppendTime {
				configs = map[string]string{"message.timestamp.type": "LogAppendTime"}
			}
			out := newProdOutcomes()
			sentAt := time.Now()
			before, after, addr := prodBacklog(t, topic, 2, configs, client.ProducerConfig{
				Acks: client.AcksLeader, Linger: time.Millisecond, BatchSize: 1024, Compression: tc.compression,
				MaxRequestSize: tc.maxRequestSize, MaxInFlight: tc.maxInFlight,
			}, func(p *client.Producer) {
				for i := range n {
					p.Send(context.Background(), &client.Record{Topic: topic, Partition: int32(i % 2), PartitionSet: true, Value: []byte(value(i))}, out.cb(i))
				}
			})
			prodCheckStored(t, out, addr, topic, 2, n, value)
			reqs, batches := after.Requests-before.Requests, after.Batches-before.Batches
			t.Logf("%d batches in %d requests after the restart", batches, reqs)
			if batches < 2*20 {
				t.Fatalf("%d batches sent after the restart, want the backlog's ~60", batches)
			}
			if per := float64(batches) / float64(reqs); per < tc.minPerRequest {
				t.Fatalf("%d batches in %d requests (%.1f per request), want at least %.0f", batches, reqs, per, tc.minPerRequest)
			}
			if bytes := after.Bytes - before.Bytes; bytes > reqs*int64(tc.maxRequestSize) {
				t.Fatalf("%d bytes of batches in %d requests of at most %d bytes", bytes, reqs, tc.maxRequestSize)
			}
			if tc.compression == batch.None && after.Bytes-before.Bytes < int64(n*100) {
				t.Fatalf("%d bytes sent after the restart for %d records of 100 bytes", after.Bytes-before.Bytes, n)
			}
			if tc.logAppendTime {
				// Every batch of a request gets the broker's time, stamped after the restart.
				for i := range n {
					if ts := out.md[i].Timestamp; ts.Before(sentAt.Truncate(time.Millisecond)) || ts.After(time.Now()) {
						t.Fatalf("record %d: timestamp %v, want the broker's append time", i, ts)
					}
				}
			}
		})
	}
}

// A partition's batches in one request are appended all or none, so a batch the broker
// refuses fails the ones sent with it. Each then goes again on its own: the small records
// around a batch over max.message.bytes are stored, and only the large one fails.
func TestProducerBacklogBatchTooLargeFailsAlone(t *testing.T) {
	const topic, small = "toolarge", 20
	big := strings.Repeat("x", 3000)
	value := func(i int) string { return fmt.Sprintf("%-100d", i) }
	out := newProdOutcomes()
	_, _, addr := prodBacklog(t, topic, 1, map[string]string{"max.message.bytes": "2048"}, client.ProducerConfig{
		Acks: client.AcksLeader, Linger: time.Millisecond, BatchSize: 1024,
	}, func(p *client.Producer) {
		for i := range 2*small + 1 {
			v := value(i)
			if i == small {
				v = big // a batch of its own, over max.message.bytes
			}
			p.Send(context.Background(), &client.Record{Topic: topic, Value: []byte(v)}, out.cb(i))
		}
	})
	out.wait(t, 10*time.Second)
	if err := out.errs[small]; !errors.Is(err, wire.ErrMessageTooLarge) {
		t.Fatalf("the large record: %v, want MESSAGE_TOO_LARGE", err)
	}
	recs := prodRecords(prodFetch(t, addr, topic, 0, 2*small)) // every small record: acks=1 precedes the commit
	for i := range 2*small + 1 {
		if i == small {
			continue
		}
		md := out.md[i]
		if err := out.errs[i]; err != nil {
			t.Fatalf("small record %d failed with the large one: %v", i, err)
		}
		if md.Offset < 0 || md.Offset >= int64(len(recs)) || string(recs[md.Offset].Value) != value(i) {
			t.Fatalf("record %d acknowledged at offset %d of %d stored", i, md.Offset, len(recs))
		}
	}
}

// segment.bytes bounds one append: batches that each fit a small segment but not together are
// sent again one by one, and all are stored.
func TestProducerBacklogLargerThanSegment(t *testing.T) {
	const topic, n = "smallseg", 100 // ~100-byte records: about 12 batches of ~1 KiB
	value := func(i int) string { return fmt.Sprintf("%-100d", i) }
	out := newProdOutcomes()
	_, _, addr := prodBacklog(t, topic, 1, map[string]string{"segment.bytes": "4096"}, client.ProducerConfig{
		Acks: client.AcksLeader, Linger: time.Millisecond, BatchSize: 1024,
	}, func(p *client.Producer) {
		for i := range n {
			p.Send(context.Background(), &client.Record{Topic: topic, Value: []byte(value(i))}, out.cb(i))
		}
	})
	prodCheckStored(t, out, addr, topic, 1, n, value)
}

// A batch of many small records that is over the topic's max.message.bytes on its own
// (batch.size above it) is split in two and sent again, as Kafka's producer does, until each
// part fits: every record is stored once and acknowledged at its offset, in order with one
// request in flight. Its records used to fail with MESSAGE_TOO_LARGE. A single record over the
// limit still fails (TestProducerBacklogBatchTooLargeFailsAlone).
func TestProducerSplitsBatchOverMaxMessageBytes(t *testing.T) {
	for _, tc := range []struct {
		codec batch.Codec
		unix  bool // the batches then go in the producer's shared-memory region
	}{{batch.None, false}, {batch.LZ4, false}, {batch.None, true}, {batch.Zstd, true}} {
		codec := tc.codec
		name := codec.String() + map[bool]string{false: "/tcp", true: "/unix"}[tc.unix]
		t.Run(name, func(t *testing.T) {
			const n = 300
			topic := "split-" + strings.ReplaceAll(name, "/", "-")
			// About 100 bytes that compress to no less than half.
			value := func(i int) string {
				return fmt.Sprintf("%d:%016x%016x%016x%016x%016x", i, uint64(i)*0x9e3779b97f4a7c15, uint64(i)*0xbf58476d1ce4e5b9,
					uint64(i)*0x94d049bb133111eb, uint64(i+1)*0x9e3779b97f4a7c15, uint64(i+1)*0xbf58476d1ce4e5b9)
			}
			b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
			addr := b.Addr().String()
			ctx := prodCtx(t, 20*time.Second)
			a, err := client.NewAdmin(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			// 700 bytes fit a handful of these records, compressed or not, so a 16 KiB batch
			// splits several times.
			if err := a.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1, Configs: map[string]string{"max.message.bytes": "700"}}); err != nil {
				t.Fatal(err)
			}
			a.Close()
			brokerAddr := addr
			if tc.unix {
				brokerAddr = "unix://" + b.UnixAddr().String()
			}
			p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: []string{brokerAddr}},
				Acks: client.AcksLeader, Linger: 50 * time.Millisecond, BatchSize: 16 << 10, Compression: codec, MaxInFlight: 1})
			out := newProdOutcomes()
			for i := range n {
				// A key and headers of its own, which the split must carry over: the decoder
				// reuses one header array from record to record.
				p.Send(ctx, &client.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(value(i)),
					Headers: []client.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}, {Key: "odd", Value: []byte(strconv.FormatBool(i%2 == 1))}}}, out.cb(i))
			}
			// Flush waits for every half: once it returns, every callback has run.
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			out.mu.Lock()
			done := len(out.md)
			out.mu.Unlock()
			if done != n {
				t.Fatalf("Flush returned with %d of %d records completed", done, n)
			}
			prodCheckStored(t, out, addr, topic, 1, n, value)
			stored := prodRecords(prodFetch(t, addr, topic, 0, n))
			for i := range n {
				r := stored[out.md[i].Offset]
				if string(r.Key) != strconv.Itoa(i) || len(r.Headers) != 2 || string(r.Headers[0].Value) != strconv.Itoa(i) ||
					string(r.Headers[1].Value) != strconv.FormatBool(i%2 == 1) {
					t.Fatalf("record %d stored with key %q and headers %q", i, r.Key, r.Headers)
				}
			}
			for i := 1; i < n; i++ {
				if out.md[i].Offset != out.md[i-1].Offset+1 {
					t.Fatalf("record %d at offset %d after record %d at %d: out of order", i, out.md[i].Offset, i-1, out.md[i-1].Offset)
				}
			}
			if st := p.Stats(); st.Splits == 0 || (tc.unix && st.SharedRequests == 0) {
				t.Fatalf("no batch was split, or none went through shared memory: %+v", st)
			}
		})
	}
}

// SendSync returns the error Send reported, not ctx's bare one: a Send that ended because ctx
// did has run the callback before SendSync waits, and a select between the two picked either
// (9 of 20 calls lost the cause; all 10 here keep it with a chance of 1 in 1,024).
func TestSendSyncKeepsSendsError(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: []string{b.Addr().String()}}})
	// Long enough for a metadata answer (which says the topic is unknown) on a loaded machine.
	// On a very loaded one the metadata request itself may time out: Send's error then says
	// so instead, and is still not ctx's bare error, which is what the bug returned.
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := p.SendSync(ctx, &client.Record{Topic: "missing", Value: []byte("x")})
		cancel()
		sendsOwn := errors.Is(err, client.ErrUnknownTopic) || strings.Contains(fmt.Sprint(err), "waiting for metadata")
		if !sendsOwn || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d: %v, want Send's error (the unknown topic) and the deadline", i, err)
		}
	}
}

// After a topic is deleted and created again with fewer partitions, the producer partitions
// over the new count once its metadata says so: keys go where other clients put them, and an
// explicit partition past the end is refused at once. It kept the old count, so keys hashed to
// partitions that no longer exist and their records waited out delivery.timeout.ms.
func TestProducerFollowsARecreatedTopicWithFewerPartitions(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "rc", 4)
	// delivery.timeout.ms short enough that records waiting for a partition that no longer
	// exists fail well within the test's context, and long enough for every SendSync below to
	// be delivered on a loaded machine.
	p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: []string{addr}, MetadataMaxAge: 50 * time.Millisecond},
		Acks: client.AcksLeader, DeliveryTimeout: 2 * time.Second})
	ctx := prodCtx(t, 20*time.Second)
	if md, err := p.SendSync(ctx, &client.Record{Topic: "rc", Partition: 3, PartitionSet: true, Value: []byte("x")}); err != nil || md.Partition != 3 {
		t.Fatalf("partition 3 of 4: %+v, %v", md, err)
	}
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.DeleteTopic(ctx, "rc"); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: "rc", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := p.SendSync(ctx, &client.Record{Topic: "rc", Partition: 3, PartitionSet: true, Value: []byte("x")})
		if errors.Is(err, client.ErrInvalidPartition) {
			break // the producer knows the topic has 2 partitions now
		}
		if ctx.Err() != nil {
			t.Fatalf("partition 3 of a topic recreated with 2: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 50 {
		key := []byte(strconv.Itoa(i))
		md, err := p.SendSync(ctx, &client.Record{Topic: "rc", Partition: client.PartitionAny, Key: key, Value: []byte("v")})
		if err != nil || md.Partition != client.KeyPartition(key, 2) {
			t.Fatalf("key %s: partition %d, %v; want %d", key, md.Partition, err, client.KeyPartition(key, 2))
		}
		if _, err := p.SendSync(ctx, &client.Record{Topic: "rc", Partition: client.PartitionAny, Value: []byte("keyless")}); err != nil {
			t.Fatalf("keyless record after the topic shrank: %v", err)
		}
	}
}

// A second Close returns what the first returned: it used to return nil after a first Close
// that could not deliver everything.
func TestProducerSecondCloseReturnsTheFirstsResult(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "cl", 1)
	p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: []string{addr}}, Acks: client.AcksLeader})
	ctx := prodCtx(t, 20*time.Second)
	if _, err := p.SendSync(ctx, &client.Record{Topic: "cl", Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p.Send(ctx, &client.Record{Topic: "cl", Value: []byte("undeliverable")}, nil)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	first := p.Close(short)
	if first == nil {
		t.Fatal("Close with a record the broker cannot take returned nil")
	}
	if second := p.Close(ctx); second != first {
		t.Fatalf("second Close: %v, want the first's %v", second, first)
	}
}
