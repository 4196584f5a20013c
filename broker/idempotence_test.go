package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// idemRecords is one batch of n records of producer pid at epoch, sequences from seq.
func idemRecords(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.DefaultBuilderOptions())
	b.SetProducerState(pid, epoch, seq)
	for i := range n {
		b.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Value: fmt.Appendf(nil, "p%d-e%d-s%d", pid, epoch, seq+int32(i))})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// TestProduceIdempotence is the broker's side of each rule: a retry answered with its first
// offset and not appended, with acks=1 and acks=all, and before and after a restart (from the
// clean close's snapshot); each refusal with Kafka's code and nothing appended.
func TestProduceIdempotence(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, testConfig(t, dir))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "idem", 1)

	first := produceRaw(t, c, "idem", 0, wire.AcksLeader, idemRecords(t, 7, 0, 0, 3))
	produceRaw(t, c, "idem", 0, wire.AcksAll, idemRecords(t, 7, 0, 3, 2))
	for _, acks := range []int16{wire.AcksLeader, wire.AcksAll} {
		again := produceRaw(t, c, "idem", 0, acks, idemRecords(t, 7, 0, 0, 3))
		if again.ErrorCode != wire.NoError || again.BaseOffset != first.BaseOffset {
			t.Fatalf("acks=%d: a retry of the first batch: %v at %d, want success at %d", acks, again.ErrorCode, again.BaseOffset, first.BaseOffset)
		}
	}
	for _, c2 := range []struct {
		name string
		recs []byte
		want wire.ErrorCode
	}{
		{"gap", idemRecords(t, 7, 0, 9, 1), wire.ErrOutOfOrderSequenceNumber},
		{"older epoch", nil, wire.ErrInvalidProducerEpoch},
		{"unknown producer", idemRecords(t, 8, 0, 5, 1), wire.ErrUnknownProducerID},
		{"sequence without producer", idemRecords(t, -1, -1, 0, 1), wire.ErrInvalidRecord},
		{"duplicate beside a new batch", append(idemRecords(t, 7, 0, 3, 2), idemRecords(t, 7, 0, 5, 1)...), wire.ErrDuplicateSequenceNumber},
	} {
		if c2.name == "older epoch" {
			produceRaw(t, c, "idem", 0, wire.AcksLeader, idemRecords(t, 9, 4, 0, 1))
			c2.recs = idemRecords(t, 9, 3, 0, 1)
		}
		end := b.partition("idem", 0).log().EndOffset()
		got := produceRaw(t, c, "idem", 0, wire.AcksLeader, c2.recs)
		if got.ErrorCode != c2.want || got.BaseOffset != -1 {
			t.Errorf("%s: %v at %d, want %v", c2.name, got.ErrorCode, got.BaseOffset, c2.want)
		}
		if now := b.partition("idem", 0).log().EndOffset(); now != end {
			t.Errorf("%s: the log end moved %d → %d", c2.name, end, now)
		}
	}
	end := b.partition("idem", 0).log().EndOffset()

	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, testConfig(t, dir))
	c = dial(t, b.Addr().String())
	again := produceRaw(t, c, "idem", 0, wire.AcksAll, idemRecords(t, 7, 0, 3, 2))
	if again.ErrorCode != wire.NoError || again.BaseOffset != first.BaseOffset+3 {
		t.Fatalf("after a restart, a retry: %v at %d, want success at %d", again.ErrorCode, again.BaseOffset, first.BaseOffset+3)
	}
	if next := produceRaw(t, c, "idem", 0, wire.AcksAll, idemRecords(t, 7, 0, 5, 1)); next.ErrorCode != wire.NoError || next.BaseOffset != int64(end) {
		t.Fatalf("after a restart, the next batch: %v at %d, want success at %d", next.ErrorCode, next.BaseOffset, end)
	}
}

// TestIdempotenceAcrossLeaderChange: a producer whose answers were lost sends its last
// batches again to the partition's new leader, a follower when they were written (the leader
// was killed): the new leader, whose producer state came from replication, answers them with
// their first offsets and appends them never; the producer's next batch goes on in sequence.
// The old leader, restarted without a clean close (its state from a snapshot and its log),
// then leads again and does the same.
func TestIdempotenceAcrossLeaderChange(t *testing.T) {
	c := newRCluster(t, nil)
	c.createTopic("idem", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connTo := func(i int32) *client.Conn {
		conn, err := client.DialWith(ctx, c.net.Dialer(sideNode), c.cfgs[i].Listen, "rtest")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	const pid = 42
	seq := int32(0)
	var offsets []int64
	leader := c.leaderOf("idem", 0)
	conn := connTo(leader)
	for range 10 {
		r := produceRaw(t, conn, "idem", 0, wire.AcksAll, idemRecords(t, pid, 0, seq, 2))
		if r.ErrorCode != wire.NoError {
			t.Fatalf("produce: %v", r.ErrorCode)
		}
		offsets = append(offsets, r.BaseOffset)
		seq += 2
	}
	retryLast := func(conn *client.Conn, what string) {
		t.Helper()
		for k := 6; k < 10; k++ { // the window's batches, the oldest first as a client resends
			r := produceRaw(t, conn, "idem", 0, wire.AcksAll, idemRecords(t, pid, 0, int32(k*2), 2))
			if r.ErrorCode != wire.NoError || r.BaseOffset != offsets[k] {
				t.Fatalf("%s: batch %d again: %v at %d, want success at %d", what, k, r.ErrorCode, r.BaseOffset, offsets[k])
			}
		}
	}
	epoch := c.meta(c.live()[0], "idem", 0).LeaderEpoch
	c.kill(int(leader))
	newLeader := c.waitNewLeader("idem", 0, leader, epoch, 30*time.Second)
	conn = connTo(newLeader)
	retryLast(conn, fmt.Sprintf("new leader %d", newLeader))
	r := produceRaw(t, conn, "idem", 0, wire.AcksAll, idemRecords(t, pid, 0, seq, 2))
	if r.ErrorCode != wire.NoError || r.BaseOffset != offsets[9]+2 {
		t.Fatalf("the next batch at the new leader: %v at %d, want success at %d", r.ErrorCode, r.BaseOffset, offsets[9]+2)
	}
	offsets = append(offsets, r.BaseOffset)
	seq += 2

	c.restart(int(leader))
	c.settle("idem", 1, 30*time.Second)
	epoch = c.meta(c.live()[0], "idem", 0).LeaderEpoch
	c.kill(int(newLeader)) // the restarted node or the third one leads now
	third := c.waitNewLeader("idem", 0, newLeader, epoch, 30*time.Second)
	conn = connTo(third)
	for k := 7; k < 11; k++ {
		r := produceRaw(t, conn, "idem", 0, wire.AcksAll, idemRecords(t, pid, 0, int32(k*2), 2))
		if r.ErrorCode != wire.NoError || r.BaseOffset != offsets[k] {
			t.Fatalf("leader %d: batch %d again: %v at %d, want success at %d", third, k, r.ErrorCode, r.BaseOffset, offsets[k])
		}
	}
	bs, err := c.readBatches(int(third), "idem", 0, batch.Offset(offsets[10]+2))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 11 {
		t.Fatalf("leader %d's log has %d batches, want the 11 produced once each", third, len(bs))
	}
	for k, b := range bs {
		if b.BaseSequence() != int32(k*2) || int64(b.BaseOffset()) != offsets[k] {
			t.Fatalf("batch %d: sequence %d at %d, want %d at %d", k, b.BaseSequence(), b.BaseOffset(), k*2, offsets[k])
		}
	}
}

// TestProducerIDExpiration: the broker's loop (producer.id.expiration.check.interval.ms)
// makes a partition forget a producer idle for producer.id.expiration.ms; its next batch,
// not from sequence 0, is then UNKNOWN_PRODUCER_ID, and one from 0 starts it again.
func TestProducerIDExpiration(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ProducerIDExpiration = 50 * time.Millisecond
	cfg.ProducerIDExpirationCheck = 20 * time.Millisecond
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "expiring", 1)
	if r := produceRaw(t, c, "expiring", 0, wire.AcksLeader, idemRecords(t, 3, 0, 0, 2)); r.ErrorCode != wire.NoError {
		t.Fatalf("produce: %v", r.ErrorCode)
	}
	l := b.partition("expiring", 0).log()
	waitFor(t, 10*time.Second, "the idle producer expired", func() bool { return l.ProducerCount() == 0 })
	if r := produceRaw(t, c, "expiring", 0, wire.AcksLeader, idemRecords(t, 3, 0, 2, 1)); r.ErrorCode != wire.ErrUnknownProducerID {
		t.Fatalf("the expired producer's next batch: %v, want UNKNOWN_PRODUCER_ID", r.ErrorCode)
	}
	if r := produceRaw(t, c, "expiring", 0, wire.AcksLeader, idemRecords(t, 3, 1, 0, 1)); r.ErrorCode != wire.NoError {
		t.Fatalf("the producer from sequence 0 at a bumped epoch: %v", r.ErrorCode)
	}
}
