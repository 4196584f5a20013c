//go:build unix

package client

// Tests of four promises of file reads (filereads.go) that need the fetcher's insides: a
// seek during a span's read leaves the fetcher's request for other partitions alone; spans
// that keep failing pause file reads for spanPause, then they resume; a permission error
// turns them off for good, and every record still comes, fetched; while Poll is behind, the
// fetcher checks the pieces it reads. Faults come through the
// test hooks on the open and the read (fileReadHooks, a ConsumerConfig option); nothing here
// waits a fixed time for something to happen.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/net/wire"
)

// spanFixture is an in-process broker with one topic, and a connection to fill it.
type spanFixture struct {
	t     *testing.T
	b     *broker.Broker
	ctx   context.Context
	conn  *Conn
	topic string
}

func newSpanFixture(t *testing.T, topic string, partitions int32) *spanFixture {
	t.Helper()
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	conn, err := Dial(ctx, b.Addr().String(), "span-promises")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	var cr wire.CreateTopicsResponse
	if err := conn.Call(ctx, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: -1}}}, &cr); err != nil || cr.Topics[0].ErrorCode != wire.NoError {
		t.Fatal(err, cr.Topics)
	}
	return &spanFixture{t: t, b: b, ctx: ctx, conn: conn, topic: topic}
}

// spanValue is the value of the record at offset o of partition p: 1 KiB naming both.
func spanValue(p int32, o int64) []byte {
	v := make([]byte, 1024)
	binary.BigEndian.PutUint32(v, uint32(p))
	binary.BigEndian.PutUint64(v[4:], uint64(o))
	return v
}

// fill appends batches of 10 records (10 KiB) to partition p, which holds from records, and
// returns how many it holds then.
func (f *spanFixture) fill(p int32, from, batches int) int {
	f.t.Helper()
	for i := range batches {
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		for j := range 10 {
			bl.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Value: spanValue(p, int64(from+i*10+j))})
		}
		bt, err := bl.Build()
		if err != nil {
			f.t.Fatal(err)
		}
		// The last with acks=all, so that what fill returns is under the high watermark (the
		// durable end): a consumer that fetches next finds it all, to read from the file.
		acks := wire.AcksLeader
		if i == batches-1 {
			acks = wire.AcksAll
		}
		var pr wire.ProduceResponse
		if err := f.conn.Call(f.ctx, &wire.ProduceRequest{Acks: acks, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: f.topic, Partitions: []wire.ProduceRequestPartition{{Partition: p, Records: bt}}}}}, &pr); err != nil {
			f.t.Fatal(err)
		} else if code := pr.Topics[0].Partitions[0].ErrorCode; code != wire.NoError {
			f.t.Fatal(code)
		}
	}
	return from + batches*10
}

// consumer is a consumer over the broker's unix socket (file reads on), assigned tps, closed
// when the test ends.
func (f *spanFixture) consumer(cfg ConsumerConfig, tps ...TopicPartition) *Consumer {
	f.t.Helper()
	cfg.Config = Config{Brokers: []string{"unix://" + f.b.UnixAddr().String()}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.AutoOffsetReset = OffsetResetEarliest
	if cfg.hooks == nil {
		cfg.hooks = new(fileReadHooks) // for holdSpanReads
	}
	c, err := NewConsumer(f.ctx, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close(context.Background()) })
	if err := c.Assign(tps); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// poll returns the next records, failing the test on an error.
func (f *spanFixture) poll(c *Consumer) []Record {
	f.t.Helper()
	recs, err := c.Poll(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}

// check fails the test unless r is the record at offset want of partition p.
func (f *spanFixture) check(r Record, p int32, want int64) {
	f.t.Helper()
	if r.Partition != p || r.Offset != want || len(r.Value) != 1024 ||
		binary.BigEndian.Uint32(r.Value) != uint32(p) || binary.BigEndian.Uint64(r.Value[4:]) != uint64(want) {
		f.t.Fatalf("record %s-%d at offset %d, want partition %d offset %d", r.Topic, r.Partition, r.Offset, p, want)
	}
}

// waitUntil polls cond (under the consumer's lock) until it holds, failing the test after a
// minute.
func waitUntil(t *testing.T, c *Consumer, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			var state []string
			for tp, ps := range c.mu.parts {
				state = append(state, fmt.Sprintf("%s: %+v", tp, *ps))
			}
			for id, fe := range c.mu.fetchers {
				state = append(state, fmt.Sprintf("fetcher %d: spans %d, in flight %v, shared %v, off %v, paused until %d, failures %d",
					id, len(fe.spans), fe.cancel != nil, fe.shared, fe.fileReadsOff.Load(), fe.pausedUntil.Load(), fe.spanFailures.Load()))
			}
			c.mu.Unlock()
			t.Fatalf("after a minute, still not %s: stats %+v\n%s", what, c.Stats(), strings.Join(state, "\n"))
		}
	}
}

// spanOpenHooks are file-read hooks (ConsumerConfig.hooks) with hook on every span's open.
func spanOpenHooks(hook func(*wire.FileSpan) error) *fileReadHooks {
	h := new(fileReadHooks)
	h.spanOpen.Store(&hook)
	return h
}

// openLog counts the span opens the hook saw, and when each came.
type openLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (l *openLog) add() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.times = append(l.times, time.Now())
	return len(l.times)
}

func (l *openLog) get() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.times...)
}

// A seek of a partition whose piece is being read from its file (the in-flight mark is the
// read's: spanRead) does not cancel the fetcher's request, which carries other partitions: a
// cancelled request closes the fetcher's connection, and every partition in it is asked for
// again, for a seek that concerned none of them.
func TestFileReadsSeekDuringSpanReadKeepsTheFetch(t *testing.T) {
	f := newSpanFixture(t, "span-seek-fetch", 2)
	n := f.fill(0, 0, 60) // 600 KiB: partition 0 is read from its file
	a, b := TopicPartition{Topic: f.topic, Partition: 0}, TopicPartition{Topic: f.topic, Partition: 1}
	c := f.consumer(ConsumerConfig{
		MaxPartitionFetchBytes: 16 << 10, FetchMaxBytes: 32 << 10, MaxPollRecords: 1,
		// Partition 1, empty, long-polls in the fetcher's request for the whole test.
		FetchMaxWait: time.Minute,
	}, a, b)
	recs := f.poll(c)
	f.check(recs[0], 0, 0)

	// The fetcher reads partition 0 from its file, and waits in a request that carries
	// partition 1 alone (so it reads no piece itself meanwhile).
	var fe *fetcher
	waitUntil(t, c, "reading partition 0 from its file, and long-polling partition 1", func() bool {
		pa, pb := c.mu.parts[a], c.mu.parts[b]
		fe = c.mu.fetchers[pa.leader]
		return fe != nil && fe.spans[a] != nil && !pa.inflight && pb.inflight && !pb.spanRead && fe.cancel != nil && fe.reqCtx != nil
	})
	c.mu.Lock()
	c.mu.parts[a].spanAhead = 100 // a piece may be read now whatever is queued: by Poll's readFiles, held below
	request := fe.reqCtx
	c.mu.Unlock()

	read, release := readFilesHeld(f.ctx, t, c)
	c.mu.Lock()
	if pa := c.mu.parts[a]; !pa.inflight || !pa.spanRead {
		c.mu.Unlock()
		t.Fatal("partition 0 is not marked as being read from its file")
	}
	c.mu.Unlock()

	if err := c.Seek(a, 7); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	cause, still := context.Cause(request), c.mu.parts[b].inflight
	c.mu.Unlock()
	if cause != nil || !still {
		t.Errorf("the seek of partition 0 ended the request for partition 1 (cause %v, partition 1 in flight %v)", cause, still)
	}
	close(release)
	if !<-read {
		t.Fatal("readFiles read nothing")
	}

	// Both partitions go on: partition 0 from the new position, and partition 1's new record
	// comes back from the request that waited for it.
	f.fill(1, 0, 1)
	next, got1 := int64(7), 0
	for got1 < 10 {
		for _, r := range f.poll(c) {
			if r.Partition == 0 {
				f.check(r, 0, next)
				next++
			} else {
				f.check(r, 1, int64(got1))
				got1++
			}
		}
		if next > int64(n) {
			t.Fatalf("partition 0 read to its end (%d), and partition 1 has %d records of 10", n, got1)
		}
	}
}

// After maxSpanFailures spans in a row fail to open (here: their files gone, as when
// retention races the consumer), the fetcher fetches through the socket for spanPause: the
// consumer keeps fetching and reads no file. Then it asks for spans again and reads files.
func TestFileReadsPauseAfterFailedSpansThenResume(t *testing.T) {
	const spanPause = time.Hour // the test ends it (below): no race with the fetches checked in it
	var opens openLog
	hooks := spanOpenHooks(func(sp *wire.FileSpan) error {
		if opens.add() <= maxSpanFailures {
			return &fs.PathError{Op: "open", Path: sp.Path, Err: syscall.ENOENT}
		}
		return nil
	})

	hooks.pause = spanPause
	f := newSpanFixture(t, "span-pause", 1)
	n := f.fill(0, 0, 100) // 1 MiB
	tp := TopicPartition{Topic: f.topic}
	c := f.consumer(ConsumerConfig{MaxPartitionFetchBytes: 16 << 10, MaxPollRecords: 10, hooks: hooks}, tp)

	// Poll looks the position up; then the three spans fail, the pause begins, and fetched
	// records come.
	pausedUntil := func() int64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if fe := c.mu.fetchers[c.mu.parts[tp].leader]; fe != nil {
			return fe.pausedUntil.Load()
		}
		return 0
	}
	next := int64(0)
	for pausedUntil() == 0 {
		if next >= int64(n) {
			t.Fatalf("every record read, and file reads never paused: %+v, %d span opens", c.Stats(), len(opens.get()))
		}
		for _, r := range f.poll(c) {
			f.check(r, 0, next)
			next++
		}
	}
	seen := time.Now()
	until := time.Unix(0, pausedUntil())
	tried := opens.get()
	if len(tried) != maxSpanFailures {
		t.Fatalf("file reads paused after %d span opens, want %d", len(tried), maxSpanFailures)
	}
	if until.Before(tried[len(tried)-1].Add(spanPause)) || until.After(seen.Add(spanPause)) {
		t.Fatalf("file reads paused until %v after the last failed open, want spanPause %v", until.Sub(tried[len(tried)-1]), spanPause)
	}

	// During the pause: fetches, and no file read.
	before := c.Stats()
	for c.Stats().Fetches < before.Fetches+3 {
		for _, r := range f.poll(c) {
			f.check(r, 0, next)
			next++
		}
	}
	during := c.Stats()
	if during.FileReads != 0 || len(opens.get()) != maxSpanFailures {
		t.Fatalf("during the pause: %+v, %d span opens; want fetches only", during, len(opens.get()))
	}

	// After it (ended here, as if the hour had passed): spans again, read from the file.
	ended := time.Now()
	c.mu.Lock()
	c.mu.fetchers[c.mu.parts[tp].leader].pausedUntil.Store(ended.UnixNano())
	c.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for c.Stats().FileReads == 0 {
		if time.Now().After(deadline) || next >= int64(n) {
			t.Fatalf("file reads never resumed after the pause: %+v, %d span opens, %d records of %d read", c.Stats(), len(opens.get()), next, n)
		}
		for _, r := range f.poll(c) {
			f.check(r, 0, next)
			next++
		}
	}
	if tried := opens.get(); len(tried) <= maxSpanFailures || tried[maxSpanFailures].Before(ended) {
		t.Fatalf("span opens at %v, pause ended at %v: want one after the pause", tried, ended)
	}
	for next < int64(n) {
		for _, r := range f.poll(c) {
			f.check(r, 0, next)
			next++
		}
	}
}

// A span whose file the consumer may not open (EACCES: it lacks permission to read the
// broker's data directory) turns file reads off for good for that broker, at once: the
// consumer fetches every record through the socket and asks for no span again. (Counted as
// one more failure, it would ask twice more, pause for spanPause, and then ask again.)
func TestFileReadsPermissionDeniedFallsBackToFetch(t *testing.T) {
	if !errors.Is(&fs.PathError{Op: "open", Err: syscall.EACCES}, fs.ErrPermission) {
		t.Fatal("EACCES is not fs.ErrPermission here: the test would inject the wrong error")
	}
	var opens openLog
	hooks := spanOpenHooks(func(sp *wire.FileSpan) error {
		opens.add()
		return &fs.PathError{Op: "open", Path: sp.Path, Err: syscall.EACCES}
	})
	f := newSpanFixture(t, "span-eacces", 1)
	n := f.fill(0, 0, 60)
	tp := TopicPartition{Topic: f.topic}
	c := f.consumer(ConsumerConfig{MaxPartitionFetchBytes: 16 << 10, MaxPollRecords: 10, hooks: hooks}, tp)
	next := int64(0)
	for next < int64(n) {
		for _, r := range f.poll(c) {
			f.check(r, 0, next)
			next++
		}
	}
	// And records that come later are fetched too.
	n = f.fill(0, n, 10)
	for next < int64(n) {
		for _, r := range f.poll(c) {
			f.check(r, 0, next)
			next++
		}
	}
	st := c.Stats()
	c.mu.Lock()
	fe := c.mu.fetchers[c.mu.parts[tp].leader]
	off := fe != nil && fe.fileReadsOff.Load()
	c.mu.Unlock()
	if opens := len(opens.get()); opens != 1 || !off || st.FileReads != 0 || st.Fetches == 0 {
		t.Fatalf("%d span opens, file reads off %v, stats %+v; want one refused open, then fetches only", opens, off, st)
	}
}

// While Poll is well behind (half of maxSpanAhead pieces waiting), the fetcher checks the
// batches of the pieces it reads and marks them (chunk.validated), whole; every record still
// comes, in order. (That Poll checks what is not marked: TestDecodeChecksWhatTheReaderDidNot.)
func TestFileReadsCheckOnTheReaderWhenPollIsBehind(t *testing.T) {
	f := newSpanFixture(t, "behind", 1)
	n := f.fill(0, 0, 200) // 2,000 records, about 2 MB: 16 pieces of 128 KiB
	tp := TopicPartition{Topic: "behind", Partition: 0}
	c := f.consumer(ConsumerConfig{MaxPartitionFetchBytes: 64 << 10}, tp)
	// One Poll positions the partition; with no other, the fetcher reads ahead. Once more than
	// half of maxSpanAhead pieces wait, one of them was read with half waiting: the fetcher's.
	next := int64(0)
	for _, r := range f.poll(c) {
		f.check(r, 0, next)
		next++
	}
	waitUntil(t, c, "more than half of maxSpanAhead pieces read ahead", func() bool {
		return c.mu.parts[tp] != nil && c.mu.parts[tp].buffered > maxSpanAhead/2
	})
	c.mu.Lock()
	var checked []bool
	for _, ch := range c.mu.queue {
		if ch.tp == tp && len(ch.records) > 0 {
			if ch.validated != 0 && ch.validated != len(ch.records) {
				c.mu.Unlock()
				t.Fatalf("a sound piece of %d bytes marked checked up to %d", len(ch.records), ch.validated)
			}
			checked = append(checked, ch.validated > 0)
		}
	}
	c.mu.Unlock()
	if !slices.Contains(checked, true) {
		t.Fatalf("pieces checked on the reader, in queue order: %v; want some", checked)
	}
	for next < int64(n) {
		for _, r := range f.poll(c) {
			f.check(r, 0, next)
			next++
		}
	}
}

// Pieces of spanPieceFactor × max.partition.fetch.bytes are read only where fetch.max.bytes,
// shared among the fetcher's spans, holds responsesAhead of them for each: what a partition
// holds ahead stays within its share of fetch.max.bytes, or, where the share is smaller, within
// what it would hold fetched (responsesAhead responses of max.partition.fetch.bytes), as it did
// with pieces of max.partition.fetch.bytes. Larger pieces with the same floor of responsesAhead
// pieces doubled that floor: with fetch.max.bytes at max.partition.fetch.bytes, or with a
// fetcher reading 13 spans or more under the defaults.
func TestSpanPiecesWithinFetchMaxBytes(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name             string
		partBytes, total int // max.partition.fetch.bytes, fetch.max.bytes
		spans            int
		piece, ahead     int64 // want
	}{
		{"defaults, one span", mib, 50 * mib, 1, 2 * mib, 4},
		{"defaults, six spans", mib, 50 * mib, 6, 2 * mib, 4},
		{"defaults, ten spans", mib, 50 * mib, 10, 2 * mib, 2},
		{"defaults, thirteen spans", mib, 50 * mib, 13, mib, 3},
		{"defaults, fifty spans", mib, 50 * mib, 50, mib, 2},
		{"fetch.max.bytes = max.partition.fetch.bytes", mib, mib, 1, mib, 2},
		{"fetch.max.bytes = 3 × max.partition.fetch.bytes", mib, 3 * mib, 1, mib, 3},
		{"fetch.max.bytes = 4 × max.partition.fetch.bytes", mib, 4 * mib, 1, 2 * mib, 2},
		{"fetch.max.bytes below max.partition.fetch.bytes", mib, 64 << 10, 1, mib, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Consumer{cfg: ConsumerConfig{MaxPartitionFetchBytes: tc.partBytes, FetchMaxBytes: tc.total}}
			f := &fetcher{c: c, spans: map[TopicPartition]*fileSpan{}}
			for p := range tc.spans {
				f.spans[TopicPartition{Topic: "t", Partition: int32(p)}] = &fileSpan{}
			}
			piece, ahead := f.spanPieceLocked(), int64(f.spanAheadLocked())
			if piece != tc.piece || ahead != tc.ahead {
				t.Errorf("pieces of %d bytes, %d ahead; want %d bytes, %d ahead", piece, ahead, tc.piece, tc.ahead)
			}
			share := int64(tc.total / tc.spans)
			if held, limit := piece*ahead, max(share, responsesAhead*int64(tc.partBytes)); held > limit {
				t.Errorf("a partition holds %d bytes ahead, more than its share of fetch.max.bytes (%d) or what it would hold fetched (%d)",
					held, share, responsesAhead*tc.partBytes)
			}
		})
	}
}
