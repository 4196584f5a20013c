package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// The examples below without an Output comment need a running broker (`sluice serve`); `go
// test` only compiles them.

// A keyed record goes where Kafka's Java client would put it: murmur2 of the key, sign bit
// cleared, modulo the partition count.
func ExampleKeyPartition() {
	for _, key := range []string{"order-42", "order-43", "customer-7"} {
		fmt.Println(key, client.KeyPartition([]byte(key), 3))
	}
	// Output:
	// order-42 0
	// order-43 1
	// customer-7 1
}

// One address form for both transports.
func ExampleParseAddress() {
	for _, addr := range []string{"127.0.0.1:9092", "unix:///var/run/sluice.sock", "./data/sluice.sock"} {
		network, address, err := client.ParseAddress(addr)
		fmt.Println(network, address, err)
	}
	// Output:
	// tcp 127.0.0.1:9092 <nil>
	// unix /var/run/sluice.sock <nil>
	// unix ./data/sluice.sock <nil>
}

// Asynchronous sends with a callback, then Flush and Close. Callbacks run on the producer's
// goroutines: keep them short, and count with atomics.
func ExampleProducer() {
	ctx := context.Background()
	p, err := client.NewProducer(ctx, client.ProducerConfig{
		Config: client.Config{Brokers: []string{"127.0.0.1:9092"}}, // or "unix:///path/to/sluice.sock"
	})
	if err != nil {
		log.Fatal(err)
	}
	var failed atomic.Int64
	for i := range 1000 {
		p.Send(ctx, &client.Record{
			Topic: "orders",
			// Partition unset: the partitioner chooses (OnPartition pins one).
			Key:     fmt.Appendf(nil, "order-%d", i),
			Value:   []byte(`{"amount": 42}`),
			Headers: []client.Header{{Key: "source", Value: []byte("checkout")}},
		}, func(md client.RecordMetadata, err error) {
			if err != nil {
				failed.Add(1) // errors.Is(err, client.ErrDeliveryTimeout), wire.ErrMessageTooLarge, ...
			}
		})
	}
	if err := p.Flush(ctx); err != nil { // waits for every callback of the records sent so far
		log.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(failed.Load(), "records failed")
}

// SendSync waits for the acknowledgement; errors found before the record is batched are
// sentinels to test with errors.Is.
func ExampleProducer_SendSync() {
	ctx := context.Background()
	p, err := client.NewProducer(ctx, client.ProducerConfig{
		Config:   client.Config{Brokers: []string{"127.0.0.1:9092"}},
		MaxBlock: 5 * time.Second, // how long Send waits for a topic to appear (60 s by default)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	md, err := p.SendSync(ctx, &client.Record{Topic: "orders", Partition: client.PartitionAny, Value: []byte("v")})
	switch {
	case errors.Is(err, client.ErrUnknownTopic):
		log.Print("create the topic first (or set auto.create.topics.enable on the broker)")
	case err != nil:
		log.Print(err)
	default:
		fmt.Println(md.Partition, md.Offset, md.Timestamp)
	}
}

// Process, then commit: a crash redelivers what was processed since the last commit, and
// loses nothing (CONSUMER.md). A restarted consumer in the same group resumes from the last
// commit.
func ExampleConsumer_CommitSync() {
	ctx := context.Background()
	c, err := client.NewConsumer(ctx, client.ConsumerConfig{
		Config:           client.Config{Brokers: []string{"127.0.0.1:9092"}},
		GroupID:          "billing",
		EnableAutoCommit: new(false),
		AutoOffsetReset:  client.OffsetResetEarliest, // a group without a commit starts at the log's start
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	tps, err := c.PartitionsFor(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Assign(tps); err != nil { // no group membership: the application picks partitions
		log.Fatal(err)
	}
	for {
		pollCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		recs, err := c.Poll(pollCtx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			continue // nothing new within 5 s
		}
		if err != nil {
			log.Fatal(err) // a partition's error, named in err; returned until a Seek
		}
		for _, r := range recs {
			fmt.Println(r.Partition, r.Offset, string(r.Key), string(r.Value))
		}
		if err := c.CommitSync(ctx); err != nil {
			log.Print(err)
		}
	}
}

// Seeks are lazy: the next Poll or Position looks the offsets up.
func ExampleConsumer_SeekToTimestamp() {
	ctx := context.Background()
	c, err := client.NewConsumer(ctx, client.ConsumerConfig{Config: client.Config{Brokers: []string{"127.0.0.1:9092"}}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	tp := client.TopicPartition{Topic: "orders", Partition: 0}
	if err := c.Assign([]client.TopicPartition{tp}); err != nil {
		log.Fatal(err)
	}
	// Replay the last hour: the first record at or after the time, or the end if none.
	if err := c.SeekToTimestamp(nil, time.Now().Add(-time.Hour)); err != nil {
		log.Fatal(err)
	}
	pos, err := c.Position(ctx, tp)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replaying from offset", pos)
	_ = c.SeekToBeginning(nil) // or the log start
	_ = c.SeekToEnd(nil)       // or only what is produced from now on
	_ = c.Seek(tp, 42)         // or an offset (out of range: AutoOffsetReset decides)
}

// Topic administration; errors wrap the broker's error code and test with errors.Is.
func ExampleAdmin() {
	ctx := context.Background()
	a, err := client.NewAdmin(ctx, "127.0.0.1:9092")
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	err = a.CreateTopic(ctx, client.TopicSpec{Name: "orders", Partitions: 3, Configs: map[string]string{"retention.ms": "86400000"}})
	switch {
	case errors.Is(err, wire.ErrTopicAlreadyExists):
	case errors.Is(err, wire.ErrInvalidConfig), errors.Is(err, wire.ErrInvalidTopicException):
		log.Fatal(err) // the message says which config or what in the name
	case err != nil:
		log.Fatal(err)
	}
	if err := a.AlterTopicConfigs(ctx, "orders", map[string]string{"write.caching": "true"}, []string{"retention.ms"}); err != nil {
		log.Fatal(err)
	}
	info, configs, err := a.DescribeTopic(ctx, "orders")
	if errors.Is(err, client.ErrUnknownTopic) {
		log.Fatal("deleted meanwhile")
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Name, len(info.Partitions), "partitions")
	for _, e := range configs {
		if e.Source == wire.ConfigSourceDynamicTopic && e.Value != nil { // the topic's own overrides
			fmt.Printf("%s=%s\n", e.Name, *e.Value)
		}
	}
}
