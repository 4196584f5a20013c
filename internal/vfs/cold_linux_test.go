package vfs

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the pages of f's first n bytes that are in the page cache (mincore).
func resident(t *testing.T, f *os.File, n int) int {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	c := 0
	for _, v := range vec {
		c += int(v & 1)
	}
	return c
}

// ReadCold leaves the page cache as it found it: pages it had to read from the disk are
// dropped after, pages that were cached stay cached; and it returns the file's bytes either way.
func TestReadColdKeepsTheCacheAsItWas(t *testing.T) {
	const n = 4 << 20
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, n, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	pages := n / os.Getpagesize()
	if r := resident(t, f, n); r > pages/10 {
		t.Skipf("this file system keeps the file cached after DONTNEED (%d of %d pages; tmpfs does): nothing to observe", r, pages)
	}
	buf := make([]byte, n)
	got, err := ReadCold(osFile{f}, buf, 0)
	if err != nil || got != n || string(buf) != string(data) {
		t.Fatalf("cold ReadCold: %d bytes, %v, equal %v", got, err, string(buf) == string(data))
	}
	if r := resident(t, f, n); r > pages/10 {
		t.Fatalf("%d of %d pages cached after a cold ReadCold, want them dropped", r, pages)
	}
	// Cached by an ordinary read: ReadCold keeps them.
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	clear(buf)
	if got, err := ReadCold(osFile{f}, buf, 0); err != nil || got != n || string(buf) != string(data) {
		t.Fatalf("hot ReadCold: %d bytes, %v", got, err)
	}
	if r := resident(t, f, n); r < pages*9/10 {
		t.Fatalf("%d of %d pages cached after a hot ReadCold, want all kept", r, pages)
	}
	// Past the end: a short read with io.EOF, as ReadAt.
	if got, err := ReadCold(osFile{f}, make([]byte, 10), n-4); got != 4 || err == nil {
		t.Fatalf("ReadCold at the end: %d, %v", got, err)
	}
}
