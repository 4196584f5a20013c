package segment

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// TestRollReservesBeforeFinishing: at a roll the flusher reserves the new segment's blocks
// before it syncs the old one, so appends to the new segment do not run unreserved for as long
// as that fsync takes.
func TestRollReservesBeforeFinishing(t *testing.T) {
	var mu sync.Mutex
	var ops []string
	record := func(op vfs.Op, path string) error {
		if op == vfs.OpSync || op == vfs.OpPreallocate {
			mu.Lock()
			ops = append(ops, op.String()+" "+filepath.Base(path))
			mu.Unlock()
		}
		return nil
	}
	o := testOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: record})
	o.SegmentBytes = 1 << 20
	o.PreallocateBytes = 256 << 10
	o.WritebackBytes = -1
	l := mustOpen(t, t.TempDir(), o)
	defer l.Close()
	b := sizedBatch(t, 64<<10, 1)
	for range 16 { // 1 MiB: the first segment, full
		mustAppend(t, l, b)
	}
	first := l.active.base
	// Let the flusher catch up with the first segment, so that only the roll is left.
	deadline := time.Now().Add(10 * time.Second)
	for l.active.preallocTo.Load() < o.SegmentBytes {
		if time.Now().After(deadline) {
			t.Fatalf("first segment reserved to %d", l.active.preallocTo.Load())
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	ops = nil
	mu.Unlock()
	info := mustAppend(t, l, b) // rolls
	if l.active.base == first || l.active.base != info.FirstOffset {
		t.Fatalf("no roll: active segment %d", l.active.base)
	}
	oldLog := fmt.Sprintf("%020d.log", first)
	newLog := fmt.Sprintf("%020d.log", info.FirstOffset)
	deadline = time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		seen := append([]string(nil), ops...)
		mu.Unlock()
		reserved, synced := -1, -1
		for i, op := range seen {
			if op == "preallocate "+newLog && reserved < 0 {
				reserved = i
			}
			if op == "sync "+oldLog && synced < 0 {
				synced = i
			}
		}
		if reserved >= 0 && synced >= 0 {
			if reserved > synced {
				t.Fatalf("the new segment was reserved after the old one's fsync: %v", seen)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the roll: %v", seen)
		}
		time.Sleep(time.Millisecond)
	}
}
