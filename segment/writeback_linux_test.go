package segment

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// fallocateWorks reports whether dir's file system reserves blocks with fallocate.
func fallocateWorks(t *testing.T, dir string) bool {
	f, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 1 /* FALLOC_FL_KEEP_SIZE */, 0, 1<<20); err != nil {
		t.Logf("fallocate unsupported here (%v): not checking allocated blocks", err)
		return false
	}
	return true
}
