package broker

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// A partition whose log cannot open at a restart (the process at its file limit: EMFILE) is
// opened again by itself once it can, without a metadata change; it used to stay offline
// (KAFKA_STORAGE_ERROR) until the next reconcile, that is until some topic changed.
func TestPartitionThatFailedToOpenIsRetried(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.LogRetryBackoff, cfg.LogRetryBackoffMax = 5*time.Millisecond, 50*time.Millisecond
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	if got := produce(t, c, "t", 0, wire.AcksAll, records(t, "before")); got.ErrorCode != wire.NoError {
		t.Fatalf("produce: %v", got.ErrorCode)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	fault := &vfs.Switch{Op: vfs.OpReadDir, Err: syscall.EMFILE, Match: func(path string) bool { return filepath.Base(path) == "t-0" }}
	fault.Set(true)
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: fault.Inject}
	b2 := startBroker(t, cfg) // waits for the logs: t-0's open has failed
	if b2.partition("t", 0) != nil || fault.Hits() == 0 {
		t.Fatalf("t-0 opened through the injected error (%d hits)", fault.Hits())
	}
	c2 := dial(t, b2.Addr().String())
	if got := produce(t, c2, "t", 0, wire.AcksAll, records(t, "during")); got.ErrorCode != wire.ErrKafkaStorageError {
		t.Fatalf("produce to a partition that failed to open: %v, want KAFKA_STORAGE_ERROR", got.ErrorCode)
	}
	waitUntil(t, "a retried open", func() bool { return fault.Hits() >= 2 })
	fault.Set(false)
	waitUntil(t, "t-0 open", func() bool { return b2.partition("t", 0) != nil })
	if got := produce(t, c2, "t", 0, wire.AcksAll, records(t, "after")); got.ErrorCode != wire.NoError || got.BaseOffset != 1 {
		t.Fatalf("produce once t-0 is open: %v at %d, want offset 1", got.ErrorCode, got.BaseOffset)
	}
}
