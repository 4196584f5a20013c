package client

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicemq/sluice/net/wire"
)

// A batch that expires in flight with shared memory keeps its buffer in the region until its
// request ends: the broker may still copy the batch from there (it reads the spans when it
// serves the request). Records sent meanwhile are built elsewhere, so neither the batch's
// bytes nor its guard word change while the request is outstanding. (Without idempotence: an
// idempotent producer sends nothing more of the partition until the expired batch's request
// ends, since its outcome is unknown.)
func TestProducerSharedMemoryKeptWhileExpiredBatchInFlight(t *testing.T) {
	pb := startParkingBroker(t)
	const batchSize = 1024
	off := false
	cfg := ProducerConfig{
		Config: Config{Brokers: []string{pb.fb.addr()}, RequestTimeout: time.Hour, Logger: fzDiscardLogger()},
		Linger: -1, DeliveryTimeout: inFlightExpiry, BatchSize: batchSize, BufferMemory: 4 * batchSize,
		EnableIdempotence: &off,
	}
	cfg.SharedMemoryBytes = slotStride(slotSize(cfg)) // one buffer in the region
	ctx := context.Background()
	p := newClosedAtEndProducer(t, cfg)
	if p.region == nil {
		t.Skip("no shared-memory region on this system")
	}

	first := newCountingCallback()
	p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("first record, in the region")}, first.cb)
	parked := pb.waitParked(t, 1)
	sreq, ok := parked[0].req.(*wire.ProduceSharedRequest)
	if !ok {
		t.Fatalf("the first batch went as %T, want a ProduceShared request", parked[0].req)
	}
	var span wire.SharedPart
	for _, part := range sreq.Parts {
		if part.Length > 0 {
			span = part
		}
	}
	if span.Length == 0 || span.GuardOffset < 0 {
		t.Fatalf("no guarded span in the ProduceShared request: %+v", sreq.Parts)
	}
	mem := p.region.Bytes()
	sent := bytes.Clone(mem[span.Offset : span.Offset+int64(span.Length)])
	guard := (*atomic.Uint64)(unsafe.Pointer(&mem[span.GuardOffset]))
	if g := guard.Load(); g != span.Guard {
		t.Fatalf("guard word holds %d when the request names %d", g, span.Guard)
	}

	checkInFlightExpiry(t, "first record", first.wait(t, "first record"))
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := p.Flush(fctx)
	cancel()
	if err != nil {
		t.Fatalf("Flush with the batch expired in flight: %v", err)
	}

	// Another record while the request is outstanding: its batch must not take the buffer.
	// (Its answer, which the broker gives after the first's, may come after its own delivery
	// deadline: either outcome will do, once.)
	second := newCountingCallback()
	p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("second record, built elsewhere!")}, second.cb)
	parked = pb.waitParked(t, 2)
	if _, ok := parked[1].req.(*wire.ProduceRequest); !ok {
		t.Fatalf("the second batch went as %T, want a Produce request (the region's one buffer is taken)", parked[1].req)
	}
	if !bytes.Equal(mem[span.Offset:span.Offset+int64(span.Length)], sent) || guard.Load() != span.Guard {
		t.Fatal("the buffer of a batch whose request is outstanding was reused: a broker serving the request now would refuse it or read other records")
	}

	// The late answers, in order.
	pb.fb.locked(func() { pb.park = false })
	_ = parked[0].c.reply(parked[0].id, produceAnswer(wire.NoError, 0))
	_ = parked[1].c.reply(parked[1].id, produceAnswer(wire.NoError, 1))
	second.wait(t, "second record")
	waitMemoryReleased(t, p, "after the late answers")
	if n, m := first.calls.Load(), second.calls.Load(); n != 1 || m != 1 {
		t.Fatalf("callbacks ran %d and %d times, want once each", n, m)
	}
	// The request has ended: its buffer is back with its batch, for a later one.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = p.SendSync(sctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("third")})
	cancel()
	if err != nil {
		t.Fatalf("a record sent after the late answers: %v", err)
	}
}
