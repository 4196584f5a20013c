package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
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
