package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// BenchmarkProducerSend measures Send through to acknowledgement (the timed loop ends with a
// Flush) against an in-process broker on the same machine, with the defaults (linger.ms 5,
// batch.size 16384, buffer.memory 32 MiB) and acks=all (the default; the topic has
// write.caching=false, so every acknowledged batch is fsynced: this measures the disk) or
// acks=1 (this measures the client, the transport and the broker's append); acks=all runs
// twice, idempotent (the default) and with enable.idempotence=false, for the cost of
// idempotence. The producer is warmed up first by pushing twice
// buffer.memory through it, so that its batch free list has reached steady state. allocs/op is
// per record and includes the in-process broker's allocations per request.
func BenchmarkProducerSend(b *testing.B) {
	br := prodOpenBroker(b, prodBrokerConfig(b.TempDir(), "127.0.0.1:0"))
	transports := []struct{ name, addr string }{
		{"unix", "unix://" + br.UnixAddr().String()},
		{"tcp", br.Addr().String()},
	}
	off := false
	for _, v := range []struct {
		acks client.Acks
		idem *bool
	}{{client.AcksAll, nil}, {client.AcksAll, &off}, {client.AcksLeader, nil}} {
		for _, tr := range transports {
			for _, size := range []int{100, 1024} {
				benchProducer(b, tr.name, tr.addr, v.acks, v.idem, size)
			}
		}
	}
}

func benchProducer(b *testing.B, transport, addr string, acks client.Acks, idem *bool, size int) {
	name := "acks=" + acks.String()
	if idem != nil && !*idem {
		name += ",idempotence=off"
	}
	topic := fmt.Sprintf("bench-%s-%d-%v-%t", transport, size, acks, idem == nil || *idem)
	prodCreateTopic(b, addr, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var p *client.Producer
	defer func() {
		if p != nil {
			_ = p.Close(ctx)
		}
	}()
	rec := &client.Record{Topic: topic, Partition: 0, PartitionSet: true, Value: make([]byte, size)}
	b.Run(fmt.Sprintf("%s/%s/%dB", name, transport, size), func(b *testing.B) {
		if p == nil { // first run of this sub-benchmark: start and warm up
			var err error
			p, err = client.NewProducer(ctx, client.ProducerConfig{Config: client.Config{Brokers: []string{addr}, Logger: prodLogger()}, Acks: acks, EnableIdempotence: idem})
			if err != nil {
				b.Fatal(err)
			}
			for range 2 * (32 << 20) / size {
				p.Send(ctx, rec, nil)
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(size))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			p.Send(ctx, rec, nil)
		}
		if err := p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
