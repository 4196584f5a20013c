package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// fileSystems runs a test against the OS (in a temp dir) and MemFS alike: both must honour the
// same contract.
func fileSystems(t *testing.T, fn func(t *testing.T, fsys FS, dir string)) {
	t.Run("os", func(t *testing.T) { fn(t, Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		m := NewMemFS()
		if err := m.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		fn(t, m, "/data")
	})
}

func TestContract(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "a")
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("hello"), 3); err != nil {
			t.Fatal(err)
		}
		if size, _ := f.Size(); size != 8 {
			t.Fatalf("size %d, want 8 (a write past the end extends with zeros)", size)
		}
		buf := make([]byte, 8)
		if _, err := f.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, []byte("\x00\x00\x00hello")) {
			t.Fatalf("read %q", buf)
		}
		if n, err := f.ReadAt(buf, 6); n != 2 || err != io.EOF {
			t.Fatalf("short read at end: n=%d err=%v, want 2, EOF", n, err)
		}
		if err := f.Truncate(4096); err != nil {
			t.Fatal(err)
		}
		m, err := f.Map(4096)
		if err != nil {
			t.Fatal(err)
		}
		copy(m.Bytes()[100:], "mapped")
		if err := m.Flush(100, 6); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 6)
		if _, err := f.ReadAt(got, 100); err != nil || string(got) != "mapped" {
			t.Fatalf("write through mapping not visible to ReadAt: %q %v", got, err)
		}
		if err := m.Unmap(); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(106); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename(name, filepath.Join(dir, "b")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
		names, err := fsys.ReadDir(dir)
		if err != nil || len(names) != 1 || names[0] != "b" {
			t.Fatalf("ReadDir = %v, %v", names, err)
		}
		if _, err := fsys.Open(name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open renamed-away file: %v, want ErrNotExist", err)
		}
		if err := fsys.Remove(filepath.Join(dir, "b")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFdOf(t *testing.T) {
	f, err := Default.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := FdOf(f); !ok {
		t.Fatal("OS file has no descriptor")
	}
	wrapped, err := (&ErrorFS{FS: Default}).Create(filepath.Join(t.TempDir(), "y"))
	if err != nil {
		t.Fatal(err)
	}
	defer wrapped.Close()
	if _, ok := FdOf(wrapped); !ok {
		t.Fatal("FdOf does not look through ErrorFS")
	}
	mem, _ := NewMemFS().Create("/z")
	if _, ok := FdOf(mem); ok {
		t.Fatal("MemFS file claims a descriptor")
	}
}

func readAll(t *testing.T, fsys FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Size()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

func TestMemCrashDropsUnsynced(t *testing.T) {
	m := NewMemFS()
	_ = m.MkdirAll("/d", 0o755)
	synced, _ := m.Create("/d/synced")
	_, _ = synced.WriteAt([]byte("durable"), 0)
	_ = synced.Sync()
	_, _ = synced.WriteAt([]byte("-lost"), 7)
	_ = m.SyncDir("/d")
	unsyncedEntry, _ := m.Create("/d/new")
	_, _ = unsyncedEntry.WriteAt([]byte("x"), 0)
	_ = unsyncedEntry.Sync() // contents synced, entry not

	after := m.Crash(CrashOptions{})
	if got := readAll(t, after, "/d/synced"); string(got) != "durable" {
		t.Fatalf("after crash: %q, want %q", got, "durable")
	}
	if _, err := after.Open("/d/new"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("entry created after the last SyncDir survived: %v", err)
	}
	if _, err := synced.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("old handle still writable after crash: %v", err)
	}
	if _, err := m.Create("/d/z"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashed FS still usable: %v", err)
	}
}

func TestMemCrashKeepsPrefixAndTears(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		m := NewMemFS()
		_ = m.MkdirAll("/d", 0o755)
		f, _ := m.Create("/d/f")
		_ = m.SyncDir("/d")
		base := bytes.Repeat([]byte{'s'}, 5000)
		_, _ = f.WriteAt(base, 0)
		_ = f.Sync()
		extra := bytes.Repeat([]byte{'u'}, 9000)
		_, _ = f.WriteAt(extra, int64(len(base)))
		after := m.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 1)), KeepUnsyncedPrefix: true, TearLastPage: true})
		got := readAll(t, after, "/d/f")
		if len(got) < len(base) || len(got) > len(base)+len(extra) {
			t.Fatalf("seed %d: size %d outside [synced, written]", seed, len(got))
		}
		if !bytes.Equal(got[:len(base)], base) {
			t.Fatalf("seed %d: synced bytes changed by a crash", seed)
		}
		// Only the last page of the kept region may differ from what was written.
		lastPage := (len(got) - 1) / PageSize * PageSize
		for i := len(base); i < min(lastPage, len(got)); i++ {
			if got[i] != 'u' {
				t.Fatalf("seed %d: byte %d torn outside the last page", seed, i)
			}
		}
	}
}

func TestMemMappingFlushIsDurable(t *testing.T) {
	m := NewMemFS()
	_ = m.MkdirAll("/d", 0o755)
	f, _ := m.Create("/d/idx")
	_ = m.SyncDir("/d")
	_ = f.Truncate(8192)
	mp, err := f.Map(8192)
	if err != nil {
		t.Fatal(err)
	}
	copy(mp.Bytes(), "flushed")
	_ = mp.Flush(0, 7)
	copy(mp.Bytes()[7:], "-unflushed")
	if err := f.Truncate(10); !errors.Is(err, ErrMapped) {
		t.Fatalf("truncate while mapped: %v, want ErrMapped", err)
	}
	after := m.Crash(CrashOptions{})
	if got := readAll(t, after, "/d/idx"); string(got) != "flushed" {
		t.Fatalf("after crash: %q", got)
	}
}

func TestErrorFS(t *testing.T) {
	mem := NewMemFS()
	_ = mem.MkdirAll("/d", 0o755)
	efs := &ErrorFS{FS: mem, Inject: FailAfter(OpSync, 1, ENOSPC)}
	f, err := efs.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	if err := f.Sync(); !errors.Is(err, ENOSPC) {
		t.Fatalf("second sync: %v, want ENOSPC", err)
	}
	var counts [NumOps]atomic.Int64
	cfs := &ErrorFS{FS: mem, Inject: Count(&counts)}
	g, _ := cfs.OpenReadWrite("/d/f")
	_, _ = g.WriteAt([]byte("abc"), 0)
	_, _ = g.ReadAt(make([]byte, 3), 0)
	_, _ = g.ReadAt(make([]byte, 3), 0)
	if counts[OpRead].Load() != 2 || counts[OpWrite].Load() != 1 || counts[OpOpen].Load() != 1 {
		t.Fatalf("counts read=%d write=%d open=%d", counts[OpRead].Load(), counts[OpWrite].Load(), counts[OpOpen].Load())
	}
}

// WriteBack and Preallocate are advice: on files that cannot (MemFS) they do nothing, and
// through ErrorFS they reach the OS file underneath after the injector had its say.
func TestWriteBackAndPreallocateAreAdvice(t *testing.T) {
	m := NewMemFS()
	mf, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(WriteBack(mf, 0, 4096), Preallocate(mf, 0, 1<<20)); err != nil {
		t.Fatalf("on MemFS: %v", err)
	}
	var counts [NumOps]atomic.Int64
	efs := &ErrorFS{FS: Default, Inject: Count(&counts)}
	f, err := efs.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 8192), 0); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(WriteBack(f, 0, 8192), Preallocate(f, 8192, 1<<20)); err != nil {
		t.Fatalf("on the OS through ErrorFS: %v", err)
	}
	if counts[OpWriteBack].Load() != 1 || counts[OpPreallocate].Load() != 1 {
		t.Fatalf("injector saw %d writebacks, %d preallocations; want 1 each", counts[OpWriteBack].Load(), counts[OpPreallocate].Load())
	}
	if size, err := f.Size(); err != nil || size != 8192 {
		t.Fatalf("size %d, %v after Preallocate: it must keep the size", size, err)
	}
	failing := &ErrorFS{FS: Default, Inject: FailAfter(OpWriteBack, 0, EIO)}
	g, err := failing.Create(filepath.Join(t.TempDir(), "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := WriteBack(g, 0, 4096); !errors.Is(err, EIO) {
		t.Fatalf("injected writeback error: %v", err)
	}
}
