package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// A broker that stops answering (SIGSTOP, a hung disk) holds every in-flight slot until
// request.timeout.ms. The batches waiting behind them must still fail at delivery.timeout.ms,
// not when a slot frees: the sender used to wait for a slot before it looked for expired
// batches, so with a paused broker no callback fired until the broker came back or the
// requests timed out (a producer with delivery.timeout.ms=3s reported nothing for as long as
// the broker was stopped).
func TestProducerDeliveryTimeoutWhileRequestsHang(t *testing.T) {
	var produces atomic.Int64
	var fb *fakeBroker
	fb = startFakeBroker(t, t.TempDir(), func(h wire.RequestHeader, req wire.Request) []byte {
		switch req.(type) {
		case *wire.MetadataRequest:
			resp := &wire.MetadataResponse{ControllerID: 1,
				Brokers: []wire.MetadataBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9, UnixPath: fb.path}},
				Topics: []wire.MetadataTopic{{Topic: retryTopic, Partitions: []wire.MetadataPartition{
					{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}}}}
			return resp.AppendTo(nil)
		case *wire.ProduceRequest:
			produces.Add(1)
			return nil // never answered: a stopped broker
		default:
			t.Errorf("fake broker: unexpected %v request", h.APIKey)
			return nil
		}
	})
	t.Cleanup(fb.close)

	const deliveryTimeout = inFlightExpiry // the first batch must be in flight before it
	ctx := context.Background()
	p := newClosedAtEndProducer(t, ProducerConfig{
		// The in-flight request holds its slot for the whole test.
		Config:          Config{Brokers: []string{fb.addr()}, RequestTimeout: time.Hour, SharedMemoryBytes: -1, Logger: fzDiscardLogger()},
		MaxInFlight:     1,
		Linger:          -1,
		DeliveryTimeout: deliveryTimeout,
	})
	firstDone := make(chan error, 1)
	p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("in flight")}, func(_ RecordMetadata, err error) {
		firstDone <- err
	})
	for deadline := time.Now().Add(time.Minute); produces.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first batch was never sent")
		}
	}

	secondDone := make(chan error, 1)
	p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("waiting")}, func(_ RecordMetadata, err error) {
		secondDone <- err
	})
	// Both fail at delivery.timeout.ms: the waiting one unsent, the one in flight although its
	// request is still outstanding (TestProducerDeliveryTimeoutInFlight).
	for _, r := range []struct {
		name     string
		done     chan error
		inFlight bool
	}{{"waiting", secondDone, false}, {"in-flight", firstDone, true}} {
		select {
		case err := <-r.done:
			if !errors.Is(err, ErrDeliveryTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
				strings.Contains(err.Error(), "in flight") != r.inFlight {
				t.Fatalf("the %s record failed with %v, want a delivery timeout", r.name, err)
			}
		case <-time.After(30 * time.Second): // 15 times delivery.timeout.ms; the request waits an hour
			t.Fatalf("the %s record did not fail within 30 s (delivery.timeout.ms %v)", r.name, deliveryTimeout)
		}
	}
	if n := produces.Load(); n != 1 {
		t.Errorf("%d Produce requests, want 1 (the expired batch must not be sent)", n)
	}
}
