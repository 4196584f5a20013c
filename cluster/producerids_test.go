package cluster

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func allocate(id int32, epoch int64) *allocateProducerIDsCmd {
	return &allocateProducerIDsCmd{brokerEpochCmd{ID: id, Epoch: epoch}}
}

// TestApplyAllocateProducerIDs: each allocation hands the broker that asked the block after the
// last one and advances the counter by a block; a broker that is not registered at that epoch is
// refused with the state unchanged; a fenced broker at its epoch is served, as Kafka's.
func TestApplyAllocateProducerIDs(t *testing.T) {
	m := newMachine(t)
	m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 1, Host: "h1", Port: 9091, Incarnation: "a"}}) // index 1, fenced
	m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 2, Host: "h2", Port: 9092, Incarnation: "b"}}) // index 2
	m.ok(&unfenceBrokerCmd{brokerEpochCmd{ID: 2, Epoch: 2}})
	m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 3, Host: "h3", Port: 9093}}) // before the lifecycle: epoch 0

	tests := []struct {
		name      string
		cmd       *allocateProducerIDsCmd
		wantFirst int64
		wantErr   error
	}{
		{"first block", allocate(2, 2), 0, nil},
		{"second broker", allocate(1, 1), 1000, nil},
		{"same broker again", allocate(2, 2), 2000, nil},
		{"broker without a lifecycle", allocate(3, 0), 3000, nil},
		{"stale epoch", allocate(2, 1), 0, ErrStaleBrokerEpoch},
		{"future epoch", allocate(1, 99), 0, ErrStaleBrokerEpoch},
		{"unknown broker", allocate(9, 0), 0, ErrUnknownBroker},
		{"after refusals", allocate(1, 1), 4000, nil},
	}
	for _, tt := range tests {
		before := m.md
		res := m.apply(tt.cmd)
		if tt.wantErr != nil {
			if !errors.Is(res.Err, tt.wantErr) || m.md != before {
				t.Fatalf("%s: got %v (state changed: %v), want %v", tt.name, res.Err, m.md != before, tt.wantErr)
			}
			continue
		}
		want := ProducerIDBlock{BrokerID: tt.cmd.ID, First: tt.wantFirst, Size: ProducerIDBlockSize}
		if res.Err != nil || res.ProducerIDs != want {
			t.Fatalf("%s: got %+v, %v; want %+v", tt.name, res.ProducerIDs, res.Err, want)
		}
		if got := m.md.NextProducerID(); got != tt.wantFirst+ProducerIDBlockSize || m.md.Version() != m.index {
			t.Fatalf("%s: next producer id %d version %d", tt.name, got, m.md.Version())
		}
	}

	// A re-registration moves the broker to a new epoch: the old one is refused.
	reg := m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 2, Host: "h2", Port: 9092, Incarnation: "b2"}})
	m.fails(allocate(2, 2), ErrStaleBrokerEpoch)
	if res := m.ok(allocate(2, reg.BrokerEpoch)); res.ProducerIDs.First != 5000 {
		t.Fatalf("after re-registering: %+v", res.ProducerIDs)
	}

	// The counter never wraps.
	m.md.nextProducerID = math.MaxInt64 - ProducerIDBlockSize + 1
	m.fails(allocate(1, 1), ErrProducerIDsExhausted)
}

// TestSnapshotKeepsNextProducerID: the counter survives a snapshot round trip and a restored
// machine goes on from it; a snapshot without the field (written before it existed) reads as 0;
// a negative one is refused.
func TestSnapshotKeepsNextProducerID(t *testing.T) {
	m := richMachine(t)
	m.ok(allocate(1, 0))
	m.ok(allocate(2, 0))
	b := encoded(t, m.md)
	if !strings.Contains(string(b), `"next_producer_id":2000`) {
		t.Fatalf("snapshot lacks the counter: %s", b)
	}
	got, err := decodeSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got.NextProducerID() != 2000 {
		t.Fatalf("restored next producer id %d", got.NextProducerID())
	}
	_, res := allocate(3, 0).apply(got, m.index+1)
	if res.Err != nil || res.ProducerIDs.First != 2000 {
		t.Fatalf("allocation after restore: %+v %v", res.ProducerIDs, res.Err)
	}

	old := strings.Replace(string(b), `"next_producer_id":2000,`, ``, 1)
	if got, err := decodeSnapshot(strings.NewReader(old)); err != nil || got.NextProducerID() != 0 {
		t.Fatalf("snapshot without the field: %v, next %d", err, got.NextProducerID())
	}
	neg := strings.Replace(string(b), `"next_producer_id":2000`, `"next_producer_id":-1`, 1)
	if _, err := decodeSnapshot(strings.NewReader(neg)); err == nil {
		t.Fatal("negative next producer id accepted")
	}
}

// TestControllerRestartKeepsProducerIDs: a single controller restarted from its snapshot and
// the log after it never hands a block twice.
func TestControllerRestartKeepsProducerIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	c := open(t, testConfig(dir))
	epoch := registerAlive(t, c, BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9092})
	var blocks []ProducerIDBlock
	take := func(c *Controller) {
		t.Helper()
		b, err := c.AllocateProducerIDs(ctx, 1, epoch)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	take(c)
	if err := c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	take(c) // in the log after the snapshot
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, testConfig(dir))
	if got := c.Metadata().NextProducerID(); got != 2*ProducerIDBlockSize {
		t.Fatalf("after restart: next producer id %d", got)
	}
	take(c)
	checkDisjoint(t, blocks)
	if _, err := c.AllocateProducerIDs(ctx, 1, epoch+1); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
}

// checkDisjoint fails unless the blocks are whole, in the order given and never overlap.
func checkDisjoint(t *testing.T, blocks []ProducerIDBlock) {
	t.Helper()
	for i, b := range blocks {
		if b.Size != ProducerIDBlockSize || b.First < 0 {
			t.Fatalf("block %d: %+v", i, b)
		}
		if i > 0 && b.First <= blocks[i-1].Last() {
			t.Fatalf("block %d %+v overlaps or precedes block %d %+v", i, b, i-1, blocks[i-1])
		}
	}
}

// TestQuorumProducerIDs: two brokers take blocks through a follower and the leader; the blocks
// never overlap; after the leader dies the new one continues past every block given, and so
// does the cluster once the dead node is back (from its snapshot and log); a stale epoch is
// refused through forwarding too.
func TestQuorumProducerIDs(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	l := tc.leader()
	f := tc.follower()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	epochs := map[int32]int64{}
	for _, id := range []int32{1, 2} {
		e, err := tc.node(f).RegisterBroker(ctx, BrokerInfo{ID: id, Host: "127.0.0.1", Port: 9092 + id})
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = e
	}
	var blocks []ProducerIDBlock
	take := func(node, broker int32) {
		t.Helper()
		b, err := tc.node(node).AllocateProducerIDs(ctx, broker, epochs[broker])
		if err != nil {
			t.Fatalf("allocate for broker %d on node %d: %v", broker, node, err)
		}
		if b.BrokerID != broker {
			t.Fatalf("block for broker %d: %+v", broker, b)
		}
		blocks = append(blocks, b)
	}
	take(f, 1)
	take(l, 2)
	take(f, 2)
	take(l, 1)
	for _, id := range tc.running() {
		if err := tc.node(id).Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	take(f, 1) // in the log after the snapshots

	tc.kill(l)
	l2 := tc.leader()
	take(l2, 2)
	take(tc.follower(), 1)

	tc.start(map[int32]net.Listener{l: tc.listen(l)})
	md := tc.converge()
	take(l, 2) // the restarted node, forwarding
	checkDisjoint(t, blocks)
	md = tc.converge()
	if want := blocks[len(blocks)-1].First + ProducerIDBlockSize; md.NextProducerID() != want {
		t.Fatalf("next producer id %d, want %d", md.NextProducerID(), want)
	}
	if !slices.IsSortedFunc(blocks, func(a, b ProducerIDBlock) int { return int(a.First - b.First) }) {
		t.Fatalf("blocks out of order: %+v", blocks)
	}
	if _, err := tc.node(tc.follower()).AllocateProducerIDs(ctx, 1, epochs[1]-1); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("stale epoch through a follower: %v", err)
	}
}
