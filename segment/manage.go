package segment

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/producerstate"
)

// Close stops the flusher, syncs everything, trims the active segment's indexes, writes the
// recovery point at the log end (so the next Open reads no data) and closes the files. Slices
// still held by readers keep their segment open until released. Close is idempotent. Later
// operations return ErrClosed.
func (l *Log) Close() error { return l.close(ErrClosed) }

// close is Close; operations after it return why (ErrClosed or ErrDeleted). A Delete after a
// Close still makes them return ErrDeleted.
func (l *Log) close(why error) error {
	l.appendMu.Lock()
	if l.closed {
		if why == ErrDeleted {
			l.closeErr.Store(&why)
		}
		l.appendMu.Unlock()
		return nil
	}
	l.closed = true
	l.closeErr.Store(&why)
	l.appendMu.Unlock()
	close(l.stop)
	<-l.done

	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.stopRetryLocked()
	var err error
	if l.Err() == nil {
		err = l.flushLocked(false)
		if err == nil {
			err = l.closeActiveLocked()
		}
		if err == nil && why == ErrClosed {
			// The state as of the log end, so the next Open replays nothing. Closed: no
			// append changes it now.
			l.pendingSnap.Store(nil)
			if serr := l.writeSnapshot(l.producers, batch.Offset(l.end.Load()), true); serr != nil {
				l.logger.Warn("could not write the producer-state snapshot at close", "err", serr)
			}
		}
	}
	l.releaseWaiters(-1, why)
	if derr := l.dropStandbyLocked(); err == nil {
		err = derr
	}
	for _, s := range l.Segments() {
		s.releaseLogRef()
	}
	if ferr := l.Err(); err == nil && ferr != nil {
		err = ferr
	}
	return err
}

// closeActiveLocked seals and finishes the active segment and checkpoints the log end.
func (l *Log) closeActiveLocked() error {
	s := l.active
	if err := s.sealLocked(); err != nil {
		return err
	}
	if err := s.finishActive(); err != nil {
		return err
	}
	cp := checkpoint{offset: s.nextOffset, segment: s.base, pos: s.size.Load(), maxTs: s.maxTs.Load()}
	if cp == l.checkpoint {
		return nil
	}
	return l.writeCheckpoint(cp)
}

// Delete closes the log and removes its directory (the topic was deleted). Later operations,
// and those that meet the log closing, return ErrDeleted rather than ErrClosed.
func (l *Log) Delete() error {
	err := l.close(ErrDeleted)
	if rerr := l.opts.FS.RemoveAll(l.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// RetentionResult reports what DeleteExpired removed.
type RetentionResult struct {
	Segments int
	Bytes    int64
	NewStart batch.Offset
	// Rolled says the active segment was deleted too: a new, empty one was rolled first at
	// the log end, which is now also the log start.
	Rolled bool
}

// DeleteExpired applies retention.ms and retention.bytes as Kafka does: it deletes whole
// segments, oldest first, while each is expired (its newest record older than retention.ms,
// or the log without it still at least retention.bytes), and advances the log start offset.
// The broker calls it periodically (Kafka's log.retention.check.interval.ms).
//
// A segment goes only if every offset in it is below highWatermark (the caller's: records not
// yet committed are never deleted), and only once the flusher has finished it (so a crash that
// undoes the deletion finds it whole). The active segment goes too when it is expired, holds
// records and the high watermark has reached the log end: a new, empty segment is first rolled
// at the log end, so the log start becomes the log end and appends go on at the same offset.
// The sealed segment is synced and the recovery point moved to the new one before the old
// files are renamed away, so that a restart finds the new segment and the log end it carries.
func (l *Log) DeleteExpired(highWatermark batch.Offset) (RetentionResult, error) {
	l.flushMu.Lock()
	l.appendMu.Lock()
	if l.closed {
		l.appendMu.Unlock()
		l.flushMu.Unlock()
		return RetentionResult{}, l.closedErr()
	}
	segs := l.Segments()
	n, bytes := l.expiredLocked(segs, highWatermark)
	if n == 0 {
		l.appendMu.Unlock()
		l.flushMu.Unlock()
		return RetentionResult{NewStart: l.StartOffset()}, nil
	}
	res := RetentionResult{Segments: n, Bytes: bytes, Rolled: n == len(segs)}
	if res.Rolled {
		if err := l.rollLocked(batch.Offset(l.end.Load())); err != nil {
			l.appendMu.Unlock()
			l.flushMu.Unlock()
			// Nothing rolled (resource.go): the next retention pass tries again.
			return RetentionResult{NewStart: l.StartOffset()}, fmt.Errorf("%w: roll for retention: %w", ErrUnavailable, err)
		}
		l.appendMu.Unlock()
		// No fsync under appendMu: appends go on into the new segment meanwhile. flushMu,
		// held throughout, keeps truncations out, so the list only grows at its end.
		if err := l.finishRolledLocked(); err != nil {
			l.flushMu.Unlock()
			return RetentionResult{NewStart: l.StartOffset()}, err
		}
		l.appendMu.Lock()
		segs = l.Segments()
	}
	doomed := segs[:n]
	kept := append([]*Segment(nil), segs[n:]...)
	// The start first: a reader that loads the new list (before the start) then also sees the
	// new start, and never looks for an offset below it in segments that do not hold it.
	l.start.Store(int64(kept[0].base))
	l.segments.Store(&kept)
	res.NewStart = kept[0].base
	l.appendMu.Unlock()
	l.flushMu.Unlock()

	var errs []error
	for _, s := range doomed {
		errs = append(errs, s.retire())
	}
	// Make the renames durable: a crash would otherwise bring back records that a consumer
	// was told are gone (the log start moving back).
	l.pruneSnapshots(res.NewStart)
	errs = append(errs, l.opts.FS.SyncDir(l.dir))
	l.logger.Info("retention deleted segments", "segments", n, "bytes", res.Bytes, "log_start", res.NewStart, "rolled", res.Rolled)
	return res, errors.Join(errs...)
}

// expiredLocked returns how many segments, from the oldest, retention deletes, and their
// bytes: Kafka's deletableSegments with the retention.ms and retention.bytes predicates. n ==
// len(segs) means the active segment too. Called with flushMu (which owns finished) and
// appendMu held.
func (l *Log) expiredLocked(segs []*Segment, highWatermark batch.Offset) (n int, bytes int64) {
	var total int64
	for _, s := range segs {
		total += s.Size()
	}
	limit := l.opts.RetentionBytes
	if limit == ZeroRetentionBytes {
		limit = 0
	}
	nowMs := l.opts.Now().UnixMilli()
	for i, s := range segs {
		last := i == len(segs)-1
		upper := batch.Offset(l.end.Load()) // the offset after the segment's last one
		if !last {
			upper = segs[i+1].base
		}
		switch {
		case upper > highWatermark: // holds records not yet committed
			return n, bytes
		case last && (s.Size() == 0 || l.Err() != nil): // nothing to delete; no roll on a failed log
			return n, bytes
		case !last && !s.finished:
			return n, bytes
		}
		expiredByTime := l.opts.RetentionMs >= 0 && s.maxTs.Load() >= 0 &&
			nowMs-s.maxTs.Load() > l.opts.RetentionMs.Milliseconds()
		expiredBySize := limit >= 0 && total-s.Size() >= limit
		if !expiredByTime && !expiredBySize {
			return n, bytes
		}
		total -= s.Size()
		bytes += s.Size()
		n++
	}
	return n, bytes
}

// TruncateTo removes every batch at or after off (whole batches: a batch holding off goes too),
// as a follower does before it fetches from a new leader. The truncation is durable when it
// returns. An off below the log start truncates fully and restarts the log at off.
//
// Reads in flight across it (a Slice made before it, being read or sendfiled) get the bytes
// they were given or a short read, never batches appended after it at the positions they
// named: see Slice for how, and for the one case (a cut inside a segment's first batch) where
// AppendTo reports ErrTruncated instead. EndOffset and SyncedOffset are lowered to the new
// end before it returns; a scrub that began before it marks nothing in the segment it cut.
func (l *Log) TruncateTo(off batch.Offset) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if err := l.lockForTruncate(); err != nil {
		return err
	}
	if off >= batch.Offset(l.end.Load()) {
		l.appendMu.Unlock()
		return nil
	}
	if off < l.Segments()[0].base {
		l.appendMu.Unlock()
		return l.truncateFullyLocked(off)
	}
	return l.truncateTailLocked(off, true)
}

// truncateTailLocked is TruncateTo for an off in [first segment's base, log end): it cuts the
// segment holding off (off at the first segment's base empties that one) and retires the later
// ones. With roll, a segment it cut and left non-empty is sealed and a new one started at the
// new end, so that no append rewrites positions a reader of the old bytes may be reading
// (Slice); so is a non-empty segment an earlier truncation cut that this one would make
// active again by retiring the segments after it. A full truncation, which retires the cut
// segment next, passes false. Called with
// flushMu and appendMu held; it releases appendMu.
func (l *Log) truncateTailLocked(off batch.Offset, roll bool) error {
	segs := l.Segments()
	i := len(segs) - 1
	for i > 0 && segs[i].base >= off {
		i--
	}
	t := segs[i]
	doomed := segs[i+1:]
	removed := len(doomed)
	cutsBefore := t.cuts.Load()
	wasActive := t == l.active
	err := l.truncateSegmentLocked(t, off)
	if err == nil {
		kept := append([]*Segment(nil), segs[:i+1]...)
		l.segments.Store(&kept)
		l.active = t
		l.end.Store(int64(t.nextOffset))
		if l.synced.Load() > int64(t.nextOffset) {
			l.synced.Store(int64(t.nextOffset))
		}
		// Before any append and before the roll below snapshots it: the state must not
		// know the batches that are gone.
		err = l.reloadProducersLocked()
	}
	var errs []error
	if err == nil && roll && t.size.Load() > 0 && (t.cuts.Load() != cutsBefore || (!wasActive && t.cuts.Load() != 0)) {
		// Bytes were cut, now or by an earlier truncation of this sealed segment (which
		// rolled away from it, and which this one, retiring the segments after it, would
		// make active again): a Slice made before that cut may name positions past t's
		// end. The appends go to a new segment, not to the positions readers of t may have
		// read (Slice). A roll that fails (no space) leaves t active, as after a roll
		// refused at an append, and the appends write into t.
		if len(doomed) > 0 && doomed[0].base == t.nextOffset {
			// The new segment takes the name of the first one retired (off was its base):
			// its files go first, so that the roll does not remove them from under it nor
			// its retire rename the new segment's away.
			for _, s := range doomed {
				errs = append(errs, s.retire())
			}
			doomed = nil
		}
		if rerr := l.rollLocked(t.nextOffset); rerr != nil {
			l.logger.Warn("truncated segment stays active", "dir", l.dir, "base", t.base, "err", rerr)
		}
	}
	l.appendMu.Unlock()
	if err != nil {
		return l.fail(fmt.Errorf("truncate to %d: %w", off, err))
	}
	for _, s := range doomed {
		errs = append(errs, s.retire())
	}
	if err := errors.Join(errs...); err != nil {
		return l.fail(fmt.Errorf("truncate to %d: %w", off, err))
	}
	l.logger.Info("truncated log", "offset", off, "log_end", t.nextOffset, "segments_removed", removed)
	l.notify()
	// Make the truncation durable and move the recovery point below the removed bytes.
	l.checkpoint = checkpoint{offset: -1}
	if err := l.flushLocked(true); err != nil {
		return l.fail(err) // a recovery point past the cut would trust bytes that are gone
	}
	return nil
}

// truncateSegmentLocked cuts t at the first batch whose last offset is >= off and makes it the
// active segment again.
func (l *Log) truncateSegmentLocked(t *Segment, off batch.Offset) error {
	// t may be a sealed segment whose file the FileCache closed: open it for writing, and
	// keep it open, before reading it.
	if err := t.pinFile(); err != nil {
		return err
	}
	if r := t.recent.Load(); r != nil {
		r.reset() // positions past the cut will hold other batches
	}
	var hdr [batch.HeaderSize]byte
	size := t.size.Load()
	pos, h, found, err := t.locate(off, size, &hdr)
	if err != nil {
		return err
	}
	if !found {
		pos = size
	}
	newEnd := off
	if found {
		newEnd = h.BaseOffset()
	}
	if pos < size {
		t.cuts.Add(1) // odd while cutting: see Segment.cuts
		defer t.cuts.Add(1)
	}
	if t.finished || t.app == nil {
		if err := t.activate(&l.opts); err != nil {
			return err
		}
		t.finished = false
	}
	if err := t.offsets.TruncateToPos(indexPos(pos)); err != nil {
		return err
	}
	if err := t.times.TruncateTo(newEnd); err != nil {
		return err
	}
	if err := t.app.truncate(pos, size); err != nil {
		return err
	}
	// ftruncate also freed the blocks reserved past pos: the flusher reserves again from here.
	t.preallocTo.Store(pos)
	// Recompute the appender state from what is left.
	t.lastIndexedPos = 0
	if n := t.offsets.Len(); n > 0 {
		t.lastIndexedPos = int64(t.offsets.Entry(n - 1).Pos)
	}
	t.maxTs.Store(-1)
	t.firstTs = -1
	from := int64(t.offsets.LookupPos(indexPos(pos)).Pos)
	if last, ok := t.times.Last(); ok {
		t.maxTs.Store(last.Timestamp)
		t.firstTs = t.times.Entry(0).Timestamp
	}
	err = t.eachHeader(from, pos, &hdr, func(h batch.Batch, p int64) bool {
		t.maxTs.Store(max(t.maxTs.Load(), h.MaxTimestamp()))
		if p == 0 {
			t.firstTs = h.MaxTimestamp()
		}
		t.lastBatchBase = h.BaseOffset()
		return true
	})
	if err != nil {
		return err
	}
	t.dropCorruptFrom(pos, newEnd)
	t.size.Store(pos)
	t.syncedSize = min(t.syncedSize, pos)
	t.nextOffset = newEnd
	return nil
}

// lockForTruncate takes appendMu for a truncation, unless the log is closed or stopped by a
// disk error: then it returns that error, without appendMu.
func (l *Log) lockForTruncate() error {
	l.appendMu.Lock()
	if l.closed {
		l.appendMu.Unlock()
		return l.closedErr()
	}
	if err := l.Err(); err != nil {
		l.appendMu.Unlock()
		return err
	}
	return nil
}

// TruncateFullyAndStartAt removes every segment and restarts the log, empty, at off (a follower
// that fell behind the leader's log start). The truncation is durable when it returns. A log
// stopped by a disk error (Err) is left as it is, and its error returned, as TruncateTo does.
func (l *Log) TruncateFullyAndStartAt(off batch.Offset) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.truncateFullyLocked(off)
}

// truncateFullyLocked is TruncateFullyAndStartAt, in retention's order (DeleteExpired): the new
// segment at off is on disk before any old one is renamed away, so a crash finds the old log,
// the new one, or the old segments (all, or the later ones with the renames half done) with
// the new, empty one beside them (the log then starts at off, if it lies below them, or at the
// first old segment left, and ends at its old end or at off), never a directory without a
// segment, which would restart the log at 0. For the new segment to lie beside the old ones on
// disk, no old batch may be at or after off (a restart would find the segments overlapping),
// so the records from off on are first cut away as TruncateTo does, durably; and when off
// names the empty active segment (the log end), that segment is the new one. Called with
// flushMu held.
func (l *Log) truncateFullyLocked(off batch.Offset) error {
	for {
		if err := l.lockForTruncate(); err != nil {
			return err
		}
		if off < l.Segments()[0].base || off >= batch.Offset(l.end.Load()) {
			break // appendMu held
		}
		// Records at or after off. truncateTailLocked may leave the end past off (a gap
		// after off in the log), with no batch there: the next round then cuts at off.
		if err := l.truncateTailLocked(off, false); err != nil {
			return err
		}
	}
	segs := l.Segments()
	s := l.active
	if s.base != off {
		var err error
		if s, err = createSegment(&l.opts, l.dir, off, nil, true); err != nil {
			l.appendMu.Unlock()
			return l.fail(fmt.Errorf("truncate fully at %d: %w", off, err))
		}
		if err := l.opts.FS.SyncDir(l.dir); err != nil {
			_ = s.retire()
			l.appendMu.Unlock()
			return l.fail(fmt.Errorf("truncate fully at %d: %w", off, err))
		}
	}
	s.nextOffset = off
	var doomed []*Segment
	for _, old := range segs {
		if old != s {
			doomed = append(doomed, old)
		}
	}
	kept := []*Segment{s}
	// The bounds first, then the list (as DeleteExpired): a reader that loads the new list
	// then also sees the new bounds, and never looks for an offset outside them in a segment
	// that does not hold it.
	l.start.Store(int64(off))
	l.end.Store(int64(off))
	l.synced.Store(int64(off))
	l.segments.Store(&kept)
	l.active = s
	l.producers = producerstate.New()
	l.pendingSnap.Store(nil)
	l.appendMu.Unlock()
	l.removeAllSnapshots()
	var errs []error
	for _, old := range doomed {
		errs = append(errs, old.retire())
	}
	if err := errors.Join(errs...); err != nil {
		return l.fail(fmt.Errorf("truncate fully at %d: %w", off, err))
	}
	l.logger.Info("truncated log fully", "log_start", off, "segments_removed", len(doomed))
	l.notify()
	// Make the renames durable and move the recovery point to the new segment.
	l.checkpoint = checkpoint{offset: -1}
	if err := l.flushLocked(true); err != nil {
		return l.fail(err) // a recovery point past the cut would trust bytes that are gone
	}
	return nil
}

// MaxTimestamp returns the largest batch max timestamp in the log, -1 if it holds none.
func (l *Log) MaxTimestamp() int64 {
	m := int64(-1)
	for _, s := range l.Segments() {
		m = max(m, s.maxTs.Load())
	}
	return m
}

// OffsetForTimestamp returns the first offset whose record timestamp is >= ts and that record's
// timestamp (Kafka's ListOffsets by timestamp); ok is false when no record is that new.
func (l *Log) OffsetForTimestamp(ts int64) (off batch.Offset, recordTs int64, ok bool, err error) {
	var hdr [batch.HeaderSize]byte
	for {
		off, recordTs, ok, retry, err := l.offsetForTimestamp(ts, &hdr)
		if !retry {
			return off, recordTs, ok, err
		}
		if e := l.closeErr.Load(); e != nil {
			return 0, -1, false, *e // closed: reloading the list would spin
		}
		runtime.Gosched() // a truncation may be under way: let it finish, then look again
	}
}

// offsetForTimestamp is one pass of OffsetForTimestamp over the segment list; retry reports
// that a segment was retired or cut under it (as Read does), so that the caller looks again
// in the log as it is now rather than answer from a half-cut segment.
func (l *Log) offsetForTimestamp(ts int64, hdr *[batch.HeaderSize]byte) (off batch.Offset, recordTs int64, ok, retry bool, err error) {
	for _, s := range l.Segments() {
		if s.maxTs.Load() < ts {
			continue
		}
		acquired, err := s.acquireFile()
		if err != nil {
			return 0, -1, false, false, err
		}
		if !acquired {
			return 0, -1, false, true, nil
		}
		cuts := s.cuts.Load() // odd while a truncation cuts the segment
		off, recordTs, ok, err = s.offsetForTimestamp(ts, hdr)
		s.release()
		if err != nil && (cuts%2 == 1 || s.cuts.Load() != cuts) {
			return 0, -1, false, true, nil
		}
		if err != nil || ok {
			return off, recordTs, ok, false, err
		}
	}
	return 0, -1, false, false, nil
}

func (s *Segment) offsetForTimestamp(ts int64, hdr *[batch.HeaderSize]byte) (batch.Offset, int64, bool, error) {
	limit := s.size.Load()
	pos := int64(s.offsets.Lookup(s.times.Lookup(ts).Offset).Pos)
	for pos < limit {
		h, err := s.readHeader(pos, hdr)
		if err != nil {
			return 0, 0, false, err
		}
		size, err := batch.SizeOf(h)
		if err != nil {
			return 0, 0, false, err
		}
		if h.MaxTimestamp() >= ts {
			b := make(batch.Batch, size)
			if _, err := s.loadFile().ReadAt(b, pos); err != nil {
				return 0, 0, false, err
			}
			it := b.Iter(batch.IterOptions{})
			var r batch.Record
			for it.Next(&r) {
				if r.Timestamp >= ts {
					return r.Offset, r.Timestamp, true, nil
				}
			}
			if err := it.Err(); err != nil {
				return 0, 0, false, fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
			}
		}
		pos += int64(size)
	}
	return 0, 0, false, nil
}
