package segment

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// writebackRecorder records the paths of the writebacks a log starts.
type writebackRecorder struct {
	mu    sync.Mutex
	paths []string
}

func (r *writebackRecorder) inject(op vfs.Op, path string) error {
	if op == vfs.OpWriteBack {
		r.mu.Lock()
		r.paths = append(r.paths, path)
		r.mu.Unlock()
	}
	return nil
}

func (r *writebackRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// TestWritebackFollowsAppends: with WritebackBytes set, the flusher starts writeback of the
// active segment as it grows (on a real file system, where sync_file_range must succeed),
// without waiting for an fsync; turned off, it starts none.
func TestWritebackFollowsAppends(t *testing.T) {
	for _, tc := range []struct {
		name      string
		writeback int64
		wantSome  bool
	}{
		{"every 256KiB", 256 << 10, true},
		{"off", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &writebackRecorder{}
			o := testOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: rec.inject})
			o.SegmentBytes = 64 << 20
			o.WritebackBytes = tc.writeback
			l := mustOpen(t, t.TempDir(), o)
			defer l.Close()
			b := sizedBatch(t, 64<<10, 1)
			for range 64 { // 4 MiB
				mustAppend(t, l, b)
			}
			if !tc.wantSome {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := l.Sync(ctx); err != nil { // a full flusher cycle has run
					t.Fatal(err)
				}
				if got := rec.seen(); len(got) != 0 {
					t.Fatalf("%d writebacks with WritebackBytes < 0", len(got))
				}
				return
			}
			// Kicks coalesce, so count bytes, not calls: writeback must catch up to within
			// WritebackBytes of the end.
			size := l.active.size.Load()
			deadline := time.Now().Add(10 * time.Second)
			for l.active.writebackFrom.Load() < size-tc.writeback {
				if time.Now().After(deadline) {
					t.Fatalf("writeback started below %d of %d bytes after 10 s (%d calls)", l.active.writebackFrom.Load(), size, len(rec.seen()))
				}
				time.Sleep(time.Millisecond)
			}
			if len(rec.seen()) == 0 {
				t.Fatal("writeback progressed without a WriteBack call")
			}
			for _, p := range rec.seen() {
				if !strings.HasSuffix(p, ".log") {
					t.Fatalf("writeback of %s: only segment data is written back", p)
				}
			}
			if err := l.Err(); err != nil {
				t.Fatalf("log failed: %v", err)
			}
		})
	}
}
