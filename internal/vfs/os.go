package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	mmap "github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return openOS(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
}

func (osFS) Open(name string) (File, error) { return openOS(name, os.O_RDONLY) }

func (osFS) OpenReadWrite(name string) (File, error) {
	return openOS(name, os.O_RDWR|os.O_CREATE)
}

func openOS(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(dir string) error                  { return os.RemoveAll(dir) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile is an operating-system file. Sync, WriteBack and Preallocate depend on the system:
// os_linux.go has the Linux calls, os_other.go the fallbacks elsewhere.
type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f osFile) Map(length int) (Mapping, error) {
	if length <= 0 {
		return nil, fmt.Errorf("vfs: map %s: length %d", f.Name(), length)
	}
	m, err := mmap.MapRegion(f.File, length, mmap.RDWR, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("vfs: map %s: %w", f.Name(), err)
	}
	return osMapping{m: m, name: f.Name()}, nil
}

// osMapping is a mapping of the file name (which Populate's errors look at).
type osMapping struct {
	m    mmap.MMap
	name string
}

func (m osMapping) Bytes() []byte { return m.m }
func (m osMapping) Flush(off, n int) error {
	if off < 0 || n < 0 || off+n > len(m.m) {
		return fmt.Errorf("vfs: flush [%d, %d) of a %d-byte mapping", off, off+n, len(m.m))
	}
	if n == 0 {
		return nil
	}
	// msync wants a page-aligned start.
	start := off &^ (os.Getpagesize() - 1)
	return unix.Msync(m.m[start:off+n], unix.MS_SYNC)
}
func (m osMapping) Unmap() error { return m.m.Unmap() }
