package segment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// TestPreallocateKeepsAheadOfAppends: the active segment's blocks are reserved ahead of its end
// as it grows (never past segment.bytes), the file's size stays the data's size, and finishing
// the segment releases the reserve.
func TestPreallocateKeepsAheadOfAppends(t *testing.T) {
	var counts [vfs.NumOps]atomic.Int64
	o := testOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: vfs.Count(&counts)})
	o.SegmentBytes = 8 << 20
	o.PreallocateBytes = 1 << 20
	o.WritebackBytes = -1
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for range 64 { // 4 MiB
		mustAppend(t, l, b)
	}
	size := l.active.size.Load()
	deadline := time.Now().Add(10 * time.Second)
	for l.active.preallocTo.Load() < size+o.PreallocateBytes/2 {
		if time.Now().After(deadline) {
			t.Fatalf("reserve ends at %d, %d bytes appended: not kept ahead", l.active.preallocTo.Load(), size)
		}
		time.Sleep(time.Millisecond)
	}
	if got := l.active.preallocTo.Load(); got > o.SegmentBytes {
		t.Fatalf("reserved up to %d, past segment.bytes %d", got, o.SegmentBytes)
	}
	if counts[vfs.OpPreallocate].Load() == 0 { // kicks coalesce: one call may cover it all
		t.Fatal("the reserve grew without a fallocate call")
	}
	path := filepath.Join(dir, fmt.Sprintf("%020d.log", 0))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != size {
		t.Fatalf("file size %d, want the data's %d: the reserve must not change the size", st.Size(), size)
	}
	var sys syscall.Stat_t
	if fallocateWorks(t, dir) {
		if err := syscall.Stat(path, &sys); err != nil {
			t.Fatal(err)
		}
		if allocated := sys.Blocks * 512; allocated < l.active.preallocTo.Load()-64<<10 {
			t.Fatalf("%d bytes allocated, reserve said to end at %d", allocated, l.active.preallocTo.Load())
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(path, &sys); err != nil {
		t.Fatal(err)
	}
	if allocated := sys.Blocks * 512; allocated > size+64<<10 {
		t.Fatalf("%d bytes allocated for %d bytes of data after close: the reserve was not released", allocated, size)
	}
}

// TestDiskAdviceErrorsDoNotFailTheLog: writeback and the block reserve are advice; when the
// file system refuses them (EIO, ENOSPC) appends, reads and fsyncs go on, and the log stays
// healthy.
func TestDiskAdviceErrorsDoNotFailTheLog(t *testing.T) {
	var refused atomic.Int64
	inject := func(op vfs.Op, _ string) error {
		switch op {
		case vfs.OpWriteBack:
			refused.Add(1)
			return vfs.EIO
		case vfs.OpPreallocate:
			refused.Add(1)
			return vfs.ENOSPC
		}
		return nil
	}
	o := testOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: inject})
	o.SegmentBytes = 8 << 20
	o.WritebackBytes = 256 << 10
	o.PreallocateBytes = 1 << 20
	l := mustOpen(t, t.TempDir(), o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for range 64 {
		mustAppend(t, l, b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for refused.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d refused writebacks/reserves after 4 MiB: the flusher never asked", refused.Load())
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Sync(ctx); err != nil {
		t.Fatalf("sync after refused advice: %v", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("log failed on refused advice: %v", err)
	}
	if got := len(readAll(t, l, 0)); got != 64 {
		t.Fatalf("read back %d batches, want 64", got)
	}
}
