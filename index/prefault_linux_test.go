package index

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
	"golang.org/x/sys/unix"
)

func minorFaults(t *testing.T) int64 {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// After Prefault, the appends that fill the next 64 KiB of the offset index take no page fault
// (without it, about one per page: the control), and the entries read back as appended.
func TestPrefaultSparesAppendsTheirFaults(t *testing.T) {
	perPage := unix.Getpagesize() / OffsetEntrySize
	const pages = 8 // of the 16 prefaulted: Prefault keeps 64 KiB ahead
	for _, prefault := range []bool{false, true} {
		x, err := OpenOffsetIndex(vfs.Default, filepath.Join(t.TempDir(), "0.index"), 0, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		if prefault {
			if err := x.Prefault(); err != nil {
				t.Fatal(err)
			}
		}
		runtime.LockOSThread()
		before := minorFaults(t)
		for i := range pages * perPage {
			if err := x.Append(batch.Offset(i*10+1), Pos(i*4096+4096)); err != nil {
				t.Fatal(err)
			}
		}
		faults := minorFaults(t) - before
		runtime.UnlockOSThread()
		switch {
		case prefault && faults != 0:
			t.Errorf("%d page faults appending %d pages of entries after Prefault, want 0", faults, pages)
		case !prefault && faults < pages/2:
			// About one per page (the first may already be mapped): enough to show the count tells.
			t.Errorf("control: %d page faults appending %d pages of entries, want about %d", faults, pages, pages)
		}
		for _, i := range []int{0, perPage, pages*perPage - 1} {
			if e := x.Entry(i); e.Offset != batch.Offset(i*10+1) || e.Pos != Pos(i*4096+4096) {
				t.Fatalf("entry %d reads %+v", i, e)
			}
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
