package vfs

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// plFile is a PowerLossFS file: the OS file, with the journal told what becomes durable.
type plFile struct {
	File // the osFile
	fs   *PowerLossFS
	node *plNode
	name string
}

// Unwrap lets FdOf, WriteBack, DataEnd and ReadCold reach the OS file (sendfile works).
func (f *plFile) Unwrap() File { return f.File }

func (f *plFile) WriteAt(p []byte, off int64) (int, error) {
	defer f.fs.maybeCompact()
	if f.fs.full.Load() {
		return 0, noSpace("write", f.name)
	}
	n := f.node
	n.mu.Lock()
	n.mu.dirty = true
	if n.mu.shadow != nil || n.mu.removed || off >= n.mu.synced {
		// An append (or a file whose durable contents are kept elsewhere): nothing to save.
		n.mu.Unlock()
		return f.File.WriteAt(p, off)
	}
	defer n.mu.Unlock()
	if err := f.fs.preImageLocked(n, f.File, off, min(int64(len(p)), n.mu.synced-off)); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// Sync syncs the file and then journals its size: a process killed in between never had
// the Sync return, so not counting it durable is right.
func (f *plFile) Sync() error {
	defer f.fs.maybeCompact()
	n, p := f.node, f.fs
	if f.fs.full.Load() {
		n.mu.Lock()
		dirty := n.mu.dirty
		n.mu.Unlock()
		if dirty {
			return noSpace("fdatasync", f.name)
		}
	}
	size, err := f.File.Size()
	if err != nil {
		return err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.removed {
		return nil
	}
	n.mu.dirty = false
	if n.mu.shadow != nil && n.mu.maps > 0 {
		// Still mapped: the sidecar stays, now a copy of the whole file. It is built beside
		// and renamed over the old one, so that a kill in the middle of the copy leaves the
		// old durable contents, never a part of the new (RollBack takes the sidecar as it is).
		sc, err := p.rebuildSidecar(n, f.File, size)
		if err != nil {
			return fmt.Errorf("vfs: power-loss sidecar: %w", err)
		}
		n.mu.shadow.Close()
		n.mu.shadow, n.mu.synced = sc, size
		return nil
	}
	n.mu.synced, n.mu.pre = size, nil
	err = f.fs.record(recSync(nil, n.id, size))
	f.fs.dropShadowLocked(n)
	return err
}

func (f *plFile) Truncate(size int64) error {
	defer f.fs.maybeCompact()
	if f.fs.full.Load() {
		if cur, err := f.File.Size(); err == nil && size > cur {
			return noSpace("truncate", f.name)
		}
	}
	n := f.node
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.dirty = true
	if n.mu.shadow == nil && !n.mu.removed && size >= 0 && size < n.mu.synced {
		if err := f.fs.preImageLocked(n, f.File, size, n.mu.synced-size); err != nil {
			return err
		}
	}
	return f.File.Truncate(size)
}

// Preallocate fails on a full disk, and otherwise is the OS file's (advice).
func (f *plFile) Preallocate(off, n int64) error {
	if f.fs.full.Load() {
		return noSpace("fallocate", f.name)
	}
	return Preallocate(f.File, off, n)
}

func (f *plFile) Map(length int) (Mapping, error) {
	m, err := f.File.Map(length)
	if err != nil {
		return nil, err
	}
	f.node.mu.Lock()
	f.node.mu.maps++
	f.node.mu.Unlock()
	return &plMapping{Mapping: m, f: f}, nil
}

// preImageLocked saves the durable bytes [off, off+length) of n, read from r (the live file,
// whose bytes there are still the durable ones: the first overwrite since the last Sync is
// the one saved, and RollBack applies pre-images newest first so the oldest wins). Bytes past
// the live file's end were saved by the truncation that cut them. Called with n.mu held.
func (p *PowerLossFS) preImageLocked(n *plNode, r io.ReaderAt, off, length int64) error {
	if length <= 0 {
		return nil
	}
	if r == nil {
		f, err := os.Open(n.mu.path)
		if err != nil {
			return fmt.Errorf("vfs: power-loss pre-image: %w", err)
		}
		defer f.Close()
		r = f
	}
	data := make([]byte, length)
	k, err := r.ReadAt(data, off)
	if err != nil && err != io.EOF {
		return fmt.Errorf("vfs: power-loss pre-image: %w", err)
	}
	if k == 0 {
		return nil
	}
	data = data[:k]
	if err := p.record(recPre(nil, n.id, off, data)); err != nil {
		return err
	}
	n.mu.pre = append(n.mu.pre, preImage{off: off, data: data})
	return nil
}

// startShadowLocked moves n to the shadow representation: a sidecar holding its durable
// contents, built from the live file (opened by its path: the handle that mapped it may be
// closed since, as the index closes its file once mapped) with the pre-images applied. The
// journal names the sidecar only once it is whole. Called with n.mu held.
func (p *PowerLossFS) startShadowLocked(n *plNode) error {
	r, err := os.Open(n.mu.path)
	if err != nil {
		return fmt.Errorf("vfs: power-loss sidecar: %w", err)
	}
	defer r.Close()
	sc, err := os.OpenFile(p.sidecarPath(n.id), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("vfs: power-loss sidecar: %w", err)
	}
	err = copySparse(sc, r, n.mu.synced)
	for i := len(n.mu.pre) - 1; i >= 0 && err == nil; i-- {
		_, err = sc.WriteAt(n.mu.pre[i].data, n.mu.pre[i].off)
	}
	if err == nil {
		err = sc.Truncate(n.mu.synced)
	}
	if err == nil {
		err = p.record(recID(nil, recShadow, n.id))
	}
	if err != nil {
		sc.Close()
		os.Remove(sc.Name())
		return fmt.Errorf("vfs: power-loss sidecar: %w", err)
	}
	n.mu.shadow, n.mu.pre = sc, nil
	return nil
}

// rebuildSidecar writes [0, size) of r to a new sidecar of n and renames it over the old
// one, returning it open. Called with n.mu held.
func (p *PowerLossFS) rebuildSidecar(n *plNode, r io.ReaderAt, size int64) (*os.File, error) {
	path := p.sidecarPath(n.id)
	sc, err := os.OpenFile(path+".new", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	err = copySparse(sc, r, size)
	if err == nil {
		err = sc.Truncate(size)
	}
	if err == nil {
		err = os.Rename(sc.Name(), path)
	}
	if err != nil {
		sc.Close()
		os.Remove(sc.Name())
		return nil, err
	}
	return sc, nil
}

// dropShadowLocked removes n's sidecar, if any. Called with n.mu held.
func (p *PowerLossFS) dropShadowLocked(n *plNode) {
	if n.mu.shadow == nil {
		return
	}
	n.mu.shadow.Close()
	os.Remove(n.mu.shadow.Name())
	n.mu.shadow = nil
}

// copySparse copies [0, size) of src to dst (empty, or holding no data it must keep), writing
// only pages that hold a non-zero byte: a preallocated index is mostly holes, and its sidecar
// stays as sparse. A short src reads as zeros past its end.
func copySparse(dst io.WriterAt, src io.ReaderAt, size int64) error {
	buf := make([]byte, 64<<10)
	for off := int64(0); off < size; off += int64(len(buf)) {
		chunk := buf[:min(int64(len(buf)), size-off)]
		k, err := src.ReadAt(chunk, off)
		if err != nil && err != io.EOF {
			return err
		}
		clear(chunk[k:])
		for pg := 0; pg < len(chunk); pg += PageSize {
			page := chunk[pg:min(pg+PageSize, len(chunk))]
			if isZero(page) {
				continue
			}
			if _, err := dst.WriteAt(page, off+int64(pg)); err != nil {
				return err
			}
		}
	}
	return nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// plMapping is a mapping of a PowerLossFS file: Flush saves what it made durable.
type plMapping struct {
	Mapping
	f    *plFile
	once sync.Once
}

func (m *plMapping) Flush(off, n int) error {
	defer m.f.fs.maybeCompact()
	if err := m.Mapping.Flush(off, n); err != nil || n == 0 {
		return err
	}
	node := m.f.node
	node.mu.Lock()
	defer node.mu.Unlock()
	if node.mu.removed {
		return nil
	}
	if node.mu.shadow == nil {
		if err := m.f.fs.startShadowLocked(node); err != nil {
			return err
		}
	}
	if _, err := node.mu.shadow.WriteAt(m.Bytes()[off:off+n], int64(off)); err != nil {
		return fmt.Errorf("vfs: power-loss sidecar: %w", err)
	}
	return nil
}

// Populate fails on a full disk, as a page the file system has no block for does
// (populateFault); otherwise it is the OS mapping's advice.
func (m *plMapping) Populate(off, n int) error {
	if m.f.fs.full.Load() {
		return &os.PathError{Op: "populate", Path: m.f.name, Err: syscall.ENOSPC}
	}
	return Populate(m.Mapping, off, n)
}

func (m *plMapping) Unmap() error {
	m.once.Do(func() {
		m.f.node.mu.Lock()
		m.f.node.mu.maps--
		m.f.node.mu.Unlock()
	})
	return m.Mapping.Unmap()
}
