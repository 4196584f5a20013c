package segment

import (
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/internal/vfs"
)

// Appends held because the active segment's index pages ahead could not be faulted in resume
// once they can, by the flusher's retry alone, even when the failed attempt found the segment
// no larger than at the last successful one (here: the empty segment retention rolls in, whose
// pages the flusher faults in before it syncs the sealed one). The retry used to skip a
// segment that had not grown since its last prefault, and appends, refused meanwhile, could
// never make it grow: produce was refused until a restart.
func TestHeldAppendsResumeAfterRetentionRoll(t *testing.T) {
	var on atomic.Bool
	var hits atomic.Int64
	first := filepath.Base(segmentPath("", 0, indexSuffix))
	fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if on.Load() && op == vfs.OpPopulate && strings.HasSuffix(path, indexSuffix) && filepath.Base(path) != first {
			hits.Add(1)
			return syscall.ENOSPC
		}
		return nil
	}}
	logs := &syncBuffer{}
	o := resourceOptions(fsys, logs)
	o.RetentionMs, o.RetentionBytes = -1, ZeroRetentionBytes
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	defer func() { l.Close() }()
	appendSynced(t, l, 3, "before")

	on.Store(true)
	res, err := l.DeleteExpired(l.EndOffset())
	if err != nil || !res.Rolled {
		t.Fatalf("retention: %+v, %v; want the active segment rolled away", res, err)
	}
	waitUntil(t, "the injected error", func() bool { return hits.Load() > 0 })
	if _, err := l.Append(makeBatch(t, "held", 1, 1), 7); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("append with the index pages ahead failing: %v, want ErrUnavailable", err)
	}

	on.Store(false)
	waitUntil(t, "an append to succeed", func() bool {
		_, err := l.Append(makeBatch(t, "after", 1, 1), 7)
		if err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("append after the error cleared: %v", err)
		}
		return err == nil
	})
	if l.Err() != nil {
		t.Fatalf("the log stopped: %v", l.Err())
	}
}
