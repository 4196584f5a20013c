package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// PowerLossFS brings MemFS's crash semantics to a real broker process (`sluice serve
// --simulate-power-loss JOURNAL`, which `sluice chaos` uses): a kill -9 of a process keeps its
// page cache, so by itself it never loses a byte the process wrote; a power cut loses every
// byte not yet fsynced. PowerLossFS writes through to the operating system's files (sendfile
// and mmap keep working) and records in a journal file beside the data what is durable: each
// file's synced size, the pre-images of synced bytes overwritten since, and for mapped files
// their contents as of the last Flush or Sync. The journal is written without fsync (the
// page cache outlives the kill, and the journal need only survive the process), and is
// compacted as it grows.
//
// After the process is killed, RollBack(journal, opts) turns the files into what a machine
// would find after a power cut at that moment: each file back to its durable contents, plus,
// as CrashOptions says, a random prefix of the unsynced appends with the last page torn.
// Directory operations (create, rename, remove) are taken as durable at once, which is more
// forgiving than ext4 (see the type's doc for what that leaves untested).
//
// It also injects a full disk: SetDiskFull makes every write, create, truncate that grows and
// preallocation fail with ENOSPC until it is turned off (the broker's serve polls a control
// file for it).
//
// # The model, per file (the one MemFS keeps in memory)
//
// A file's durable contents are what a MemFS node calls synced: after File.Sync, the whole
// file; a Mapping.Flush(off, n) makes [off, off+n) durable (growing the durable contents with
// zeros if they were shorter); WriteAt, Truncate and Create change only the live file. A
// crash keeps the durable contents, and CrashOptions may keep a prefix of the live bytes past
// their end (the appends), torn. RollBack gives, file by file, what MemFS.Crash with
// KeepUnsyncedEntries gives after the same operations (powerloss_test.go checks it on random
// operation sequences).
//
// The journal represents the durable contents of a file it tracks in one of two ways:
//
//   - by size (every file until it is flushed through a mapping): the durable contents are
//     the live file's first S bytes (S the size at the last Sync, or at its first open by
//     this process), except for ranges overwritten since (a WriteAt below S, a Truncate or
//     Create that cut below S), whose pre-images the journal holds. Appends cost nothing
//     until a Sync, which costs one record of a few bytes.
//   - by shadow (a file flushed through a mapping since its last Sync with no mapping live):
//     writes through a mapping are stores to memory that no call sees, so no pre-image can
//     be taken; instead a sidecar file (JOURNAL.shadow.ID) holds the durable contents
//     themselves, made at the first Flush from the durable contents by size, and updated by
//     each Flush (the flushed range) and Sync (the whole file). A Sync with no mapping live
//     returns the file to the size representation and removes the sidecar.
//
// # What it leaves untested
//
//   - Directory entries: a create, rename or remove is durable at once (ext4 usually loses
//     entries not yet fsynced, as MemFS without KeepUnsyncedEntries models), so a broker that
//     forgot a SyncDir passes here. The MemFS tests cover that.
//   - Stores through a mapping before its file's first Flush, to bytes below the durable size
//     and outside the flushed range, count as durable. The tree's mapped writers (the
//     indexes, the mmap appender) write past the durable size or flush what they wrote.
//   - Files written by other means than this FS (meta/, the ballast) are not rolled back.
//   - Metadata that a sync makes durable on a real file system (a file's size after a
//     Truncate that was not followed by a Sync) follows the same rule as data: a truncation
//     not synced is undone, as MemFS undoes it.
//
// A full disk (SetDiskFull): WriteAt, Create (and OpenReadWrite of a file that does not
// exist), a Truncate that grows, Preallocate and Mapping populate advice (vfs.Populate) fail
// with ENOSPC; a Sync fails with ENOSPC when the file has been written since its last Sync,
// as delayed allocation finds no block at writeback, and succeeds when there is nothing to
// write. A Mapping.Flush succeeds: a mapped page's block is allocated when the page is first
// stored to (populated), not at msync.
//
// Concurrency: a File is safe for concurrent ReadAt and WriteAt, as the vfs contract says.
// Lock order: PowerLossFS.mu, then a node's mu (several in id order, for a compaction), then
// the journal's mu. No lock is held across an fsync.
type PowerLossFS struct {
	journalPath string
	full        atomic.Bool
	compactSoon atomic.Bool // the journal grew past its bound: the next call to finish compacts
	compacting  atomic.Bool

	mu struct {
		sync.Mutex
		nodes  map[string]*plNode // by path: every file opened since the journal began
		nextID uint64
	}
	j journal
}

// plNode is the durable state of one file, shared by every handle on it.
type plNode struct {
	id  uint64
	ino uint64 // the inode: RollBack touches a path only while it is still this file

	mu struct {
		sync.Mutex
		path    string // guarded by PowerLossFS.mu too: written under both
		synced  int64  // the durable size, by size (the sidecar's size, by shadow)
		pre     []preImage
		shadow  *os.File // the sidecar, or nil (by size)
		maps    int      // live mappings of the file
		dirty   bool     // written since the last Sync (for the full disk's Sync)
		removed bool
	}
}

// preImage is the durable contents of [off, off+len(data)) before an overwrite.
type preImage struct {
	off  int64
	data []byte
}

// journalLimitMin is the journal size past which it is compacted (at least; then four times
// its size after the last compaction): a million records of a few bytes.
const journalLimitMin = 4 << 20

// NewPowerLossFS returns the OS file system journalled into journal (created, or truncated: a
// process starts with everything on disk durable, which RollBack made true).
func NewPowerLossFS(journal string) (*PowerLossFS, error) {
	p := &PowerLossFS{journalPath: journal}
	p.mu.nodes = map[string]*plNode{}
	if err := p.j.open(journal); err != nil {
		return nil, err
	}
	removeSidecars(journal)
	return p, nil
}

// Close closes the journal. The files stay as they are; RollBack still applies.
func (p *PowerLossFS) Close() error { return p.j.close() }

// SetDiskFull turns the full disk on or off.
func (p *PowerLossFS) SetDiskFull(full bool) { p.full.Store(full) }

// DiskFull reports whether the full disk is on.
func (p *PowerLossFS) DiskFull() bool { return p.full.Load() }

func noSpace(op, path string) error { return &os.PathError{Op: op, Path: path, Err: syscall.ENOSPC} }

func (p *PowerLossFS) sidecarPath(id uint64) string {
	return fmt.Sprintf("%s.shadow.%d", p.journalPath, id)
}

// removeSidecars removes journal's sidecar files (best effort: leftovers are only disk use).
func removeSidecars(journal string) {
	names, _ := filepath.Glob(journal + ".shadow.*")
	for _, n := range names {
		_ = os.Remove(n)
	}
	_ = os.Remove(journal + ".tmp")
}

func (p *PowerLossFS) Create(name string) (File, error) {
	defer p.maybeCompact()
	name = filepath.Clean(name)
	if p.full.Load() {
		return nil, noSpace("create", name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.mu.nodes[name]
	if n == nil {
		// A file that exists already is durable as it stands: track it before cutting it.
		if f, err := os.OpenFile(name, os.O_RDWR, 0); err == nil {
			n, err = p.trackLocked(name, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if n != nil {
		if err := p.cutLocked(n, 0); err != nil {
			return nil, err
		}
	}
	f, err := osFS{}.Create(name)
	if err != nil {
		return nil, err
	}
	if n == nil {
		if n, err = p.trackLocked(name, f.(osFile).File); err != nil {
			f.Close()
			return nil, err
		}
	}
	return p.wrap(f, n), nil
}

// cutLocked records the pre-image of n's durable bytes from size on before a truncation or a
// Create cuts them. Called with p.mu held.
func (p *PowerLossFS) cutLocked(n *plNode, size int64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.dirty = true
	if n.mu.shadow != nil || size >= n.mu.synced {
		return nil
	}
	return p.preImageLocked(n, nil, size, n.mu.synced-size)
}

func (p *PowerLossFS) Open(name string) (File, error) { return p.open(name, os.O_RDONLY) }

func (p *PowerLossFS) OpenReadWrite(name string) (File, error) {
	name = filepath.Clean(name)
	if p.full.Load() {
		if _, err := os.Stat(name); errors.Is(err, fs.ErrNotExist) {
			return nil, noSpace("create", name)
		}
	}
	return p.open(name, os.O_RDWR|os.O_CREATE)
}

func (p *PowerLossFS) open(name string, flag int) (File, error) {
	defer p.maybeCompact()
	name = filepath.Clean(name)
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := openOS(name, flag)
	if err != nil {
		return nil, err
	}
	n := p.mu.nodes[name]
	if n == nil {
		if n, err = p.trackLocked(name, f.(osFile).File); err != nil {
			f.Close()
			return nil, err
		}
	}
	return p.wrap(f, n), nil
}

// trackLocked starts tracking the file name, open as f: durable as it is now. Called with p.mu
// held.
func (p *PowerLossFS) trackLocked(name string, f *os.File) (*plNode, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	p.mu.nextID++
	n := &plNode{id: p.mu.nextID, ino: inode(fi)}
	n.mu.path, n.mu.synced = name, fi.Size()
	if err := p.record(recOpen(nil, n.id, n.ino, n.mu.synced, name)); err != nil {
		return nil, err
	}
	p.mu.nodes[name] = n
	return n, nil
}

func (p *PowerLossFS) wrap(f File, n *plNode) File {
	return &plFile{File: f, fs: p, node: n, name: n.mu.path}
}

func (p *PowerLossFS) Remove(name string) error {
	defer p.maybeCompact()
	name = filepath.Clean(name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.Remove(name); err != nil {
		return err
	}
	return p.forgetLocked(name)
}

// forgetLocked stops tracking the file at name, if tracked (it was removed or replaced).
func (p *PowerLossFS) forgetLocked(name string) error {
	n := p.mu.nodes[name]
	if n == nil {
		return nil
	}
	delete(p.mu.nodes, name)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.removed = true
	n.mu.pre = nil
	err := p.record(recID(nil, recRemove, n.id))
	p.dropShadowLocked(n)
	return err
}

func (p *PowerLossFS) RemoveAll(dir string) error {
	defer p.maybeCompact()
	dir = filepath.Clean(dir)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	var errs []error
	for name := range p.mu.nodes {
		if name == dir || strings.HasPrefix(name, dir+string(filepath.Separator)) {
			errs = append(errs, p.forgetLocked(name))
		}
	}
	return errors.Join(errs...)
}

// Rename renames a file or a directory; the files tracked under a renamed directory follow it.
func (p *PowerLossFS) Rename(oldname, newname string) error {
	defer p.maybeCompact()
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	if oldname == newname {
		return nil
	}
	var errs []error
	if p.mu.nodes[oldname] != nil {
		errs = append(errs, p.forgetLocked(newname), p.moveLocked(oldname, newname))
	}
	prefix := oldname + string(filepath.Separator)
	for name := range p.mu.nodes {
		if strings.HasPrefix(name, prefix) {
			errs = append(errs, p.moveLocked(name, newname+name[len(oldname):]))
		}
	}
	return errors.Join(errs...)
}

func (p *PowerLossFS) moveLocked(from, to string) error {
	n := p.mu.nodes[from]
	delete(p.mu.nodes, from)
	p.mu.nodes[to] = n
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.path = to
	return p.record(recRename(nil, n.id, to))
}

func (p *PowerLossFS) MkdirAll(dir string, perm os.FileMode) error {
	return osFS{}.MkdirAll(dir, perm)
}

func (p *PowerLossFS) ReadDir(dir string) ([]string, error) { return osFS{}.ReadDir(dir) }

func (p *PowerLossFS) SyncDir(dir string) error { return osFS{}.SyncDir(dir) }

// record appends a record to the journal and compacts it if it grew past its bound.
func (p *PowerLossFS) record(rec []byte) error {
	over, err := p.j.append(rec)
	if err != nil {
		return fmt.Errorf("vfs: power-loss journal: %w", err)
	}
	if over {
		p.compactSoon.Store(true)
	}
	return nil
}
