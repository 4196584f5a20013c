package vfs

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// threadMinorFaults is the calling thread's count of minor page faults.
func threadMinorFaults(t *testing.T) int64 {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// Writes to pages that Populate faulted in take no page fault, and the file's contents and size
// do not change; without Populate, each page's first write faults (the control, which shows the
// count can tell). The per-thread count now and then includes a fault the runtime takes on the
// same thread, so a populated run is measured afresh up to three times and the least count
// kept, as index's leastFaults does: a Populate that did nothing shows one fault per page every
// time.
func TestPopulateSparesTheWritersFaults(t *testing.T) {
	const pages, strayFaults = 16, 1
	page := unix.Getpagesize()
	writeFaults := func(populate bool) int64 {
		f, err := Default.Create(filepath.Join(t.TempDir(), "idx"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(int64(pages * page)); err != nil {
			t.Fatal(err)
		}
		m, err := f.Map(pages * page)
		if err != nil {
			t.Fatal(err)
		}
		if populate {
			// Through ErrorFS's wrapper, as the index sees it under fault injection.
			wrapped := &errorMapping{Mapping: m, f: &errorFile{fs: &ErrorFS{}, name: "idx"}}
			if err := Populate(wrapped, 100, pages*page-100); err != nil {
				t.Fatal(err)
			}
		}
		b := m.Bytes()
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("byte %d is %d after Populate, want 0", i, b[i])
			}
		}
		runtime.LockOSThread()
		before := threadMinorFaults(t)
		for p := range pages {
			b[p*page+7] = 1
		}
		faults := threadMinorFaults(t) - before
		runtime.UnlockOSThread()
		if size, err := f.Size(); err != nil || size != int64(pages*page) {
			t.Fatalf("size %d (%v), want %d", size, err, pages*page)
		}
		if err := m.Unmap(); err != nil {
			t.Fatal(err)
		}
		return faults
	}
	if faults := writeFaults(false); faults < pages {
		t.Errorf("control: %d page faults writing %d fresh pages, want at least %d", faults, pages, pages)
	}
	least := writeFaults(true)
	for try := 1; try < 3 && least > strayFaults; try++ {
		least = min(least, writeFaults(true))
	}
	if least > strayFaults {
		t.Errorf("%d page faults writing %d populated pages (the least of three tries), want 0", least, pages)
	}
}

// When the file system cannot back a page (EFAULT from MADV_POPULATE_WRITE: a store would
// raise SIGBUS), Populate says why: on a full disk it is ENOSPC ("no space left on device"),
// not the kernel's bare "bad address"; otherwise it names the causes. A page past the file's
// end stands in for a page without a block: the kernel refuses both with EFAULT.
func TestPopulateFaultSaysTheDiskIsFull(t *testing.T) {
	page := unix.Getpagesize()
	f, err := Default.Create(filepath.Join(t.TempDir(), "idx"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(2 * page)); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(2 * page)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	if err := f.Truncate(0); err != nil { // the test's own breach of the contract
		t.Fatal(err)
	}
	err = Populate(m, page, 12)
	if err == nil {
		t.Skip("no MADV_POPULATE_WRITE on this kernel (Linux 5.14): Populate is advice it ignores")
	}
	if !errors.Is(err, unix.EFAULT) || errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("with free space: %v, want EFAULT explained", err)
	}

	saved := freeBytes
	defer func() { freeBytes = saved }()
	freeBytes = func(string) (uint64, error) { return 0, nil }
	err = Populate(m, page, 12)
	if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("on a full disk: %v, want ENOSPC", err)
	}
}
