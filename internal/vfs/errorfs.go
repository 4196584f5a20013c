package vfs

import (
	"os"
	"sync/atomic"
	"syscall"
)

// Op names a file-system operation that ErrorFS can fail.
type Op int

const (
	OpCreate Op = iota
	OpOpen
	OpRemove
	OpRename
	OpMkdir
	OpReadDir
	OpSyncDir
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpMap
	OpFlush
	OpWriteBack
	OpPreallocate
	OpPopulate

	// NumOps is the number of operation kinds, for arrays indexed by Op.
	NumOps
)

var opNames = [...]string{"create", "open", "remove", "rename", "mkdir", "readdir", "syncdir",
	"read", "write", "sync", "truncate", "map", "flush", "writeback", "preallocate", "populate"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Injector decides whether an operation on path fails; nil means it goes ahead.
type Injector func(op Op, path string) error

// ErrorFS wraps an FS and asks Inject before every operation. Inject may be called from several
// goroutines at once.
type ErrorFS struct {
	FS     FS
	Inject Injector
}

// FailAfter returns an injector that lets n operations of kind op through and fails every later
// one with err (for example syscall.EIO or syscall.ENOSPC).
func FailAfter(op Op, n int64, err error) Injector {
	var seen atomic.Int64
	return func(o Op, _ string) error {
		if o == op && seen.Add(1) > n {
			return err
		}
		return nil
	}
}

// Count returns an injector that fails nothing and counts operations of each kind.
func Count(counts *[NumOps]atomic.Int64) Injector {
	return func(o Op, _ string) error {
		counts[o].Add(1)
		return nil
	}
}

// Switch is a fault that a test turns on and off: while on, operations of kind Op on a path
// that Match accepts fail with Err, and Hits counts them. Its Inject is an Injector.
type Switch struct {
	Op    Op
	Match func(path string) bool
	Err   error
	on    atomic.Bool
	hits  atomic.Int64
}

// Set turns the fault on or off.
func (s *Switch) Set(on bool) { s.on.Store(on) }

// Hits is how many operations the fault has failed.
func (s *Switch) Hits() int64 { return s.hits.Load() }

// Inject fails op on path with Err while the fault is on and the operation is the one it
// names.
func (s *Switch) Inject(op Op, path string) error {
	if s.on.Load() && op == s.Op && s.Match(path) {
		s.hits.Add(1)
		return s.Err
	}
	return nil
}

// Convenience errors as a disk returns them.
var (
	EIO    error = syscall.EIO
	ENOSPC error = syscall.ENOSPC
)

func (e *ErrorFS) check(op Op, path string) error {
	if e.Inject == nil {
		return nil
	}
	if err := e.Inject(op, path); err != nil {
		return &os.PathError{Op: op.String(), Path: path, Err: err}
	}
	return nil
}

func (e *ErrorFS) wrap(f File, err error, name string) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, fs: e, name: name}, nil
}

func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Create(name)
	return e.wrap(f, err, name)
}

func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Open(name)
	return e.wrap(f, err, name)
}

func (e *ErrorFS) OpenReadWrite(name string) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.OpenReadWrite(name)
	return e.wrap(f, err, name)
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.FS.Remove(name)
}

func (e *ErrorFS) RemoveAll(dir string) error {
	if err := e.check(OpRemove, dir); err != nil {
		return err
	}
	return e.FS.RemoveAll(dir)
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, newname); err != nil {
		return err
	}
	return e.FS.Rename(oldname, newname)
}

func (e *ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.check(OpMkdir, dir); err != nil {
		return err
	}
	return e.FS.MkdirAll(dir, perm)
}

func (e *ErrorFS) ReadDir(dir string) ([]string, error) {
	if err := e.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	return e.FS.ReadDir(dir)
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.check(OpSyncDir, dir); err != nil {
		return err
	}
	return e.FS.SyncDir(dir)
}

type errorFile struct {
	File
	fs   *ErrorFS
	name string
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

// WriteAt fails before writing anything: a short write that reports an error is modelled by the
// caller seeing the error, which is what matters for "never acknowledge what was not written".
func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errorFile) WriteBack(off, n int64) error {
	if err := f.fs.check(OpWriteBack, f.name); err != nil {
		return err
	}
	return WriteBack(f.File, off, n)
}

func (f *errorFile) Preallocate(off, n int64) error {
	if err := f.fs.check(OpPreallocate, f.name); err != nil {
		return err
	}
	return Preallocate(f.File, off, n)
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *errorFile) Map(length int) (Mapping, error) {
	if err := f.fs.check(OpMap, f.name); err != nil {
		return nil, err
	}
	m, err := f.File.Map(length)
	if err != nil {
		return nil, err
	}
	return &errorMapping{Mapping: m, f: f}, nil
}

// Unwrap lets FdOf reach the OS file underneath, so sendfile paths still work under ErrorFS.
func (f *errorFile) Unwrap() File { return f.File }

type errorMapping struct {
	Mapping
	f *errorFile
}

// Populate fails as injected, or asks the mapping underneath (vfs.Populate: advice it may not
// take).
func (m *errorMapping) Populate(off, n int) error {
	if err := m.f.fs.check(OpPopulate, m.f.name); err != nil {
		return err
	}
	return Populate(m.Mapping, off, n)
}

func (m *errorMapping) Flush(off, n int) error {
	if err := m.f.fs.check(OpFlush, m.f.name); err != nil {
		return err
	}
	return m.Mapping.Flush(off, n)
}
