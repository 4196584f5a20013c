package segment

import (
	"container/list"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/internal/vfs"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
)

func segmentPath(dir string, base batch.Offset, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// Segment is one log file and its two indexes.
//
// Ownership: the fields under "appender" belong to whoever holds Log.appendMu; size, maxTs and
// refs are atomics that readers use without a lock; syncedSize and finished belong to the
// flusher (Log.flushMu), and so does writebackFrom, which appenders read.
//
// file: the active segment's is always open. A sealed segment's may be closed by the log's
// FileCache while no reader holds the segment (file nil); readers take their reference with
// acquireFile, which opens it again, and may read file until they release. fileMu guards file
// and fileRW against that closing and reopening; elem belongs to the cache (FileCache.mu).
type Segment struct {
	base  batch.Offset
	dir   string
	fs    vfs.FS
	cache *FileCache // nil: the file stays open while the segment is

	fileMu sync.Mutex
	file   vfs.File
	fileRW bool       // file was opened for writing (false: reopened by the cache, read-only)
	spare  []vfs.File // read-only files pinFile replaced, closed with the segment's files
	used   atomic.Bool
	elem   *list.Element
	// pinned: a truncation made the sealed segment active again (pinFile): the cache must not
	// take it back, even from a reader's reopen, until the flusher hands it over sealed again
	// (cacheFile). Guarded by FileCache.mu.
	pinned bool
	// leftLog: the log's reference is gone (releaseLogRef), so the cache must not take the
	// segment back (a count of one is then a reader's, whose file it would close).
	leftLog atomic.Bool

	offsets *index.OffsetIndex
	times   *index.TimeIndex

	// size is the published length: bytes below it hold whole, validated batches.
	size atomic.Int64
	// maxTs is the greatest batch max timestamp in the segment (-1 when empty).
	maxTs atomic.Int64
	// refs counts the Log's reference (while the segment is part of the log) and each reader's.
	// The files close when it reaches zero; they are removed too if the segment was retired.
	refs    atomic.Int32
	retired atomic.Bool

	// appender state
	app            appender // nil once the segment is no longer active
	nextOffset     batch.Offset
	lastIndexedPos int64
	lastBatchBase  batch.Offset
	firstTs        int64         // max timestamp of the first batch, for segment.ms; -1 if unknown
	openedAt       time.Time     // fallback for segment.ms when firstTs is unknown
	rollJitter     time.Duration // this segment rolls this much before segment.ms (segment.jitter.ms)

	// flusher state
	syncedSize int64
	finished   bool
	// writebackFrom: writeback has been started for the bytes below (Options.WritebackBytes).
	writebackFrom atomic.Int64
	// recent: the last batches appended, for reads at the tail (recent.go); set by activate,
	// nil once the segment is sealed, so only active segments pay for it.
	recent atomic.Pointer[recentBatches]
	// preallocTo: disk blocks are reserved below this (Options.PreallocateBytes); set to the
	// size by activate and by a truncation (which frees the blocks past the cut), then raised
	// by the flusher.
	preallocTo atomic.Int64
	// prefaultedAt is the size the segment had when the flusher last faulted in its index
	// pages after a flush (prefaultActiveLocked): while the segment has not grown since, no
	// flush wrote index pages, so they need nothing. Set by activate.
	prefaultedAt atomic.Int64
	// id is the file's FileID, computed at the first shared read (a stat per read would be a
	// system call per fetch): nil until then, &noFileID if it has none.
	id atomic.Pointer[FileID]
	// corrupt is the bad stretches the scrub found (scrub.go), sorted by position; nil for none.
	// Stored under Log.appendMu, loaded by readers without it.
	corrupt atomic.Pointer[[]CorruptBatch]
	// cuts counts the truncations that cut bytes off the segment, twice each (a sequence
	// count): raised under Log.appendMu before the bytes go, so it is odd while a cut is under
	// way, and again once the new size is published. What was computed from the segment's
	// bytes under another value (a Slice, a scrub's finding, a lookup that failed) may name
	// positions that now hold other batches, or nothing.
	cuts atomic.Uint64
}

// preallocate reserves blocks up to want if that is past what is reserved. Errors are
// ignored: the reserve is advice, and a full disk surfaces at the next write. Flusher only.
func (s *Segment) preallocate(want int64) {
	if from := s.preallocTo.Load(); want > from {
		_ = vfs.Preallocate(s.file, from, want-from)
		s.preallocTo.Store(want)
	}
}

// Base is the offset of the segment's first batch (and its file name).
func (s *Segment) Base() batch.Offset { return s.base }

// Size is the segment's published length in bytes.
func (s *Segment) Size() int64 { return s.size.Load() }

// acquire takes a reader's reference; it fails once the segment's files are closing.
func (s *Segment) acquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes the files and, for a retired segment, removes
// them.
func (s *Segment) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	_ = s.closeFiles()
	if s.retired.Load() {
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			_ = s.fs.Remove(segmentPath(s.dir, s.base, suffix+deletedSuffix))
		}
	}
}

// releaseLogRef drops the log's own reference (the segment leaves the log: retired, or the
// log closing). The FileCache lets go of the segment first: it closes a file only while the
// log's reference is the only one, and once that reference is gone a count of one is a
// reader's.
func (s *Segment) releaseLogRef() {
	if s.cache != nil {
		s.leftLog.Store(true) // before remove: a reader reopening the file does not add it back
		s.cache.remove(s, false)
	}
	s.release()
}

func (s *Segment) closeFiles() error {
	var errs []error
	if s.offsets != nil {
		errs = append(errs, s.offsets.Close())
	}
	if s.times != nil {
		errs = append(errs, s.times.Close())
	}
	if s.cache != nil {
		s.cache.remove(s, false) // first: the lock order is the cache's, then fileMu
	}
	s.fileMu.Lock()
	if s.file != nil {
		errs = append(errs, s.file.Close())
		s.file = nil
	}
	for _, f := range s.spare {
		errs = append(errs, f.Close())
	}
	s.spare = nil
	s.fileMu.Unlock()
	return errors.Join(errs...)
}

// createSegment makes a new, empty active segment, replacing any files of that name. With sb,
// a standby segment already renamed to the segment's log file, it takes that file and its
// block reserve. With prefault (a roll or a truncation, which appends follow at once), the
// time index page of the first append is faulted in now; a new log, which may never be
// written, leaves it to the first append's page fault.
func createSegment(o *Options, dir string, base batch.Offset, sb *standbyFile, prefault bool) (*Segment, error) {
	suffixes := []string{logSuffix, indexSuffix, timeIndexSuffix}
	if sb != nil {
		suffixes = suffixes[1:]
	}
	for _, suffix := range suffixes {
		if err := o.FS.Remove(segmentPath(dir, base, suffix)); err != nil && !errors.Is(err, errNotExist) {
			if sb != nil {
				_ = sb.f.Close()
				_ = o.FS.Remove(sb.path)
			}
			return nil, fmt.Errorf("create segment %d: %w", base, err)
		}
	}
	var f vfs.File
	if sb != nil {
		f = sb.f
	} else {
		var err error
		if f, err = o.FS.Create(segmentPath(dir, base, logSuffix)); err != nil {
			return nil, fmt.Errorf("create segment %d: %w", base, err)
		}
	}
	s := &Segment{base: base, dir: dir, fs: o.FS, cache: o.OpenFiles, file: f, fileRW: true, nextOffset: base, firstTs: -1, openedAt: o.Now(), rollJitter: o.rollJitter()}
	s.refs.Store(1)
	s.maxTs.Store(-1)
	// On a failure the new files go: a restart would otherwise find an empty segment (with a
	// standby's whole reserve) that the log never had.
	undo := func() {
		_ = s.closeFiles()
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			_ = o.FS.Remove(segmentPath(dir, base, suffix))
		}
	}
	if err := s.openIndexes(o, true); err != nil {
		undo()
		return nil, err
	}
	if err := s.activate(o); err != nil {
		undo()
		return nil, err
	}
	if prefault {
		// The first append writes a time index entry at once: fault its page in now. The
		// offset index's first entry comes a few KiB later, by when the flusher has done its
		// pages.
		if err := s.times.PrefaultFirst(); err != nil {
			undo()
			return nil, fmt.Errorf("segment %d: %w", s.base, err)
		}
	}
	if sb != nil {
		s.preallocTo.Store(sb.reserved)
	}
	return s, nil
}

// openSegment opens an existing segment's files; recovery decides what to trust in them.
func openSegment(o *Options, dir string, base batch.Offset) (*Segment, error) {
	f, err := o.FS.OpenReadWrite(segmentPath(dir, base, logSuffix))
	if err != nil {
		return nil, fmt.Errorf("open segment %d: %w", base, err)
	}
	s := &Segment{base: base, dir: dir, fs: o.FS, cache: o.OpenFiles, file: f, fileRW: true, nextOffset: base, firstTs: -1, openedAt: o.Now(), rollJitter: o.rollJitter()}
	s.refs.Store(1)
	s.maxTs.Store(-1)
	return s, nil
}

// openIndexes opens the segment's indexes, writable (preallocated) for the active segment.
func (s *Segment) openIndexes(o *Options, writable bool) error {
	var err error
	s.offsets, err = index.OpenOffsetIndex(o.FS, segmentPath(s.dir, s.base, indexSuffix), s.base, o.SegmentIndexBytes, writable)
	if err != nil {
		return err
	}
	s.times, err = index.OpenTimeIndex(o.FS, segmentPath(s.dir, s.base, timeIndexSuffix), s.base, o.SegmentIndexBytes, writable)
	return err
}

// rebuildIndexes discards the index files and starts empty ones; the caller rescans the log.
func (s *Segment) rebuildIndexes(o *Options, writable bool) error {
	if s.offsets != nil {
		_ = s.offsets.Close()
		s.offsets = nil
	}
	if s.times != nil {
		_ = s.times.Close()
		s.times = nil
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := o.FS.Remove(segmentPath(s.dir, s.base, suffix)); err != nil && !errors.Is(err, errNotExist) {
			return err
		}
	}
	return s.openIndexes(o, writable)
}

// activate prepares the segment to take appends.
func (s *Segment) activate(o *Options) error {
	if err := s.pinFile(); err != nil { // a sealed segment the cache may have closed
		return err
	}
	s.recent.Store(new(recentBatches))
	if o.MmapAppend {
		a, err := newMmapAppender(s.file, max(o.SegmentBytes, s.size.Load()))
		if err != nil {
			return fmt.Errorf("segment %d: %w", s.base, err)
		}
		s.app = a
	} else {
		s.app = pwriteAppender{s.file}
		// Nothing reserved yet: the first append wakes the flusher, which reserves, so that a
		// roll (under Log.appendMu) never waits for fallocate reading block bitmaps.
		s.preallocTo.Store(s.size.Load())
	}
	if err := s.offsets.MakeWritable(o.SegmentIndexBytes); err != nil {
		return err
	}
	if err := s.times.MakeWritable(o.SegmentIndexBytes); err != nil {
		return err
	}
	// No index page is faulted in here: a log opened at start-up may take no append for
	// hours, and faulting in (and dirtying, and allocating disk blocks for) a page of each of
	// 10,000 partitions' indexes took most of a restart. The flusher faults pages in once
	// appends come (prefaultIndexes); the first append may take one page fault.
	s.prefaultedAt.Store(s.size.Load())
	return nil
}

// finishActive is finish for the active segment of a log closing cleanly: it syncs the log
// file and flushes the indexes but leaves them preallocated, since the next open makes this
// segment the active one again and would grow them back. Trimming and regrowing them cost a
// 10,000-partition broker four file size changes and two fsyncs per partition between a
// SIGTERM and serving again. Called with the log's locks held, as finish.
func (s *Segment) finishActive() error {
	size := s.size.Load()
	if s.app != nil {
		if err := s.app.finish(size); err != nil {
			return err
		}
	}
	s.syncedSize = size
	if err := errors.Join(s.offsets.Flush(), s.times.Flush()); err != nil {
		return err
	}
	s.finished = true
	return nil
}

// prefaultIndexes faults in the index pages the next appends will write (index.Prefault), so
// that no append waits for a page fault under Log.appendMu. An error means a store to those
// pages would raise SIGBUS (no disk space for them, an I/O error): the caller fails the log
// before an append gets there.
func (s *Segment) prefaultIndexes() error {
	if err := s.offsets.Prefault(); err != nil {
		return fmt.Errorf("segment %d: %w", s.base, err)
	}
	if err := s.times.Prefault(); err != nil {
		return fmt.Errorf("segment %d: %w", s.base, err)
	}
	return nil
}

// indexBatch records the index entries for the batch at pos, under Kafka's rule: an offset
// entry once index.interval.bytes have passed since the previous one; a time entry for the
// segment's first batch and whenever a new maximum timestamp gets an offset entry.
func (s *Segment) indexBatch(b batch.Batch, pos int64, interval int) error {
	ts := b.MaxTimestamp()
	if s.firstTs < 0 && pos == 0 {
		s.firstTs = ts
	}
	if ts > s.maxTs.Load() {
		s.maxTs.Store(ts)
	}
	indexed := false
	if pos > 0 && pos-s.lastIndexedPos >= int64(interval) {
		if err := s.offsets.Append(b.BaseOffset(), index.Pos(pos)); err != nil {
			return err
		}
		s.lastIndexedPos = pos
		indexed = true
	}
	// The time index's last slot is kept for the entry sealLocked writes, the segment's max
	// timestamp, which retention and lookups by timestamp read after a restart (Kafka keeps it
	// too): without it, the batches appended after the index filled would be older, to them, than
	// they are.
	if (pos == 0 || indexed) && s.times.Free() > 1 {
		if _, err := s.times.Append(s.maxTs.Load(), b.BaseOffset()); err != nil {
			return err
		}
	}
	return nil
}

// sealLocked stops appends to the segment: it records the final time index entry (the
// segment's max timestamp) that retention and segment.ms read after a restart. Syncing and
// trimming are left to the flusher.
func (s *Segment) sealLocked() error {
	s.recent.Store(nil)
	if s.size.Load() > 0 {
		// The entry's offset may be earlier than the batch that reached maxTs (after a restart
		// the appender does not know that batch); an earlier offset only lengthens a scan.
		off := max(s.lastBatchBase, s.base)
		if last, ok := s.times.Last(); ok {
			off = max(off, last.Offset)
		}
		if _, err := s.times.Append(s.maxTs.Load(), off); err != nil && !errors.Is(err, index.ErrFull) {
			return fmt.Errorf("seal segment %d: %w", s.base, err)
		}
	}
	return nil
}

// indexFull reports whether either index lacks room for the entries one more append may need
// (the time index's last slot being sealLocked's).
func (s *Segment) indexFull() bool { return s.offsets.Full() || s.times.Free() <= 1 }

var headerPool = sync.Pool{New: func() any { return new([batch.HeaderSize]byte) }}

// loadFile returns the segment's log file, for a reader holding a reference (acquireFile),
// under fileMu: a truncation's pinFile may replace it meanwhile (the file it replaces stays
// open until the segment's files close, so either serves the reader).
func (s *Segment) loadFile() vfs.File {
	s.fileMu.Lock()
	f := s.file
	s.fileMu.Unlock()
	return f
}

// readHeader reads the batch header at pos into hdr.
func (s *Segment) readHeader(pos int64, hdr *[batch.HeaderSize]byte) (batch.Batch, error) {
	n, err := s.loadFile().ReadAt(hdr[:], pos)
	if n < batch.HeaderSize {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("segment %d: read header at %d: %w", s.base, pos, err)
	}
	return batch.Batch(hdr[:]), nil
}

// eachHeader calls fn with the header of each batch from pos up to limit, in order (h aliases
// hdr), until fn returns false. The error is a header's read or its length's.
func (s *Segment) eachHeader(pos, limit int64, hdr *[batch.HeaderSize]byte, fn func(h batch.Batch, pos int64) bool) error {
	for pos < limit {
		h, err := s.readHeader(pos, hdr)
		if err != nil {
			return err
		}
		size, err := batch.SizeOf(h)
		if err != nil {
			return fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		if !fn(h, pos) {
			return nil
		}
		pos += int64(size)
	}
	return nil
}

// locate returns the position of the first batch at or below limit whose last offset is >= off
// (the batch holding off, or the next one after a gap), its header, and whether one exists.
func (s *Segment) locate(off batch.Offset, limit int64, hdr *[batch.HeaderSize]byte) (int64, batch.Batch, bool, error) {
	if r := s.recent.Load(); r != nil {
		if pos, h, found, ok := r.locate(off, limit, hdr); ok {
			return pos, h, found, nil
		}
	}
	return s.locateInFile(off, limit, hdr)
}

// locateInFile is locate from the offset index and the batch headers in the file.
func (s *Segment) locateInFile(off batch.Offset, limit int64, hdr *[batch.HeaderSize]byte) (int64, batch.Batch, bool, error) {
	pos := int64(s.offsets.Lookup(off).Pos)
	for pos < limit {
		h, err := s.readHeader(pos, hdr)
		if err != nil {
			return 0, nil, false, err
		}
		size, err := batch.SizeOf(h)
		if err != nil {
			return 0, nil, false, fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
		}
		if h.LastOffset() >= off {
			return pos, h, true, nil
		}
		pos += int64(size)
	}
	return limit, nil, false, nil
}

// scanResult is what a recovery scan learned about a stretch of a segment.
type scanResult struct {
	end        int64        // position after the last good batch
	nextOffset batch.Offset // offset after the last good batch
	batches    int
	stop       error // why the scan stopped before the file's end, nil if it reached it
}

// scanBufferSize is the buffer a recovery scan streams batches through for their CRC.
const scanBufferSize = 64 << 10

// scan validates batches from pos to fileSize, one at a time (header, length, magic, offsets,
// CRC computed while streaming the batch so a huge batch is never held in memory), and indexes
// each good batch. It stops at the first bad one.
func (s *Segment) scan(o *Options, pos, fileSize int64, next batch.Offset, buf []byte) scanResult {
	r := scanResult{end: pos, nextOffset: next}
	if len(buf) == 0 && pos < fileSize {
		buf = make([]byte, scanBufferSize)
	}
	var hdr [batch.HeaderSize]byte
	for pos < fileSize {
		if fileSize-pos < batch.HeaderSize {
			r.stop = fmt.Errorf("%d trailing bytes are less than a batch header", fileSize-pos)
			return r
		}
		h, err := s.readHeader(pos, &hdr)
		if err != nil {
			r.stop = err
			return r
		}
		size, err := batch.SizeOf(h)
		if err != nil {
			r.stop = err
			return r
		}
		if pos+int64(size) > fileSize {
			r.stop = fmt.Errorf("batch of %d bytes at %d runs past the file end %d", size, pos, fileSize)
			return r
		}
		if err := batch.CheckHeader(h, size); err != nil {
			r.stop = err
			return r
		}
		if h.BaseOffset() < next {
			r.stop = fmt.Errorf("batch base offset %d below the expected %d", h.BaseOffset(), next)
			return r
		}
		if h.LastOffset()-s.base > batch.Offset(^uint32(0)) {
			r.stop = fmt.Errorf("batch last offset %d does not fit segment %d", h.LastOffset(), s.base)
			return r
		}
		if err := s.checkCRC(h, pos, size, buf); err != nil {
			r.stop = err
			return r
		}
		if err := s.indexBatch(h, pos, o.IndexIntervalBytes); err != nil {
			r.stop = fmt.Errorf("index: %w", err)
			return r
		}
		s.lastBatchBase = h.BaseOffset()
		pos += int64(size)
		next = h.NextOffset()
		r.end, r.nextOffset = pos, next
		r.batches++
	}
	return r
}

// checkCRC streams [pos+CRCStart, pos+size) through CRC-32C and compares it to the header's.
func (s *Segment) checkCRC(h batch.Batch, pos int64, size int, buf []byte) error {
	crc := uint32(0)
	for off := int64(batch.CRCStart); off < int64(size); {
		n := min(int64(len(buf)), int64(size)-off)
		if _, err := s.file.ReadAt(buf[:n], pos+off); err != nil && !(err == io.EOF && n > 0) {
			return fmt.Errorf("read batch at %d: %w", pos, err)
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += n
	}
	if crc != h.CRC() {
		return fmt.Errorf("%w: batch at %d: stored %#x, computed %#x", batch.ErrCRC, pos, h.CRC(), crc)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// retire takes the segment out of the log: its files are renamed *.deleted at once (so a crash
// cannot bring it back) and removed when the last reader lets go.
func (s *Segment) retire() error {
	var errs []error
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		old := segmentPath(s.dir, s.base, suffix)
		if err := s.fs.Rename(old, old+deletedSuffix); err != nil && !errors.Is(err, errNotExist) {
			// Left under its name, the file would be a segment again at the next start, and
			// the records the log start has passed would come back: remove it now instead
			// (readers holding it open still read it).
			if rerr := s.fs.Remove(old); rerr != nil && !errors.Is(rerr, errNotExist) {
				errs = append(errs, err, rerr)
			}
		}
	}
	s.retired.Store(true)
	s.releaseLogRef()
	return errors.Join(errs...)
}

func indexPos(pos int64) index.Pos { return index.Pos(pos) }
