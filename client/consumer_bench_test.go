package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// consumerBenchValue returns a 1 KiB value that compresses like a log line or a JSON event would:
// words from a small vocabulary, numbers, punctuation.
func consumerBenchValue(rng *rand.Rand) []byte {
	words := []string{"user", "order", "created", "status", "ok", "error", "payment", "id", "amount",
		"currency", "EUR", "timestamp", "region", "eu-west-1", "latency_ms", "true", "false", "items"}
	var sb strings.Builder
	for sb.Len() < 1024 {
		fmt.Fprintf(&sb, `"%s":"%s-%d",`, words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(100000))
	}
	return []byte(sb.String()[:1024])
}

// BenchmarkConsumer measures Poll decoding 1 KiB records with each codec, end to end against an
// in-process broker, over TCP and over the unix socket: fetch (sendfile on the broker), frame
// read, CRC check, decompression, record decoding. Mode "default" returns records that stay
// valid forever; "reuse" sets ConsumerConfig.ReuseRecordBuffers (valid until the next Poll).
// The data is 16-record (16 KiB) batches, Kafka's default batch.size; the consumer seeks back
// to the start when it reaches the end. Names are codec/transport/mode, so that
// -bench='BenchmarkConsumer/none' still selects the uncompressed runs.
func BenchmarkConsumer(b *testing.B) {
	br := brokertest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := client.Dial(ctx, br.Addr().String(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()

	const records, perBatch = 8192, 16
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([][]byte, 256)
	for i := range vals {
		vals[i] = consumerBenchValue(rng)
	}
	for _, codec := range consumerCodecs {
		topic := "bench-" + codec.String()
		var cr wire.CreateTopicsResponse
		if err := conn.Call(ctx, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 1, ReplicationFactor: -1}}}, &cr); err != nil || cr.Topics[0].ErrorCode != wire.NoError {
			b.Fatalf("create %s: %v %v", topic, err, cr.Topics)
		}
		opts := batch.DefaultBuilderOptions()
		opts.Compression = codec
		bl := batch.NewBuilder(opts)
		for i := 0; i < records; i += perBatch {
			bl.Reset(opts)
			for j := range perBatch {
				bl.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Key: fmt.Appendf(nil, "key-%d", i+j), Value: vals[(i+j)%len(vals)]})
			}
			bt, err := bl.Build()
			if err != nil {
				b.Fatal(err)
			}
			var pr wire.ProduceResponse
			if err := conn.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksLeader, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Records: bt}}}}}, &pr); err != nil || pr.Topics[0].Partitions[0].ErrorCode != wire.NoError {
				b.Fatalf("produce: %v %v", err, pr.Topics)
			}
		}
	}

	transports := []struct{ name, addr string }{
		{"tcp", br.Addr().String()},
		{"unix", "unix://" + br.UnixAddr().String()},
	}
	modes := []struct {
		name  string
		reuse bool
	}{{"default", false}, {"reuse", true}}
	for _, codec := range consumerCodecs {
		for _, tr := range transports {
			for _, mode := range modes {
				b.Run(codec.String()+"/"+tr.name+"/"+mode.name, func(b *testing.B) {
					benchmarkConsume(b, ctx, client.ConsumerConfig{
						Config:             client.Config{Brokers: []string{tr.addr}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
						AutoOffsetReset:    client.OffsetResetEarliest,
						ReuseRecordBuffers: mode.reuse,
					}, client.TopicPartition{Topic: "bench-" + codec.String()}, records)
				})
			}
		}
	}
}

// benchmarkConsume polls tp, which holds records records, over and over from the start.
func benchmarkConsume(b *testing.B, ctx context.Context, cfg client.ConsumerConfig, tp client.TopicPartition, records int64) {
	c, err := client.NewConsumer(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Assign([]client.TopicPartition{tp}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		recs, err := c.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n += len(recs)
		if recs[len(recs)-1].Offset == records-1 {
			if err := c.Seek(tp, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}
