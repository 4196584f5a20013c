package segment

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/index"
)

// waitUntil polls cond every millisecond until it holds, failing after a generous bound (the
// bound only keeps a broken build from hanging; a passing run returns in milliseconds).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// flush.ms altered on an open log takes effect at once: set, the flusher syncs on its own
// (nothing else asks it to: no waiter, flush.messages never, the checkpoint interval an hour);
// back to never, it stops.
func TestReconfigureFlushMs(t *testing.T) {
	o := testOptions(newMem(t))
	o.CheckpointInterval = time.Hour
	l := mustOpen(t, "/p", o) // flush.ms unset: never
	defer l.Close()
	mustAppend(t, l, makeBatch(t, "a", 3, 1))
	if got := l.SyncedOffset(); got != 0 {
		t.Fatalf("synced %d with nothing asking for a sync", got)
	}

	on := o
	on.FlushMs = time.Millisecond
	l.Reconfigure(on)
	waitUntil(t, "flush.ms=1 set by Reconfigure never synced the log", func() bool {
		return l.SyncedOffset() == l.EndOffset()
	})

	off := o
	off.FlushMs = -1
	l.Reconfigure(off)
	// Whatever flush a tick started before the change is over once this returns; later ticks
	// are refused (the flusher checks flush.ms at each one).
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	synced := l.SyncedOffset()
	mustAppend(t, l, makeBatch(t, "b", 3, 10))
	// A ticker left running at 1 ms would sync within this many of its periods. (This wait
	// cannot fail a correct flusher, which has nothing that would sync: it can only miss a
	// broken one on a machine too loaded to run it.)
	time.Sleep(200 * time.Millisecond)
	if got := l.SyncedOffset(); got != synced {
		t.Fatalf("synced %d after flush.ms went back to never, want it to stay at %d", got, synced)
	}

	// Set again, it resumes.
	l.Reconfigure(on)
	waitUntil(t, "flush.ms=1 set again never synced the log", func() bool {
		return l.SyncedOffset() == l.EndOffset()
	})
}

// segment.index.bytes altered on an open log applies to the segments created from then on,
// whether the roll takes a standby segment made before the change or creates its file then
// (the standby is only the log file: its indexes are created at the roll).
func TestReconfigureSegmentIndexBytes(t *testing.T) {
	for _, standby := range []bool{false, true} {
		name := "no standby"
		if standby {
			name = "standby made before the change"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			o := standbyOptions(nil) // 1 MiB segments; 4 KiB indexes
			if !standby {
				o.PreallocateBytes = -1
			}
			l := mustOpen(t, dir, o)
			defer l.Close()
			b := sizedBatch(t, 64<<10, 1)
			for range 16 { // the first segment, full
				mustAppend(t, l, b)
			}
			if standby {
				waitForStandby(t, l, "once the active one was full")
			}
			first := l.active.base
			indexSize := func(base batch.Offset) (int64, int64) {
				t.Helper()
				var sizes [2]int64
				for i, suffix := range []string{indexSuffix, timeIndexSuffix} {
					f, err := o.withDefaults().FS.Open(segmentPath(dir, base, suffix))
					if err != nil {
						t.Fatal(err)
					}
					sizes[i], err = f.Size()
					f.Close()
					if err != nil {
						t.Fatal(err)
					}
				}
				return sizes[0], sizes[1]
			}
			// A writable index is preallocated to segment.index.bytes, in whole entries.
			want := func(n int64) (int64, int64) {
				return n / index.OffsetEntrySize * index.OffsetEntrySize, n / index.TimeEntrySize * index.TimeEntrySize
			}
			wx, wt := want(4 << 10)
			if x, ti := indexSize(first); x != wx || ti != wt {
				t.Fatalf("first segment's indexes are %d and %d bytes, want %d and %d", x, ti, wx, wt)
			}

			n := o
			n.SegmentIndexBytes = 8 << 10
			l.Reconfigure(n)
			info := mustAppend(t, l, b) // rolls
			if l.active.base == first {
				t.Fatal("no roll")
			}
			wx, wt = want(8 << 10)
			if x, ti := indexSize(info.FirstOffset); x != wx || ti != wt {
				t.Fatalf("segment created after segment.index.bytes=%d has indexes of %d and %d bytes, want %d and %d",
					8<<10, x, ti, wx, wt)
			}
		})
	}
}
