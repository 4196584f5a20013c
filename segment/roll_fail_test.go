package segment

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// A roll that fails after it has taken the standby segment (the new segment's time index
// cannot be opened, or a leftover index file of the new base cannot be cleared) leaves no file
// of the new segment behind, so a restart finds the log as it was before the failed append,
// not an extra empty segment holding a whole reserve.
func TestFailedRollLeavesNoSegment(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse func(op vfs.Op, path string) bool
	}{
		// The new segment's time index cannot be opened: after its log (the standby) and
		// offset index exist.
		{"open time index", func(op vfs.Op, path string) bool {
			return op == vfs.OpOpen && strings.HasSuffix(path, timeIndexSuffix)
		}},
		// A leftover index file of the new base cannot be cleared: before any new file, with
		// the standby already renamed to the new segment's log.
		{"clear old index", func(op vfs.Op, path string) bool {
			return op == vfs.OpRemove && strings.HasSuffix(path, indexSuffix)
		}},
		// The new segment's time index page cannot be faulted in as it becomes active (the
		// first segment's populates, by the flusher, still succeed).
		{"populate new time index", func(op vfs.Op, path string) bool {
			return op == vfs.OpPopulate && strings.HasSuffix(path, timeIndexSuffix) &&
				filepath.Base(path) != filepath.Base(segmentPath("", 0, timeIndexSuffix))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var refuse atomic.Bool
			inject := func(op vfs.Op, path string) error {
				if refuse.Load() && tc.refuse(op, path) {
					return errors.New("injected")
				}
				return nil
			}
			testFailedRoll(t, standbyOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: inject}), &refuse)
		})
	}
}

// testFailedRoll appends until an append with refuse set fails at a roll, then checks that
// only the first segment's files are left and that the log reopens where it was.
func testFailedRoll(t *testing.T, o Options, refuse *atomic.Bool) {
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	b := sizedBatch(t, 64<<10, 1)
	for range 10 { // past half: the flusher makes a standby
		mustAppend(t, l, b)
	}
	waitForStandby(t, l, "past half")
	for len(l.Segments()) == 1 && l.Err() == nil {
		end := l.EndOffset()
		refuse.Store(true)
		if _, err := l.Append(b, 7); err == nil {
			refuse.Store(false)
			continue // not yet a roll
		}
		refuse.Store(false)
		l.Close()
		logs, err := filepath.Glob(filepath.Join(dir, "*"+logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) != 1 {
			t.Fatalf("log files after the failed roll: %v, want the first segment's alone", logs)
		}
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if _, err := os.Stat(segmentPath(dir, end, suffix)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the failed segment's %s file: %v", suffix, err)
			}
		}
		o.FS = vfs.Default
		l = mustOpen(t, dir, o)
		defer l.Close()
		if l.EndOffset() != end || len(l.Segments()) != 1 {
			t.Fatalf("reopened at %d with %d segments, want %d with 1", l.EndOffset(), len(l.Segments()), end)
		}
		return
	}
	t.Fatal("the log rolled without failing")
}

// When the index pages ahead cannot be faulted in (vfs.Populate fails: on Linux, a store to them
// would raise SIGBUS, as on a full disk), the flusher holds appends, which get ErrUnavailable
// with the cause instead of the process crashing at the store; the log is not stopped, and
// appends resume by themselves once the flusher's retry faults the pages in. (A segment
// becoming active at a roll fails that roll the same way, through activate.)
func TestFailedPrefaultHoldsAppends(t *testing.T) {
	var refuse atomic.Bool
	injected := errors.New("injected")
	o := testOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if refuse.Load() && op == vfs.OpPopulate {
			return injected
		}
		return nil
	}})
	// No roll (a full index rolls too: room for 128 Ki entries), so what fails is the flusher's
	// populate, not a new segment's.
	o.SegmentBytes, o.SegmentIndexBytes = 64<<20, 1<<20
	o.WritebackBytes = 4 << 10 // the flusher wakes at every append
	o.RetryBackoff, o.RetryBackoffMax = time.Millisecond, 5*time.Millisecond
	l := mustOpen(t, t.TempDir(), o)
	defer l.Close()
	b := sizedBatch(t, 8<<10, 1)
	mustAppend(t, l, b)
	refuse.Store(true)
	var err error
	for i := 0; err == nil; i++ {
		if i == 2000 { // 16 MiB, 2 s at least
			t.Fatal("appends went on after the index pages could not be faulted in")
		}
		if _, err = l.Append(b, 7); err == nil {
			time.Sleep(time.Millisecond) // pacing the appends, not waiting for a condition
		}
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, injected) {
		t.Fatalf("append after the failure: %v, want ErrUnavailable wrapping the injected populate failure", err)
	}
	if l.Err() != nil {
		t.Fatalf("the log stopped: %v", l.Err())
	}
	refuse.Store(false)
	waitUntil(t, "appends to resume", func() bool {
		_, err := l.Append(b, 7)
		return err == nil
	})
}
