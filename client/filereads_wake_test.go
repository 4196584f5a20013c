//go:build unix

package client

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/net/wire"
)

// A seek that lands while Poll (readFiles) reads a piece of the partition's span: the
// fetcher, woken by the seek, finds the partition in flight, passes over it and sleeps; the
// read then queues nothing (its partition was sought), and must wake the fetcher, or nothing
// would ever fetch the partition again and Poll would wait forever. (Found by seeking from
// another goroutine while polling a file-read backlog: Poll hung within seconds.)
func TestFileReadsSeekDuringPollsReadWakesTheFetcher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, tp := spanBacklogConsumer(ctx, t, "span-wake")
	waitSpanFull(ctx, t, c, tp)
	// Let Poll's readFiles read a piece while the fetcher sleeps (as when Poll drained the
	// queue before the fetcher's wake-up took effect), and hold it in the read.
	c.mu.Lock()
	c.mu.parts[tp].spanAhead = 100
	c.mu.Unlock()
	read, release := readFilesHeld(ctx, t, c)
	if err := c.Seek(tp, 7); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the fetcher wakes, passes over the partition, sleeps
	close(release)
	if !<-read {
		t.Fatal("readFiles read nothing")
	}

	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	recs, err := c.Poll(pctx)
	if err != nil || len(recs) != 1 || recs[0].Offset != 7 {
		t.Fatalf("poll after the seek: %d records, %v; want the record at offset 7", len(recs), err)
	}
}

// Poll's readFiles reads a piece while the fetcher, woken, looks for one: the fetcher finds
// the partition in flight, passes over it and sleeps. The piece Poll queues leaves room to
// read further ahead, so the read must wake the fetcher: else it sleeps until Poll has taken
// the queue down to half (seen with 5-7 of 8 pieces waiting: BENCHMARKS.md, Consume).
func TestFileReadsPollsReadWakesTheFetcherToReadAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, tp := spanBacklogConsumer(ctx, t, "span-ahead")
	f := waitSpanFull(ctx, t, c, tp)

	// Room for more pieces than the fetcher read (as when Poll took one), and Poll's
	// readFiles reads one while the fetcher, woken, looks.
	c.mu.Lock()
	ps := c.mu.parts[tp]
	ps.spanAhead = 100
	queued := ps.buffered
	c.mu.Unlock()
	read, release := readFilesHeld(ctx, t, c)
	select {
	case f.wake <- struct{}{}:
	default:
	}
	time.Sleep(100 * time.Millisecond) // the fetcher passes over the partition and sleeps
	c.mu.Lock()
	during := ps.buffered
	c.mu.Unlock()
	if during != queued {
		t.Fatalf("the fetcher read %d pieces while Poll's read held the partition", during-queued)
	}
	close(release)
	if !<-read {
		t.Fatal("readFiles read nothing")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		n := ps.buffered
		c.mu.Unlock()
		if n > queued+1 {
			return // the fetcher reads ahead again
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pieces wait (%d before Poll's read): the fetcher was not woken to read further", n, queued)
		}
		time.Sleep(time.Millisecond)
	}
}

// spanBacklogConsumer makes a topic with a 400 KiB backlog (40 batches of ten 1 KiB records)
// on a broker of its own, and a consumer over its unix socket, assigned to its partition with
// 16 KiB pieces, that has polled the first record: the backlog is read from the file.
func spanBacklogConsumer(ctx context.Context, t *testing.T, topic string) (*Consumer, TopicPartition) {
	t.Helper()
	b := brokertest.Start(t)
	conn, err := Dial(ctx, b.Addr().String(), topic)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var cr wire.CreateTopicsResponse
	if err := conn.Call(ctx, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 1, ReplicationFactor: -1}}}, &cr); err != nil || cr.Topics[0].ErrorCode != wire.NoError {
		t.Fatal(err, cr.Topics)
	}
	for i := range 40 {
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		for j := range 10 {
			v := make([]byte, 1024)
			v[0], v[1] = byte(i), byte(j)
			bl.Append(&batch.Record{Timestamp: 1, Value: v})
		}
		bt, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		// The last with acks=all: the consumer's first fetch must find the whole backlog under
		// the high watermark (the durable end, write.caching=false), or its answer is a small
		// inline one, and under load a second inline response can fill the partition's
		// responsesAhead with no span ever fetched (the test then waited 60 s in CI).
		acks := wire.AcksLeader
		if i == 39 {
			acks = wire.AcksAll
		}
		var pr wire.ProduceResponse
		if err := conn.Call(ctx, &wire.ProduceRequest{Acks: acks, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: bt}}}}}, &pr); err != nil || pr.Topics[0].Partitions[0].ErrorCode != wire.NoError {
			t.Fatal(err, pr.Topics)
		}
	}
	c, err := NewConsumer(ctx, ConsumerConfig{
		Config:          Config{Brokers: []string{"unix://" + b.UnixAddr().String()}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		AutoOffsetReset: OffsetResetEarliest, MaxPartitionFetchBytes: 16 << 10, FetchMaxBytes: 32 << 10, MaxPollRecords: 1,
		FetchMaxWait: 100 * time.Millisecond, hooks: new(fileReadHooks),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	tp := TopicPartition{Topic: topic}
	if err := c.Assign([]TopicPartition{tp}); err != nil {
		t.Fatal(err)
	}
	if recs, err := c.Poll(ctx); err != nil || len(recs) != 1 || recs[0].Offset != 0 {
		t.Fatalf("first poll: %d records, %v", len(recs), err)
	}
	return c, tp
}

// waitSpanFull waits for tp's fetcher to read tp's span as far ahead as it may and go to
// sleep (the state holds for 50 looks), and returns the fetcher.
func waitSpanFull(ctx context.Context, t *testing.T, c *Consumer, tp TopicPartition) *fetcher {
	t.Helper()
	var f *fetcher
	for stable := 0; stable < 50; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		ps := c.mu.parts[tp]
		f = c.mu.fetchers[ps.leader]
		full := ps.spanAhead > 0 && ps.buffered >= ps.spanAhead && !ps.inflight && f != nil && f.spans[tp] != nil
		c.mu.Unlock()
		if full {
			stable++
		} else {
			stable = 0
		}
		if ctx.Err() != nil {
			t.Fatal("the partition is never read ahead from its file")
		}
	}
	return f
}

// readFilesHeld runs Poll's readFiles on c in a goroutine and returns once the span read it
// makes is held in readSpan's hook (later reads are not held): read gets what readFiles
// returns after release is closed.
func readFilesHeld(ctx context.Context, t *testing.T, c *Consumer) (read <-chan bool, release chan struct{}) {
	t.Helper()
	entered, release := holdSpanReads(t, c)
	done := make(chan bool, 1)
	go func() {
		c.pollMu.Lock()
		defer c.pollMu.Unlock()
		done <- c.readFiles()
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		close(release)
		t.Fatal("readFiles did not read")
	}
	c.cfg.hooks.spanRead.Store(nil)
	return done, release
}

// holdSpanReads makes the next span read wait in readSpan's hook: entered is closed when it
// starts, and it goes on once release is closed. The hook is removed at the test's end.
func holdSpanReads(t *testing.T, c *Consumer) (entered, release chan struct{}) {
	t.Helper()
	if c.cfg.hooks == nil {
		t.Fatal("the consumer was made without ConsumerConfig.hooks")
	}
	entered, release = make(chan struct{}), make(chan struct{})
	hook := func() {
		close(entered)
		<-release
	}
	c.cfg.hooks.spanRead.Store(&hook)
	t.Cleanup(func() { c.cfg.hooks.spanRead.Store(nil) })
	return entered, release
}
