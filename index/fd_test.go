package index

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// liveFS counts the files it has open, so a test can see that an index holds no descriptor.
type liveFS struct {
	vfs.FS
	live atomic.Int64
}

type liveFile struct {
	vfs.File
	fs *liveFS
}

func (f *liveFile) Close() error     { f.fs.live.Add(-1); return f.File.Close() }
func (f *liveFile) Unwrap() vfs.File { return f.File }

func (l *liveFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := l.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	l.live.Add(1)
	return &liveFile{File: f, fs: l}, nil
}

// TestIndexHoldsNoFile proves that an index keeps no file open once it is mapped (two per
// segment would otherwise bound the partitions a broker can host at its file limit), and that
// everything that resizes it (Trim, MakeWritable, TruncateTo on a trimmed index) reopens the
// file by its path and closes it again, with the entries still read correctly through the
// mapping.
func TestIndexHoldsNoFile(t *testing.T) {
	both(t, func(t *testing.T, fsys vfs.FS, dir string) {
		lfs := &liveFS{FS: fsys}
		const base = 500
		x, err := OpenOffsetIndex(lfs, filepath.Join(dir, "a.index"), base, 4096, true)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := OpenTimeIndex(lfs, filepath.Join(dir, "a.timeindex"), base, 4096, true)
		if err != nil {
			t.Fatal(err)
		}
		open := func(when string) {
			t.Helper()
			if n := lfs.live.Load(); n != 0 {
				t.Fatalf("%s: %d index files open, want 0", when, n)
			}
		}
		open("after open")
		for i := 1; i <= 10; i++ {
			if err := x.Append(base+batch.Offset(i*10), Pos(i*100)); err != nil {
				t.Fatal(err)
			}
			if _, err := ts.Append(int64(i*1000), base+batch.Offset(i*10)); err != nil {
				t.Fatal(err)
			}
		}
		if err := errors.Join(x.Flush(), ts.Flush(), x.Prefault(), ts.Prefault()); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(x.Trim(), ts.Trim()); err != nil {
			t.Fatal(err)
		}
		open("after trim")
		if got := x.Lookup(base + 55); got != (OffsetEntry{base + 50, 500}) {
			t.Fatalf("Lookup after trim = %+v", got)
		}
		if err := x.TruncateTo(base + 80); err != nil {
			t.Fatal(err)
		}
		open("after truncating a trimmed index")
		if got, n := x.Lookup(base+1000), x.Len(); got != (OffsetEntry{base + 70, 700}) || n != 7 {
			t.Fatalf("after TruncateTo: Lookup = %+v, Len %d", got, n)
		}
		if err := errors.Join(x.MakeWritable(4096), ts.MakeWritable(4096)); err != nil {
			t.Fatal(err)
		}
		open("after MakeWritable")
		if err := x.Append(base+90, 900); err != nil {
			t.Fatal(err)
		}
		if got := ts.Lookup(5500); got != (TimeEntry{5000, base + 50}) {
			t.Fatalf("time Lookup = %+v", got)
		}
		if err := errors.Join(x.Close(), ts.Close()); err != nil {
			t.Fatal(err)
		}
		open("after close")

		// Reopened read-only, the entries are all there and no file stays open.
		y, err := OpenOffsetIndex(lfs, filepath.Join(dir, "a.index"), base, 4096, false)
		if err != nil {
			t.Fatal(err)
		}
		defer y.Close()
		open("after a read-only open")
		if y.Len() != 8 || y.Lookup(base+95) != (OffsetEntry{base + 90, 900}) {
			t.Fatalf("reopened: Len %d, Lookup %+v", y.Len(), y.Lookup(base+95))
		}
	})
}

// TestIndexTrimRetriesAfterEMFILE: a trim that cannot open the file (the process at its file
// limit) changes nothing, so the index stays whole and writable, and a later trim succeeds.
func TestIndexTrimRetriesAfterEMFILE(t *testing.T) {
	m, dir := memDir(t)
	var failOpens atomic.Bool
	efs := &vfs.ErrorFS{FS: m, Inject: func(op vfs.Op, path string) error {
		if op == vfs.OpOpen && failOpens.Load() {
			return syscall.EMFILE
		}
		return nil
	}}
	x, err := OpenOffsetIndex(efs, filepath.Join(dir, "b.index"), 0, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for i := 1; i <= 3; i++ {
		if err := x.Append(batch.Offset(i), Pos(i*10)); err != nil {
			t.Fatal(err)
		}
	}
	failOpens.Store(true)
	if err := x.Trim(); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Trim at the file limit: %v, want EMFILE", err)
	}
	if x.Len() != 3 || x.Lookup(2) != (OffsetEntry{2, 20}) || x.Full() {
		t.Fatalf("after a failed trim: Len %d, Lookup %+v, Full %v", x.Len(), x.Lookup(2), x.Full())
	}
	failOpens.Store(false)
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	if !x.Full() || x.Len() != 3 || x.Lookup(3) != (OffsetEntry{3, 30}) {
		t.Fatalf("after trim: Full %v, Len %d, Lookup %+v", x.Full(), x.Len(), x.Lookup(3))
	}
}

// TestReopenAfterUncleanStopFindsEveryEntry: an index left preallocated by an unclean stop
// (a few pages of entries, then megabytes of holes) is searched below its first hole only
// (vfs.DataEnd); entries that span several pages, and a last entry that straddles a page
// boundary (12-byte time entries), are all found again.
func TestReopenAfterUncleanStopFindsEveryEntry(t *testing.T) {
	both(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const maxBytes = 4 << 20
		path := filepath.Join(dir, "u.timeindex")
		x, err := OpenTimeIndex(fsys, path, 0, maxBytes, true)
		if err != nil {
			t.Fatal(err)
		}
		const n = 2*4096/TimeEntrySize + 1 // the last one straddles the second page's end
		for i := 1; i <= n; i++ {
			if _, err := x.Append(int64(i), batch.Offset(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil { // no Trim: the file stays 4 MiB
			t.Fatal(err)
		}
		y, err := OpenTimeIndex(fsys, path, 0, maxBytes, true)
		if err != nil {
			t.Fatal(err)
		}
		defer y.Close()
		if y.Len() != n {
			t.Fatalf("reopened: %d entries, want %d", y.Len(), n)
		}
		if last, _ := y.Last(); last != (TimeEntry{n, n}) {
			t.Fatalf("last entry %+v", last)
		}
	})
}
