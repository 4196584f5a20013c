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
)

// A broker whose data disk is full cannot start (every partition's active segment needs its
// index pages, vfs.Populate), and says so first, with the data directory, then which file and
// step failed: the first few partitions' errors in full, the count of the others.
func TestStartOnAFullDiskSaysSo(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b := startBroker(t, cfg)
	createTopic(t, dial(t, b.Addr().String()), "t", 4)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// What a full disk gives when a writable index's page is faulted in (vfs.Populate's
	// EFAULT explained as ENOSPC).
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if op == vfs.OpPopulate {
			return vfs.ENOSPC
		}
		return nil
	}}
	b2, err := Open(cfg)
	if err == nil {
		_ = b2.Close(context.Background())
		t.Fatal("started on a full disk")
	}
	msg := err.Error()
	if !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(msg, "broker: cannot start: the disk holding "+dir+" is full") {
		t.Fatalf("start on a full disk: %v, want it to say the disk holding %s is full", err, dir)
	}
	if !strings.Contains(msg, "index") || !strings.Contains(msg, "populate") {
		t.Fatalf("start on a full disk: %v, want the file and step that failed", err)
	}
	// 6 partitions (4 of t, 2 of the offsets topic) failed alike: 3 in full, then a count.
	if n := strings.Count(msg, "populate"); n != maxPartitionErrors || !strings.Contains(msg, "and 3 more partitions failed") {
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
