package broker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// waitParked waits until n fetches are parked on p (or fails after 10 s).
func waitParked(t *testing.T, p *partition, n int) {
	t.Helper()
	for start := time.Now(); p.parkedCount() != n; {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d fetches parked, want %d", p.parkedCount(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A parked fetch's other ways out: maxWait passes (an empty answer), its connection ends, or
// the broker shuts down (Close does not wait out a long maxWait). Each leaves nothing parked.
func TestParkedFetchExits(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "park", 1)
	p := b.partition("park", 0)

	t.Run("maxWait", func(t *testing.T) {
		start := time.Now()
		r := fetchP(t, c, "park", 0, 0, 100, 1)
		if len(r.Records) != 0 || r.ErrorCode != wire.NoError || time.Since(start) < 90*time.Millisecond {
			t.Fatalf("after %v: %+v, want an empty answer after maxWait", time.Since(start), r)
		}
		waitParked(t, p, 0)
	})

	t.Run("connection closed", func(t *testing.T) {
		gone := dial(t, b.Addr().String())
		go func() {
			var resp wire.FetchResponse
			_ = gone.Call(context.Background(), &wire.FetchRequest{ReplicaID: -1, MaxWaitMs: 60000, MinBytes: 1, MaxBytes: 1 << 20,
				Topics: []wire.FetchRequestTopic{{Topic: "park", Partitions: []wire.FetchRequestPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}}, &resp)
		}()
		waitParked(t, p, 1)
		gone.Close()
		waitParked(t, p, 0)
	})

	t.Run("broker closed", func(t *testing.T) {
		answered := make(chan error, 1)
		go func() {
			var resp wire.FetchResponse
			answered <- c.Call(context.Background(), &wire.FetchRequest{ReplicaID: -1, MaxWaitMs: 60000, MinBytes: 1, MaxBytes: 1 << 20,
				Topics: []wire.FetchRequestTopic{{Topic: "park", Partitions: []wire.FetchRequestPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}}, &resp)
		}()
		waitParked(t, p, 1)
		start := time.Now()
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("Close took %v with a fetch parked for 60 s", d)
		}
		select {
		case <-answered: // answered empty, or the connection closed under it: either way, not left hanging
		case <-time.After(10 * time.Second):
			t.Fatal("the parked fetch was neither answered nor failed by Close")
		}
		if n := p.parkedCount(); n != 0 {
			t.Fatalf("%d fetches still parked after Close", n)
		}
	})
}

// Many consumers parked on one partition while producers append: every fetch is answered
// with the records, exactly once, and nothing stays parked (run with -race).
func TestManyParkedFetchesWokenByAppends(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "many", 1)
	p := b.partition("many", 0)
	const fetchers = 16
	var wg sync.WaitGroup
	got := make(chan wire.FetchResponsePartition, fetchers)
	for range fetchers {
		fc := dial(t, b.Addr().String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			got <- fetchP(t, fc, "many", 0, 0, 20000, 1)
		}()
	}
	waitParked(t, p, fetchers)
	var pw sync.WaitGroup
	for range 4 {
		pc := dial(t, b.Addr().String())
		pw.Add(1)
		go func() {
			defer pw.Done()
			for range 5 {
				produce(t, pc, "many", 0, wire.AcksLeader, records(t, "x"))
			}
		}()
	}
	pw.Wait()
	wg.Wait()
	close(got)
	n := 0
	for r := range got {
		if r.ErrorCode != wire.NoError || len(r.Records) == 0 {
			t.Errorf("fetch answered %+v, want records", r)
		}
		n++
	}
	if n != fetchers {
		t.Fatalf("%d answers, want %d", n, fetchers)
	}
	waitParked(t, p, 0)
}

// A parked fetch does not hold its request's share of queued.max.request.bytes while it waits:
// a frame needing the whole budget (admitted once nothing else is charged) would otherwise
// wait, at the head of the queue and with every connection's next frame behind it, for as long
// as a client's maxWait says.
func TestParkedFetchHoldsNoRequestBudget(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.QueuedMaxRequestBytes = 1 << 20
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "park", 1)
	p := b.partition("park", 0)

	poller := dial(t, b.Addr().String())
	parked := make(chan error, 1)
	go func() {
		var resp wire.FetchResponse
		parked <- poller.Call(context.Background(), &wire.FetchRequest{ReplicaID: -1, MaxWaitMs: 600000, MinBytes: 1 << 20, MaxBytes: 1 << 20,
			Topics: []wire.FetchRequestTopic{{Topic: "park", Partitions: []wire.FetchRequestPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}}, &resp)
	}()
	waitParked(t, p, 1)

	// A produce of about 700 KB: its frame's buffer is 1 MiB, the whole budget.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp wire.ProduceResponse
	err := c.Call(ctx, &wire.ProduceRequest{Acks: 1, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
		{Topic: "park", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, strings.Repeat("v", 700<<10))}}},
	}}, &resp)
	if err != nil {
		t.Fatalf("a produce needing the whole budget, with a fetch parked: %v", err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != wire.NoError {
		t.Fatalf("produce: %v", code)
	}
	waitParked(t, p, 1) // still parked (minBytes not reached): only its frame went back
	poller.Close()
	<-parked
}
