package segment

import (
	"container/list"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicemq/sluice/internal/vfs"
)

// FileCache bounds how many log files of sealed segments are open at once, across every log
// that shares it (Options.OpenFiles): once more than its bound are open, the least recently
// read are closed, and the next read of such a segment opens its file again. A broker with
// 10,000 partitions of many segments each would otherwise hold a descriptor per segment,
// most of them never read after they rolled.
//
// What it never closes: an active segment's file (appends and the flusher use it; it is not
// in the cache), and the file of a segment a reader holds (Log.Read's Slice, a lookup by
// timestamp): a segment's file is closed only while the log's own reference is its only one,
// so a reader that took a reference (Segment.acquireFile) reads, or sendfiles, from an open
// file until it releases it, however many others are opened meanwhile. The bound can so be
// passed while readers hold more segments than it allows; the files close as they let go.
//
// Eviction is CLOCK (second chance): a read marks its segment used without taking the
// cache's lock, and the hand passes over a marked segment once before closing it.
//
// Lock order: FileCache.mu, then Segment.fileMu.
type FileCache struct {
	max int

	mu struct {
		sync.Mutex
		ring list.List     // of *Segment: the sealed segments whose files are open
		hand *list.Element // the next to consider for closing; nil: the ring's front
	}
}

// NewFileCache returns a cache that keeps at most bound sealed segments' files open (at least
// 1).
func NewFileCache(bound int) *FileCache { return &FileCache{max: max(bound, 1)} }

// Len is the number of sealed segments' files open now.
func (c *FileCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.ring.Len()
}

// add records s's open file (if s is not in the cache yet), then closes files beyond the bound.
// A segment a truncation pinned (made active again) is not taken back, unless sealed is set:
// the flusher hands it over sealed (cacheFile). Without that, a reader reopening the file
// between pinFile's remove and its reopen for writing would put the active segment back, and
// the cache could close the file appends write to.
func (c *FileCache) add(s *Segment, sealed bool) {
	c.mu.Lock()
	if sealed {
		s.pinned = false
	}
	if s.elem != nil || s.leftLog.Load() || s.pinned {
		c.mu.Unlock()
		return
	}
	s.used.Store(true)
	s.elem = c.mu.ring.PushBack(s)
	victims := c.evictLocked()
	c.mu.Unlock()
	for _, f := range victims {
		_ = f.Close() // a read-only or synced file: nothing is lost
	}
}

// remove takes s out of the cache (its files are closing, or, pinned, it becomes active again).
func (c *FileCache) remove(s *Segment, pin bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pin {
		s.pinned = true
	}
	if s.elem == nil {
		return
	}
	if c.mu.hand == s.elem {
		c.mu.hand = s.elem.Next()
	}
	c.mu.ring.Remove(s.elem)
	s.elem = nil
}

// evictLocked takes the files of segments that no reader holds out of them, oldest first with
// a second chance for those read since the hand last passed, until the bound holds or every
// segment has been looked at twice. It returns the files for the caller to close outside the
// lock.
func (c *FileCache) evictLocked() []vfs.File {
	var victims []vfs.File
	for looked := 0; c.mu.ring.Len() > c.max && looked < 2*c.mu.ring.Len(); looked++ {
		e := c.mu.hand
		if e == nil {
			e = c.mu.ring.Front()
		}
		c.mu.hand = e.Next()
		s := e.Value.(*Segment)
		if s.used.Swap(false) {
			continue
		}
		s.fileMu.Lock()
		// The log's reference alone: no reader holds the file, and one that takes a
		// reference now finds it closed (under fileMu) and opens it again.
		if s.refs.Load() == 1 && s.file != nil {
			victims = append(victims, s.file)
			s.file = nil
			c.mu.ring.Remove(e)
			s.elem = nil
		}
		s.fileMu.Unlock()
	}
	return victims
}

// acquireFile takes a reader's reference on s (acquire) and makes sure its log file is open:
// s.file may be read until the matching release. It reports false, with no reference taken,
// once the segment's files are closing (the caller reloads the segment list, as for acquire),
// and also when the file is gone (the segment was retired and renamed meanwhile). An error
// to open it (EMFILE: the process at its file limit) is the read's, retriable, and never
// fails the log: nothing is wrong with the data.
func (s *Segment) acquireFile() (bool, error) {
	if !s.acquire() {
		return false, nil
	}
	if s.cache == nil {
		return true, nil
	}
	s.fileMu.Lock()
	if s.file != nil {
		s.fileMu.Unlock()
		s.used.Store(true)
		return true, nil
	}
	f, err := s.fs.Open(segmentPath(s.dir, s.base, logSuffix))
	if err != nil {
		s.fileMu.Unlock()
		s.release()
		if errors.Is(err, errNotExist) {
			return false, nil // retired under us
		}
		return false, fmt.Errorf("%w: segment %d: %w", ErrReopen, s.base, err)
	}
	s.file, s.fileRW = f, false
	s.fileMu.Unlock()
	s.cache.add(s, false)
	return true, nil
}

// cacheFile hands a sealed (finished) segment's open file to the cache, which may close it at
// once. Flusher (or Open) only.
func (s *Segment) cacheFile() {
	if s.cache != nil {
		s.cache.add(s, true)
	}
}

// pinFile takes s out of the cache and makes sure its log file is open for writing: a
// truncation is making the sealed segment active again. A read-only file it replaces may
// still be read by a reader holding the segment: it is closed with the segment's files.
// Called with Log.appendMu held.
func (s *Segment) pinFile() error {
	if s.cache == nil {
		return nil
	}
	s.cache.remove(s, true)
	s.fileMu.Lock()
	if s.file != nil && s.fileRW {
		s.fileMu.Unlock()
		return nil
	}
	f, err := s.fs.OpenReadWrite(segmentPath(s.dir, s.base, logSuffix))
	if err != nil {
		open := s.file != nil
		s.fileMu.Unlock()
		if open {
			s.cache.add(s, true) // back in the cache, read-only and sealed as it was
		}
		return fmt.Errorf("%w: segment %d: %w", ErrReopen, s.base, err)
	}
	if s.file != nil {
		s.spare = append(s.spare, s.file)
	}
	s.file, s.fileRW = f, true
	s.fileMu.Unlock()
	return nil
}
