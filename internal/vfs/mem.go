package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
)

// PageSize is the unit MemFS tears when a crash keeps part of an unsynced write.
const PageSize = 4096

// MemFS is an in-memory file system that remembers, per file, the bytes that were last synced and,
// per directory, the entries that were last synced. Crash derives the file system that a restart
// after power loss would see. The zero value is not usable; call NewMemFS.
//
// Paths are cleaned with path.Clean; directories exist implicitly once MkdirAll names them.
type MemFS struct {
	mu struct {
		sync.Mutex
		crashed bool
		dirs    map[string]bool
		// files is the live namespace.
		files map[string]*memNode
		// durable is the namespace as of each directory's last SyncDir (and the files created
		// before it): what a crash keeps.
		durable map[string]*memNode
	}
}

// memNode is one file's contents. Guarded by its own mutex so that readers of different files do
// not contend on the file system's lock.
type memNode struct {
	mu     sync.Mutex
	data   []byte
	synced []byte
	maps   int // live mappings; resizing is refused while > 0
}

// NewMemFS returns an empty in-memory file system.
func NewMemFS() *MemFS {
	m := &MemFS{}
	m.mu.dirs = map[string]bool{"/": true, ".": true}
	m.mu.files = map[string]*memNode{}
	m.mu.durable = map[string]*memNode{}
	return m
}

func clean(name string) string { return path.Clean(name) }

func notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (m *MemFS) checkLocked() error {
	if m.mu.crashed {
		return ErrCrashed
	}
	return nil
}

func (m *MemFS) Create(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(); err != nil {
		return nil, err
	}
	if !m.mu.dirs[path.Dir(name)] {
		return nil, notExist("create", name)
	}
	if n, ok := m.mu.files[name]; ok {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.maps > 0 {
			return nil, ErrMapped
		}
		n.data = n.data[:0]
		return &memFile{fs: m, node: n, name: name}, nil
	}
	n := &memNode{}
	m.mu.files[name] = n
	return &memFile{fs: m, node: n, name: name}, nil
}

func (m *MemFS) Open(name string) (File, error) { return m.open(name, false) }

func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open(name, true) }

func (m *MemFS) open(name string, create bool) (File, error) {
	name = clean(name)
	m.mu.Lock()
	if err := m.checkLocked(); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	n, ok := m.mu.files[name]
	m.mu.Unlock()
	if !ok {
		if !create {
			return nil, notExist("open", name)
		}
		return m.Create(name)
	}
	return &memFile{fs: m, node: n, name: name, readOnly: !create}, nil
}

func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(); err != nil {
		return err
	}
	if _, ok := m.mu.files[name]; ok {
		delete(m.mu.files, name)
		return nil
	}
	if m.mu.dirs[name] {
		prefix := name + "/"
		for f := range m.mu.files {
			if strings.HasPrefix(f, prefix) {
				return &fs.PathError{Op: "remove", Path: name, Err: fmt.Errorf("directory not empty")}
			}
		}
		delete(m.mu.dirs, name)
		return nil
	}
	return notExist("remove", name)
}

// RemoveAll removes dir and everything under it. Like the OS, the removal is durable at once in
// this model (removing is what a crash would not undo for the cases the tests care about).
func (m *MemFS) RemoveAll(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(); err != nil {
		return err
	}
	prefix := dir + "/"
	for _, set := range []map[string]*memNode{m.mu.files, m.mu.durable} {
		for f := range set {
			if f == dir || strings.HasPrefix(f, prefix) {
				delete(set, f)
			}
		}
	}
	for d := range m.mu.dirs {
		if d == dir || strings.HasPrefix(d, prefix) {
			delete(m.mu.dirs, d)
		}
	}
	return nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(); err != nil {
		return err
	}
	n, ok := m.mu.files[oldname]
	if !ok {
		return notExist("rename", oldname)
	}
	if !m.mu.dirs[path.Dir(newname)] {
		return notExist("rename", newname)
	}
	delete(m.mu.files, oldname)
	m.mu.files[newname] = n
	return nil
}

func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(); err != nil {
		return err
	}
	for d := dir; ; d = path.Dir(d) {
		m.mu.dirs[d] = true
		if d == "/" || d == "." {
			return nil
		}
	}
}

func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(); err != nil {
		return nil, err
	}
	if !m.mu.dirs[dir] {
		return nil, notExist("readdir", dir)
	}
	var names []string
	for f := range m.mu.files {
		if path.Dir(f) == dir {
			names = append(names, path.Base(f))
		}
	}
	for d := range m.mu.dirs {
		if d != dir && path.Dir(d) == dir {
			names = append(names, path.Base(d))
		}
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir makes dir's current entries the ones a crash keeps.
func (m *MemFS) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkLocked(); err != nil {
		return err
	}
	if !m.mu.dirs[dir] {
		return notExist("syncdir", dir)
	}
	for f := range m.mu.durable {
		if path.Dir(f) == dir {
			delete(m.mu.durable, f)
		}
	}
	for f, n := range m.mu.files {
		if path.Dir(f) == dir {
			m.mu.durable[f] = n
		}
	}
	return nil
}

// CrashOptions says how much of the unsynced state survives a crash.
type CrashOptions struct {
	// Rand drives the choices below; nil means keep nothing unsynced.
	Rand *rand.Rand
	// KeepUnsyncedPrefix keeps, per file, a random prefix of the bytes written past the synced
	// contents, as a kernel that wrote back some dirty pages before the power went.
	KeepUnsyncedPrefix bool
	// TearLastPage overwrites part of the last kept page with garbage, as a torn sector write.
	TearLastPage bool
	// KeepUnsyncedEntries keeps directory entries created since the last SyncDir (ext4 often
	// does); their contents are still only what was synced.
	KeepUnsyncedEntries bool
}

// Crash freezes m (every later operation on it or its open files fails with ErrCrashed) and
// returns the file system a restart would find: each surviving file holds what was last synced,
// plus whatever opts keeps.
func (m *MemFS) Crash(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.crashed = true
	after := NewMemFS()
	for d := range m.mu.dirs {
		after.mu.dirs[d] = true
	}
	survivors := m.mu.durable
	if opts.KeepUnsyncedEntries {
		survivors = m.mu.files
	}
	for name, n := range survivors {
		n.mu.Lock()
		data := append([]byte(nil), n.synced...)
		if opts.Rand != nil && opts.KeepUnsyncedPrefix && len(n.data) > len(n.synced) {
			// Only appends are modelled as partially surviving; rewrites of synced bytes are lost.
			extra := n.data[len(n.synced):]
			keep := opts.Rand.IntN(len(extra) + 1)
			data = append(data, extra[:keep]...)
			if opts.TearLastPage && keep > 0 {
				start := len(data) - (len(data)-1)%PageSize - 1
				if start < len(n.synced) {
					start = len(n.synced)
				}
				from := start + opts.Rand.IntN(len(data)-start)
				for i := from; i < len(data); i++ {
					data[i] = byte(opts.Rand.Uint32())
				}
			}
		}
		n.mu.Unlock()
		after.mu.files[name] = &memNode{data: data, synced: append([]byte(nil), data...)}
		after.mu.durable[name] = after.mu.files[name]
	}
	return after
}

// memFile is an open handle on a memNode.
type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	readOnly bool
}

func (f *memFile) crashed() bool {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.fs.mu.crashed
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.crashed() {
		return 0, ErrCrashed
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if f.crashed() {
		return 0, ErrCrashed
	}
	if f.readOnly || off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	end := off + int64(len(p))
	if end > int64(len(f.node.data)) {
		if f.node.maps > 0 {
			return 0, ErrMapped
		}
		f.node.data = grow(f.node.data, int(end))
	}
	return copy(f.node.data[off:], p), nil
}

// grow extends b to n bytes of which the new ones are zero, keeping amortised growth.
func grow(b []byte, n int) []byte {
	if n <= cap(b) {
		old := len(b)
		b = b[:n]
		clear(b[old:])
		return b
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

func (f *memFile) Close() error { return nil }

func (f *memFile) Sync() error {
	if f.crashed() {
		return ErrCrashed
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	f.node.synced = append(f.node.synced[:0], f.node.data...)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if f.crashed() {
		return ErrCrashed
	}
	if f.readOnly || size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	if f.node.maps > 0 && size != int64(len(f.node.data)) {
		return ErrMapped
	}
	if size <= int64(len(f.node.data)) {
		f.node.data = f.node.data[:size]
		return nil
	}
	f.node.data = grow(f.node.data, int(size))
	return nil
}

func (f *memFile) Size() (int64, error) {
	if f.crashed() {
		return 0, ErrCrashed
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	return int64(len(f.node.data)), nil
}

// Map aliases the file's bytes. Because resizing is refused while mapped, the slice stays valid.
func (f *memFile) Map(length int) (Mapping, error) {
	if f.crashed() {
		return nil, ErrCrashed
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	if length <= 0 || length > len(f.node.data) {
		return nil, fmt.Errorf("vfs: map %s: length %d of file size %d", f.name, length, len(f.node.data))
	}
	f.node.maps++
	return &memMapping{file: f, b: f.node.data[:length:length]}, nil
}

type memMapping struct {
	file *memFile
	b    []byte
	once sync.Once
}

func (m *memMapping) Bytes() []byte { return m.b }

// Flush makes [off, off+n) durable. Bytes of the file past what was ever synced and not in a
// flushed range read back as zeros after a crash, as pages never written back would.
func (m *memMapping) Flush(off, n int) error {
	if m.file.crashed() {
		return ErrCrashed
	}
	if off < 0 || n < 0 || off+n > len(m.b) {
		return fmt.Errorf("vfs: flush [%d, %d) of a %d-byte mapping", off, off+n, len(m.b))
	}
	node := m.file.node
	node.mu.Lock()
	defer node.mu.Unlock()
	if len(node.synced) < off+n {
		node.synced = grow(node.synced, off+n)
	}
	copy(node.synced[off:off+n], m.b[off:off+n])
	return nil
}

func (m *memMapping) Unmap() error {
	m.once.Do(func() {
		m.file.node.mu.Lock()
		m.file.node.maps--
		m.file.node.mu.Unlock()
	})
	return nil
}
