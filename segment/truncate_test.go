package segment

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// truncationStart is where truncationLog's log starts: below it a truncation restarts the
// log at an offset below its start (TruncateTo), above its end a follower's jump to its
// leader's log start (TruncateFullyAndStartAt).
const truncationStart = 100

// truncationLog opens a log in dir that starts at truncationStart (a full truncation moved it
// there) and holds batches of two records, "t<i>-0" and "t<i>-1", over several segments, all
// synced. It returns the log and its end.
func truncationLog(t *testing.T, fsys vfs.FS, dir string) (*Log, batch.Offset) {
	t.Helper()
	o := testOptions(fsys)
	o.SegmentBytes = 1024
	l := mustOpen(t, dir, o)
	if err := l.TruncateFullyAndStartAt(truncationStart); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		mustAppend(t, l, makeBatch(t, fmt.Sprintf("t%d", i), 2, int64(1000+i)))
	}
	if err := l.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n < 3 {
		t.Fatalf("setup: %d segments, want at least 3", n)
	}
	return l, l.EndOffset()
}

// truncationValue is the value truncationLog gave offset off.
func truncationValue(off batch.Offset) string {
	i := off - truncationStart
	return fmt.Sprintf("t%d-%d", i/2, i%2)
}

// checkTruncationRecords checks that l holds truncationLog's records, whole, from `from` up to
// `to`.
func checkTruncationRecords(t *testing.T, l *Log, from, to batch.Offset) {
	t.Helper()
	for _, b := range readRange(t, l, from, to) {
		for i, v := range values(t, []batch.Batch{b}) {
			if off := b.BaseOffset() + batch.Offset(i); v != truncationValue(off) {
				t.Fatalf("offset %d holds %q, want %q", off, v, truncationValue(off))
			}
		}
	}
}

// A crash during a full truncation (a follower that fell behind its leader's log start, or a
// TruncateTo below the log start) leaves, at the restart, the old log or the new one, or
// between the two the old segments and the new, empty one beside them: the log starts at its
// old start or at the truncation's offset (or, with the old segments' renames half done, at
// the base of the first one left) and ends at its old end or there, and the records it still
// holds are whole. The new segment is made durable before any old one is renamed
// away, as retention does with the segment it rolls: the other way round, a crash after the
// renames and before the new segment found no segment at all, and the log restarted empty at
// offset 0, below both.
func TestTruncateFullySurvivesCrash(t *testing.T) {
	for _, tc := range []struct {
		name     string
		off      batch.Offset
		truncate func(l *Log) error
		// inside: off lies inside the log, whose records from off on are first cut away
		// as TruncateTo does, which a crash may catch half done: the log then ends
		// anywhere from off to its old end.
		inside bool
	}{
		{"behind-the-leader", 5000, func(l *Log) error { return l.TruncateFullyAndStartAt(5000) }, false},
		{"below-the-start", 50, func(l *Log) error { return l.TruncateTo(50) }, false},
		{"inside", truncationStart + 20, func(l *Log) error { return l.TruncateFullyAndStartAt(truncationStart + 20) }, true},
	} {
		for _, crashAt := range []string{"create", "rename", "second-rename", "after"} {
			for _, keep := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/crash-at-%s/keep-unsynced-entries=%v", tc.name, crashAt, keep), func(t *testing.T) {
					m := newMem(t)
					newLog := segmentPath("/p", tc.off, logSuffix)
					var armed atomic.Bool
					var crashed atomic.Pointer[vfs.MemFS]
					var renames atomic.Int32
					efs := &vfs.ErrorFS{FS: m, Inject: func(op vfs.Op, path string) error {
						rename := armed.Load() && op == vfs.OpRename && strings.HasSuffix(path, logSuffix+deletedSuffix)
						n := int32(0)
						if rename {
							n = renames.Add(1)
						}
						at := crashAt == "create" && op == vfs.OpCreate && path == newLog ||
							crashAt == "rename" && n == 1 || crashAt == "second-rename" && n == 2
						if at && armed.Load() && crashed.Load() == nil {
							crashed.Store(m.Crash(vfs.CrashOptions{KeepUnsyncedEntries: keep}))
							return vfs.EIO
						}
						return nil
					}}
					l, end := truncationLog(t, efs, "/p")
					var bases []batch.Offset // where the log may start once old segments are gone
					for _, s := range l.Segments() {
						bases = append(bases, s.Base())
					}
					if crashAt != "second-rename" {
						bases = bases[:1]
					}
					armed.Store(true)
					err := tc.truncate(l)
					after := crashed.Load()
					if crashAt == "after" {
						if err != nil {
							t.Fatal(err)
						}
						after = m.Crash(vfs.CrashOptions{KeepUnsyncedEntries: keep})
					} else if after == nil || err == nil {
						t.Fatalf("no crash at the %s (err %v)", crashAt, err)
					}
					_ = l.Close() // fails: the file system crashed

					o := l.opts
					o.FS = after
					l2 := mustOpen(t, "/p", o)
					defer l2.Close()
					start, end2 := l2.StartOffset(), l2.EndOffset()
					endOK := end2 == end || end2 == tc.off || tc.inside && end2 >= tc.off && end2 <= end
					if !slices.Contains(bases, start) && start != tc.off || !endOK {
						t.Fatalf("after the crash the log is [%d, %d), want it to start at %d or %d and end at %d or %d (inside the log: between them)",
							start, end2, bases, tc.off, end, tc.off)
					}
					if crashAt == "after" && (start != tc.off || end2 != tc.off) {
						t.Fatalf("after the truncation returned, a crash left the log [%d, %d), want [%d, %d)", start, end2, tc.off, tc.off)
					}
					checkTruncationRecords(t, l2, max(start, truncationStart), min(end2, end))
					if info := mustAppend(t, l2, makeBatch(t, "post", 1, 1)); info.FirstOffset != end2 {
						t.Fatalf("append after the crash at %d, want the log end %d", info.FirstOffset, end2)
					}
				})
			}
		}
	}
}

// A full truncation restarts the log, empty, at its offset wherever that lies: below the log,
// at its start, inside it (at a batch boundary or inside a batch), at its end, at the base of
// an empty active segment there, or past the end. One segment is left, reads below the offset
// are out of range, appends go on there, and a restart finds the same.
func TestTruncateFullyAndStartAtAnyOffset(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  func(end batch.Offset) batch.Offset
		// emptyActive first rolls an empty active segment at the log end.
		emptyActive bool
	}{
		{"below", func(batch.Offset) batch.Offset { return truncationStart - 10 }, false},
		{"at-start", func(batch.Offset) batch.Offset { return truncationStart }, false},
		{"inside-at-a-batch", func(batch.Offset) batch.Offset { return truncationStart + 20 }, false},
		{"inside-a-batch", func(batch.Offset) batch.Offset { return truncationStart + 21 }, false},
		{"at-end", func(end batch.Offset) batch.Offset { return end }, false},
		{"at-an-empty-active-segment", func(end batch.Offset) batch.Offset { return end }, true},
		{"past-end", func(end batch.Offset) batch.Offset { return end + 1000 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			modes(t, func(t *testing.T, fsys vfs.FS, dir string, mmap bool) {
				l, end := truncationLog(t, fsys, dir)
				defer func() { _ = l.Close() }()
				if tc.emptyActive {
					l.appendMu.Lock()
					err := l.rollLocked(end)
					l.appendMu.Unlock()
					if err != nil {
						t.Fatal(err)
					}
				}
				off := tc.off(end)
				if err := l.TruncateFullyAndStartAt(off); err != nil {
					t.Fatal(err)
				}
				check := func(l *Log, end batch.Offset) {
					t.Helper()
					if segs := l.Segments(); len(segs) != 1 || segs[0].Base() != off {
						t.Fatalf("%d segments, the first at %d; want one at %d", len(segs), segs[0].Base(), off)
					}
					if l.StartOffset() != off || l.EndOffset() != end {
						t.Fatalf("log [%d, %d), want [%d, %d)", l.StartOffset(), l.EndOffset(), off, end)
					}
					var oor *OutOfRangeError
					if _, err := l.Read(off-1, 1<<20, end); !errors.As(err, &oor) {
						t.Fatalf("read below the new start: %v, want out of range", err)
					}
				}
				check(l, off)
				if info := mustAppend(t, l, makeBatch(t, "n", 2, 5000)); info.FirstOffset != off {
					t.Fatalf("append after the truncation at %d, want %d", info.FirstOffset, off)
				}
				check(l, off+2)
				if got := strings.Join(values(t, readAll(t, l, off)), ","); got != "n-0,n-1" {
					t.Fatalf("log holds %q, want n-0,n-1", got)
				}
				o := l.opts
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = mustOpen(t, dir, o)
				check(l, off+2)
				if got := strings.Join(values(t, readAll(t, l, off)), ","); got != "n-0,n-1" {
					t.Fatalf("after a restart the log holds %q, want n-0,n-1", got)
				}
			})
		})
	}
}

// A Slice held across two truncations never reads batches appended after them at its
// positions. The first cuts the sealed segment it names below the slice's end, and rolls a new
// segment at the new end; the second, to that new segment's base, retires it and leaves the
// cut segment the last one. The appends after it must go to a new segment: in the cut one they
// would land at positions the slice still names (past the first cut), and a sendfile of the
// slice would send them under the offsets it was asked for. Both truncations end on a batch
// boundary after the slice's first batch, outside the exception of a cut in a segment's first
// batch (Slice).
func TestSliceSurvivesTruncationThatReactivatesACutSegment(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		o := testOptions(fsys)
		o.SegmentBytes = 2048
		l := mustOpen(t, dir, o)
		defer l.Close()
		for i := 0; len(l.Segments()) < 2; i++ {
			mustAppend(t, l, makeBatch(t, "old", 4, int64(i)))
		}
		a := l.Segments()[0]
		bs := readRange(t, l, a.base, l.Segments()[1].base)
		if len(bs) < 6 {
			t.Fatalf("setup: %d batches in the first segment, want at least 6", len(bs))
		}
		s, err := l.Read(bs[2].BaseOffset(), 1<<20, l.Segments()[1].base)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		first, err := s.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(bs[4].BaseOffset()); err != nil { // inside the slice
			t.Fatal(err)
		}
		mustAppend(t, l, makeBatch(t, "mid", 4, 100))
		rolled := l.Segments()[len(l.Segments())-1]
		if rolled == a || rolled.base != bs[4].BaseOffset() {
			t.Fatalf("the cut segment did not roll: last segment based at %d", rolled.base)
		}
		if err := l.TruncateTo(rolled.base); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			mustAppend(t, l, makeBatch(t, "new", 4, int64(200+i)))
		}
		if segs := l.Segments(); segs[len(segs)-1] == a {
			t.Fatal("appends went on in the segment cut under the slice")
		}
		again := make([]byte, s.Len)
		n, _ := s.File.ReadAt(again, s.Pos)
		if !bytes.Equal(again[:n], first[:n]) {
			t.Fatalf("the slice read %d bytes again, not the ones it named (truncated %v)", n, s.Truncated())
		}
		// The log reads whole: the old records up to the first cut, then the new ones.
		got := values(t, readAll(t, l, l.StartOffset()))
		want := values(t, bs[:4])
		for i := range 8 {
			want = append(want, values(t, []batch.Batch{makeBatch(t, "new", 4, int64(200+i))})...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("log holds %q, want %q", got, want)
		}
		end := l.EndOffset()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, dir, o)
		if l.EndOffset() != end || !slices.Equal(values(t, readAll(t, l, l.StartOffset())), want) {
			t.Fatalf("reopened: end %d, want %d, or other records", l.EndOffset(), end)
		}
	})
}
