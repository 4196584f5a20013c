package client

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// parkingBroker is a fake broker leading retryTopic's partition 0 that leaves every Produce
// request unanswered while park is set (a broker that is up but does not answer: SIGSTOP, a
// hung disk), so that the test can answer them later, and answers them at once otherwise.
type parkingBroker struct {
	fb *fakeBroker
	// Guarded by fb's handler lock (fb.locked).
	park     bool
	parked   []parkedRequest
	produces int
	next     int64 // base offset of the next answered request
}

// parkedRequest is a Produce (or ProduceShared) request left unanswered.
type parkedRequest struct {
	c   *fakeConn
	id  int32
	req wire.Request
}

func startParkingBroker(t *testing.T) *parkingBroker {
	pb := &parkingBroker{park: true}
	pb.fb = startFakeBrokerConn(t, t.TempDir(), func(c *fakeConn, h wire.RequestHeader, req wire.Request) []byte {
		switch req.(type) {
		case *wire.MetadataRequest:
			resp := &wire.MetadataResponse{ControllerID: 1,
				Brokers: []wire.MetadataBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9, UnixPath: pb.fb.path}},
				Topics: []wire.MetadataTopic{{Topic: retryTopic, Partitions: []wire.MetadataPartition{
					{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}}}}
			return resp.AppendTo(nil)
		case *wire.AttachMemoryRequest:
			// Accepted without mapping it: the test reads the region from the producer's side.
			return (&wire.AttachMemoryResponse{}).AppendTo(nil)
		case *wire.ProduceRequest, *wire.ProduceSharedRequest:
			pb.produces++
			if pb.park {
				pb.parked = append(pb.parked, parkedRequest{c, h.CorrelationID, req})
				return nil
			}
			base := pb.next
			pb.next += 100 // more than a test's batch holds
			return produceAnswer(wire.NoError, base)
		default:
			t.Errorf("fake broker: unexpected %v request", h.APIKey)
			return nil
		}
	})
	t.Cleanup(pb.fb.close)
	return pb
}

// produceAnswer is a Produce response for retryTopic's partition 0.
func produceAnswer(code wire.ErrorCode, base int64) []byte {
	if code != wire.NoError {
		base = -1
	}
	resp := &wire.ProduceResponse{Topics: []wire.ProduceResponseTopic{{Topic: retryTopic,
		Partitions: []wire.ProduceResponsePartition{{Partition: 0, ErrorCode: code, BaseOffset: base, LogAppendTimeMs: -1}}}}}
	return resp.AppendTo(nil)
}

// waitParked waits until n Produce requests are parked and returns them.
func (pb *parkingBroker) waitParked(t *testing.T, n int) []parkedRequest {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		var got []parkedRequest
		pb.fb.locked(func() { got = append(got, pb.parked...) })
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Produce requests reached the broker in a minute, want %d", len(got), n)
		}
	}
}

// newClosedAtEndProducer returns a producer that the test's end closes at once: the records it
// still holds fail, and nothing waits for requests a fake broker leaves unanswered.
func newClosedAtEndProducer(t *testing.T, cfg ProducerConfig) *Producer {
	t.Helper()
	p, err := NewProducer(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.Close(done)
	})
	return p
}

// countingCallback records a record's outcomes: there must be exactly one.
type countingCallback struct {
	calls atomic.Int32
	mu    sync.Mutex
	errs  []error
	done  chan struct{} // closed at the first call
}

func newCountingCallback() *countingCallback { return &countingCallback{done: make(chan struct{})} }

func (c *countingCallback) cb(_ RecordMetadata, err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
	if c.calls.Add(1) == 1 {
		close(c.done)
	}
}

// wait waits for the first call and returns its error.
func (c *countingCallback) wait(t *testing.T, what string) error {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no callback within 30 s", what)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errs[0]
}

// inFlightExpiry is the delivery.timeout.ms of the tests whose batches must expire in flight:
// each batch has to reach the broker before its deadline, or it expires unsent (another error,
// which fails the test), so this is the time a loaded machine has to send it. 2 s, not less:
// the sender is a goroutine woken by Send, and under -race on a busy machine a wake-up can wait.
const inFlightExpiry = 2 * time.Second

// checkInFlightExpiry fails unless err is the error of a batch that expired in flight.
func checkInFlightExpiry(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrDeliveryTimeout) || !errors.Is(err, context.DeadlineExceeded) || err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("%s: callback got %v, want a delivery timeout in flight", what, err)
	}
}

// partitionState is retryTopic-0's inflight count and the number of its batches Flush waits for.
func partitionState(p *Producer) (inflight, incomplete int) {
	ap := (*(*p.topics.Load())[retryTopic].parts.Load())[0]
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return ap.mu.inflight, len(ap.mu.incomplete)
}

// waitMemoryReleased waits until the producer holds no buffer.memory and no batch in flight.
func waitMemoryReleased(t *testing.T, p *Producer, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		inflight, _ := partitionState(p)
		used := p.mem.used.Load()
		if used == 0 && inflight == 0 {
			return
		}
		if used < 0 {
			t.Fatalf("%s: buffer.memory in use is %d: released twice", what, used)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d bytes of buffer.memory and %d batches still in flight after a minute", what, used, inflight)
		}
	}
}

// Kafka's delivery.timeout.ms bounds the time from Send to the callback for a batch in flight
// too: against a broker that takes a request and does not answer, the batch fails at its
// delivery deadline and Flush returns, while the request stays in flight until its response
// or request.timeout.ms (here an hour), holding its slot and the batches' memory. The late
// response, whatever it says, completes nothing a second time: no second callback, no retry,
// buffer.memory released once. Two requests are in flight, answered in reverse order.
func TestProducerDeliveryTimeoutInFlight(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(r parkedRequest) // the late answer to a parked request
	}{
		{"success", func(r parkedRequest) { _ = r.c.reply(r.id, produceAnswer(wire.NoError, 0)) }},
		{"retriable error", func(r parkedRequest) { _ = r.c.reply(r.id, produceAnswer(wire.ErrNotLeaderOrFollower, 0)) }},
		{"fatal error", func(r parkedRequest) { _ = r.c.reply(r.id, produceAnswer(wire.ErrMessageTooLarge, 0)) }},
		{"connection closed", func(r parkedRequest) { _ = r.c.nc.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pb := startParkingBroker(t)
			const batchSize = 1024
			ctx := context.Background()
			p := newClosedAtEndProducer(t, ProducerConfig{
				Config: Config{Brokers: []string{pb.fb.addr()}, RequestTimeout: time.Hour, SharedMemoryBytes: -1, Logger: fzDiscardLogger()},
				Linger: -1, DeliveryTimeout: inFlightExpiry, BatchSize: batchSize, BufferMemory: 2 * batchSize,
				RetryBackoff: time.Millisecond,
			})

			// Two batches, each in a request of its own (linger 0: the first goes at once).
			first, second := newCountingCallback(), newCountingCallback()
			p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("first")}, first.cb)
			pb.waitParked(t, 1)
			p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("second")}, second.cb)
			parked := pb.waitParked(t, 2)

			checkInFlightExpiry(t, "first record", first.wait(t, "first record"))
			checkInFlightExpiry(t, "second record", second.wait(t, "second record"))
			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := p.Flush(fctx)
			cancel()
			if err != nil {
				t.Fatalf("Flush with both batches expired in flight: %v", err)
			}
			// The requests are still outstanding and own their batches' memory.
			if inflight, incomplete := partitionState(p); inflight != 2 || incomplete != 0 {
				t.Fatalf("after the expiry: %d batches in flight (want 2: their requests are outstanding), %d incomplete (want 0)", inflight, incomplete)
			}
			if used := p.mem.used.Load(); used <= 0 {
				t.Fatalf("after the expiry: %d bytes of buffer.memory in use; the batches in flight must keep theirs", used)
			}

			tc.answer(parked[1])
			tc.answer(parked[0])
			waitMemoryReleased(t, p, "after the late answers")
			if n, m := first.calls.Load(), second.calls.Load(); n != 1 || m != 1 {
				t.Fatalf("callbacks ran %d and %d times, want once each", n, m)
			}
			pb.fb.locked(func() {
				if pb.produces != 2 {
					t.Errorf("%d Produce requests, want 2 (an expired batch must not be sent again)", pb.produces)
				}
				pb.park = false
			})

			// A record that needs nearly all of buffer.memory: it fits only if the expired
			// batches gave theirs back, and only once.
			big := bytes.Repeat([]byte{'x'}, 2*batchSize-100)
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err = p.SendSync(sctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: big})
			cancel()
			if err != nil {
				t.Fatalf("a record sent after the late answers: %v", err)
			}
			waitMemoryReleased(t, p, "after the next record")
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := p.Close(cctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if used := p.mem.used.Load(); used != 0 {
				t.Fatalf("after Close: %d bytes of buffer.memory in use, want 0", used)
			}
			if n, m := first.calls.Load(), second.calls.Load(); n != 1 || m != 1 {
				t.Fatalf("callbacks ran %d and %d times, want once each", n, m)
			}
		})
	}
}

// Close after a batch expired in flight returns without waiting for the request's answer
// (request.timeout.ms, here an hour): the flush has nothing left to wait for, and the request,
// whose answer nobody wants, ends with its connection. Its memory is released once.
func TestProducerCloseWithExpiredRequestInFlight(t *testing.T) {
	pb := startParkingBroker(t)
	ctx := context.Background()
	p := newClosedAtEndProducer(t, ProducerConfig{
		Config: Config{Brokers: []string{pb.fb.addr()}, RequestTimeout: time.Hour, SharedMemoryBytes: -1, Logger: fzDiscardLogger()},
		Linger: -1, DeliveryTimeout: inFlightExpiry,
	})
	rec := newCountingCallback()
	p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("v")}, rec.cb)
	pb.waitParked(t, 1)
	checkInFlightExpiry(t, "record", rec.wait(t, "record"))
	closed := make(chan error, 1)
	go func() { closed <- p.Close(ctx) }() // no deadline: it must not need one
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited 30 s for a request whose batch had expired (request.timeout.ms is an hour)")
	}
	if used := p.mem.used.Load(); used != 0 {
		t.Fatalf("after Close: %d bytes of buffer.memory in use, want 0", used)
	}
	if n := rec.calls.Load(); n != 1 {
		t.Fatalf("the callback ran %d times, want once", n)
	}
}

// A batch retried into a later request while an earlier request (of a younger batch) is in
// flight expires at its own delivery deadline, not at the younger one's: the receiver, which
// set its timer for the head request, learns of the later request's earlier deadline when it
// goes out (expiryPoke). Here the old record's deadline is 3 s before the young one's; with the
// bug both fail at the young one's. The margins are for a loaded machine: the old batch's retry
// has inFlightExpiry to go out before its deadline, and the old record may fail up to 2 s late
// and still be told apart.
func TestProducerInFlightExpiryOfALaterRequestComesFirst(t *testing.T) {
	pb := startParkingBroker(t)
	ctx := context.Background()
	const spread = 3 * time.Second // from the old record's Send to the young one's
	const deliveryTimeout = spread + inFlightExpiry
	p := newClosedAtEndProducer(t, ProducerConfig{
		Config: Config{Brokers: []string{pb.fb.addr()}, RequestTimeout: time.Hour, SharedMemoryBytes: -1, Logger: fzDiscardLogger()},
		Linger: -1, DeliveryTimeout: deliveryTimeout, RetryBackoff: time.Millisecond,
	})

	old, young := newCountingCallback(), newCountingCallback()
	var oldAt, youngAt atomic.Int64
	p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("old")}, func(m RecordMetadata, err error) {
		oldAt.Store(time.Now().UnixNano())
		old.cb(m, err)
	})
	first := pb.waitParked(t, 1)[0]
	time.Sleep(spread) // the young record's deadline comes spread after the old one's
	p.Send(ctx, &Record{Topic: retryTopic, Partition: 0, PartitionSet: true, Value: []byte("young")}, func(m RecordMetadata, err error) {
		youngAt.Store(time.Now().UnixNano())
		young.cb(m, err)
	})
	pb.waitParked(t, 2)
	// The old batch's request fails (retriable, the leader unchanged): it is sent again, in a
	// request behind the young one's.
	_ = first.c.reply(first.id, produceAnswer(wire.ErrNotEnoughReplicas, 0))
	pb.waitParked(t, 3)

	checkInFlightExpiry(t, "old record", old.wait(t, "old record"))
	checkInFlightExpiry(t, "young record", young.wait(t, "young record"))
	if gap := time.Duration(youngAt.Load() - oldAt.Load()); gap < spread-2*time.Second {
		t.Fatalf("the old record failed %v before the young one; its deadline is %v earlier (it waited for the young request's)", gap, spread)
	}
}
