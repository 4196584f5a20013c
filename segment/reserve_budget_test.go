package segment

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// TestReserveBudgetBoundsPreallocation: Options.Reserve is asked before every step of reserve
// ahead, the active segment's and the standby segment's, and a refused step is not taken. With
// a budget of one step the log reserves that one step and no more, whichever reservation asks
// first: a standby segment whose next step is refused is dropped and leaves no file behind,
// and appends go on as without preallocation.
func TestReserveBudgetBoundsPreallocation(t *testing.T) {
	var preallocs atomic.Int64
	fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if op == vfs.OpPreallocate {
			preallocs.Add(1)
		}
		return nil
	}}
	o := standbyOptions(fsys)
	var (
		mu              sync.Mutex
		left            = o.PreallocateBytes // one step
		granted         int64
		refusedPastHalf int
		pastHalf        atomic.Bool
	)
	o.Reserve = func(n int64) bool {
		mu.Lock()
		defer mu.Unlock()
		if n > left {
			if pastHalf.Load() {
				refusedPastHalf++
			}
			return false
		}
		left -= n
		granted += n
		return true
	}
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	ctx := context.Background()
	for i := range 12 { // 768 KiB of a 1 MiB segment: past half, where a standby is asked for
		if i == 8 {
			pastHalf.Store(true)
		}
		mustAppend(t, l, b)
		if err := l.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		mu.Lock()
		n := refusedPastHalf
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Reserve was not asked past half the segment")
		}
		time.Sleep(time.Millisecond)
	}
	l.flushMu.Lock() // the flusher's disk work is done while we look
	defer l.flushMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if granted != o.PreallocateBytes {
		t.Fatalf("granted %d bytes of reserve, want the one step of %d", granted, o.PreallocateBytes)
	}
	if got := preallocs.Load(); got != 1 {
		t.Fatalf("%d fallocate calls, want 1 (the granted step)", got)
	}
	if sb := l.standby.Load(); sb != nil || l.standbyPrep != nil {
		t.Fatal("a standby segment was reserved against the budget")
	}
	if left := standbyFiles(t, dir); len(left) != 0 {
		t.Fatalf("standby files left by a refused reservation: %v", left)
	}
	if to := l.active.preallocTo.Load(); to > o.PreallocateBytes {
		t.Fatalf("active segment reserved to %d, past the granted %d", to, o.PreallocateBytes)
	}
}

// TestDropStandbyGivesTheReserveBack: DropStandby deletes a reserved standby segment (the
// broker's answer to a disk running low), and the next roll creates its file as without one.
func TestDropStandbyGivesTheReserveBack(t *testing.T) {
	o := standbyOptions(vfs.Default)
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for range 16 {
		mustAppend(t, l, b)
	}
	first := l.active.base
	waitForStandby(t, l, "once the active one was full")
	if err := l.DropStandby(); err != nil {
		t.Fatal(err)
	}
	if left := standbyFiles(t, dir); len(left) != 0 || l.standby.Load() != nil {
		t.Fatalf("standby still there after DropStandby: %v", left)
	}
	info := mustAppend(t, l, b) // rolls, without a standby
	if l.active.base == first || l.active.base != info.FirstOffset {
		t.Fatalf("no roll after DropStandby: active segment %d", l.active.base)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReserveAheadGrowsWithTheSegment: the reserve ahead starts at a megabyte and grows with
// what the segment holds, up to PreallocateBytes, so an idle partition written a few records
// does not hold PreallocateBytes of disk (10,000 such partitions held 640 GB), while a busy one
// reaches the whole step within its first megabytes.
func TestReserveAheadGrowsWithTheSegment(t *testing.T) {
	o := testOptions(vfs.Default)
	o.SegmentBytes = 64 << 20
	o.PreallocateBytes = 16 << 20
	o.WritebackBytes = -1
	var (
		mu    sync.Mutex
		asked []int64
	)
	o.Reserve = func(n int64) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, n)
		return true
	}
	l := mustOpen(t, t.TempDir(), o)
	defer l.Close()
	mustAppend(t, l, sizedBatch(t, 4<<10, 1))
	waitUntil(t, "a first step of reserve ahead", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(asked) > 0
	})
	mu.Lock()
	first := asked[0]
	mu.Unlock()
	if first > 2<<20 {
		t.Fatalf("a segment of 4 KiB reserved %d bytes ahead, want about a megabyte", first)
	}
	b := sizedBatch(t, 64<<10, 1)
	for range 128 { // 8 MiB
		mustAppend(t, l, b)
	}
	active := l.Segments()[len(l.Segments())-1]
	waitUntil(t, "the reserve to grow with the segment", func() bool {
		return active.preallocTo.Load() >= active.Size()+4<<20
	})
	if to := active.preallocTo.Load(); to > active.Size()+o.PreallocateBytes {
		t.Fatalf("reserved to %d, past the segment's %d plus PreallocateBytes", to, active.Size())
	}
}
