package segment

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/internal/vfs"
)

// logFilesFS counts the segment log files (*.log) it has open.
type logFilesFS struct {
	vfs.FS
	open atomic.Int64
}

type countedFile struct {
	vfs.File
	fs     *logFilesFS
	closed atomic.Bool
}

func (f *countedFile) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}
func (f *countedFile) Unwrap() vfs.File { return f.File }

func (l *logFilesFS) count(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, logSuffix) {
		return f, err
	}
	l.open.Add(1)
	return &countedFile{File: f, fs: l}, nil
}

func (l *logFilesFS) Create(name string) (vfs.File, error) {
	f, err := l.FS.Create(name)
	return l.count(name, f, err)
}

func (l *logFilesFS) Open(name string) (vfs.File, error) {
	f, err := l.FS.Open(name)
	return l.count(name, f, err)
}

func (l *logFilesFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := l.FS.OpenReadWrite(name)
	return l.count(name, f, err)
}

// fileSystems runs fn on the OS file system and on MemFS.
func fileSystems(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { fn(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) { fn(t, newMem(t), "/p") })
}

// fillSegments appends batches to l until it has at least n segments, and syncs it so that
// the flusher has finished (and handed to the cache) every sealed one. It returns the values.
func fillSegments(t *testing.T, l *Log, tag string, n int) []string {
	t.Helper()
	var want []string
	for i := 0; len(l.Segments()) < n; i++ {
		b := fmt.Sprintf("%s%d", tag, i)
		mustAppend(t, l, makeBatch(t, b, 20, int64(1000+i)))
		for j := range 20 {
			want = append(want, fmt.Sprintf("%s-%d", b, j))
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestFileCacheBoundsOpenFiles: logs sharing a FileCache keep at most its bound of sealed
// segments' files open (plus each active segment's), whatever they read; every read of a
// segment whose file was closed opens it again and returns the right records; a reopened log
// keeps the bound too.
func TestFileCacheBoundsOpenFiles(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const bound, logs = 2, 3
		lfs := &logFilesFS{FS: fsys}
		o := testOptions(lfs)
		o.OpenFiles = NewFileCache(bound)
		var ls []*Log
		var wants [][]string
		for i := range logs {
			l := mustOpen(t, filepath.Join(dir, fmt.Sprint(i)), o)
			ls = append(ls, l)
			wants = append(wants, fillSegments(t, l, fmt.Sprintf("l%d-", i), 6))
		}
		check := func(when string) {
			t.Helper()
			if n := o.OpenFiles.Len(); n > bound {
				t.Fatalf("%s: the cache holds %d files, bound %d", when, n, bound)
			}
			if n := lfs.open.Load(); n > logs+bound {
				t.Fatalf("%s: %d log files open, want at most %d active + %d sealed", when, n, logs, bound)
			}
		}
		check("after the appends")
		for round := range 2 {
			for i, l := range ls {
				if got := values(t, readAll(t, l, 0)); !slices.Equal(got, wants[i]) {
					t.Fatalf("round %d: log %d read back %d values, want %d", round, i, len(got), len(wants[i]))
				}
				check(fmt.Sprintf("round %d, after reading log %d", round, i))
			}
		}
		for i, l := range ls {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			ls[i] = mustOpen(t, filepath.Join(dir, fmt.Sprint(i)), o)
		}
		check("after reopening")
		for i, l := range ls {
			if got := values(t, readAll(t, l, 0)); !slices.Equal(got, wants[i]) {
				t.Fatalf("reopened log %d read back differs", i)
			}
			check(fmt.Sprintf("reopened, after reading log %d", i))
		}
		for _, l := range ls {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if n := lfs.open.Load(); n != 0 {
			t.Fatalf("%d log files open after every log closed", n)
		}
	})
}

// TestFileCacheKeepsHeldSegmentOpen: a reader holding a Slice of a sealed segment (a fetch
// about to sendfile it) keeps reading it while reads of other segments would have the cache
// close it; its file closes once the reader lets go and another read needs room.
func TestFileCacheKeepsHeldSegmentOpen(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		o := testOptions(fsys)
		o.OpenFiles = NewFileCache(1)
		l := mustOpen(t, dir, o)
		defer l.Close()
		fillSegments(t, l, "h", 5)
		held, err := l.Read(0, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		want, err := held.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		segs := l.Segments()
		for _, s := range segs[1 : len(segs)-1] { // the other sealed ones, each evicting
			sl, err := l.Read(s.Base(), 1<<20, l.EndOffset())
			if err != nil {
				t.Fatal(err)
			}
			sl.Release()
		}
		if segs[0].file == nil {
			t.Fatal("the cache closed a segment file a reader holds")
		}
		got, err := held.AppendTo(nil)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("held slice after evictions: %v, equal %v", err, slices.Equal(got, want))
		}
		held.Release()
		sl, err := l.Read(segs[1].Base(), 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		sl.Release()
		if n := o.OpenFiles.Len(); n > 1 {
			t.Fatalf("the cache holds %d files once released, bound 1", n)
		}
	})
}

// TestFileCacheReopenAtFileLimit: a read that must reopen a closed segment file while the
// process is at its file limit (EMFILE) fails with ErrReopen, retriable, and nothing else:
// the log is not failed, appends go on, and the same read succeeds once files are available.
func TestFileCacheReopenAtFileLimit(t *testing.T) {
	var atLimit atomic.Bool
	efs := &vfs.ErrorFS{FS: newMem(t), Inject: func(op vfs.Op, path string) error {
		if op == vfs.OpOpen && atLimit.Load() && strings.HasSuffix(path, logSuffix) {
			return syscall.EMFILE
		}
		return nil
	}}
	o := testOptions(efs)
	o.OpenFiles = NewFileCache(1)
	l := mustOpen(t, "/p", o)
	defer l.Close()
	want := fillSegments(t, l, "e", 4)
	atLimit.Store(true)
	// The first segments' files were closed to keep the bound: one of them must reopen.
	var readErr error
	for _, s := range l.Segments() {
		sl, err := l.Read(s.Base(), 1<<20, l.EndOffset())
		sl.Release()
		if err != nil {
			readErr = err
			break
		}
	}
	if !errors.Is(readErr, ErrReopen) || !errors.Is(readErr, syscall.EMFILE) {
		t.Fatalf("read at the file limit: %v, want ErrReopen wrapping EMFILE", readErr)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the log failed: %v", err)
	}
	mustAppend(t, l, makeBatch(t, "after", 1, 5000))
	atLimit.Store(false)
	got := values(t, readAll(t, l, 0))
	if !slices.Equal(got[:len(want)], want) || got[len(got)-1] != "after-0" {
		t.Fatal("read back differs once files are available")
	}
}

// TestFileCacheTruncateIntoClosedSegment: a truncation (a follower cutting its log back to its
// leader's) that lands in a sealed segment whose file the cache closed opens it again for
// writing and cuts it; appends go on in a new segment at the new end (TruncateTo rolls after
// a cut, so readers of the cut one never see new batches at positions they read).
func TestFileCacheTruncateIntoClosedSegment(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		o := testOptions(fsys)
		o.OpenFiles = NewFileCache(1)
		l := mustOpen(t, dir, o)
		defer l.Close()
		want := fillSegments(t, l, "t", 5)
		first := l.Segments()[0]
		first.fileMu.Lock()
		closed := first.file == nil
		first.fileMu.Unlock()
		if !closed {
			t.Fatal("the first segment's file is still open: the test needs it closed")
		}
		const cut = 30 // inside the first segment (20-record batches)
		if err := l.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		if len(l.Segments()) != 2 || l.EndOffset() != 20 || l.Segments()[1].Base() != 20 {
			t.Fatalf("after TruncateTo(%d): %d segments, end %d", cut, len(l.Segments()), l.EndOffset())
		}
		mustAppend(t, l, makeBatch(t, "new", 1, 9000))
		got := values(t, readAll(t, l, 0))
		if !slices.Equal(got[:20], want[:20]) || got[20] != "new-0" || len(got) != 21 {
			t.Fatalf("read back after truncation: %d values", len(got))
		}
	})
}

// TestFileCachePinnedSegmentStaysOut is the race of pinFile against acquireFile, made
// deterministic: a truncation has taken a sealed segment out of the cache to make it active
// (pinFile's first step) when a reader, finding its file closed, opens it again. The reader's
// reopen must not put the segment back in the cache, which could then close the file that
// appends write to; the flusher's hand-over of the segment sealed again (cacheFile) does.
func TestFileCachePinnedSegmentStaysOut(t *testing.T) {
	o := testOptions(newMem(t))
	o.OpenFiles = NewFileCache(1)
	l := mustOpen(t, "/p", o)
	defer l.Close()
	fillSegments(t, l, "p", 4)
	s := l.Segments()[0]
	s.fileMu.Lock()
	closed := s.file == nil
	s.fileMu.Unlock()
	if !closed {
		t.Fatal("the first segment's file is still open: the test needs it closed")
	}
	inCache := func() bool {
		o.OpenFiles.mu.Lock()
		defer o.OpenFiles.mu.Unlock()
		return s.elem != nil
	}
	o.OpenFiles.remove(s, true) // pinFile, before it takes fileMu
	ok, err := s.acquireFile()
	if !ok || err != nil {
		t.Fatalf("acquireFile: %v, %v", ok, err)
	}
	s.release()
	if inCache() {
		t.Fatal("a reader's reopen put a pinned segment back in the cache")
	}
	s.cacheFile() // sealed again: the cache takes it
	if !inCache() {
		t.Fatal("the sealed segment's hand-over did not put it in the cache")
	}
}
