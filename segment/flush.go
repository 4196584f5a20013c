package segment

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// syncWaiter is a caller waiting for offset to become durable.
type syncWaiter struct {
	offset batch.Offset
	done   func(error)
}

// OnSynced calls done once every offset <= off is durable (nil), or the log failed or closed
// (the error). done runs on the flusher's goroutine or the caller's: it must not block. Many
// waiters share one fsync: that is the group commit.
func (l *Log) OnSynced(off batch.Offset, done func(error)) {
	if err := l.Err(); err != nil {
		done(err)
		return
	}
	if batch.Offset(l.synced.Load()) > off {
		done(nil)
		return
	}
	l.waitMu.Lock()
	l.waiters = append(l.waiters, syncWaiter{offset: off, done: done})
	l.waitMu.Unlock()
	// Re-check: the flusher may have finished between the load above and the registration.
	if batch.Offset(l.synced.Load()) > off || l.Err() != nil {
		l.releaseWaiters(batch.Offset(l.synced.Load()), l.Err())
	}
	l.kickFlusher()
}

// WaitSynced blocks until every offset <= off is durable, the log fails, or ctx ends.
func (l *Log) WaitSynced(ctx context.Context, off batch.Offset) error {
	ch := make(chan error, 1)
	l.OnSynced(off, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sync makes everything appended so far durable.
func (l *Log) Sync(ctx context.Context) error {
	end := l.EndOffset()
	if end == 0 || batch.Offset(l.synced.Load()) >= end {
		return l.Err()
	}
	return l.WaitSynced(ctx, end-1)
}

// releaseWaiters completes the waiters whose offset is below synced with nil, and every waiter
// with err when err is set.
func (l *Log) releaseWaiters(synced batch.Offset, err error) {
	l.waitMu.Lock()
	var ready []syncWaiter
	kept := l.waiters[:0]
	for _, w := range l.waiters {
		if err != nil || w.offset < synced {
			ready = append(ready, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(l.waiters[len(kept):])
	l.waiters = kept
	l.waitMu.Unlock()
	for _, w := range ready {
		w.done(err)
	}
}

func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// flushLoop is the log's one flusher goroutine: it wakes on a kick (a waiter, a roll,
// flush.messages), on flush.ms, and on the checkpoint interval.
func (l *Log) flushLoop() {
	defer close(l.done)
	checkpointTicker := time.NewTicker(l.opts.CheckpointInterval)
	defer checkpointTicker.Stop()
	var ft flushTicker
	defer ft.stop()
	for {
		// flush.ms may have changed (Reconfigure): follow it before waiting.
		ft.follow(time.Duration(l.flushMs.Load()))
		checkpointDue := false
		select {
		case <-l.stop:
			return
		case <-l.diskWork:
			l.flushMu.Lock()
			l.prepareDiskLocked()
			l.flushMu.Unlock()
			continue
		case <-l.kick:
			if !l.syncWanted() { // a roll, and nobody waits for the active segment
				l.flushMu.Lock()
				l.prefaultActiveLocked() // before the rolled segment's fsync, which takes a while
				_ = l.finishRolledLocked()
				l.resumeStandbyLocked()
				l.flushMu.Unlock()
				continue
			}
		case <-l.reconfigured:
			continue // the ticker follows the new flush.ms at the top of the loop
		case <-l.retryKick:
			l.flushMu.Lock()
			l.retryLocked()
			l.flushMu.Unlock()
			continue
		case <-ft.c:
			if l.flushMs.Load() <= 0 {
				continue // flush.ms became never after this tick was sent
			}
		case <-checkpointTicker.C:
			checkpointDue = true
		}
		l.flushMu.Lock()
		_ = l.flushLocked(checkpointDue)
		l.prefaultActiveLocked() // a flush leaves the index pages it wrote read-only
		l.resumeStandbyLocked()
		l.flushMu.Unlock()
	}
}

// flushTicker is the flusher's flush.ms ticker, replaced when flush.ms changes and stopped
// (c nil, so its select case never fires) while flush.ms is never. Flusher only.
type flushTicker struct {
	t     *time.Ticker
	every time.Duration // what t ticks at; <= 0 when there is none
	c     <-chan time.Time
}

// follow makes the ticker tick every d, or stops it when d <= 0.
func (f *flushTicker) follow(d time.Duration) {
	if d <= 0 {
		d = 0
	}
	if d == f.every {
		return
	}
	f.every = d
	switch {
	case d == 0:
		f.stop()
	case f.t == nil:
		f.t = time.NewTicker(d)
		f.c = f.t.C
	default:
		f.t.Reset(d)
	}
}

func (f *flushTicker) stop() {
	if f.t != nil {
		f.t.Stop()
	}
	f.t, f.c, f.every = nil, nil, 0
}

// resumeStandbyLocked asks for more disk housekeeping when a standby segment's reservation
// stopped for an fsync (prepareStandbyLocked), which is done now. Called with flushMu held.
func (l *Log) resumeStandbyLocked() {
	if l.standbyPrep != nil {
		select {
		case l.diskWork <- struct{}{}:
		default:
		}
	}
}

// minReserveStep is the smallest step of reserve ahead (below).
const minReserveStep = 1 << 20

// reserveStep is how far past its end a segment of size bytes keeps disk blocks reserved: as
// far as it has been written, from minReserveStep up to Options.PreallocateBytes. A busy
// partition reaches the whole step within its first megabytes (and its next segment is
// reserved whole ahead of the roll, standby.go); an idle one does not hold PreallocateBytes
// of disk for a few records: 10,000 partitions written once each held 64 MiB apiece, 640 GB.
func reserveStep(size, preallocateBytes int64) int64 {
	return min(preallocateBytes, max(minReserveStep, size))
}

// writebackPage is the unit of writeback: the partly written last page is left alone, since
// it will be dirtied again by the next append.
const writebackPage = 4096

// prepareDiskLocked does the active segment's disk housekeeping: it extends the segment's
// block reserve (Options.PreallocateBytes), then starts writeback of the whole pages appended
// since the last time (Options.WritebackBytes), which so finds its blocks allocated. Errors
// are ignored: both are advice, and an I/O error surfaces at the next write or fsync, which
// fails the log. Index pages that cannot be faulted in hold appends (prefaultLocked). Called
// with flushMu held.
func (l *Log) prepareDiskLocked() {
	if l.Err() != nil {
		return
	}
	l.appendMu.Lock()
	s := l.active
	size := s.size.Load()
	segmentBytes := l.opts.SegmentBytes // Reconfigure changes it under appendMu
	closed := l.closed
	l.appendMu.Unlock()
	if s.finished || !s.acquire() {
		return
	}
	defer s.release()
	if !l.prefaultLocked(s) {
		return
	}
	if pa := l.opts.PreallocateBytes; pa > 0 && !l.opts.MmapAppend && size > s.preallocTo.Load()-reserveStep(size, pa)/2 {
		if want := min(size+reserveStep(size, pa), segmentBytes); l.opts.mayReserve(want - s.preallocTo.Load()) {
			s.preallocate(want)
		}
	}
	if l.opts.WritebackBytes > 0 {
		to := size &^ (writebackPage - 1)
		from := s.writebackFrom.Load()
		if from > to { // a truncation cut below it
			from = to
			s.writebackFrom.Store(to)
		}
		if to-from >= l.opts.WritebackBytes {
			_ = s.app.writeback(from, to)
			s.writebackFrom.Store(to)
		}
	}
	if l.wantStandby() && !closed && (l.standbyPrep != nil || size >= segmentBytes/2) {
		l.prepareStandbyLocked(s, segmentBytes)
	}
}

// prefaultActiveLocked faults in the active segment's next index pages, holding appends while
// it cannot (prefaultLocked). Called with flushMu held.
func (l *Log) prefaultActiveLocked() {
	l.appendMu.Lock()
	s := l.active
	l.appendMu.Unlock()
	if s == nil || s.finished || s.size.Load() == s.prefaultedAt.Load() || !s.acquire() {
		return // nothing appended since the last time, so no flush wrote index pages
	}
	size := s.size.Load()
	if l.prefaultLocked(s) {
		s.prefaultedAt.Store(size)
	}
	s.release()
}

// syncWanted reports whether the active segment must be synced now: a waiter (acks=all, Sync,
// Close) or flush.messages asks for it. A waiter that registers after this returns kicks the
// flusher again.
func (l *Log) syncWanted() bool {
	l.waitMu.Lock()
	waiting := len(l.waiters) > 0
	l.waitMu.Unlock()
	l.appendMu.Lock()
	flushMessages := l.opts.FlushMessages // Reconfigure changes it under appendMu
	l.appendMu.Unlock()
	return waiting || l.end.Load()-l.synced.Load() >= flushMessages
}

// finishRolledLocked finishes the rolled segments (sync, trim indexes, release mappings) but
// leaves the active one alone: after a roll that nobody waits on, an fsync of the segment
// taking the appends would only compete with them (Kafka too flushes only up to the new
// segment at a roll). Everything below the active segment is then durable, and the recovery
// point moves to its start if the active segment has not been synced yet; a failed write of it
// does not stop the log (checkpointFailedLocked) but is returned. Called with flushMu held.
func (l *Log) finishRolledLocked() error {
	if err := l.Err(); err != nil {
		return err
	}
	l.writePendingSnapshotLocked()
	l.appendMu.Lock()
	segs := l.Segments()
	active := l.active
	rolls := l.res.rolls
	l.appendMu.Unlock()
	finished, err := l.finishSealedLocked(segs, active)
	if err != nil {
		return err
	}
	if !finished {
		return nil
	}
	if ok, err := l.dirDurableLocked(rolls); !ok {
		return err
	}
	synced := batch.Offset(l.synced.Load())
	if active.base > synced {
		synced = active.base
		l.synced.Store(int64(synced))
	}
	l.releaseWaiters(synced, nil)
	if active.syncedSize > 0 {
		return nil // the recovery point is already in the active segment
	}
	if cp := (checkpoint{offset: active.base, segment: active.base, pos: 0, maxTs: -1}); cp != l.checkpoint {
		if err := l.writeCheckpoint(cp); err != nil {
			return l.checkpointFailedLocked(err)
		}
	}
	return nil
}

// finishSealedLocked finishes the segments rolled away from (every one before active not yet
// finished). It first reserves the new active segment's blocks: a roll's fsync may take a
// while, and the appends meanwhile must not wait on block allocation. It reports whether it
// finished any. Called with flushMu held.
func (l *Log) finishSealedLocked(segs []*Segment, active *Segment) (bool, error) {
	finished, prepared := false, false
	var later error
	for _, s := range segs {
		if s == active || s.finished || !s.acquire() {
			continue
		}
		if !prepared {
			l.prepareDiskLocked()
			prepared = true
		}
		err := s.finish()
		s.release()
		if errors.Is(err, errTrimLater) {
			// Synced: only the trim waits. The segments after it are synced all the same,
			// since the caller counts everything below the active one durable.
			if later == nil {
				later = l.trimFailedLocked(s, err)
			}
			continue
		}
		if err != nil {
			return finished, l.fail(fmt.Errorf("sync segment %d: %w", s.base, err))
		}
		finished = true
	}
	if later != nil {
		return finished, later
	}
	l.trimmedLocked() // every sealed segment is finished (or gone, cut by a truncation)
	return finished, nil
}

// flushLocked syncs everything appended so far, finishes rolled segments (sync, trim indexes,
// release mappings) and writes the checkpoint when a segment was finished or when asked. A
// failed sync stops the log; a failed checkpoint write does not (checkpointFailedLocked: the
// flusher writes it again later) but is returned, for truncations, which must not go on
// without it. Called with flushMu held; takes appendMu only to snapshot the log end.
func (l *Log) flushLocked(forceCheckpoint bool) error {
	if err := l.Err(); err != nil {
		return err
	}
	l.appendMu.Lock()
	end := batch.Offset(l.end.Load())
	segs := l.Segments()
	active := l.active
	activeSize := active.size.Load()
	activeMaxTs := active.maxTs.Load()
	rolls := l.res.rolls
	l.appendMu.Unlock()

	finished, err := l.finishSealedLocked(segs, active)
	if err != nil && l.Err() != nil {
		return err
	}
	l.writePendingSnapshotLocked()
	// Otherwise nil, or a deferred index trim (errTrimLater): the sealed segments are synced,
	// and the flusher finishes them at a retry.
	if !active.finished && activeSize > active.syncedSize && active.acquire() {
		err = active.app.sync(active.syncedSize, activeSize)
		if err == nil {
			active.syncedSize = activeSize
		}
		active.release()
		if err != nil {
			return l.fail(fmt.Errorf("sync segment %d: %w", active.base, err))
		}
	}
	if end > batch.Offset(l.synced.Load()) {
		if ok, err := l.dirDurableLocked(rolls); !ok {
			return err
		}
		l.synced.Store(int64(end))
	}
	l.releaseWaiters(end, nil)

	cp := checkpoint{offset: end, segment: active.base, pos: activeSize, maxTs: activeMaxTs}
	if (finished || forceCheckpoint) && cp != l.checkpoint {
		// The checkpoint promises the index entries below pos too.
		if err := errors.Join(active.offsets.Flush(), active.times.Flush()); err != nil {
			return l.fail(err)
		}
		if err := l.writeCheckpoint(cp); err != nil {
			return l.checkpointFailedLocked(err)
		}
	}
	return nil
}

// finish syncs a sealed segment, releases its appender and trims its indexes. Flusher only.
func (s *Segment) finish() error {
	size := s.size.Load()
	if s.app != nil {
		if err := s.app.finish(size); err != nil {
			return err
		}
	} else if err := s.file.Sync(); err != nil {
		// A segment that recovery scanned past the recovery point, never active since: its
		// bytes may not have been synced before the crash, and the recovery point will say
		// they are.
		return err
	}
	s.syncedSize = size
	if err := errors.Join(s.offsets.Trim(), s.times.Trim()); err != nil {
		if vfs.IsResource(err) {
			// The trim opens the index file again (it holds no descriptor): out of
			// descriptors or memory, the data is synced and the index still whole.
			return fmt.Errorf("%w: %w", errTrimLater, err)
		}
		return err
	}
	s.finished = true
	s.cacheFile() // sealed and synced: the FileCache may close its file
	return nil
}

// checkpoint is the recovery point; see the package doc for its file format.
type checkpoint struct {
	offset  batch.Offset // every batch below is durable
	segment batch.Offset // base of the segment where they end
	pos     int64        // byte position where they end in that segment
	maxTs   int64        // that segment's max timestamp up to pos
}

const (
	checkpointFile    = "recovery-point"
	checkpointMagic   = "SLRP"
	checkpointVersion = 1
	checkpointSize    = 40
)

func (c checkpoint) encode() []byte {
	b := make([]byte, checkpointSize)
	copy(b, checkpointMagic)
	b[4] = checkpointVersion
	binary.BigEndian.PutUint64(b[8:], uint64(c.offset))
	binary.BigEndian.PutUint64(b[16:], uint64(c.segment))
	binary.BigEndian.PutUint32(b[24:], uint32(c.pos))
	binary.BigEndian.PutUint64(b[28:], uint64(c.maxTs))
	binary.BigEndian.PutUint32(b[36:], crc32.Checksum(b[:36], castagnoli))
	return b
}

var errBadCheckpoint = errors.New("segment: bad recovery-point file")

func decodeCheckpoint(b []byte) (checkpoint, error) {
	if len(b) != checkpointSize || string(b[:4]) != checkpointMagic || b[4] != checkpointVersion {
		return checkpoint{}, fmt.Errorf("%w: bad header or size %d", errBadCheckpoint, len(b))
	}
	if crc32.Checksum(b[:36], castagnoli) != binary.BigEndian.Uint32(b[36:]) {
		return checkpoint{}, fmt.Errorf("%w: checksum", errBadCheckpoint)
	}
	c := checkpoint{
		offset:  batch.Offset(binary.BigEndian.Uint64(b[8:])),
		segment: batch.Offset(binary.BigEndian.Uint64(b[16:])),
		pos:     int64(binary.BigEndian.Uint32(b[24:])),
		maxTs:   int64(binary.BigEndian.Uint64(b[28:])),
	}
	if c.offset < c.segment || c.segment < 0 {
		return checkpoint{}, fmt.Errorf("%w: offset %d before segment %d", errBadCheckpoint, c.offset, c.segment)
	}
	return c, nil
}

// writeCheckpoint replaces the recovery-point file atomically (vfs.WriteFileAtomic: temp file,
// fsync, rename, fsync of the directory).
func (l *Log) writeCheckpoint(c checkpoint) error {
	if err := vfs.WriteFileAtomic(l.opts.FS, filepath.Join(l.dir, checkpointFile), c.encode()); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	l.checkpoint = c
	l.checkpointWrittenLocked()
	return nil
}

func readCheckpoint(l *Log) (checkpoint, bool, error) {
	f, err := l.opts.FS.Open(filepath.Join(l.dir, checkpointFile))
	if errors.Is(err, errNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, err
	}
	defer f.Close()
	b := make([]byte, checkpointSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return checkpoint{}, false, err
	}
	c, err := decodeCheckpoint(b[:n])
	return c, err == nil, err
}
