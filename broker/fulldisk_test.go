package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// A broker restarted after a clean stop on a disk where every write fails (full) still
// starts and serves its partitions: opening a log writes nothing (no index is resized, no
// index page is faulted in, vfs.Populate, and no recovery point is written), so reads,
// metadata and deletions can go on while space is freed.
func TestStartOnAFullDiskAfterCleanStop(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 4)
	var pr wire.ProduceResponse
	call(t, c, &wire.ProduceRequest{Acks: -1, TimeoutMs: 5000, Topics: []wire.ProduceRequestTopic{{
		Topic: "t", Partitions: []wire.ProduceRequestPartition{{Partition: 1, Records: records(t, "a", "b")}},
	}}}, &pr)
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != wire.NoError {
		t.Fatalf("produce: %v", code)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	var populates, writes atomic.Int64
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		switch op {
		case vfs.OpPopulate:
			populates.Add(1)
			return vfs.ENOSPC
		case vfs.OpCreate, vfs.OpWrite, vfs.OpTruncate, vfs.OpPreallocate:
			// The leader epochs the restart brings (registering fences and unfences the
			// broker: new epochs) are written to each partition's leader-epoch-checkpoint
			// off the start-up path, and fail harmlessly on a full disk: not counted.
			if strings.Contains(filepath.Base(path), segment.LeaderEpochCheckpointFile) {
				return vfs.ENOSPC
			}
			writes.Add(1)
			return vfs.ENOSPC
		}
		return nil
	}}
	b2 := startBroker(t, cfg)
	c2 := dial(t, b2.Addr().String())
	var lo wire.ListOffsetsResponse
	call(t, c2, &wire.ListOffsetsRequest{ReplicaID: wire.ConsumerReplicaID, Topics: []wire.ListOffsetsRequestTopic{{
		Topic: "t", Partitions: []wire.ListOffsetsRequestPartition{
			{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: wire.LatestTimestamp},
			{Partition: 1, CurrentLeaderEpoch: -1, Timestamp: wire.LatestTimestamp},
		},
	}}}, &lo)
	for _, p := range lo.Topics[0].Partitions {
		if want := map[int32]int64{0: 0, 1: 2}[p.Partition]; p.ErrorCode != wire.NoError || p.Offset != want {
			t.Fatalf("partition %d on a full disk: %v offset %d, want %d", p.Partition, p.ErrorCode, p.Offset, want)
		}
	}
	if n, w := populates.Load(), writes.Load(); n != 0 || w != 0 {
		t.Fatalf("start-up faulted in index pages %d times and wrote %d times", n, w)
	}
}

// A broker whose offsets topic's logs cannot open because the disk is full says so first, with
// the data directory, then which file failed.
func TestStartOnAFullDiskSaysSo(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b := startBroker(t, cfg)
	createTopic(t, dial(t, b.Addr().String()), "t", 4)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if op == vfs.OpOpen && strings.HasSuffix(path, ".index") {
			return vfs.ENOSPC
		}
		return nil
	}}
	b2, err := Open(cfg)
	if err == nil {
		_ = b2.Close(context.Background())
		t.Fatal("started with the offsets topic's logs failing")
	}
	msg := err.Error()
	if !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(msg, "broker: cannot start: the disk holding "+dir+" is full") {
		t.Fatalf("start on a full disk: %v, want it to say the disk holding %s is full", err, dir)
	}
	if !strings.Contains(msg, ".index") {
		t.Fatalf("start on a full disk: %v, want the file that failed", err)
	}
	// The offsets topic's 2 partitions failed alike, each in full; the other topic's open
	// after the listeners, in the background, and never started.
	if n := strings.Count(msg, "open index"); n != 2 {
		t.Fatalf("start on a full disk: %d partition errors in full: %v", n, err)
	}
}

// A clean shutdown with a log that a disk error stopped earlier succeeds (`sluice serve` exits
// 0 on SIGTERM): the stopped log was reported when it stopped, and its Close only gives that
// error back. No clean-shutdown marker is written, since that log recovers at the next start,
// and the close says so.
func TestCloseWithAStoppedLogSucceeds(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.LogRetryBackoff = time.Hour // the supervisor does not reopen it before the close
	var full atomic.Bool
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		// An I/O error of the data (a full disk no longer stops a log: the append is cut
		// and refused), on every write to the partition, so the log stays stopped.
		if full.Load() && op == vfs.OpWrite && strings.Contains(path, "t-0") {
			return vfs.EIO
		}
		return nil
	}}
	logs := captureLogs(&cfg)
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	full.Store(true)
	if r := produce(t, c, "t", 0, wire.AcksLeader, records(t, "x")); r.ErrorCode != wire.ErrKafkaStorageError {
		t.Fatalf("produce on a disk giving EIO: %v, want KAFKA_STORAGE_ERROR", r.ErrorCode)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("close with a stopped log: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker written with a stopped log: %v", err)
	}
	if !strings.Contains(logs(), "logs stopped by a disk error recover at the next start") {
		t.Fatalf("the close does not say why there is no marker:\n%s", logs())
	}
}
