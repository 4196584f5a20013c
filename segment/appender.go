package segment

import (
	"fmt"
	"sync"

	"github.com/sluicemq/sluice/internal/vfs"
)

// appender is how bytes reach an active segment's log file: pwrite (the default) or a memory
// mapping of a preallocated file. Both are driven by one goroutine at a time (the Log's
// appender for write, the flusher for sync), and sync only ever covers bytes already written.
type appender interface {
	// write puts p at pos. It never leaves a partial write visible: the segment publishes its
	// size only after write returns nil.
	write(p []byte, pos int64) error
	// sync makes bytes [from, to) durable.
	sync(from, to int64) error
	// finish makes the file exactly size bytes long and durable, and releases any mapping: the
	// segment stops being active.
	finish(size int64) error
	// truncate discards bytes [from, to).
	truncate(from, to int64) error
	// writeback starts writing bytes [from, to) to the disk without waiting (advice only).
	writeback(from, to int64) error
}

// pwriteAppender appends with positional writes and syncs with fdatasync.
type pwriteAppender struct{ f vfs.File }

func (a pwriteAppender) write(p []byte, pos int64) error {
	_, err := a.f.WriteAt(p, pos)
	return err
}

func (a pwriteAppender) sync(_, _ int64) error { return a.f.Sync() }

func (a pwriteAppender) writeback(from, to int64) error { return vfs.WriteBack(a.f, from, to-from) }

func (a pwriteAppender) finish(size int64) error {
	if err := a.f.Truncate(size); err != nil {
		return err
	}
	return a.f.Sync()
}

// mmapAppender copies batches into a shared mapping of a file preallocated to segment.bytes and
// syncs with msync of the written range. The mapping grows (remaps) only for an append larger
// than the whole preallocation.
//
// mu guards m: the appender's writes and the flusher's syncs share it (read side), and only a
// remap replaces it (write side).
type mmapAppender struct {
	f  vfs.File
	mu sync.RWMutex
	m  vfs.Mapping
}

func newMmapAppender(f vfs.File, length int64) (*mmapAppender, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size < length {
		if err := f.Truncate(length); err != nil {
			return nil, fmt.Errorf("preallocate: %w", err)
		}
	}
	m, err := f.Map(int(length))
	if err != nil {
		return nil, err
	}
	return &mmapAppender{f: f, m: m}, nil
}

func (a *mmapAppender) write(p []byte, pos int64) error {
	end := pos + int64(len(p))
	a.mu.RLock()
	if end <= int64(len(a.m.Bytes())) {
		copy(a.m.Bytes()[pos:], p)
		a.mu.RUnlock()
		return nil
	}
	a.mu.RUnlock()
	if err := a.remap(end); err != nil {
		return err
	}
	return a.write(p, pos)
}

func (a *mmapAppender) remap(length int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.m.Unmap(); err != nil {
		return err
	}
	a.m = nil
	if err := a.f.Truncate(length); err != nil {
		return err
	}
	m, err := a.f.Map(int(length))
	if err != nil {
		return err
	}
	a.m = m
	return nil
}

func (a *mmapAppender) sync(from, to int64) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.m == nil {
		return fmt.Errorf("sync: segment mapping lost after a failed remap")
	}
	return a.m.Flush(int(from), int(to-from))
}

// writeback does nothing: pages dirtied through a mapping are only found by msync (sync),
// which waits. mmap'd appends are off by default (see Options.MmapAppend).
func (a *mmapAppender) writeback(_, _ int64) error { return nil }

func (a *mmapAppender) finish(size int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m != nil {
		if err := a.m.Flush(0, int(size)); err != nil {
			return err
		}
		if err := a.m.Unmap(); err != nil {
			return err
		}
		a.m = nil
	}
	if err := a.f.Truncate(size); err != nil {
		return err
	}
	return a.f.Sync()
}

// truncate discards bytes [from, to) of the active segment. pwrite shrinks the file; the mmap
// appender zeroes the range instead (the file stays preallocated and mapped) so that recovery
// sees the same zero tail it sees after a crash.
func (a pwriteAppender) truncate(from, _ int64) error {
	if err := a.f.Truncate(from); err != nil {
		return err
	}
	return a.f.Sync()
}

func (a *mmapAppender) truncate(from, to int64) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.m == nil {
		return fmt.Errorf("truncate: segment mapping lost after a failed remap")
	}
	end := min(to, int64(len(a.m.Bytes())))
	if from >= end {
		return nil
	}
	clear(a.m.Bytes()[from:end])
	return a.m.Flush(int(from), int(end-from))
}
