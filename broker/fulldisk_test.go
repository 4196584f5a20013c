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

// A broker whose data disk is full cannot start (the offsets topic's active segments need their
// index files grown back to segment.index.bytes), and says so first, with the data directory,
// then which file and step failed. The other partitions open after the listeners, in the
// background (their errors are logged and answered as KAFKA_STORAGE_ERROR). No index page is
// faulted in at start-up (vfs.Populate): a restart of 10,000 partitions spent most of its time
// there.
func TestStartOnAFullDiskSaysSo(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b := startBroker(t, cfg)
	createTopic(t, dial(t, b.Addr().String()), "t", 4)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// What a full disk gives where the file system cannot grow a file sparsely.
	var populates atomic.Int64
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		switch {
		case op == vfs.OpPopulate:
			populates.Add(1)
		case op == vfs.OpTruncate && strings.HasSuffix(path, ".index"):
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
	if !strings.Contains(msg, ".index") || !strings.Contains(msg, "preallocate") {
		t.Fatalf("start on a full disk: %v, want the file and step that failed", err)
	}
	// The offsets topic's 2 partitions failed alike, each in full.
	if n := strings.Count(msg, "preallocate"); n != 2 {
		t.Fatalf("start on a full disk: %d partition errors in full: %v", n, err)
	}
	if n := populates.Load(); n != 0 {
		t.Fatalf("start-up faulted in index pages %d times", n)
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
