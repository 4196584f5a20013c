package segment

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// TestTruncateResetsTheReserve: ftruncate frees the blocks reserved past the cut, so after
// TruncateTo the reserve must start again from the new end, and the next appends must get
// blocks reserved ahead of them again.
func TestTruncateResetsTheReserve(t *testing.T) {
	var counts [vfs.NumOps]atomic.Int64
	o := testOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: vfs.Count(&counts)})
	o.SegmentBytes = 8 << 20
	o.PreallocateBytes = 1 << 20
	o.WritebackBytes = -1
	l := mustOpen(t, t.TempDir(), o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for range 64 { // 4 MiB, offsets 0..63
		mustAppend(t, l, b)
	}
	waitReserve := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for l.active.preallocTo.Load() < l.active.size.Load()+o.PreallocateBytes/2 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: reserve ends at %d, %d bytes appended", what, l.active.preallocTo.Load(), l.active.size.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitReserve("before the truncation")

	atTruncate := counts[vfs.OpPreallocate].Load()
	// To the segment's start: a cut that leaves a segment non-empty rolls a new one, one that
	// empties it appends on in its file, whose reserve the ftruncate freed.
	if err := l.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	size := l.active.size.Load()
	if size != 0 || len(l.Segments()) != 1 {
		t.Fatalf("size %d, %d segments after truncating to offset 0, want 0 in 1", size, len(l.Segments()))
	}
	// The flusher, woken by the appends before, may already have reserved again past the cut
	// (with a fallocate of its own): only a reserve said to be there without one is wrong.
	if got := l.active.preallocTo.Load(); got != size && counts[vfs.OpPreallocate].Load() == atTruncate {
		t.Fatalf("reserve said to end at %d after the truncation freed it past %d", got, size)
	}
	mustAppend(t, l, b)
	waitReserve("after the truncation")
	if counts[vfs.OpPreallocate].Load() == atTruncate { // since the cut, which freed the reserve
		t.Fatal("the reserve grew back without a fallocate call")
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
}
