package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// plPair drives a PowerLossFS over a real directory and a MemFS with the same operations, so
// that after RollBack the directory can be compared with what MemFS.Crash keeps: the
// differential test of the power-loss model.
type plPair struct {
	t       *testing.T
	dir     string
	journal string
	pl      *PowerLossFS
	mem     *MemFS
	log     []string // the operations, for a failure's message
}

func newPLPair(t *testing.T) *plPair {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(root, "journal")
	pl, err := NewPowerLossFS(journal)
	if err != nil {
		t.Fatal(err)
	}
	mem := NewMemFS()
	if err := mem.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &plPair{t: t, dir: dir, journal: journal, pl: pl, mem: mem}
}

func (p *plPair) path(name string) string { return filepath.Join(p.dir, name) }

// both runs op on each file system and fails the test if their errors differ in kind.
func (p *plPair) both(desc string, op func(fsys FS) error) {
	p.t.Helper()
	p.log = append(p.log, desc)
	errPL, errMem := op(p.pl), op(p.mem)
	if (errPL == nil) != (errMem == nil) {
		p.t.Fatalf("%s: power-loss FS %v, MemFS %v\nops: %v", desc, errPL, errMem, p.log)
	}
}

func withFile(fsys FS, name string, fn func(File) error) error {
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return err
	}
	return errors.Join(fn(f), f.Close())
}

// randomOps applies n random operations on files a, b and c: appends, overwrites (of synced
// bytes too), syncs, truncations, creates over existing files, writes and flushes through a
// mapping, renames and removes.
func (p *plPair) randomOps(rng *rand.Rand, n int, names []string) {
	p.t.Helper()
	sizes := map[string]int64{} // the live size, as both see it
	for range n {
		name := names[rng.IntN(len(names))]
		path := p.path(name)
		size := sizes[name]
		switch k := rng.IntN(10); {
		case k < 3: // write: an append or an overwrite
			off := size
			if size > 0 && rng.IntN(2) == 0 {
				off = rng.Int64N(size)
			}
			data := randBytes(rng, 1+rng.IntN(3*PageSize))
			p.both(fmt.Sprintf("write %s %d+%d", name, off, len(data)), func(fsys FS) error {
				return withFile(fsys, path, func(f File) error { _, err := f.WriteAt(data, off); return err })
			})
			sizes[name] = max(size, off+int64(len(data)))
		case k < 5:
			p.both("sync "+name, func(fsys FS) error {
				return withFile(fsys, path, func(f File) error { return f.Sync() })
			})
			sizes[name] = size
		case k < 6:
			to := rng.Int64N(size + 2*PageSize + 1)
			p.both(fmt.Sprintf("truncate %s %d", name, to), func(fsys FS) error {
				return withFile(fsys, path, func(f File) error { return f.Truncate(to) })
			})
			sizes[name] = to
		case k < 7:
			if rng.IntN(3) > 0 {
				continue
			}
			p.both("create "+name, func(fsys FS) error {
				f, err := fsys.Create(path)
				if err != nil {
					return err
				}
				return f.Close()
			})
			sizes[name] = 0
		case k < 9: // through a mapping: a write flushed, then (shadowed now) one not flushed
			if size == 0 {
				continue
			}
			a := rng.Int64N(size)
			b := a + 1 + rng.Int64N(size-a)
			c := rng.Int64N(size)
			d := c + 1 + rng.Int64N(size-c)
			w1, w2 := randBytes(rng, int(b-a)), randBytes(rng, int(d-c))
			p.both(fmt.Sprintf("map %s flush [%d,%d) then write [%d,%d)", name, a, b, c, d), func(fsys FS) error {
				return withFile(fsys, path, func(f File) error {
					m, err := f.Map(int(size))
					if err != nil {
						return err
					}
					copy(m.Bytes()[a:b], w1)
					err = m.Flush(int(a), int(b-a))
					copy(m.Bytes()[c:d], w2)
					return errors.Join(err, m.Unmap())
				})
			})
		default: // rename over another name, or remove
			other := names[rng.IntN(len(names))]
			if _, ok := sizes[name]; !ok || other == name {
				continue
			}
			if rng.IntN(4) == 0 {
				p.both("remove "+name, func(fsys FS) error { return fsys.Remove(path) })
				delete(sizes, name)
				continue
			}
			p.both("rename "+name+" "+other, func(fsys FS) error { return fsys.Rename(path, p.path(other)) })
			sizes[other] = size
			delete(sizes, name)
		}
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// crashAndCompare rolls the directory back and compares it with MemFS's crash under the same
// options (two rands seeded alike).
func (p *plPair) crashAndCompare(opts func() CrashOptions) RollBackReport {
	p.t.Helper()
	after := p.mem.Crash(opts())
	if err := p.pl.Close(); err != nil {
		p.t.Fatal(err)
	}
	rep, err := RollBack(p.journal, opts())
	if err != nil {
		p.t.Fatal(err)
	}
	want, err := after.ReadDir(p.dir)
	if err != nil {
		p.t.Fatal(err)
	}
	got, err := Default.ReadDir(p.dir)
	if err != nil {
		p.t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		p.t.Fatalf("files %v, MemFS keeps %v\nops: %v", got, want, p.log)
	}
	for _, name := range want {
		w := readAllFS(p.t, after, p.path(name))
		g, err := os.ReadFile(p.path(name))
		if err != nil {
			p.t.Fatal(err)
		}
		if !bytes.Equal(g, w) {
			p.t.Fatalf("%s: %d bytes after the roll back, MemFS keeps %d (first difference at %d)\nops: %v",
				name, len(g), len(w), firstDiff(g, w), p.log)
		}
	}
	if left, _ := filepath.Glob(p.journal + "*"); len(left) != 0 {
		p.t.Fatalf("RollBack left %v", left)
	}
	return rep
}

func readAllFS(t *testing.T, fsys FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		t.Fatal(err)
	}
	return b
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// After any sequence of operations, RollBack leaves the files MemFS.Crash (keeping directory
// entries, which PowerLossFS takes as durable at once) keeps: synced bytes, overwritten
// synced bytes restored, flushed mapped ranges kept and unflushed ones dropped, creates and
// truncations not synced undone. Half the seeds compact the journal every few records.
func TestPowerLossMatchesMemFSCrash(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			p := newPLPair(t)
			if seed%2 == 1 {
				p.pl.j.mu.limit, p.pl.j.minLimit = 256, 256
			}
			p.randomOps(rng, 40, []string{"a", "b", "c"})
			p.crashAndCompare(func() CrashOptions { return CrashOptions{KeepUnsyncedEntries: true} })
		})
	}
}

// With KeepUnsyncedPrefix and TearLastPage, a file keeps a random prefix of its unsynced
// appends with the last page torn, drawn from the rand exactly as MemFS.Crash draws it (one
// file, so that both take the same draws).
func TestPowerLossKeepsTornPrefixAsMemFS(t *testing.T) {
	torn := 0
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 2))
			p := newPLPair(t)
			p.randomOps(rng, 20, []string{"a"})
			// Unsynced appends past the end, so that there is something to keep.
			p.both("append", func(fsys FS) error {
				return withFile(fsys, p.path("a"), func(f File) error {
					size, err := f.Size()
					if err != nil {
						return err
					}
					_, err = f.WriteAt(randBytes(rand.New(rand.NewPCG(seed, 3)), 3*PageSize+100), size)
					return err
				})
			})
			rep := p.crashAndCompare(func() CrashOptions {
				return CrashOptions{Rand: rand.New(rand.NewPCG(seed, 4)), KeepUnsyncedPrefix: true, TearLastPage: true,
					KeepUnsyncedEntries: true}
			})
			torn += rep.TornFiles
		})
	}
	if torn == 0 {
		t.Fatal("no seed tore a page")
	}
}

// The report counts what was undone, and a file created and never synced is emptied but kept.
func TestPowerLossRollBackReport(t *testing.T) {
	root := t.TempDir()
	journal := filepath.Join(root, "journal")
	pl, err := NewPowerLossFS(journal)
	if err != nil {
		t.Fatal(err)
	}
	a, err := pl.Create(filepath.Join(root, "a"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, a, bytes.Repeat([]byte{1}, 100), 0)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, a, bytes.Repeat([]byte{2}, 10), 50)   // overwrites synced bytes
	mustWrite(t, a, bytes.Repeat([]byte{3}, 900), 100) // 900 unsynced
	b, err := pl.Create(filepath.Join(root, "b"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, b, []byte("never synced"), 0)
	if err := errors.Join(a.Close(), b.Close(), pl.Close()); err != nil {
		t.Fatal(err)
	}
	rep, err := RollBack(journal, CrashOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := RollBackReport{Files: 2, BytesLost: 912, Overwrites: 1}
	if rep != want {
		t.Fatalf("report %+v, want %+v", rep, want)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "a")); !bytes.Equal(got, bytes.Repeat([]byte{1}, 100)) {
		t.Fatalf("a after the roll back: %d bytes %x...", len(got), got[:min(len(got), 60)])
	}
	if fi, err := os.Stat(filepath.Join(root, "b")); err != nil || fi.Size() != 0 {
		t.Fatalf("b after the roll back: %v, %v (want kept, empty)", fi, err)
	}
}

func mustWrite(t *testing.T, f File, p []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

// Two thousand syncs journal two thousand records and the journal stays under its bound:
// compaction rewrites it as one record per file.
func TestPowerLossJournalCompacts(t *testing.T) {
	root := t.TempDir()
	journal := filepath.Join(root, "journal")
	pl, err := NewPowerLossFS(journal)
	if err != nil {
		t.Fatal(err)
	}
	pl.j.mu.limit, pl.j.minLimit = 1024, 1024
	f, err := pl.Create(filepath.Join(root, "log"))
	if err != nil {
		t.Fatal(err)
	}
	rec := []byte("0123456789")
	for i := range 2000 {
		mustWrite(t, f, rec, int64(i*len(rec)))
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if size := pl.JournalSize(); size > 2048 {
			t.Fatalf("journal %d bytes after %d syncs", size, i+1)
		}
	}
	mustWrite(t, f, rec, 20000)
	if err := errors.Join(f.Close(), pl.Close()); err != nil {
		t.Fatal(err)
	}
	if _, err := RollBack(journal, CrashOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, "log")); err != nil || fi.Size() != 20000 {
		t.Fatalf("log after the roll back: %v, %v; want the 20000 synced bytes", fi, err)
	}
}

// A journal cut in the middle of its last record (the kill came during the write) is read up
// to that record: the operation had not returned.
func TestPowerLossJournalCutShort(t *testing.T) {
	root := t.TempDir()
	journal := filepath.Join(root, "journal")
	pl, err := NewPowerLossFS(journal)
	if err != nil {
		t.Fatal(err)
	}
	f, err := pl.Create(filepath.Join(root, "log"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, make([]byte, 100), 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, make([]byte, 100), 100)
	before := pl.JournalSize()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Close(), pl.Close()); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(journal, before+3); err != nil {
		t.Fatal(err)
	}
	if _, err := RollBack(journal, CrashOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(root, "log")); fi.Size() != 100 {
		t.Fatalf("log %d bytes, want 100 (the second sync's record was cut)", fi.Size())
	}
	if _, err := RollBack(filepath.Join(root, "log"), CrashOptions{}); !errors.Is(err, ErrBadJournal) {
		t.Fatalf("RollBack of a file that is no journal: %v", err)
	}
}

// While the disk is full, writes, creates, growing truncations, preallocation, populate
// advice and syncs of written files fail with ENOSPC (an *os.PathError); a sync with nothing
// to write, a shrinking truncation and reads go on. Turned off, all work again.
func TestPowerLossDiskFull(t *testing.T) {
	root := t.TempDir()
	pl, err := NewPowerLossFS(filepath.Join(root, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	f, err := pl.Create(filepath.Join(root, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mustWrite(t, f, make([]byte, 2*PageSize), 0)
	m, err := f.Map(2 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	pl.SetDiskFull(true)
	isNoSpace := func(what string, err error) {
		t.Helper()
		var pe *os.PathError
		if !errors.As(err, &pe) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s on a full disk: %v, want ENOSPC as an *os.PathError", what, err)
		}
	}
	_, err = f.WriteAt([]byte("x"), 0)
	isNoSpace("write", err)
	_, err = pl.Create(filepath.Join(root, "new"))
	isNoSpace("create", err)
	_, err = pl.OpenReadWrite(filepath.Join(root, "new"))
	isNoSpace("open read-write of a new file", err)
	isNoSpace("truncate that grows", f.Truncate(3*PageSize))
	isNoSpace("preallocate", Preallocate(f, 0, 1<<20))
	isNoSpace("populate", Populate(m, 0, PageSize))
	isNoSpace("sync of a written file", f.Sync())
	pl.SetDiskFull(false)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	pl.SetDiskFull(true)
	if err := f.Sync(); err != nil {
		t.Fatalf("sync with nothing written on a full disk: %v", err)
	}
	if _, err := f.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := pl.OpenReadWrite(filepath.Join(root, "log")); err != nil {
		t.Fatalf("open read-write of an existing file on a full disk: %v", err)
	}
	pl.SetDiskFull(false)
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
}

// A PowerLossFS file still reaches its descriptor (sendfile) and the OS file's advice through
// the wrappers.
func TestPowerLossFileUnwraps(t *testing.T) {
	root := t.TempDir()
	pl, err := NewPowerLossFS(filepath.Join(root, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	for _, open := range []func(string) (File, error){pl.Create, pl.OpenReadWrite, pl.Open} {
		f, err := open(filepath.Join(root, "log"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := FdOf(f); !ok {
			t.Fatal("FdOf found no descriptor")
		}
		if _, ok := as[WriteBacker](f); !ok {
			t.Fatal("no WriteBack through the wrapper")
		}
		f.Close()
	}
}

// TestPowerLossFlushAfterClose: the index package maps its file and closes the handle; a
// later Flush of the mapping (the first one starts the file's shadow) must still work, and a
// RollBack must keep exactly what was flushed. (Found by sluice chaos: every index truncation
// of a follower on a PowerLossFS failed with "file already closed" and stopped its log.)
func TestPowerLossFlushAfterClose(t *testing.T) {
	root := t.TempDir()
	journal := filepath.Join(root, "journal")
	pl, err := NewPowerLossFS(journal)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(root, "00000000000000000000.index")
	f, err := pl.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 * PageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // durable contents for the shadow to start from
		t.Fatal(err)
	}
	m, err := f.Map(2 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	copy(b, "flushed")
	if err := m.Flush(0, PageSize); err != nil {
		t.Fatalf("Flush after the handle closed: %v", err)
	}
	copy(b[PageSize:], "not flushed")
	if err := m.Unmap(); err != nil {
		t.Fatal(err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := RollBack(journal, CrashOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, []byte("flushed")) || bytes.Contains(got, []byte("not flushed")) {
		t.Errorf("after the roll back the file holds %q..., want the flushed page only", got[:16])
	}
}
