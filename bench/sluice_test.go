package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
)

// startSluiceDriver is a Sluice driver on an in-process broker, and a deadline for the test;
// both end with the test.
func startSluiceDriver(t *testing.T) (*SluiceDriver, context.Context) {
	t.Helper()
	br := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	d, err := NewSluiceDriver(ctx, "sluice-tcp", br.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, ctx
}

// TestSluiceDriverDeletesTopics: the Sluice driver deletes a topic (as the harness deletes its
// probes' topics) on the broker: a second delete finds nothing, and the name can be created
// afresh.
func TestSluiceDriverDeletesTopics(t *testing.T) {
	d, ctx := startSluiceDriver(t)
	if err := d.CreateTopic(ctx, "probe", 2); err != nil {
		t.Fatal(err)
	}
	var td TopicDeleter = d
	if err := td.DeleteTopic(ctx, "probe"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if err := td.DeleteTopic(ctx, "probe"); err == nil {
		t.Error("DeleteTopic a second time: no error, so the first did not delete the topic")
	}
	if err := d.CreateTopic(ctx, "probe", 1); err != nil {
		t.Errorf("CreateTopic after the delete: %v", err)
	}
}

// TestSluiceDriverFetchSize: the fetch size reaches the Sluice consumer. With fetches of at most
// one byte (the broker still sends the first batch whole, as Kafka's does) the records arrive
// batch by batch over many polls; with the default 1 MiB, in a few.
func TestSluiceDriverFetchSize(t *testing.T) {
	d, ctx := startSluiceDriver(t)
	if err := d.CreateTopic(ctx, "fetch", 1); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	p, err := d.NewProducer(ctx, ProducerOptions{Topic: "fetch", Acks: 1, Compression: "none", BatchSize: 1100, LingerMs: 5,
		Ack: func(time.Time, int, error) {}})
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 100)
	for range n {
		p.Send(ctx, nil, value, time.Now())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	polls := func(fetchBytes int) int {
		c, err := d.NewConsumer(ctx, ConsumerOptions{Topic: "fetch", FetchBytes: fetchBytes})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		polls := 0
		for got := 0; got < n; polls++ {
			msgs, err := c.Poll(ctx)
			if err != nil {
				t.Fatalf("fetch size %d: Poll after %d records: %v", fetchBytes, got, err)
			}
			got += len(msgs)
		}
		return polls
	}
	// About 110 batches of 9 records.
	if small := polls(1); small < 40 {
		t.Errorf("fetch size 1: %d polls for %d records, want one batch (or two) a poll", small, n)
	}
	if dflt := polls(0); dflt > 10 {
		t.Errorf("default fetch size: %d polls for %d records, want a few", dflt, n)
	}
}

// TestSluiceDriverCountsRequests: a produce run on the Sluice driver reports the client's
// requests and batches: at least as many batches as the records need at the batch size, and
// no more requests than batches.
func TestSluiceDriverCountsRequests(t *testing.T) {
	d, ctx := startSluiceDriver(t)
	const n, size, batchSize = 3000, 100, 1100
	r, err := Produce(ctx, d, Config{Topic: "count", CreateTopic: true, Records: n, RecordSize: size, BatchSize: batchSize, Acks: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d produce requests, %d batches", r.ProduceRequests, r.Batches)
	if r.Batches < n*size/batchSize || r.ProduceRequests < 1 || r.ProduceRequests > r.Batches {
		t.Fatalf("%d produce requests, %d batches for %d records of %d bytes in batches of %d", r.ProduceRequests, r.Batches, n, size, batchSize)
	}
}

// pollSizes is a driver whose consumers note how many records each of their Polls returned.
type pollSizes struct {
	Driver
	mu    sync.Mutex
	polls []int
}

func (d *pollSizes) NewConsumer(ctx context.Context, o ConsumerOptions) (Consumer, error) {
	c, err := d.Driver.NewConsumer(ctx, o)
	if err != nil {
		return nil, err
	}
	return &pollSizesConsumer{Consumer: c, d: d}, nil
}

// take returns the sizes noted so far and starts afresh.
func (d *pollSizes) take() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.polls
	d.polls = nil
	return p
}

type pollSizesConsumer struct {
	Consumer
	d *pollSizes
}

func (c *pollSizesConsumer) Poll(ctx context.Context) ([]Message, error) {
	msgs, err := c.Consumer.Poll(ctx)
	if len(msgs) > 0 {
		c.d.mu.Lock()
		c.d.polls = append(c.d.polls, len(msgs))
		c.d.mu.Unlock()
	}
	return msgs, err
}

// Rewind passes the harness's call on: the wrapper must not hide it.
func (c *pollSizesConsumer) Rewind(n int) { c.Consumer.(Rewinder).Rewind(n) }

// committedOffset is group's committed offset of tp on the broker at addr, or -1 if it has
// none.
func committedOffset(ctx context.Context, t *testing.T, addr, group string, tp client.TopicPartition) int64 {
	t.Helper()
	c := groupConsumer(ctx, t, addr, group, tp)
	defer c.Close(ctx)
	pos, err := c.Position(ctx, tp)
	if errors.Is(err, client.ErrNoOffset) {
		return -1
	}
	if err != nil {
		t.Fatalf("committed offset of %s for group %s: %v", tp, group, err)
	}
	return pos
}

// groupConsumer is a consumer of group, assigned tp, that starts from the group's committed
// offset (none is an error) and commits nothing itself.
func groupConsumer(ctx context.Context, t *testing.T, addr, group string, tp client.TopicPartition) *client.Consumer {
	t.Helper()
	c, err := client.NewConsumer(ctx, client.ConsumerConfig{Config: client.Config{Brokers: []string{addr}}, GroupID: group,
		EnableAutoCommit: new(false), AutoOffsetReset: client.OffsetResetNone})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign([]client.TopicPartition{tp}); err != nil {
		_ = c.Close(ctx)
		t.Fatal(err)
	}
	return c
}

// TestConsumeGroupCommitsOnlyTheRecordsCounted: a consume run of --records in a group counts
// 300 of 1000 records, the last of them in the middle of a Poll; the group's offset is then
// 300, not the end of that Poll, so that the group's next run starts at record 300 and the
// one after at 600.
func TestConsumeGroupCommitsOnlyTheRecordsCounted(t *testing.T) {
	sd, ctx := startSluiceDriver(t)
	d := &pollSizes{Driver: sd}
	if _, err := Produce(ctx, d, Config{Topic: "grp", CreateTopic: true, Records: 1000, RecordSize: 100}); err != nil {
		t.Fatal(err)
	}
	tp := client.TopicPartition{Topic: "grp", Partition: 0}
	for run, want := range []int64{300, 600} {
		r, err := Consume(ctx, d, Config{Topic: "grp", Records: 300, Group: "g", IdleTimeout: 10 * time.Second})
		if err != nil || r.Records != 300 {
			t.Fatalf("run %d: %d records, %v; want 300", run+1, r.Records, err)
		}
		polls := d.take()
		sum := 0
		for _, n := range polls {
			sum += n
		}
		if sum <= 300 {
			t.Fatalf("run %d: polls of %v records: none brought more than the run wanted, so the test proves nothing", run+1, polls)
		}
		if got := committedOffset(ctx, t, sd.brokers[0], "g", tp); got != want {
			t.Errorf("run %d (polls of %v records): group offset %d, want %d", run+1, polls, got, want)
		}
	}
	// A consumer of the group starts with record 600.
	c := groupConsumer(ctx, t, sd.brokers[0], "g", tp)
	defer c.Close(ctx)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	recs, err := c.Poll(pctx)
	if err != nil || len(recs) == 0 || recs[0].Offset != 600 {
		t.Fatalf("the group's next consumer: %d records, %v; want the first at offset 600", len(recs), err)
	}
}

// TestConsumeGroupCommitsNothingForPartitionsNotCounted: a run of 10 records of a topic whose
// partitions 0 and 1 hold 1000 records each and partition 2 none counts its records from one
// partition's first Poll; the group commits 10 for that partition and nothing at all for the
// others, not the rest of the Poll nor where they started.
func TestConsumeGroupCommitsNothingForPartitionsNotCounted(t *testing.T) {
	d, ctx := startSluiceDriver(t)
	if err := d.CreateTopic(ctx, "parts", 3); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(ctx, client.ProducerConfig{Config: client.Config{Brokers: d.brokers}})
	if err != nil {
		t.Fatal(err)
	}
	for part := range int32(2) {
		for i := range 1000 {
			p.Send(ctx, &client.Record{Topic: "parts", Partition: part, PartitionSet: true, Value: fmt.Appendf(nil, "p%d-%04d", part, i)}, nil)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := Consume(ctx, d, Config{Topic: "parts", Records: 10, Group: "g2", IdleTimeout: 10 * time.Second})
	if err != nil || r.Records != 10 {
		t.Fatalf("%d records, %v; want 10", r.Records, err)
	}
	var got [3]int64
	for part := range int32(3) {
		got[part] = committedOffset(ctx, t, d.brokers[0], "g2", client.TopicPartition{Topic: "parts", Partition: part})
	}
	// One Poll (max.poll.records 500) brings records of one partition only.
	if got != [3]int64{10, -1, -1} && got != [3]int64{-1, 10, -1} {
		t.Errorf("group offsets of partitions 0, 1, 2: %v (-1: none); want 10 for one of 0 and 1, none for the others", got)
	}
}
