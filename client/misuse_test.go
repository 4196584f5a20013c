package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// Misuse an application can make by mistake gets an error it can test for, not a panic or a
// silent success.

// A nil record is that record's error (ErrNilRecord), from Send's callback and SendSync, and
// the producer goes on.
func TestProducerNilRecordIsAnError(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "nil", 1)
	p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: []string{addr}}})
	ctx := prodCtx(t, 20*time.Second)

	var got error
	calls := 0
	p.Send(ctx, nil, func(md client.RecordMetadata, err error) {
		calls++
		got = err
		if md.Offset != -1 {
			t.Errorf("nil record's metadata: offset %d, want -1", md.Offset)
		}
	})
	if calls != 1 || !errors.Is(got, client.ErrNilRecord) {
		t.Fatalf("Send(nil): %d callbacks before it returned, error %v; want one, ErrNilRecord", calls, got)
	}
	p.Send(ctx, nil, nil) // no callback to tell: nothing happens
	if _, err := p.SendSync(ctx, nil); !errors.Is(err, client.ErrNilRecord) {
		t.Fatalf("SendSync(nil): %v, want ErrNilRecord", err)
	}
	if _, err := p.SendSync(ctx, &client.Record{Topic: "nil", Value: []byte("v")}); err != nil {
		t.Fatalf("a record after the nil ones: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// After Close every call that talks to the cluster says the consumer is closed: CommitSync
// with nothing to commit used to return nil, as if it had committed, and PartitionsFor said no
// bootstrap broker was reachable.
func TestConsumerCallsAfterCloseSayClosed(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("closed", 1)
	tp := client.TopicPartition{Topic: "closed"}
	c := f.consumer(client.ConsumerConfig{GroupID: "g-closed", EnableAutoCommit: new(false)}, tp)
	if err := c.CommitSync(f.ctx); err != nil { // nothing to commit yet: fine while open
		t.Fatal(err)
	}
	if err := c.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitSync(f.ctx); !errors.Is(err, client.ErrConsumerClosed) {
		t.Errorf("CommitSync after Close: %v, want ErrConsumerClosed", err)
	}
	if err := c.CommitOffsets(f.ctx, nil); !errors.Is(err, client.ErrConsumerClosed) {
		t.Errorf("CommitOffsets(nil) after Close: %v, want ErrConsumerClosed", err)
	}
	if err := c.CommitOffsets(f.ctx, map[client.TopicPartition]int64{tp: 1}); !errors.Is(err, client.ErrConsumerClosed) {
		t.Errorf("CommitOffsets after Close: %v, want ErrConsumerClosed", err)
	}
	if _, err := c.PartitionsFor(f.ctx, "closed"); !errors.Is(err, client.ErrConsumerClosed) {
		t.Errorf("PartitionsFor after Close: %v, want ErrConsumerClosed", err)
	}
	if _, err := c.Poll(f.ctx); !errors.Is(err, client.ErrConsumerClosed) {
		t.Errorf("Poll after Close: %v, want ErrConsumerClosed", err)
	}
}

// A negative partition can never exist (PartitionAny is the producer's): Assign refuses it, as
// it refuses an invalid topic name, instead of looking it up on every Poll forever.
func TestConsumerAssignRefusesNegativePartition(t *testing.T) {
	f := newConsumerFixture(t)
	f.createTopic("neg", 1)
	c := f.consumer(client.ConsumerConfig{})
	err := c.Assign([]client.TopicPartition{{Topic: "neg"}, {Topic: "neg", Partition: client.PartitionAny}})
	if !errors.Is(err, client.ErrInvalidPartition) {
		t.Fatalf("Assign(neg-0, neg--1): %v, want ErrInvalidPartition", err)
	}
	if a := c.Assignment(); len(a) != 0 {
		t.Fatalf("a refused Assign assigned %v", a)
	}
}

// Calls made with context.Background() end after DefaultAPITimeout (Kafka's
// default.api.timeout.ms) instead of waiting for ever: Position of a partition that does not
// exist, and a commit to a broker that is gone.
func TestConsumerDefaultAPITimeoutBoundsCallsWithoutDeadline(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := b.Addr().String()
	prodCreateTopic(t, addr, "api", 1)
	c, err := client.NewConsumer(prodCtx(t, 20*time.Second), client.ConsumerConfig{Config: client.Config{Brokers: []string{addr}},
		GroupID: "api", EnableAutoCommit: new(false), DefaultAPITimeout: 300 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(prodCtx(t, 5*time.Second))
	missing := client.TopicPartition{Topic: "api", Partition: 3}
	if err := c.Assign([]client.TopicPartition{missing}); err != nil {
		t.Fatal(err)
	}
	bounded := func(what string, call func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: %v, want an error matching context.DeadlineExceeded", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s with context.Background() has not returned after 30 s (DefaultAPITimeout 300 ms)", what)
		}
	}
	bounded("Position of a partition that does not exist", func() error {
		_, err := c.Position(context.Background(), missing)
		return err
	})
	_ = b.Close(prodCtx(t, 10*time.Second))
	bounded("CommitOffsets with the broker gone", func() error {
		return c.CommitOffsets(context.Background(), map[client.TopicPartition]int64{{Topic: "api"}: 1})
	})
}
