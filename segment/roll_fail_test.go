package segment

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/internal/vfs"
)

// A roll that fails after it has taken the standby segment (here: the new segment's time
// index cannot be created) leaves no file of the new segment behind, so a restart finds the
// log as it was before the failed append, not an extra empty segment holding a whole reserve.
func TestFailedRollLeavesNoSegment(t *testing.T) {
	var refuse atomic.Bool
	inject := func(op vfs.Op, path string) error {
		if refuse.Load() && op == vfs.OpOpen && strings.HasSuffix(path, timeIndexSuffix) {
			return errors.New("injected")
		}
		return nil
	}
	o := standbyOptions(&vfs.ErrorFS{FS: vfs.Default, Inject: inject})
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
