package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
)

// fakeBlocks hands out blocks of size ids from a counter, as the controller does, and records
// how many calls were in flight at once.
type fakeBlocks struct {
	size            int64
	next            atomic.Int64
	calls, inflight atomic.Int32
	maxInflight     atomic.Int32
	fail            atomic.Bool
}

func (f *fakeBlocks) alloc(ctx context.Context) (cluster.ProducerIDBlock, error) {
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxInflight.Load()
		if n <= m || f.maxInflight.CompareAndSwap(m, n) {
			break
		}
	}
	f.calls.Add(1)
	if f.fail.Load() {
		return cluster.ProducerIDBlock{}, fmt.Errorf("%w: no leader known", cluster.ErrNotLeader)
	}
	first := f.next.Add(f.size) - f.size
	return cluster.ProducerIDBlock{BrokerID: 1, First: first, Size: f.size}, nil
}

// source is f as a pidSource; fetches ahead run on goroutines wg waits for.
func (f *fakeBlocks) source(wg *sync.WaitGroup) pidSource {
	return pidSource{
		alloc:    f.alloc,
		allocCtx: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
		spawn: func(fn func()) bool {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fn()
			}()
			return true
		},
	}
}

// TestProducerIDAllocatorShares: many concurrent takes get distinct ids, consecutive within a
// block; the controller is asked once per block, never twice at once.
func TestProducerIDAllocatorShares(t *testing.T) {
	f := &fakeBlocks{size: 10}
	var p producerIDs
	const workers, each = 20, 15
	ids := make(chan int64, workers*each)
	var wg, ahead sync.WaitGroup
	src := f.source(&ahead)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id, err := p.take(context.Background(), src)
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		}()
	}
	wg.Wait()
	ahead.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		// The last block may have been fetched ahead and left unused: ids stay below one more.
		if seen[id] || id < 0 || id >= workers*each {
			t.Fatalf("id %d given twice or outside the blocks", id)
		}
		seen[id] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("%d ids", len(seen))
	}
	if got := f.calls.Load(); got != workers*each/10 && got != workers*each/10+1 {
		t.Errorf("%d allocations for %d ids in blocks of 10", got, workers*each)
	}
	if got := f.maxInflight.Load(); got != 1 {
		t.Errorf("%d allocations in flight at once", got)
	}
}

// TestProducerIDAllocatorFetchesAhead: once a block is 90% given the next is fetched in the
// background, so the take past the block's end finds an id at hand, without waiting.
func TestProducerIDAllocatorFetchesAhead(t *testing.T) {
	f := &fakeBlocks{size: 100}
	var p producerIDs
	var ahead sync.WaitGroup
	src := f.source(&ahead)
	for want := range int64(89) {
		if id, err := p.take(context.Background(), src); err != nil || id != want {
			t.Fatalf("take %d: %d, %v", want, id, err)
		}
	}
	ahead.Wait()
	if got := f.calls.Load(); got != 1 {
		t.Fatalf("%d allocations before the block is 90%% given", got)
	}
	if id, ok := p.tryTake(src); !ok || id != 89 { // the 90th: the next block is fetched
		t.Fatalf("tryTake: %d %v", id, ok)
	}
	ahead.Wait()
	if got := f.calls.Load(); got != 2 {
		t.Fatalf("%d allocations once the block is 90%% given", got)
	}
	for want := int64(90); want < 200; want++ {
		if id, ok := p.tryTake(src); !ok || id != want {
			t.Fatalf("tryTake %d: %d %v", want, id, ok)
		}
	}
	ahead.Wait()
	if got := f.calls.Load(); got != 3 {
		t.Fatalf("%d allocations for 200 ids", got)
	}
}

// TestProducerIDAllocatorFailure: an allocation that fails fails the takes waiting for it with a
// retriable COORDINATOR_NOT_AVAILABLE; the next take asks again.
func TestProducerIDAllocatorFailure(t *testing.T) {
	f := &fakeBlocks{size: 2}
	f.fail.Store(true)
	var p producerIDs
	var ahead sync.WaitGroup
	defer ahead.Wait()
	src := f.source(&ahead)
	_, err := p.take(context.Background(), src)
	if !errors.Is(err, ErrProducerIDsUnavailable) || errorCode(err) != wire.ErrCoordinatorNotAvailable || !errorCode(err).Retriable() {
		t.Fatalf("take with no controller: %v (%v)", err, errorCode(err))
	}
	f.fail.Store(false)
	for want := range int64(5) {
		if id, err := p.take(context.Background(), src); err != nil || id != want {
			t.Fatalf("take %d: %d, %v", want, id, err)
		}
	}
	// A caller whose own context ends stops waiting; the allocation it waited for goes on.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var q producerIDs
	q.mu.inflight = &pidAllocation{done: make(chan struct{})}
	if _, err := q.take(ctx, src); !errors.Is(err, ErrProducerIDsUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("take with its context ended: %v", err)
	}
}

func initProducerID(t testing.TB, c *client.Conn, txn *string) wire.InitProducerIDResponse {
	t.Helper()
	var resp wire.InitProducerIDResponse
	call(t, c, &wire.InitProducerIDRequest{TransactionalID: txn, TransactionTimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1}, &resp)
	return resp
}

// takeIDs asks n producer ids through c, checks each answer and that none was seen before.
func takeIDs(t testing.TB, c *client.Conn, n int, seen map[int64]string, who string) {
	t.Helper()
	if err := collectIDs(c, n, seen, who); err != nil {
		t.Fatal(err)
	}
}

// collectIDs is takeIDs for a goroutine other than the test's.
func collectIDs(c *client.Conn, n int, seen map[int64]string, who string) error {
	for range n {
		var r wire.InitProducerIDResponse
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := c.Call(ctx, &wire.InitProducerIDRequest{ProducerID: -1, ProducerEpoch: -1}, &r)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: InitProducerId: %w", who, err)
		}
		if r.ErrorCode != wire.NoError || r.ProducerID < 0 || r.ProducerEpoch != 0 {
			return fmt.Errorf("%s: InitProducerId answered %+v", who, r)
		}
		if prev, dup := seen[r.ProducerID]; dup {
			return fmt.Errorf("producer id %d given by %s and before by %s", r.ProducerID, who, prev)
		}
		seen[r.ProducerID] = who
	}
	return nil
}

// TestInitProducerIDSingleNode: `sluice serve`'s single node (its controller a one-voter raft)
// hands out unique ids past one block; a transactional id is refused; a restart, clean or after
// the controller's snapshot, never gives an id again.
func TestInitProducerIDSingleNode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	seen := map[int64]string{}
	takeIDs(t, c, cluster.ProducerIDBlockSize+200, seen, "first run")

	r := initProducerID(t, c, strPtr("txn-1"))
	if r.ErrorCode != wire.ErrInvalidRequest || r.ProducerID != -1 || r.ProducerEpoch != -1 {
		t.Fatalf("transactional InitProducerId answered %+v", r)
	}

	if err := b.Controller().Snapshot(); err != nil {
		t.Fatal(err)
	}
	takeIDs(t, c, cluster.ProducerIDBlockSize, seen, "after the snapshot") // one more block, in the log after it
	_ = c.Close()
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, cfg)
	takeIDs(t, dial(t, b.Addr().String()), 10, seen, "second run")
}

// TestInitProducerIDAcrossBrokers: two brokers of a three-node cluster, asked concurrently for
// more ids than a block holds, never give one id twice; a broker restarted gives none again.
func TestInitProducerIDAcrossBrokers(t *testing.T) {
	c := newRCluster(t, nil)
	dialNode := func(i int) *client.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := client.DialWith(ctx, c.net.Dialer(sideNode), c.cfgs[i].Listen, "pid-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	n := cluster.ProducerIDBlockSize + 100
	seen := make([]map[int64]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		seen[i] = map[int64]string{}
		conn := dialNode(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = collectIDs(conn, n, seen[i], fmt.Sprintf("broker %d", i))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	all := map[int64]string{}
	for _, s := range seen {
		for id, who := range s {
			if prev, dup := all[id]; dup {
				t.Fatalf("producer id %d given by %s and by %s", id, prev, who)
			}
			all[id] = who
		}
	}
	if len(all) != 2*n {
		t.Fatalf("%d distinct ids, want %d", len(all), 2*n)
	}

	c.kill(1)
	c.restart(1)
	takeIDs(t, dialNode(1), 10, all, "broker 1 restarted")
}

// TestInitProducerIDWithoutController: a broker whose controller quorum is lost keeps answering
// from its block; once the block (and the one fetched ahead) is used up it answers
// COORDINATOR_NOT_AVAILABLE with id and epoch -1, and once the quorum is back the producer's
// retry gets a new id, unique still.
func TestInitProducerIDWithoutController(t *testing.T) {
	c := newRCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := client.DialWith(ctx, c.net.Dialer(sideNode), c.cfgs[0].Listen, "pid-test")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	seen := map[int64]string{}
	takeIDs(t, conn, 1, seen, "with the quorum")
	c.kill(1)
	c.kill(2)
	var refused wire.InitProducerIDResponse
	for i := 0; refused.ErrorCode == wire.NoError; i++ {
		if i > 3*cluster.ProducerIDBlockSize {
			t.Fatalf("%d ids given without a controller quorum", i)
		}
		refused = initProducerID(t, conn, nil)
		if refused.ErrorCode == wire.NoError {
			if prev, dup := seen[refused.ProducerID]; dup {
				t.Fatalf("producer id %d given twice (before by %s)", refused.ProducerID, prev)
			}
			seen[refused.ProducerID] = "without the quorum"
		}
	}
	if refused.ErrorCode != wire.ErrCoordinatorNotAvailable || !refused.ErrorCode.Retriable() ||
		refused.ProducerID != -1 || refused.ProducerEpoch != -1 {
		t.Fatalf("without a controller quorum: %+v", refused)
	}
	c.restart(1)
	c.restart(2)
	// As a producer does: retry the retriable answer until the quorum has a leader again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := initProducerID(t, conn, nil)
		if r.ErrorCode == wire.ErrCoordinatorNotAvailable && time.Now().Before(deadline) {
			continue // bounded by the deadline; a try mostly waits out producerIDAllocTimeout
		}
		if r.ErrorCode != wire.NoError || r.ProducerEpoch != 0 {
			t.Fatalf("with the quorum back: %+v", r)
		}
		if prev, dup := seen[r.ProducerID]; dup {
			t.Fatalf("producer id %d given twice (before by %s)", r.ProducerID, prev)
		}
		break
	}
}
