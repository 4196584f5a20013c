package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

func memDir(t *testing.T) (*vfs.MemFS, string) {
	t.Helper()
	m := vfs.NewMemFS()
	if err := m.MkdirAll("/seg", 0o755); err != nil {
		t.Fatal(err)
	}
	return m, "/seg"
}

// both runs fn on the OS file system and on MemFS.
func both(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { fn(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) { m, d := memDir(t); fn(t, m, d) })
}

func TestOffsetIndexLookup(t *testing.T) {
	both(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const base = 1000
		x, err := OpenOffsetIndex(fsys, filepath.Join(dir, "a.index"), base, 1024, true)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		// Batches of 10 records; an entry every other batch at 4 KiB strides.
		for i := 1; i <= 20; i++ {
			if err := x.Append(base+batch.Offset(i*10), Pos(i*4096)); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			target batch.Offset
			want   OffsetEntry
		}{
			{0, OffsetEntry{base, 0}},
			{base, OffsetEntry{base, 0}},
			{base + 9, OffsetEntry{base, 0}},
			{base + 10, OffsetEntry{base + 10, 4096}},
			{base + 15, OffsetEntry{base + 10, 4096}},
			{base + 199, OffsetEntry{base + 190, 19 * 4096}},
			{base + 200, OffsetEntry{base + 200, 20 * 4096}},
			{base + 1<<40, OffsetEntry{base + 200, 20 * 4096}},
		}
		for _, tc := range tests {
			if got := x.Lookup(tc.target); got != tc.want {
				t.Errorf("Lookup(%d) = %+v, want %+v", tc.target, got, tc.want)
			}
		}
		if got := x.LookupPos(4096*3 + 5); got != (OffsetEntry{base + 30, 3 * 4096}) {
			t.Errorf("LookupPos = %+v", got)
		}
		if err := x.Append(base+200, 21*4096); !errors.Is(err, ErrOrder) {
			t.Errorf("non-increasing offset accepted: %v", err)
		}
		if err := x.Append(base+210, 20*4096); !errors.Is(err, ErrOrder) {
			t.Errorf("non-increasing position accepted: %v", err)
		}
		if err := x.Check(21 * 4096); err != nil {
			t.Errorf("Check: %v", err)
		}
		if err := x.Check(20 * 4096); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Check with an entry past the log end: %v", err)
		}
	})
}

func TestOffsetIndexFullTruncateTrimReopen(t *testing.T) {
	both(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := filepath.Join(dir, "b.index")
		x, err := OpenOffsetIndex(fsys, path, 0, 10*OffsetEntrySize+3, true)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 10; i++ {
			if err := x.Append(batch.Offset(i), Pos(i*100)); err != nil {
				t.Fatal(err)
			}
		}
		if !x.Full() {
			t.Fatal("index with 10 of 10 entries not full")
		}
		if err := x.Append(11, 1100); !errors.Is(err, ErrFull) {
			t.Fatalf("append to full index: %v", err)
		}
		if err := x.TruncateTo(8); err != nil {
			t.Fatal(err)
		}
		if x.Len() != 7 {
			t.Fatalf("after TruncateTo(8): %d entries, want 7", x.Len())
		}
		if err := x.TruncateToPos(650); err != nil {
			t.Fatal(err)
		}
		if x.Len() != 6 {
			t.Fatalf("after TruncateToPos(650): %d entries, want 6", x.Len())
		}
		if err := x.Trim(); err != nil {
			t.Fatal(err)
		}
		if err := x.Append(7, 700); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("append after trim: %v", err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		// Trimmed file: exactly its entries.
		f, _ := fsys.Open(path)
		size, _ := f.Size()
		_ = f.Close()
		if size != 6*OffsetEntrySize {
			t.Fatalf("trimmed size %d, want %d", size, 6*OffsetEntrySize)
		}
		y, err := OpenOffsetIndex(fsys, path, 0, 1024, true)
		if err != nil {
			t.Fatal(err)
		}
		defer y.Close()
		if y.Len() != 6 || y.Lookup(100) != (OffsetEntry{6, 600}) {
			t.Fatalf("reopened: len %d lookup %+v", y.Len(), y.Lookup(100))
		}
		if err := y.Append(7, 700); err != nil {
			t.Fatalf("append after writable reopen: %v", err)
		}
	})
}

// An index that was preallocated and never trimmed (an unclean stop) is read back with exactly
// the entries that were flushed.
func TestOffsetIndexUntrimmedAfterCrash(t *testing.T) {
	m, dir := memDir(t)
	path := filepath.Join(dir, "c.index")
	x, err := OpenOffsetIndex(m, path, 0, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	_ = m.SyncDir(dir)
	for i := 1; i <= 5; i++ {
		_ = x.Append(batch.Offset(i), Pos(i*10))
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = x.Append(6, 60) // never flushed
	after := m.Crash(vfs.CrashOptions{})
	y, err := OpenOffsetIndex(after, path, 0, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if y.Len() != 5 {
		t.Fatalf("after crash: %d entries, want the 5 flushed", y.Len())
	}
}

func TestIndexOpenRejectsBadSize(t *testing.T) {
	m, dir := memDir(t)
	path := filepath.Join(dir, "d.index")
	f, _ := m.Create(path)
	_, _ = f.WriteAt(make([]byte, 13), 0)
	_, err := OpenOffsetIndex(m, path, 0, 4096, false)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("13-byte offset index: %v, want ErrCorrupt", err)
	}
}

func TestTimeIndex(t *testing.T) {
	both(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x, err := OpenTimeIndex(fsys, filepath.Join(dir, "a.timeindex"), 100, 1200, true)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		for i, e := range []TimeEntry{{1000, 100}, {2000, 110}, {2000, 120}, {1500, 125}, {3000, 130}} {
			added, err := x.Append(e.Timestamp, e.Offset)
			if err != nil {
				t.Fatal(err)
			}
			if wantAdded := i != 2 && i != 3; added != wantAdded {
				t.Errorf("append %+v: added=%v, want %v (only increasing timestamps)", e, added, wantAdded)
			}
		}
		tests := []struct {
			ts   int64
			want TimeEntry
		}{
			{0, TimeEntry{-1, 100}},
			{1000, TimeEntry{-1, 100}},
			{1001, TimeEntry{1000, 100}},
			{2500, TimeEntry{2000, 110}},
			{9999, TimeEntry{3000, 130}},
		}
		for _, tc := range tests {
			if got := x.Lookup(tc.ts); got != tc.want {
				t.Errorf("Lookup(%d) = %+v, want %+v", tc.ts, got, tc.want)
			}
		}
		if err := x.Check(131); err != nil {
			t.Fatal(err)
		}
		if err := x.Check(130); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Check past end: %v", err)
		}
		if err := x.TruncateTo(111); err != nil || x.Len() != 2 {
			t.Fatalf("TruncateTo: %v, len %d", err, x.Len())
		}
	})
}

// Lookups run concurrently with the appender (run under -race).
func TestConcurrentLookups(t *testing.T) {
	m, dir := memDir(t)
	x, err := OpenOffsetIndex(m, filepath.Join(dir, "e.index"), 0, 8*10000, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	done := make(chan error)
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 20000 {
			target := batch.Offset(rng.IntN(20000))
			e := x.Lookup(target)
			if e.Offset > target || (e.Pos != 0 && uint32(e.Pos) != uint32(e.Offset)*2) {
				done <- fmt.Errorf("Lookup(%d) = %+v", target, e)
				return
			}
		}
		done <- nil
	}()
	for i := 1; i < 10000; i++ {
		if err := x.Append(batch.Offset(i), Pos(2*i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func BenchmarkOffsetIndexLookup(b *testing.B) {
	m := vfs.NewMemFS()
	_ = m.MkdirAll("/b", 0o755)
	const entries = 262144 // a full 1 GiB segment at index.interval.bytes 4096
	x, err := OpenOffsetIndex(m, "/b/x.index", 0, entries*OffsetEntrySize, true)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	for i := 1; i <= entries; i++ {
		_ = x.Append(batch.Offset(i*4), Pos(i*4096))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	targets := make([]batch.Offset, 1024)
	for i := range targets {
		targets[i] = batch.Offset(rng.IntN(entries * 4))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = x.Lookup(targets[i%len(targets)])
	}
}

// Lookups run concurrently with the changes that shrink or replace the mapping: a truncation
// of the writable index, then its trim (a roll), then MakeWritable again (a later truncation
// making the segment active), over and over, as a follower's truncations and rolls do (run under
// -race). A lookup that searched the entries under one mapping must not read its answer
// from the next: it used to panic (slice bounds out of range) when a truncation and a trim
// shrank the mapping between the search and the read of the entry it found. Bounded: a fixed
// number of rounds.
func TestLookupsAcrossTruncateAndTrim(t *testing.T) {
	both(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const base = 500
		x, err := OpenOffsetIndex(fsys, filepath.Join(dir, "f.index"), base, 8*64, true)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		ts, err := OpenTimeIndex(fsys, filepath.Join(dir, "f.timeindex"), base, 12*64, true)
		if err != nil {
			t.Fatal(err)
		}
		defer ts.Close()
		var stop atomic.Bool
		errc := make(chan error, 1)
		go func() {
			defer close(errc)
			rng := rand.New(rand.NewPCG(5, 6))
			for !stop.Load() {
				target := base + batch.Offset(rng.IntN(40))
				// Entry i is (base+i, 100*i) in the offset index, (1000+i, base+i) in the
				// time index; anything else is a read of a mapping the entry was not found in.
				if e := x.Lookup(target); e.Offset > target || uint32(e.Pos) != uint32(e.Offset-base)*100 {
					errc <- fmt.Errorf("Lookup(%d) = %+v", target, e)
					return
				}
				if e := x.LookupPos(Pos(rng.IntN(4000))); uint32(e.Pos) != uint32(e.Offset-base)*100 {
					errc <- fmt.Errorf("LookupPos = %+v", e)
					return
				}
				if e := ts.Lookup(1000 + int64(rng.IntN(40))); e.Timestamp != -1 && e.Timestamp != 1000+int64(e.Offset-base) {
					errc <- fmt.Errorf("time Lookup = %+v", e)
					return
				}
				if e, ok := ts.Last(); ok && e.Timestamp != 1000+int64(e.Offset-base) {
					errc <- fmt.Errorf("time Last = %+v", e)
					return
				}
			}
		}()
		rng := rand.New(rand.NewPCG(7, 8))
		for round := range 200 {
			for i := x.Len() + 1; i <= 30; i++ {
				if err := x.Append(base+batch.Offset(i), Pos(100*i)); err != nil {
					t.Fatal(err)
				}
			}
			for i := ts.Len() + 1; i <= 30; i++ {
				if _, err := ts.Append(1000+int64(i), base+batch.Offset(i)); err != nil {
					t.Fatal(err)
				}
			}
			keep := base + batch.Offset(rng.IntN(3))
			if err := errors.Join(x.TruncateTo(keep), ts.TruncateTo(keep)); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(x.Trim(), ts.Trim()); err != nil {
				t.Fatal(err)
			}
			if round%2 == 0 { // a trimmed index truncated further: its mapping shrinks again
				if err := errors.Join(x.TruncateTo(base), ts.TruncateTo(base)); err != nil {
					t.Fatal(err)
				}
			}
			if err := errors.Join(x.MakeWritable(8*64), ts.MakeWritable(12*64)); err != nil {
				t.Fatal(err)
			}
		}
		stop.Store(true)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
