package index

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluicemq/sluice/internal/vfs"
)

// entryFile is a memory-mapped array of fixed-size entries: the storage shared by both indexes.
//
// Concurrency: one appender (the segment's owner, serialised by the log) and any number of
// lookups. Append writes entry n and then publishes n+1, so lookups read only published,
// immutable entries without a lock. mu excludes lookups (read side) from the operations that
// move or shrink the mapping (write side: truncate, trim, close). A lookup searches and reads
// the entry it found in one read-locked section (find), never with a position it computed
// under an earlier one: a truncation and a trim in between may have shrunk the mapping below
// it. flushMu serialises flushes.
//
// Files: the file is open only while it is being mapped or resized. A mapping needs no
// descriptor (the kernel keeps its own reference to the file), and msync flushes through it,
// so a mapped index holds no file descriptor: a broker with 10,000 partitions would otherwise
// spend two of its descriptors per segment on files it only ever reaches through memory.
// Truncate, Trim and MakeWritable reopen it by path for the resize and close it again.
type entryFile struct {
	fs        vfs.FS
	path      string
	entrySize int
	isEmpty   func([]byte) bool

	mu struct {
		sync.RWMutex
		mapping  vfs.Mapping // nil when nothing is mapped (an empty, trimmed file)
		buf      []byte      // mapping.Bytes(), or nil
		writable bool
	}
	n       atomic.Int64 // published entries
	flushMu sync.Mutex
	flushed atomic.Int64 // entries known to be on stable storage
}

// openEntryFile opens (creating if needed) an index file. A writable index is grown to maxBytes
// so appends never resize the mapping; a read-only one maps just its entries.
func openEntryFile(fsys vfs.FS, path string, entrySize, maxBytes int, writable bool, isEmpty func([]byte) bool) (*entryFile, error) {
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", path, err)
	}
	e := &entryFile{fs: fsys, path: path, entrySize: entrySize, isEmpty: isEmpty}
	err = e.load(f, maxBytes, writable)
	// The mapping (if any) keeps the file; the descriptor is not needed any more.
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("open index %s: %w", path, cerr)
	}
	if err != nil {
		e.unmapLocked()
		return nil, err
	}
	return e, nil
}

// reopenLocked opens the file again for a resize and remap; the caller closes it. Called with
// mu held for writing.
func (e *entryFile) reopenLocked(op string) (vfs.File, error) {
	f, err := e.fs.OpenReadWrite(e.path)
	if err != nil {
		return nil, fmt.Errorf("%s index %s: %w", op, e.path, err)
	}
	return f, nil
}

// unmapLocked drops the mapping, if any. Called with mu held for writing (or before the
// entryFile is shared).
func (e *entryFile) unmapLocked() error {
	if e.mu.mapping == nil {
		return nil
	}
	err := e.mu.mapping.Unmap()
	e.mu.mapping, e.mu.buf = nil, nil
	return err
}

func (e *entryFile) load(f vfs.File, maxBytes int, writable bool) error {
	size64, err := f.Size()
	if err != nil {
		return fmt.Errorf("index %s: %w", e.path, err)
	}
	if size64%int64(e.entrySize) != 0 {
		return fmt.Errorf("%w: %s: size %d is not a multiple of %d", ErrCorrupt, e.path, size64, e.entrySize)
	}
	capacity := maxBytes / e.entrySize * e.entrySize
	if size64 > int64(max(capacity, 0)) && writable {
		// A file larger than the configured maximum (the setting shrank): keep its entries, but
		// it cannot take more.
		capacity = int(size64)
	}
	size := int(size64)
	mapLen := size
	if writable {
		if capacity < e.entrySize {
			return fmt.Errorf("index %s: segment.index.bytes %d holds no entry", e.path, maxBytes)
		}
		if size < capacity {
			if err := f.Truncate(int64(capacity)); err != nil {
				return fmt.Errorf("preallocate index %s: %w", e.path, err)
			}
		}
		mapLen = capacity
	}
	if mapLen > 0 {
		m, err := f.Map(mapLen)
		if err != nil {
			return fmt.Errorf("index %s: %w", e.path, err)
		}
		e.mu.mapping, e.mu.buf = m, m.Bytes()
	}
	e.mu.writable = writable
	// Entries are a prefix followed by an all-empty tail (the preallocated part, or nothing).
	// The tail's never-written pages are holes: the search stays below the first one, so as
	// not to fault in zero pages it need not read (vfs.DataEnd).
	total := size / e.entrySize
	if end, ok := vfs.DataEnd(f); ok && end < int64(size) {
		total = min(total, int((end+int64(e.entrySize)-1)/int64(e.entrySize)))
	}
	n := e.searchEnd(f, total)
	e.n.Store(int64(n))
	e.flushed.Store(int64(n))
	return nil
}

// searchEnd finds the number of entries before the empty tail among the first total. It reads
// the entries it probes with pread, not through the mapping: a page fault on a virtual machine
// that shadows page tables costs tens of microseconds (vfs.Populate), and a restart of 10,000
// partitions spent 9 of its 25 s faulting in the pages that the searches of its 20,000 indexes
// probed (and kept them resident: 500 MB). A read that fails falls back to the mapping.
func (e *entryFile) searchEnd(f vfs.File, total int) int {
	var scratch [maxEntrySize]byte
	entry := scratch[:e.entrySize]
	failed := false
	n := sort.Search(total, func(i int) bool {
		if _, err := f.ReadAt(entry, int64(i*e.entrySize)); err != nil {
			failed = true
			return true
		}
		return e.isEmpty(entry)
	})
	if failed {
		n = sort.Search(total, func(i int) bool { return e.isEmpty(e.entryLocked(i)) })
	}
	return n
}

func (e *entryFile) entryLocked(i int) []byte {
	off := i * e.entrySize
	return e.mu.buf[off : off+e.entrySize : off+e.entrySize]
}

// len is the number of published entries.
func (e *entryFile) len() int { return int(e.n.Load()) }

// mappedLocked is the number of published entries that the current mapping holds: len(),
// bounded by the mapping (none once it is gone: a closed index, a failed remap). Lookups
// read only below it, and find their entry in the same read-locked section as they search,
// so a truncation, trim or close between two lookups never makes one read past the mapping.
// Called with mu held (either side).
func (e *entryFile) mappedLocked() int {
	return min(e.len(), len(e.mu.buf)/e.entrySize)
}

// search returns the number of published entries for which below(entry) is true, given below
// is true for a prefix of the entries.
func (e *entryFile) search(below func([]byte) bool) int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return sort.Search(e.mappedLocked(), func(i int) bool { return !below(e.entryLocked(i)) })
}

// find calls fn on the last entry for which below(entry) is true (below being true for a
// prefix of the entries), searched and read under one read lock, and reports whether there
// is one.
func (e *entryFile) find(below func([]byte) bool, fn func([]byte)) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	i := sort.Search(e.mappedLocked(), func(i int) bool { return !below(e.entryLocked(i)) })
	if i == 0 {
		return false
	}
	fn(e.entryLocked(i - 1))
	return true
}

// read calls fn on entry i under the read lock and reports whether there is one: false when i
// is not below len(), or no longer is (a truncation or a close came first).
func (e *entryFile) read(i int, fn func([]byte)) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if i < 0 || i >= e.mappedLocked() {
		return false
	}
	fn(e.entryLocked(i))
	return true
}

// last calls fn on the newest entry under the read lock and reports whether there is one.
func (e *entryFile) last(fn func([]byte)) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	n := e.mappedLocked()
	if n == 0 {
		return false
	}
	fn(e.entryLocked(n - 1))
	return true
}

// append writes one entry with put and publishes it. Only the segment's appender calls it.
func (e *entryFile) append(put func([]byte)) error {
	n := e.len()
	// No lock: the mapping cannot change under the appender (trim and close happen only after
	// appends stop), and readers never look at entry n before it is published.
	if !e.mu.writable {
		return fmt.Errorf("%w: %s", ErrReadOnly, e.path)
	}
	if (n+1)*e.entrySize > len(e.mu.buf) {
		return fmt.Errorf("%w: %s holds %d entries", ErrFull, e.path, n)
	}
	put(e.mu.buf[n*e.entrySize : (n+1)*e.entrySize])
	e.n.Store(int64(n + 1))
	return nil
}

// maxEntrySize is the larger of the two indexes' entries.
const maxEntrySize = max(OffsetEntrySize, TimeEntrySize)

// prefaultAhead is how far past the next entry Prefault faults in a writable index's pages:
// 8 pages, which the offset index fills in 16 MiB of log at the default index.interval.bytes,
// several of the flusher's wake-ups (one per log.writeback.bytes, 4 MiB). Each populated page
// is dirtied and gets its disk block: 2 x 32 KiB per active segment.
const prefaultAhead = 32 << 10

// prefault faults in, writable, the pages from the next entry's up to limit bytes past it
// (vfs.Populate), so that the appender's next entries take no page fault. Every call covers
// the whole range: a page faulted in earlier may since have been written back (an index Flush,
// the kernel's writeback), which makes it read-only again until its next write faults; on a
// page that is still writable the call costs a page-table walk. The appender never calls it:
// the segment's flusher does, and a segment becoming active does once (for the time index, whose
// first entry comes with the first append).
func (e *entryFile) prefault(limit int) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if !e.mu.writable || e.mu.mapping == nil {
		return nil
	}
	from := e.len() * e.entrySize
	to := min(from+limit, len(e.mu.buf))
	if to <= from {
		return nil
	}
	if err := vfs.Populate(e.mu.mapping, from, to-from); err != nil {
		return fmt.Errorf("index %s: %w", e.path, err)
	}
	return nil
}

// free is how many more entries fit (0 when read-only).
func (e *entryFile) free() int {
	if !e.mu.writable {
		return 0
	}
	return len(e.mu.buf)/e.entrySize - e.len()
}

// full reports whether one more entry would not fit.
func (e *entryFile) full() bool {
	return !e.mu.writable || (e.len()+1)*e.entrySize > len(e.mu.buf)
}

// truncate drops entries [k, len()). The dropped entries are zeroed and flushed so that a crash
// cannot resurrect them past the new end.
func (e *entryFile) truncate(k int) error {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.len()
	if k >= n {
		return nil
	}
	e.n.Store(int64(k))
	if e.flushed.Load() > int64(k) {
		e.flushed.Store(int64(k))
	}
	if e.mu.writable {
		region := e.mu.buf[k*e.entrySize : n*e.entrySize]
		clear(region)
		if err := e.mu.mapping.Flush(k*e.entrySize, len(region)); err != nil {
			return fmt.Errorf("truncate index %s: %w", e.path, err)
		}
		return nil
	}
	// A trimmed file: shrink it and map what is left.
	f, err := e.reopenLocked("truncate")
	if err != nil {
		return err
	}
	defer f.Close()
	return e.remapLocked(f, k, "truncate")
}

// flush makes every published entry durable.
func (e *entryFile) flush() error {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	e.mu.RLock()
	defer e.mu.RUnlock()
	from, to := int(e.flushed.Load()), e.len()
	if to <= from || e.mu.mapping == nil {
		return nil
	}
	if err := e.mu.mapping.Flush(from*e.entrySize, (to-from)*e.entrySize); err != nil {
		return fmt.Errorf("flush index %s: %w", e.path, err)
	}
	e.flushed.Store(int64(to))
	return nil
}

// trim shrinks the file to its entries, syncs it and makes the index read-only: the segment
// rolled or is closing.
func (e *entryFile) trim() error {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.mu.writable {
		return nil
	}
	f, err := e.reopenLocked("trim")
	if err != nil {
		return err // nothing changed: the index is still writable, and a retry trims it
	}
	defer f.Close()
	e.mu.writable = false
	return e.remapLocked(f, e.len(), "trim")
}

// remapLocked shrinks the file f (the index's file, reopened by the caller before anything
// changed, so that a failed open such as EMFILE leaves the index as it was) to n entries,
// syncs it and maps what is left. A failure leaves nothing mapped: lookups then find no
// entries, which costs a longer scan of the log, never a wrong answer.
func (e *entryFile) remapLocked(f vfs.File, n int, op string) error {
	fail := func(err error) error {
		e.n.Store(0)
		e.flushed.Store(0)
		return fmt.Errorf("%s index %s: %w", op, e.path, err)
	}
	if err := e.unmapLocked(); err != nil {
		return fail(err)
	}
	size := n * e.entrySize
	if err := f.Truncate(int64(size)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	e.flushed.Store(int64(n))
	if size == 0 {
		return nil
	}
	m, err := f.Map(size)
	if err != nil {
		return fail(err)
	}
	e.mu.mapping, e.mu.buf = m, m.Bytes()
	return nil
}

// close unmaps the file without trimming (Trim first for a clean close). No descriptor is
// open to close.
func (e *entryFile) close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unmapLocked()
}

// makeWritable grows a trimmed file back to maxBytes so appends can resume: a truncation made
// an older segment the active one again.
func (e *entryFile) makeWritable(maxBytes int) error {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.writable {
		return nil
	}
	n := e.len()
	capacity := max(maxBytes/e.entrySize, n+1) * e.entrySize
	// Open before unmapping: a failed open (EMFILE) leaves the index as it was, read-only
	// but whole.
	f, err := e.reopenLocked("reopen")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := e.unmapLocked(); err != nil {
		return fmt.Errorf("reopen index %s: %w", e.path, err)
	}
	if err := f.Truncate(int64(capacity)); err != nil {
		e.n.Store(0)
		return fmt.Errorf("reopen index %s: %w", e.path, err)
	}
	m, err := f.Map(capacity)
	if err != nil {
		e.n.Store(0)
		return fmt.Errorf("reopen index %s: %w", e.path, err)
	}
	e.mu.mapping, e.mu.buf, e.mu.writable = m, m.Bytes(), true
	return nil
}
