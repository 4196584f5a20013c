package segment

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/producerstate"
)

var errNotExist = fs.ErrNotExist

// Log is one partition's log: an ordered list of segments of which the last is active.
//
// Ownership: appendMu guards the active segment's appender state, every change to the segment
// list, and the settings that Reconfigure changes; the list itself, the log start and end offsets and the synced offset are atomics that
// readers and the flusher load without appendMu. flushMu is held by whoever syncs, finishes
// rolled segments or writes the checkpoint; lock order is flushMu, then appendMu.
type Log struct {
	dir    string
	opts   Options
	logger *slog.Logger

	segments atomic.Pointer[[]*Segment] // sorted by base; never empty; last is active
	start    atomic.Int64               // log start offset
	end      atomic.Int64               // log end offset: the next offset to assign
	synced   atomic.Int64               // every offset below is durable
	failure  atomic.Pointer[error]      // the disk error that stopped the log
	// res is what the log retries instead of stopping (resource.go: the policy per error).
	res resourceState

	appendMu sync.Mutex
	active   *Segment // guarded by appendMu
	closed   bool     // guarded by appendMu
	// producers is the idempotent producers' state as of the log end (producers.go), guarded
	// by appendMu; pendingSnap is the snapshot the last roll took of it, stored under
	// appendMu and taken by the flusher (under flushMu), or cleared by a truncation.
	producers   *producerstate.State
	pendingSnap atomic.Pointer[pendingSnapshot]
	// closeErr is what operations on the closed log return (ErrClosed, or ErrDeleted when
	// Delete closed it); nil while the log is open. Stored under appendMu with closed, loaded
	// without a lock by readers.
	closeErr atomic.Pointer[error]

	flushMu    sync.Mutex
	checkpoint checkpoint // guarded by flushMu: the last one written
	// standbyPrep is the standby segment being reserved (standby.go), standbySeq the last
	// standby's number, standbyFailed whether making one failed for the active segment whose
	// base is standbyFailedAt; guarded by flushMu. (A base, not the segment: the field must
	// not keep a deleted segment alive.)
	standbyPrep     *standbyFile
	standbySeq      int
	standbyFailed   bool
	standbyFailedAt batch.Offset
	// standby is the standby segment ready for the next roll: stored by the flusher, taken
	// (swapped out) by the roll under appendMu.
	standby atomic.Pointer[standbyFile]

	waitMu  sync.Mutex
	waiters []syncWaiter // guarded by waitMu

	notifyMu sync.Mutex
	notifyCh chan struct{} // guarded by notifyMu; closed by the next append

	kick chan struct{} // wakes the flusher (buffered 1)
	// flushMs is flush.ms in nanoseconds (<= 0: never): set at Open and by Reconfigure, read
	// by the flusher at each wake-up, which then follows it with its flush.ms ticker.
	flushMs atomic.Int64
	// reconfigured wakes the flusher to apply a changed flushMs (buffered 1).
	reconfigured chan struct{}
	// diskWork wakes the flusher for the active segment's disk housekeeping: its block
	// reserve and writeback (buffered 1).
	diskWork chan struct{}
	stop     chan struct{}
	done     chan struct{}

	// retryKick wakes the flusher for a retry that resourceState scheduled (buffered 1).
	retryKick chan struct{}
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// StartOffset is the first offset still in the log.
func (l *Log) StartOffset() batch.Offset { return batch.Offset(l.start.Load()) }

// EndOffset is the offset the next appended record gets (Kafka's log end offset, LEO).
func (l *Log) EndOffset() batch.Offset { return batch.Offset(l.end.Load()) }

// SyncedOffset is the offset below which everything is durable: the durable end offset a
// follower reports to its leader (write.caching=false), and the leader counts for itself. It
// never exceeds EndOffset, and only rises, except at a truncation: TruncateTo and
// TruncateFullyAndStartAt lower it to the new end (under flushMu, which the flusher holds
// while it raises it, so a sync begun before a truncation never raises it past the cut).
func (l *Log) SyncedOffset() batch.Offset { return batch.Offset(l.synced.Load()) }

// Err is the disk error that stopped the log, or nil.
func (l *Log) Err() error {
	if e := l.failure.Load(); e != nil {
		return *e
	}
	return nil
}

// Segments returns the current segments, oldest first. The slice must not be modified.
func (l *Log) Segments() []*Segment { return *l.segments.Load() }

// Size is the total size of the log's segments in bytes.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.Segments() {
		n += s.Size()
	}
	return n
}

// Changed returns a channel that is closed by the next append or truncation: long polls wait on
// it instead of sleeping.
func (l *Log) Changed() <-chan struct{} {
	l.notifyMu.Lock()
	defer l.notifyMu.Unlock()
	if l.notifyCh == nil {
		l.notifyCh = make(chan struct{})
	}
	return l.notifyCh
}

func (l *Log) notify() {
	l.notifyMu.Lock()
	ch := l.notifyCh
	l.notifyCh = nil
	l.notifyMu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// closedErr is the error for an operation on the closed log: ErrClosed, or ErrDeleted once
// Delete closed it.
func (l *Log) closedErr() error {
	if e := l.closeErr.Load(); e != nil {
		return *e
	}
	return ErrClosed
}

// fail stops the log after an I/O error of its data (resource.go says which errors those
// are): later appends and reads fail, waiters for durability fail, long polls on Changed wake,
// and Options.OnFailure hears of it once, so that the log is reopened through recovery.
func (l *Log) fail(err error) error {
	wrapped := fmt.Errorf("%w: %s: %w", ErrFailed, l.dir, err)
	if l.failure.CompareAndSwap(nil, &wrapped) {
		l.logger.Error("log stopped after a disk error", "dir", l.dir, "err", err)
		l.markStopped(err)
		if l.opts.OnFailure != nil {
			l.opts.OnFailure(wrapped)
		}
	}
	l.releaseWaiters(-1, l.Err())
	l.notify()
	return l.Err()
}

// AppendInfo describes what an append wrote.
type AppendInfo struct {
	FirstOffset  batch.Offset // base offset of the first batch
	LastOffset   batch.Offset // last offset of the last batch
	MaxTimestamp int64
	Batches      int
	Records      int
	Bytes        int
	// Duplicate is true when Append found the batch already in its producer's window
	// (producerstate): nothing was written, and FirstOffset and LastOffset are the offsets
	// it got the first time.
	Duplicate bool
	span      batch.Offset // offsets the batches need, before they are assigned
}

// Append validates the batches in buf (a concatenation of record batches, each checked with
// batch.ValidateStrict, so nothing is appended if any is corrupt), assigns them consecutive
// offsets from the log end by stamping each header's base offset and partition leader epoch (in
// place: the caller's buf is modified; both fields are outside the CRC), and writes buf to the
// active segment in one write. It returns once the bytes are in the file (page cache); call
// WaitSynced for durability.
func (l *Log) Append(buf []byte, leaderEpoch int32) (AppendInfo, error) {
	info, err := inspect(buf, true)
	if err != nil {
		return AppendInfo{}, err
	}
	return l.append(buf, info, true, leaderEpoch)
}

// AppendAsFollower appends batches copied from the partition's leader, keeping the offsets and
// partition leader epochs the leader stamped (buf is not modified). Each batch must pass
// batch.Validate (its CRC and header consistency, not ValidateStrict's rules for a producer's
// batch: a leader's batch may have offsets without records inside it), else ErrCorrupt; the
// first batch's base offset must be the log end exactly and each next batch's base the previous
// batch's next offset, else ErrNotContiguous. Either way nothing is appended. A follower whose
// log must restart elsewhere (its leader's log start is past its end) calls
// TruncateFullyAndStartAt first: an empty log at end E takes only a first batch based at E.
//
// A fetch response may hold more bytes than segment.bytes (replica.fetch.max.bytes is 1 MiB;
// segment.bytes may be smaller), each of its batches having fitted the leader's segments: it
// is appended in runs of whole batches that each fit a segment, rolling between them, so that
// the follower gets past it. A batch larger than a segment is refused ErrTooLarge; an error
// after the first run leaves the runs before it appended, and the returned AppendInfo says
// what was (the follower fetches again from the log end).
func (l *Log) AppendAsFollower(buf []byte) (AppendInfo, error) {
	info, err := inspect(buf, false)
	if err != nil {
		return AppendInfo{}, err
	}
	l.appendMu.Lock()
	segmentBytes := l.opts.SegmentBytes // Reconfigure changes it under appendMu
	l.appendMu.Unlock()
	if int64(len(buf)) <= segmentBytes {
		return l.append(buf, info, false, 0)
	}
	var total AppendInfo
	for len(buf) > 0 {
		n, run := followerRun(buf, segmentBytes)
		run, err := l.append(buf[:n], run, false, 0)
		if err != nil {
			return total, err
		}
		if total.Batches == 0 {
			total = run
		} else {
			total.LastOffset = run.LastOffset
			total.MaxTimestamp = max(total.MaxTimestamp, run.MaxTimestamp)
			total.Batches += run.Batches
			total.Records += run.Records
			total.Bytes += run.Bytes
		}
		buf = buf[n:]
	}
	return total, nil
}

// followerRun is the longest prefix of buf (batches inspect validated) whose whole batches fit
// in limit bytes, at least one batch, and its AppendInfo.
func followerRun(buf []byte, limit int64) (int, AppendInfo) {
	info := AppendInfo{MaxTimestamp: -1}
	for rest := buf; len(rest) > 0; {
		b, r, _ := batch.Next(rest) // validated by inspect
		if info.Batches > 0 && int64(info.Bytes+len(b)) > limit {
			break
		}
		if info.Batches == 0 {
			info.FirstOffset = b.BaseOffset()
		}
		info.LastOffset = b.LastOffset()
		info.MaxTimestamp = max(info.MaxTimestamp, b.MaxTimestamp())
		info.Records += int(b.NumRecords())
		info.Batches++
		info.Bytes += len(b)
		rest = r
	}
	return info.Bytes, info
}

// inspect validates every batch in buf before any lock is taken (the CRC is the costly part).
func inspect(buf []byte, strict bool) (AppendInfo, error) {
	info := AppendInfo{MaxTimestamp: -1, Bytes: len(buf)}
	if len(buf) == 0 {
		return info, fmt.Errorf("%w: no batches", ErrCorrupt)
	}
	prevNext := batch.Offset(-1)
	for rest := buf; len(rest) > 0; {
		b, r, err := batch.Next(rest)
		if err != nil {
			return info, fmt.Errorf("%w: batch %d: %w", ErrCorrupt, info.Batches, err)
		}
		if strict {
			err = b.ValidateStrict()
		} else {
			err = b.Validate()
		}
		if err != nil {
			return info, fmt.Errorf("%w: batch %d: %w", ErrCorrupt, info.Batches, err)
		}
		if !strict {
			if b.BaseOffset() < 0 || b.NextOffset() <= b.BaseOffset() {
				return info, fmt.Errorf("%w: batch %d: base offset %d, last offset delta %d", ErrCorrupt, info.Batches, b.BaseOffset(), b.LastOffsetDelta())
			}
			if info.Batches > 0 && b.BaseOffset() != prevNext {
				return info, fmt.Errorf("%w: batch %d base offset %d, want %d (the previous batch's next offset)", ErrNotContiguous, info.Batches, b.BaseOffset(), prevNext)
			}
			if info.Batches == 0 {
				info.FirstOffset = b.BaseOffset()
			}
			info.LastOffset = b.LastOffset()
			prevNext = b.NextOffset()
		} else {
			info.span += batch.Offset(b.LastOffsetDelta()) + 1
		}
		info.MaxTimestamp = max(info.MaxTimestamp, b.MaxTimestamp())
		info.Records += int(b.NumRecords())
		info.Batches++
		rest = r
	}
	return info, nil
}

func (l *Log) append(buf []byte, info AppendInfo, assign bool, leaderEpoch int32) (AppendInfo, error) {
	l.appendMu.Lock()
	if l.closed {
		l.appendMu.Unlock()
		return AppendInfo{}, l.closedErr()
	}
	if int64(len(buf)) > l.opts.SegmentBytes { // Reconfigure changes it under appendMu
		segmentBytes := l.opts.SegmentBytes
		l.appendMu.Unlock()
		return AppendInfo{}, fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrTooLarge, len(buf), segmentBytes)
	}
	if err := l.Err(); err != nil {
		l.appendMu.Unlock()
		return AppendInfo{}, err
	}
	if err := l.res.heldErr(); err != nil {
		l.appendMu.Unlock()
		return AppendInfo{}, err
	}
	next := batch.Offset(l.end.Load())
	if assign {
		info.FirstOffset, info.LastOffset = next, next+info.span-1
		v, err := l.checkProducersLocked(buf, next)
		if err != nil {
			l.appendMu.Unlock()
			return AppendInfo{}, err
		}
		if v.Duplicate {
			l.appendMu.Unlock()
			return AppendInfo{FirstOffset: v.FirstOffset, LastOffset: v.LastOffset, MaxTimestamp: info.MaxTimestamp,
				Batches: info.Batches, Records: info.Records, Duplicate: true}, nil
		}
	} else if info.FirstOffset != next {
		l.appendMu.Unlock()
		return AppendInfo{}, fmt.Errorf("%w: first offset %d, want the log end %d", ErrNotContiguous, info.FirstOffset, next)
	}
	s := l.active
	if l.shouldRollLocked(s, len(buf), info) {
		if err := l.rollLocked(next); err != nil {
			// Nothing written, the new segment's files removed: the next append rolls again.
			err = l.refuseLocked(err)
			l.appendMu.Unlock()
			return AppendInfo{}, err
		}
		s = l.active
	}
	if assign {
		off := next
		for rest := buf; len(rest) > 0; {
			b, r, _ := batch.Next(rest) // validated by inspect
			b.SetBaseOffset(off)
			b.SetPartitionLeaderEpoch(leaderEpoch)
			off = b.NextOffset()
			rest = r
		}
	}
	pos := s.size.Load()
	if err := s.app.write(buf, pos); err != nil {
		err = fmt.Errorf("write segment %d at %d: %w", s.base, pos, err)
		if l.cutWrite(s, pos, err) { // no space: nothing promised was touched
			err = l.refuseLocked(err)
			l.appendMu.Unlock()
			return AppendInfo{}, err
		}
		l.appendMu.Unlock()
		return AppendInfo{}, l.fail(err)
	}
	at := pos
	for rest := buf; len(rest) > 0; {
		b, r, _ := batch.Next(rest)
		// A full index only makes lookups scan further; the next append rolls.
		if err := s.indexBatch(b, at, l.opts.IndexIntervalBytes); err != nil && !errors.Is(err, index.ErrFull) {
			l.appendMu.Unlock()
			return AppendInfo{}, l.fail(fmt.Errorf("index segment %d: %w", s.base, err))
		}
		s.lastBatchBase = b.BaseOffset()
		if r := s.recent.Load(); r != nil {
			r.record(b, at)
		}
		l.producers.Update(producerstate.InfoOf(b)) // offsets as stamped; ignores a batch without a producer id
		at += int64(len(b))
		rest = r
	}
	s.nextOffset = info.LastOffset + 1
	size := pos + int64(len(buf))
	s.size.Store(size)
	l.end.Store(int64(info.LastOffset + 1))
	l.appendedLocked()
	flushMessages := l.opts.FlushMessages
	diskWork := l.opts.WritebackBytes > 0 && size-s.writebackFrom.Load() >= l.opts.WritebackBytes
	if pa := l.opts.PreallocateBytes; pa > 0 && !l.opts.MmapAppend {
		// Extend the reserve once half of its step is used, unless it reaches segment.bytes.
		to := s.preallocTo.Load()
		diskWork = diskWork || (to < l.opts.SegmentBytes && size > to-reserveStep(size, pa)/2)
		// Half full: time to prepare the next segment's file (standby.go).
		half := l.opts.SegmentBytes / 2
		diskWork = diskWork || (pos < half && size >= half)
	}
	l.appendMu.Unlock()

	l.notify()
	if diskWork {
		select {
		case l.diskWork <- struct{}{}:
		default:
		}
	}
	if int64(info.LastOffset+1)-l.synced.Load() >= flushMessages {
		l.kickFlusher()
	}
	return info, nil
}

// shouldRollLocked applies segment.bytes, segment.ms less the segment's jitter (measured, as
// Kafka, between the incoming batches' max timestamp and the segment's first batch), index
// capacity, and the 32-bit relative offset limit.
func (l *Log) shouldRollLocked(s *Segment, n int, info AppendInfo) bool {
	size := s.size.Load()
	if size == 0 {
		return false
	}
	if size+int64(n) > l.opts.SegmentBytes || s.indexFull() {
		return true
	}
	if info.LastOffset-s.base > batch.Offset(^uint32(0)) {
		return true
	}
	rollAfter := l.opts.SegmentMs - s.rollJitter // below zero after segment.ms was lowered: roll
	if s.firstTs >= 0 {
		return info.MaxTimestamp-s.firstTs > rollAfter.Milliseconds()
	}
	return l.opts.Now().Sub(s.openedAt) > rollAfter
}

// rollLocked closes the active segment for appends and starts a new one at base. The flusher
// syncs and trims the old one, outside appendMu.
func (l *Log) rollLocked(base batch.Offset) error {
	old := l.active
	if err := old.sealLocked(); err != nil {
		return err
	}
	path := segmentPath(l.dir, base, logSuffix)
	s, err := createSegment(&l.opts, l.dir, base, l.takeStandby(path), true)
	if err != nil {
		return err
	}
	l.active = s
	l.snapshotAtRollLocked(base)
	l.res.rolls++ // its directory entry is not durable yet (dirDurableLocked)
	segs := append(append([]*Segment(nil), l.Segments()...), s)
	l.segments.Store(&segs)
	l.logger.Debug("rolled segment", "dir", l.dir, "base", base, "previous", old.base, "previous_bytes", old.size.Load())
	l.kickFlusher()
	return nil
}

// OutOfRangeError reports an offset outside [Start, End] with the log's bounds.
type OutOfRangeError struct {
	Offset, Start, End batch.Offset
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("%v: %d not in [%d, %d]", ErrOffsetOutOfRange, e.Offset, e.Start, e.End)
}

func (e *OutOfRangeError) Unwrap() error { return ErrOffsetOutOfRange }

// Slice is a run of whole batches (possibly with a partial one at the end, as Kafka fetches
// allow) in one segment file: what a fetch sends with sendfile. It holds a reference on its
// segment, so its file stays open, until Release.
//
// Across a truncation (TruncateTo) that cuts its segment, a Slice serves the bytes it named
// or less, never batches appended after the truncation at the positions it named: the
// truncation does not append into a segment it cut (it rolls a new segment at the new end),
// so those positions are past the file's end (a short read) or still hold the old bytes, and
// the later segments it removes keep their bytes until their last reader lets go. The one
// exception is a cut in a segment's first batch, which empties the segment: appends then go on
// in that file from its start (a new segment of the same name cannot be created while the old
// one's files are still there), so AppendTo reports any cut since the slice was made
// (ErrTruncated) rather than return what it read, and Truncated tells a sendfile caller.
type Slice struct {
	File vfs.File
	Pos  int64
	Len  int
	// FirstOffset is the base offset of the first batch (or the offset asked for, when empty).
	FirstOffset batch.Offset
	seg         *Segment
	cuts        uint64 // seg.cuts when the slice was made
}

// Truncated reports whether a truncation has cut the slice's segment since the slice was made:
// what it names may then be shorter than Len (a short read).
func (s *Slice) Truncated() bool { return s.seg != nil && s.seg.cuts.Load() != s.cuts }

// Release lets the segment close if the log no longer needs it. Safe on an empty Slice.
func (s *Slice) Release() {
	if s.seg != nil {
		s.seg.release()
		s.seg = nil
	}
}

// AppendTo reads the slice's bytes and appends them to dst, for in-process readers.
func (s *Slice) AppendTo(dst []byte) ([]byte, error) {
	if s.Len == 0 {
		return dst, nil
	}
	n := len(dst)
	dst = slices.Grow(dst, s.Len)[:n+s.Len] // no temporary slice: the read fills it
	if _, err := s.File.ReadAt(dst[n:], s.Pos); err != nil && err != io.EOF {
		return dst[:n], err
	}
	if s.Truncated() { // after the read: a cut during it may have changed what it read
		return dst[:n], fmt.Errorf("%w: segment %d cut under a read at %d", ErrTruncated, s.seg.base, s.Pos)
	}
	return dst, nil
}

// Read returns the batches from the one holding off, up to maxBytes and below upTo (the high
// watermark for consumers; the log end for followers), all from one segment. As Kafka
// (KIP-74), if the first batch is larger than maxBytes it is returned whole, so a consumer
// always makes progress. off == upTo gives an empty Slice; off outside [start, end] gives
// an *OutOfRangeError. A stopped log (Err) serves nothing: bytes past its last good sync may
// not be what the disk holds. The caller must Release the Slice.
func (l *Log) Read(off batch.Offset, maxBytes int, upTo batch.Offset) (Slice, error) {
	if err := l.Err(); err != nil {
		return Slice{}, err
	}
	hdr := headerPool.Get().(*[batch.HeaderSize]byte)
	defer headerPool.Put(hdr)
	for {
		segs := l.Segments()
		start, end := batch.Offset(l.start.Load()), batch.Offset(l.end.Load())
		if off < start || off > end {
			return Slice{}, &OutOfRangeError{Offset: off, Start: start, End: end}
		}
		upTo = min(upTo, end)
		if off >= upTo {
			return Slice{FirstOffset: off}, nil
		}
		i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off }) - 1
		if i < 0 {
			i = 0
		}
		slice, retry, err := l.readFrom(segs[i:], off, maxBytes, upTo, hdr)
		if retry {
			if e := l.closeErr.Load(); e != nil {
				// Closed: its segments are released for good, reloading the list would spin.
				return Slice{}, *e
			}
			runtime.Gosched() // a truncation may be under way: let it finish
			continue          // a segment was retired or cut under us: reload the list
		}
		return slice, err
	}
}

func (l *Log) readFrom(segs []*Segment, off batch.Offset, maxBytes int, upTo batch.Offset, hdr *[batch.HeaderSize]byte) (Slice, bool, error) {
	for j, s := range segs {
		if ok, err := s.acquireFile(); !ok || err != nil {
			return Slice{}, err == nil, err
		}
		cuts := s.cuts.Load() // before the size: a cut after it is seen by AppendTo
		if _, err := l.checkCorrupt(s, off, -1, 0); err != nil {
			s.release()
			return Slice{}, false, err
		}
		limit := s.size.Load()
		pos, h, found, err := s.locate(off, limit, hdr)
		if err != nil || !found {
			s.release()
			if err != nil {
				// A truncation cut the segment under the lookup (its headers past the new
				// end are gone): read again, in the log as it is now.
				return Slice{}, cuts%2 == 1 || s.cuts.Load() != cuts, err
			}
			continue // off lies past this segment's batches
		}
		if h.BaseOffset() >= upTo {
			s.release()
			return Slice{FirstOffset: off}, false, nil
		}
		// h aliases hdr, which the next locate reuses.
		first := h.BaseOffset()
		firstSize, _ := batch.SizeOf(h) // checked by locate
		stop := limit
		if j+1 >= len(segs) || upTo < segs[j+1].base {
			// upTo may fall inside this segment: stop at the batch that holds it. This holds even
			// when upTo was the log end: limit may already include batches appended since, and a
			// consumer bounded by the high watermark must not see them.
			if p, _, ok, err := s.locate(upTo, limit, hdr); err != nil {
				s.release()
				return Slice{}, cuts%2 == 1 || s.cuts.Load() != cuts, err
			} else if ok {
				stop = p
			}
		}
		n := min(int64(maxBytes), stop-pos)
		if int64(firstSize) > n && int64(firstSize) <= stop-pos {
			n = int64(firstSize)
		}
		if n, err = l.checkCorrupt(s, off, pos, n); err != nil { // the scrub's marks (scrub.go)
			s.release()
			return Slice{}, false, err
		}
		return Slice{File: s.loadFile(), Pos: pos, Len: int(n), FirstOffset: first, seg: s, cuts: cuts}, false, nil
	}
	return Slice{FirstOffset: off}, false, nil
}

// Reconfigure applies new values of the settings that may change while the log is open (a topic
// config was altered): segment.bytes, segment.ms, segment.jitter.ms, index.interval.bytes,
// segment.index.bytes, retention.bytes, retention.ms, flush.messages and flush.ms. The other
// options keep the values the log was opened with.
//
// segment.jitter.ms is drawn by the segments the next rolls create: the active segment keeps
// the jitter it drew (as in Kafka), measured against the new segment.ms, so a segment.ms lowered
// below it rolls the active segment at the next append.
//
// flush.ms takes effect at once: the flusher replaces its ticker (or stops it, for never).
// segment.index.bytes applies to the index files created from now on: those of the segments
// the next rolls create (and of an older segment a truncation makes active again). The active
// segment keeps the indexes it has (a smaller value does not shrink them; a larger one does not
// grow them, it rolls when they are full). A standby segment already made (standby.go) is not
// affected: it is only the next segment's log file, and its indexes are created at the roll
// with the value then in force.
func (l *Log) Reconfigure(o Options) {
	n := o.withDefaults()
	l.appendMu.Lock()
	l.opts.SegmentBytes = n.SegmentBytes
	l.opts.SegmentMs = n.SegmentMs
	l.opts.SegmentJitter = n.SegmentJitter // drawn by the segments created or opened from now on
	l.opts.IndexIntervalBytes = n.IndexIntervalBytes
	l.opts.SegmentIndexBytes = n.SegmentIndexBytes // read by createSegment and activate, under appendMu
	l.opts.RetentionBytes = n.RetentionBytes
	l.opts.RetentionMs = n.RetentionMs
	l.opts.FlushMessages = n.FlushMessages
	l.opts.FlushMs = n.FlushMs // the flusher reads l.flushMs, not this
	l.appendMu.Unlock()
	if l.flushMs.Swap(int64(n.FlushMs)) != int64(n.FlushMs) {
		select {
		case l.reconfigured <- struct{}{}:
		default:
		}
	}
}

// BytesFrom is how many bytes of the log hold the batches at and past off (the batch that
// contains off counts whole): what a replica whose log ends at off has left to fetch. 0 for
// off at or past the end; the whole log for off before its start.
func (l *Log) BytesFrom(off batch.Offset) (int64, error) {
	start, end := l.StartOffset(), l.EndOffset()
	if off >= end {
		return 0, nil
	}
	if off < start {
		return l.Size(), nil
	}
	s, err := l.Read(off, 1, end)
	if err != nil {
		return 0, err
	}
	defer s.Release()
	segs := l.Segments()
	var n int64
	for _, seg := range segs {
		switch {
		case seg == s.seg:
			n += max(seg.Size()-s.Pos, 0)
		case seg.base > s.FirstOffset:
			n += seg.Size()
		}
	}
	return n, nil
}
