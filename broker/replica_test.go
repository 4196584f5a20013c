package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// reportAppends tells p's replica about appends a test made on its log directly (bypassing
// produce), and makes them durable, so that the high watermark covers them.
func reportAppends(t testing.TB, b *Broker, p *partition) {
	t.Helper()
	l := p.log()
	b.replicaAppended(p, l)
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.logSynced(p, nil)
}

// followerFetch is broker replica's fetch of topic-partition 0 from offset, as its replica
// fetcher would send it (Fetch v2: its log end and, as DurableOffset, its fsynced end, here the
// same), without waiting.
func followerFetch(t *testing.T, c *client.Conn, topic string, replica int32, offset int64) wire.FetchResponsePartition {
	t.Helper()
	resp := wire.FetchResponse{Version: 2}
	call(t, c, &wire.FetchRequest{Version: 2, ReplicaID: replica, MaxBytes: 1 << 20, SessionEpoch: -1, Topics: []wire.FetchRequestTopic{
		{Topic: topic, Partitions: []wire.FetchRequestPartition{{Partition: 0, CurrentLeaderEpoch: -1, FetchOffset: offset,
			DurableOffset: offset, LogStartOffset: 0, PartitionMaxBytes: 1 << 20}}},
	}}, &resp)
	p := resp.Topics[0].Partitions[0]
	p.Records = append([]byte(nil), p.Records...)
	return p
}

// produceAsync sends an acks=all produce of values to topic-partition 0 on a connection of its
// own (a connection's responses go in request order: a parked produce would hold back the
// test's other requests on it) and returns the channel its answer comes on.
func produceAsync(t *testing.T, b *Broker, topic string, timeoutMs int32, values ...string) <-chan wire.ProduceResponsePartition {
	t.Helper()
	c := dial(t, b.Addr().String())
	recs := records(t, values...)
	got := make(chan wire.ProduceResponsePartition, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var resp wire.ProduceResponse
		err := c.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksAll, TimeoutMs: timeoutMs, Topics: []wire.ProduceRequestTopic{
			{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: recs}}},
		}}, &resp)
		if err != nil {
			got <- wire.ProduceResponsePartition{ErrorCode: wire.ErrUnknownServerError}
			return
		}
		got <- resp.Topics[0].Partitions[0]
	}()
	return got
}

// On a partition of two replicas, an acks=all produce is answered only once the follower has
// fetched past the batch (its fetch offset, and its durable offset, beyond it), not at the
// leader's append or fsync; until then consumers do not see the record, ListOffsets latest does
// not count it, and a follower's fetch reads it (up to the log end) with the high watermark
// below it. After the follower's fetch past it, the high watermark, ListOffsets latest and
// consumers all have it.
func TestAcksAllAnsweredAfterFollowerFetch(t *testing.T) {
	b, c := twoBrokers(t, testConfig(t, t.TempDir()))
	p := b.partition("t", 0)
	got := produceAsync(t, b, "t", 20000, "r0")
	waitUntil(t, "the acks=all wait parked", func() bool { return p.pendingAcks() == 1 })
	// The leader's own fsync does not commit it: the follower is in the ISR.
	if err := p.log().Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.logSynced(p, nil)
	select {
	case res := <-got:
		t.Fatalf("acks=all answered %v before any follower fetched", res.ErrorCode)
	default:
	}
	if f := fetchP(t, c, "t", 0, 0, 0, 1); f.HighWatermark != 0 || len(f.Records) != 0 {
		t.Fatalf("consumer fetch before the follower's: high watermark %d, %d bytes; want 0, none", f.HighWatermark, len(f.Records))
	}
	if lo := listLatest(t, c, "t"); lo.Offset != 0 {
		t.Fatalf("ListOffsets latest before the follower's fetch: %d, want 0 (the high watermark)", lo.Offset)
	}
	// The follower reads past the high watermark, up to the log end.
	f := followerFetch(t, c, "t", 2, 0)
	if f.ErrorCode != wire.NoError || f.HighWatermark != 0 {
		t.Fatalf("follower fetch at 0: %v, high watermark %d; want NONE, 0", f.ErrorCode, f.HighWatermark)
	}
	if vs := fetchedValues(t, f.Records); len(vs) != 1 || vs[0] != "r0" {
		t.Fatalf("follower fetch at 0 read %q, want [r0]", vs)
	}
	select {
	case res := <-got:
		t.Fatalf("acks=all answered %v by a fetch at its own offset", res.ErrorCode)
	default:
	}
	// The fetch from 1 says the follower has offset 0, durably: committed.
	f = followerFetch(t, c, "t", 2, 1)
	select {
	case res := <-got:
		if res.ErrorCode != wire.NoError || res.BaseOffset != 0 {
			t.Fatalf("acks=all after the follower's fetch: %v at %d", res.ErrorCode, res.BaseOffset)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acks=all not answered after the follower fetched past it")
	}
	if f.HighWatermark > 1 {
		t.Fatalf("follower fetch: high watermark %d past the log end", f.HighWatermark)
	}
	if hw := p.highWatermark(); hw != 1 {
		t.Fatalf("high watermark %d, want 1", hw)
	}
	cf := fetchP(t, c, "t", 0, 0, 0, 1)
	if vs := fetchedValues(t, cf.Records); cf.HighWatermark != 1 || len(vs) != 1 {
		t.Fatalf("consumer fetch after commit: high watermark %d, values %q", cf.HighWatermark, vs)
	}
	if lo := listLatest(t, c, "t"); lo.Offset != 1 {
		t.Fatalf("ListOffsets latest after commit: %d, want 1", lo.Offset)
	}
}

// A follower fetch from a broker that is not a replica of the partition is refused with
// NOT_LEADER_OR_FOLLOWER, reads nothing and changes nothing: the acks=all wait stays parked and
// the high watermark does not move.
func TestFollowerFetchFromNonReplicaRefused(t *testing.T) {
	b, c := twoBrokers(t, testConfig(t, t.TempDir()))
	p := b.partition("t", 0)
	got := produceAsync(t, b, "t", 20000, "r0")
	waitUntil(t, "the acks=all wait parked", func() bool { return p.pendingAcks() == 1 })
	for _, id := range []int32{3, 1} { // a stranger, and this broker's own id
		f := followerFetch(t, c, "t", id, 1)
		if f.ErrorCode != wire.ErrNotLeaderOrFollower || len(f.Records) != 0 {
			t.Fatalf("fetch as broker %d: %v with %d bytes, want NOT_LEADER_OR_FOLLOWER and none", id, f.ErrorCode, len(f.Records))
		}
	}
	if hw := p.highWatermark(); hw != 0 {
		t.Fatalf("high watermark %d after refused fetches, want 0", hw)
	}
	if n := p.pendingAcks(); n != 1 {
		t.Fatalf("%d acks=all waits parked, want 1", n)
	}
	select {
	case res := <-got:
		t.Fatalf("acks=all answered %v by a non-replica's fetch", res.ErrorCode)
	default:
	}
	followerFetch(t, c, "t", 2, 1) // the real follower: committed
	if res := <-got; res.ErrorCode != wire.NoError {
		t.Fatalf("acks=all after the follower's fetch: %v", res.ErrorCode)
	}
}

// An acks=all produce the high watermark does not pass within the request's timeout is answered
// REQUEST_TIMED_OUT and withdrawn from the replica (the record stays in the log, uncommitted).
func TestAcksAllTimesOutWithoutFollower(t *testing.T) {
	b, _ := twoBrokers(t, testConfig(t, t.TempDir()))
	p := b.partition("t", 0)
	select {
	case res := <-produceAsync(t, b, "t", 100, "late"):
		if res.ErrorCode != wire.ErrRequestTimedOut {
			t.Fatalf("acks=all with a silent follower: %v, want REQUEST_TIMED_OUT", res.ErrorCode)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acks=all with a silent follower not answered")
	}
	if n := p.pendingAcks(); n != 0 {
		t.Fatalf("%d waits left parked after the timeout", n)
	}
	if end, hw := p.log().EndOffset(), p.highWatermark(); end != 1 || hw != 0 {
		t.Fatalf("log end %d, high watermark %d; want 1, 0", end, hw)
	}
}

// A follower that stops fetching leaves the ISR after replica.lag.time.max.ms (the ticker's
// proposal, committed by the controller): an acks=all wait parked meanwhile on a topic with
// min.insync.replicas=2 is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, and the next acks=all is
// refused up front with NOT_ENOUGH_REPLICAS, nothing appended.
func TestISRShrinkAnswersNotEnoughReplicas(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ReplicaLagTimeMax = 300 * time.Millisecond
	cfg.ReplicaFetchWait = 100 * time.Millisecond // below the lag bound, as the config check wants
	b, c := twoBrokers(t, cfg)
	var resp wire.CreateTopicsResponse
	call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{
		{Topic: "m", NumPartitions: -1, ReplicationFactor: -1, Assignments: []wire.CreateTopicsAssignment{{Partition: 0, Replicas: []int32{1, 2}}},
			Configs: []wire.ConfigEntry{{Name: "min.insync.replicas", Value: strPtr("2")}}},
	}}, &resp)
	if code := resp.Topics[0].ErrorCode; code != wire.NoError {
		t.Fatalf("create m: %v %s", code, deref(resp.Topics[0].ErrorMessage))
	}
	waitUntil(t, "m-0 open", func() bool { return b.partition("m", 0) != nil })
	p := b.partition("m", 0)
	select {
	case res := <-produceAsync(t, b, "m", 20000, "r0"):
		if res.ErrorCode != wire.ErrNotEnoughReplicasAfterAppend {
			t.Fatalf("acks=all as the ISR shrank below 2: %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", res.ErrorCode)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("acks=all not answered as the ISR shrank")
	}
	waitUntil(t, "the shrunk ISR committed", func() bool {
		tm, _ := b.Controller().Metadata().Topic("m")
		pm, _ := tm.Partition(0)
		return len(pm.ISR) == 1 && pm.ISR[0] == 1
	})
	waitUntil(t, "acks=all refused", func() bool { return !p.acksAll.Load() })
	end := p.log().EndOffset()
	if res := <-produceAsync(t, b, "m", 20000, "r1"); res.ErrorCode != wire.ErrNotEnoughReplicas {
		t.Fatalf("acks=all with the ISR below min.insync.replicas: %v, want NOT_ENOUGH_REPLICAS", res.ErrorCode)
	}
	if e := p.log().EndOffset(); e != end {
		t.Fatalf("refused acks=all appended: log end %d, was %d", e, end)
	}
}

// The high-watermark checkpoint is written at Close with every hosted partition's high
// watermark, and read back in Kafka's format.
func TestHWCheckpointWrittenAtClose(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, b.Addr().String())
	createTopic(t, c, "h", 1)
	if res := produce(t, c, "h", 0, wire.AcksLeader, records(t, "a", "b", "c")); res.ErrorCode != wire.NoError {
		t.Fatal(res.ErrorCode)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	hws, err := b.readHWCheckpoint(filepath.Join(dir, segment.OffsetCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if hw, ok := hws[topicPartition{"h", 0}]; !ok || hw != 3 {
		t.Fatalf("checkpointed high watermark of h-0: %d (%v), want 3", hw, ok)
	}
	if _, ok := hws[topicPartition{OffsetsTopic, 0}]; !ok {
		t.Fatal("the offsets topic's partitions are not checkpointed")
	}
	// Kafka's format, round trip.
	path := filepath.Join(t.TempDir(), segment.OffsetCheckpointFile)
	in := map[topicPartition]batch.Offset{{"a-b", 0}: 5, {"a-b", 12}: 0, {"z", 3}: 1 << 40}
	if err := b.writeHWCheckpointFile(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := b.readHWCheckpoint(path)
	if err != nil || len(out) != len(in) {
		t.Fatalf("read back %v, %v", out, err)
	}
	for tp, hw := range in {
		if out[tp] != hw {
			t.Fatalf("%s: read back %d, want %d", tp, out[tp], hw)
		}
	}
}

// A restarted replica of a multi-replica partition starts from its checkpointed high
// watermark clamped to its log, or, with none, from its log start: never above what the ISR had.
func TestLogStateHighWatermark(t *testing.T) {
	b := &Broker{hwLoaded: map[topicPartition]batch.Offset{{"t", 0}: 2, {"t", 1}: 99}}
	dir := t.TempDir()
	b.cfg = testConfig(t, dir)
	b.logger = b.cfg.Logger
	for i, tc := range []struct {
		part     int32
		replicas int
		want     batch.Offset
	}{
		{0, 3, 2}, // the checkpoint
		{1, 3, 5}, // clamped to the log end
		{2, 3, 0}, // none: the log start
		{2, 1, 5}, // none, single replica: the log end
	} {
		p := &partition{tp: topicPartition{"t", tc.part}}
		l := openTestLog(t, filepath.Join(dir, fmt.Sprintf("%d-%s", i, p.tp)), 5)
		if got := b.logState(p, l, tc.replicas).HighWatermark; got != tc.want {
			t.Errorf("%s with %d replicas: high watermark %d, want %d", p.tp, tc.replicas, got, tc.want)
		}
	}
}

// openTestLog opens a log in dir holding n one-record batches, fsynced.
func openTestLog(t *testing.T, dir string, n int) *segment.Log {
	t.Helper()
	l, err := segment.Open(dir, segment.Options{Logger: testConfig(t, dir).Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for range n {
		if _, err := l.Append(records(t, "v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// fetchAsync sends a fetch of topic-partition 0 from offset by replica (-1: a consumer) that
// long-polls for up to 10 s for a byte, on a connection of its own, and returns its answer's
// channel.
func fetchAsync(t *testing.T, b *Broker, topic string, replica int32, offset int64) <-chan wire.FetchResponsePartition {
	t.Helper()
	c := dial(t, b.Addr().String())
	got := make(chan wire.FetchResponsePartition, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp := wire.FetchResponse{Version: 2}
		err := c.Call(ctx, &wire.FetchRequest{Version: 2, ReplicaID: replica, MaxWaitMs: 10000, MinBytes: 1, MaxBytes: 1 << 20, SessionEpoch: -1,
			Topics: []wire.FetchRequestTopic{{Topic: topic, Partitions: []wire.FetchRequestPartition{{Partition: 0, CurrentLeaderEpoch: -1,
				FetchOffset: offset, DurableOffset: offset, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}}},
		}, &resp)
		if err != nil {
			got <- wire.FetchResponsePartition{ErrorCode: wire.ErrUnknownServerError}
			return
		}
		p := resp.Topics[0].Partitions[0]
		p.Records = append([]byte(nil), p.Records...)
		got <- p
	}()
	return got
}

// A consumer's long poll is woken by the high watermark's advance, not by the append alone: it
// stays parked while a record sits above the high watermark, and answers with the record once a
// follower's fetch commits it. A follower's long poll, by contrast, is woken by the append.
func TestLongPollsWokenByAppendsAndHighWatermark(t *testing.T) {
	b, c := twoBrokers(t, testConfig(t, t.TempDir()))
	p := b.partition("t", 0)
	consumer := fetchAsync(t, b, "t", -1, 0)
	follower := fetchAsync(t, b, "t", 2, 0)
	waitUntil(t, "both fetches parked", func() bool { return p.parkedCount() == 2 })
	if res := produceRaw(t, c, "t", 0, wire.AcksLeader, records(t, "r0")); res.ErrorCode != wire.NoError {
		t.Fatal(res.ErrorCode)
	}
	select {
	case f := <-follower:
		if vs := fetchedValues(t, f.Records); f.ErrorCode != wire.NoError || len(vs) != 1 || f.HighWatermark != 0 {
			t.Fatalf("follower's long poll: %v, values %q, high watermark %d; want r0 above a high watermark of 0", f.ErrorCode, vs, f.HighWatermark)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follower's long poll was not woken by the append")
	}
	// The append woke the consumer too, which found nothing committed and parked again.
	waitUntil(t, "the consumer parked alone", func() bool { return p.parkedCount() == 1 })
	select {
	case f := <-consumer:
		t.Fatalf("consumer answered before the record was committed: %v, %d bytes, high watermark %d", f.ErrorCode, len(f.Records), f.HighWatermark)
	default:
	}
	followerFetch(t, c, "t", 2, 1) // the follower has r0, durably: committed once the leader has fsynced it
	select {
	case f := <-consumer:
		if vs := fetchedValues(t, f.Records); f.ErrorCode != wire.NoError || len(vs) != 1 || vs[0] != "r0" || f.HighWatermark != 1 {
			t.Fatalf("consumer's long poll: %v, values %q, high watermark %d; want r0, 1", f.ErrorCode, vs, f.HighWatermark)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer's long poll was not woken by the high watermark's advance")
	}
}

// A partition's leader-epoch cache is written to its leader-epoch-checkpoint as it changes,
// read back at the next start, and, for a directory without the file (made before it), rebuilt
// from the log's batches.
func TestLeaderEpochCheckpointKeptAndRebuilt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, b.Addr().String())
	createTopic(t, c, "e", 1)
	if res := produce(t, c, "e", 0, wire.AcksLeader, records(t, "a", "b")); res.ErrorCode != wire.NoError {
		t.Fatal(res.ErrorCode)
	}
	p := b.partition("e", 0)
	epoch := p.leaderEpoch()
	pdir := p.log().Dir()
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	es, err := segment.ReadLeaderEpochCheckpoint(vfs.Default, pdir)
	if err != nil || len(es) == 0 || es[len(es)-1].Epoch != epoch || es[len(es)-1].StartOffset != 0 {
		t.Fatalf("leader-epoch-checkpoint %v (%v), want epoch %d from offset 0 last", es, err, epoch)
	}
	for _, remove := range []bool{false, true} {
		if remove {
			if err := os.Remove(filepath.Join(pdir, segment.LeaderEpochCheckpointFile)); err != nil {
				t.Fatal(err)
			}
		}
		b, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		<-b.PartitionsOpen()
		p := b.partition("e", 0)
		p.repMu.Lock()
		got := p.rep.Epochs()
		p.repMu.Unlock()
		if len(got) == 0 || got[0] != (replication.EpochEntry{Epoch: epoch, StartOffset: 0}) {
			t.Fatalf("file removed %v: epoch cache %v, want epoch %d from 0 first", remove, got, epoch)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// The leader-epoch checkpoint is written behind the appends, so after an unclean stop it may lack
// the last epoch change: the epochs then come from the batches' headers, while after a clean stop
// the file is trusted (here a file stripped of its entries tells the two apart: trusted, the
// cache starts with the epoch BecomeLeader assigns at the log end; rebuilt, with the epoch the
// batches carry from offset 0).
func TestLeaderEpochsRebuiltAfterUncleanStop(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, b.Addr().String())
	createTopic(t, c, "u", 1)
	if res := produce(t, c, "u", 0, wire.AcksAll, records(t, "a", "b")); res.ErrorCode != wire.NoError {
		t.Fatal(res.ErrorCode)
	}
	p := b.partition("u", 0)
	epoch, pdir := p.leaderEpoch(), p.log().Dir()
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, unclean := range []bool{false, true} {
		if err := segment.WriteLeaderEpochCheckpoint(vfs.Default, pdir, []segment.EpochStart{}); err != nil {
			t.Fatal(err)
		}
		if unclean {
			if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
				t.Fatal(err)
			}
		}
		b, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		<-b.PartitionsOpen()
		p := b.partition("u", 0)
		p.repMu.Lock()
		got := p.rep.Epochs()
		p.repMu.Unlock()
		switch {
		case len(got) == 0:
			t.Errorf("unclean %v: empty epoch cache", unclean)
		case unclean && got[0] != (replication.EpochEntry{Epoch: epoch, StartOffset: 0}):
			t.Errorf("unclean: epoch cache %v, want the batches' epoch %d from 0 first", got, epoch)
		case !unclean && got[0].StartOffset != 2:
			t.Errorf("clean: epoch cache %v, want only the restart's epoch, from the log end 2", got)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
