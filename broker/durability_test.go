package broker

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// stallingSyncs is an injector that holds every fsync of files under a directory until
// release is called: a disk that has stopped answering.
type stallingSyncs struct {
	dir     string
	once    sync.Once
	release chan struct{}
	stalled chan struct{} // closed at the first stalled fsync
	first   sync.Once
}

func newStallingSyncs(dir string) *stallingSyncs {
	return &stallingSyncs{dir: dir, release: make(chan struct{}), stalled: make(chan struct{})}
}

func (s *stallingSyncs) inject(op vfs.Op, path string) error {
	if op == vfs.OpSync && strings.HasPrefix(path, s.dir) {
		s.first.Do(func() { close(s.stalled) })
		<-s.release
	}
	return nil
}

func (s *stallingSyncs) Release() { s.once.Do(func() { close(s.release) }) }

// TestAcksAllTimesOutOnStalledDisk: with write.caching=false an acks=all produce is answered
// only after its fsync; when the fsync does not come back within the request's timeout the
// partition answers REQUEST_TIMED_OUT (the records may still be in the log, as in Kafka), and
// once the disk answers again acks=all produces succeed.
func TestAcksAllTimesOutOnStalledDisk(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	stall := newStallingSyncs(filepath.Join(dir, "slow-0"))
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: stall.inject}
	b := startBroker(t, cfg)
	t.Cleanup(stall.Release) // before the broker's Close, which waits for its flushers
	c := dial(t, b.Addr().String())
	createTopic(t, c, "slow", 1)

	produceAll := func(timeoutMs int32, v string) wire.ProduceResponsePartition {
		var resp wire.ProduceResponse
		call(t, c, &wire.ProduceRequest{Acks: wire.AcksAll, TimeoutMs: timeoutMs, Topics: []wire.ProduceRequestTopic{
			{Topic: "slow", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, v)}}},
		}}, &resp)
		return resp.Topics[0].Partitions[0]
	}
	start := time.Now()
	p := produceAll(200, "stuck")
	// The timeout is the stalled fsync's: the flusher must have reached it. On a loaded
	// machine it may get there only after the 200 ms the produce waited, so wait for it
	// rather than requiring it by the answer.
	select {
	case <-stall.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the produce was answered without an fsync being attempted")
	}
	if p.ErrorCode != wire.ErrRequestTimedOut {
		t.Fatalf("acks=all on a stalled disk: %v, want REQUEST_TIMED_OUT", p.ErrorCode)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("answered after %v, before the request's 200 ms timeout", waited)
	}
	// acks=1 does not wait for the disk.
	if p := produceRaw(t, c, "slow", 0, wire.AcksLeader, records(t, "leader")); p.ErrorCode != wire.NoError || p.BaseOffset != 1 {
		t.Fatalf("acks=1 while the disk stalls: %+v", p)
	}

	stall.Release()
	if p := produceAll(10000, "after"); p.ErrorCode != wire.NoError || p.BaseOffset != 2 {
		t.Fatalf("acks=all after the disk recovered: %+v", p)
	}
	got := fetchedValues(t, fetchP(t, c, "slow", 0, 0, 0, 1).Records)
	if strings.Join(got, ",") != "stuck,leader,after" {
		t.Fatalf("log holds %q, want the timed-out record too: stuck,leader,after", got)
	}
}

// TestRetentionLoopDeletesExpiredSegments: the broker applies retention.ms on its own every
// log.retention.check.interval.ms, deleting whole expired segments and advancing the log
// start offset, the active segment too, as Kafka: it rolls a new empty one at the log end
// first, so the log start reaches the log end, fetches below it are out of range, and the
// next produce gets the next offset, also after restarts.
func TestRetentionLoopDeletesExpiredSegments(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.RetentionCheck = 20 * time.Millisecond
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "ret", 1,
		wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("1024")},
		wire.ConfigEntry{Name: "retention.ms", Value: strPtr("60000")})

	// Ten batches of about 700 bytes, stamped two hours ago: every batch fills a segment.
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for i := range 10 {
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		bl.Append(&batch.Record{Timestamp: old, Value: make([]byte, 600+i)})
		recs, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		if p := produce(t, c, "ret", 0, wire.AcksLeader, append([]byte(nil), recs...)); p.ErrorCode != wire.NoError {
			t.Fatalf("produce %d: %v", i, p.ErrorCode)
		}
	}
	list := func(c *client.Conn, ts int64) int64 {
		t.Helper()
		var resp wire.ListOffsetsResponse
		call(t, c, &wire.ListOffsetsRequest{ReplicaID: -1, Topics: []wire.ListOffsetsRequestTopic{{Topic: "ret",
			Partitions: []wire.ListOffsetsRequestPartition{{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: ts}}}}}, &resp)
		return resp.Topics[0].Partitions[0].Offset
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for list(c, wire.EarliestTimestamp) < 10 {
		if ctx.Err() != nil {
			t.Fatalf("log start offset %d after 10 s, want 10 (every segment deleted, the active one too)", list(c, wire.EarliestTimestamp))
		}
		time.Sleep(10 * time.Millisecond)
	}
	emptiedAt10 := func(c *client.Conn) {
		t.Helper()
		if e, l := list(c, wire.EarliestTimestamp), list(c, wire.LatestTimestamp); e != 10 || l != 10 {
			t.Fatalf("ListOffsets earliest %d, latest %d; want both 10", e, l)
		}
		for _, off := range []int64{0, 9} {
			if p := fetchP(t, c, "ret", 0, off, 0, 1); p.ErrorCode != wire.ErrOffsetOutOfRange || p.LogStartOffset != 10 || p.HighWatermark != 10 {
				t.Fatalf("fetch at deleted offset %d: %v, log start %d, high watermark %d", off, p.ErrorCode, p.LogStartOffset, p.HighWatermark)
			}
		}
		if p := fetchP(t, c, "ret", 0, 10, 0, 1); p.ErrorCode != wire.NoError || len(p.Records) != 0 {
			t.Fatalf("fetch at the log end: %v, %d bytes", p.ErrorCode, len(p.Records))
		}
	}
	emptiedAt10(c)

	// A restart finds the log where retention left it: the empty segment at 10.
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, cfg)
	c = dial(t, b.Addr().String())
	emptiedAt10(c)
	if p := produce(t, c, "ret", 0, wire.AcksAll, records(t, "fresh")); p.ErrorCode != wire.NoError || p.BaseOffset != 10 {
		t.Fatalf("produce after retention emptied the log: %+v, want offset 10", p)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, cfg)
	c = dial(t, b.Addr().String())
	if e, l := list(c, wire.EarliestTimestamp), list(c, wire.LatestTimestamp); e != 10 || l != 11 {
		t.Fatalf("after a second restart ListOffsets earliest %d, latest %d; want 10, 11", e, l)
	}
	if got := fetchedValues(t, fetchP(t, c, "ret", 0, 10, 0, 1).Records); strings.Join(got, ",") != "fresh" {
		t.Fatalf("log holds %q, want fresh", got)
	}
}

// TestAlterConfigsApplyToLiveLog: segment.bytes and retention.ms altered on a live topic take
// effect on its open log, without a restart.
func TestAlterConfigsApplyToLiveLog(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.RetentionCheck = 20 * time.Millisecond
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "live", 1)
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	produceOld := func(n int) {
		for range n {
			bl := batch.NewBuilder(batch.DefaultBuilderOptions())
			bl.Append(&batch.Record{Timestamp: old, Value: make([]byte, 700)})
			recs, err := bl.Build()
			if err != nil {
				t.Fatal(err)
			}
			if p := produce(t, c, "live", 0, wire.AcksLeader, append([]byte(nil), recs...)); p.ErrorCode != wire.NoError {
				t.Fatal(p.ErrorCode)
			}
		}
	}
	segments := func() int {
		m, err := filepath.Glob(filepath.Join(dir, "live-0", "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	produceOld(4)
	if n := segments(); n != 1 {
		t.Fatalf("%d segments with the default segment.bytes, want 1", n)
	}

	if code := alterTopic(t, c, "live", wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("1024")}).ErrorCode; code != wire.NoError {
		t.Fatal(code)
	}
	// The broker applies metadata asynchronously: produce until the smaller segments show.
	deadline := time.Now().Add(10 * time.Second)
	for segments() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d segments 10 s after segment.bytes=1024, want rolls", segments())
		}
		produceOld(1)
	}

	// Nothing has expired under the default retention (7 days)... until retention.ms is cut.
	time.Sleep(5 * cfg.RetentionCheck)
	before := segments()
	if before < 3 {
		t.Fatalf("segments deleted under the default retention: %d left", before)
	}
	if code := alterTopic(t, c, "live", wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("1024")},
		wire.ConfigEntry{Name: "retention.ms", Value: strPtr("60000")}).ErrorCode; code != wire.NoError {
		t.Fatal(code)
	}
	// A deadline of its own: the loop above may have used most of the first one.
	deadline = time.Now().Add(10 * time.Second)
	for segments() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d segments 10 s after retention.ms=60000, want only the active one", segments())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
