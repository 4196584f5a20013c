package segment

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// A sealed segment's index trim reopens the index file by path (it holds no descriptor): out of
// descriptors there, nothing is wrong with the data, so the log keeps serving, acknowledges
// what it syncs, and the flusher trims the index once descriptors are back. It used to stop
// the log.
func TestIndexTrimOutOfDescriptorsKeepsTheLog(t *testing.T) {
	first := segmentPath("", 0, indexSuffix)[1:]
	fault := &vfs.Switch{Op: vfs.OpOpen, Err: syscall.EMFILE, Match: func(path string) bool { return strings.HasSuffix(path, first) }}
	fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: fault.Inject}
	logs := &syncBuffer{}
	o := resourceOptions(fsys, logs)
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	defer func() { l.Close() }()
	acked := appendSynced(t, l, 2, "before")

	fault.Set(true)
	// Roll (4 KiB batches, 4 a segment), then sync: the flusher finishes segment 0 and meets
	// EMFILE at its index trim.
	for i := range 6 {
		b := sizedBatchLike(t, makeBatch(t, "roll-"+string(rune('a'+i)), 1, 1), 4<<10)
		mustAppend(t, l, b)
		acked = append(acked, values(t, []batch.Batch{b})...)
	}
	if len(l.Segments()) < 2 {
		t.Fatal("the log did not roll")
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatalf("sync with the sealed segment's index trim failing: %v (log error %v)", err, l.Err())
	}
	waitUntil(t, "the injected error", func() bool { return fault.Hits() > 0 })
	if l.Err() != nil {
		t.Fatalf("the log stopped: %v", l.Err())
	}
	waitUntil(t, "a retried trim", func() bool { return fault.Hits() >= 2 })
	acked = append(acked, appendSynced(t, l, 2, "during")...)

	fault.Set(false)
	waitUntil(t, "segment 0 finished", func() bool {
		s := l.Segments()[0]
		l.flushMu.Lock()
		defer l.flushMu.Unlock()
		return s.finished
	})
	if l.Err() != nil {
		t.Fatalf("the log stopped: %v", l.Err())
	}
	if got := values(t, readAll(t, l, 0)); !equalStrings(got, acked) {
		t.Fatalf("the log holds %d records, want the %d acknowledged", len(got), len(acked))
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	l = mustOpen(t, dir, o)
	if got := values(t, readAll(t, l, 0)); !equalStrings(got, acked) {
		t.Fatalf("reopened, the log holds %d records, want the %d acknowledged", len(got), len(acked))
	}
}
