package segment

// Behavior: the producer state (idempotence).
//
// The log owns its partition's producerstate.State, guarded by appendMu, and keeps it as of
// the log end: every batch below the end applied, none above. The snapshot a roll takes is
// handed to the flusher through an atomic pointer, which a truncation clears. Append (the leader's) checks its
// batches against it after assigning their offsets and before writing, under appendMu: a
// duplicate writes nothing and returns the first offsets with AppendInfo.Duplicate; a refusal
// returns the producerstate error wrapped, writing nothing and changing no state; otherwise
// the write, then the state's Update of every batch. A write that fails updates nothing.
// AppendAsFollower updates the state from the batches it writes, refusing none. Snapshots
// (<base>.snapshot, 20 digits, Kafka's name) are written at each roll (the state as of the new
// segment's base, cloned under appendMu, encoded and written by the flusher, without an fsync:
// a snapshot torn or lost by a crash fails its CRC or is missing, and recovery falls back to
// an older one or the log) and at Close (as of the log end, durably). Open loads the newest
// snapshot at or below the recovered log end that decodes (a corrupt one is logged, removed
// and skipped; those above the end are removed) and replays the batch headers after it;
// without one, from the log start. TruncateTo reloads the newest snapshot at or below the new
// end and replays up to it, removing the snapshots above it; TruncateFullyAndStartAt empties
// the state and removes every snapshot. Retention removes the snapshots below the new log
// start, except the newest.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/producerstate"
)

// snapshotSuffix names producer-state snapshot files: <base offset, 20 digits>.snapshot.
const snapshotSuffix = ".snapshot"

// pendingSnapshot is a roll's snapshot, cloned under appendMu and written by the flusher.
type pendingSnapshot struct {
	state  *producerstate.State
	offset batch.Offset
}

// checkProducersLocked is the leader's check of an append whose batches will be at
// [next, ...). It returns the verdict, or the refusal wrapped. Called with appendMu held.
func (l *Log) checkProducersLocked(buf []byte, next batch.Offset) (producerstate.Verdict, error) {
	// One batch per append is the common case (a producer sends one per partition): the
	// infos live on the stack up to a few batches.
	var small [4]producerstate.BatchInfo
	infos := small[:0]
	off := next
	for rest := buf; len(rest) > 0; {
		b, r, _ := batch.Next(rest) // validated by inspect
		bi := producerstate.InfoOf(b)
		bi.FirstOffset = off
		bi.LastOffset = off + batch.Offset(b.LastOffsetDelta())
		off = bi.LastOffset + 1
		infos = append(infos, bi)
		rest = r
	}
	v, err := l.producers.Check(infos)
	if err != nil {
		return v, fmt.Errorf("append at %d: %w", next, err)
	}
	return v, nil
}

// snapshotAtRollLocked hands the flusher the state as of a roll at base (the log end).
// Called with appendMu held.
func (l *Log) snapshotAtRollLocked(base batch.Offset) {
	l.pendingSnap.Store(&pendingSnapshot{state: l.producers.Clone(), offset: base})
}

// writePendingSnapshotLocked writes the snapshot the last roll left, if any. A failure is
// logged, not returned: a missing snapshot only makes recovery replay more of the log.
// Called with flushMu held.
func (l *Log) writePendingSnapshotLocked() {
	p := l.pendingSnap.Swap(nil)
	if p == nil {
		return
	}
	if err := l.writeSnapshot(p.state, p.offset, false); err != nil {
		l.logger.Warn("could not write the producer-state snapshot", "offset", p.offset, "err", err)
	}
}

// writeSnapshot writes st as of offset to <offset>.snapshot, through a temp file and a rename
// (a reader never sees half a file); durably (fsync of the file and the directory) when durable
// is set.
func (l *Log) writeSnapshot(st *producerstate.State, offset batch.Offset, durable bool) error {
	path := segmentPath(l.dir, offset, snapshotSuffix)
	data := st.AppendSnapshot(nil, offset)
	if durable {
		return vfs.WriteFileAtomic(l.opts.FS, path, data)
	}
	return vfs.ReplaceFile(l.opts.FS, path, data)
}

// snapshotOffsets lists the offsets of the snapshot files in the log's directory, ascending.
func (l *Log) snapshotOffsets() ([]batch.Offset, error) {
	names, err := l.opts.FS.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var offs []batch.Offset
	for _, name := range names {
		stem, ok := strings.CutSuffix(name, snapshotSuffix)
		if !ok {
			continue
		}
		off, ok := parseBase(stem)
		if !ok {
			l.logger.Warn("ignoring file that is not a producer-state snapshot", "file", name)
			continue
		}
		offs = append(offs, off)
	}
	return offs, nil // ReadDir sorts, and the 20-digit names sort numerically
}

func (l *Log) removeSnapshot(off batch.Offset) {
	if err := l.opts.FS.Remove(segmentPath(l.dir, off, snapshotSuffix)); err != nil && !errors.Is(err, errNotExist) {
		l.logger.Warn("could not remove a producer-state snapshot", "offset", off, "err", err)
	}
}

// loadProducers builds the state as of end from the newest good snapshot at or below it and
// the batches after it in segs, removing the snapshots above end and the corrupt ones. It
// does not touch l.producers: the caller installs the result (under appendMu).
func (l *Log) loadProducers(segs []*Segment, end batch.Offset) (*producerstate.State, error) {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return nil, fmt.Errorf("list producer-state snapshots: %w", err)
	}
	st, from := producerstate.New(), segs[0].base
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off > end {
			l.removeSnapshot(off) // from a log that was longer: it knows batches that are gone
			continue
		}
		loaded, err := l.readSnapshot(off)
		if err != nil {
			l.logger.Warn("ignoring a producer-state snapshot; rebuilding from the log", "offset", off, "err", err)
			l.removeSnapshot(off)
			continue
		}
		st, from = loaded, max(off, segs[0].base)
		break
	}
	if err := replayProducers(st, segs, from, end); err != nil {
		return nil, fmt.Errorf("rebuild producer state from %d to %d: %w", from, end, err)
	}
	return st, nil
}

func (l *Log) readSnapshot(off batch.Offset) (*producerstate.State, error) {
	f, err := l.opts.FS.Open(segmentPath(l.dir, off, snapshotSuffix))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	// A snapshot holds at most a few hundred bytes a producer; one past this bound is not
	// one of ours, and is not read into memory.
	const maxSnapshotBytes = 256 << 20
	if size > maxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d bytes", producerstate.ErrCorruptSnapshot, size)
	}
	data := make([]byte, size)
	if n, err := f.ReadAt(data, 0); n < len(data) {
		return nil, fmt.Errorf("read: %w", err)
	}
	st, at, err := producerstate.DecodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	if at != off {
		return nil, fmt.Errorf("%w: file of offset %d holds a snapshot as of %d", producerstate.ErrCorruptSnapshot, off, at)
	}
	return st, nil
}

// replayProducers applies to st the headers of the batches in segs based in [from, to).
func replayProducers(st *producerstate.State, segs []*Segment, from, to batch.Offset) error {
	if from >= to {
		return nil // nothing after the snapshot: a clean open reads no data
	}
	var hdr [batch.HeaderSize]byte
	for i, s := range segs {
		if s.base >= to {
			return nil
		}
		if i+1 < len(segs) && segs[i+1].base <= from {
			continue // wholly before from
		}
		ok, err := s.acquireFile()
		if err != nil {
			return fmt.Errorf("segment %d: %w", s.base, err)
		}
		if !ok { // its files are closing: the log holds it, so only a close of the log does that
			return fmt.Errorf("segment %d: %w", s.base, ErrClosed)
		}
		err = replaySegment(st, s, from, to, &hdr)
		s.release()
		if err != nil {
			return err
		}
	}
	return nil
}

// replaySegment applies to st the headers of s's batches based in [from, to).
func replaySegment(st *producerstate.State, s *Segment, from, to batch.Offset, hdr *[batch.HeaderSize]byte) error {
	limit := s.size.Load()
	pos := int64(0)
	if from > s.base {
		p, _, found, err := s.locate(from, limit, hdr)
		if err != nil || !found {
			return err
		}
		pos = p
	}
	return s.eachHeader(pos, limit, hdr, func(h batch.Batch, _ int64) bool {
		if h.BaseOffset() >= to {
			return false
		}
		if h.BaseOffset() >= from {
			st.Update(producerstate.InfoOf(h))
		}
		return true
	})
}

// reloadProducersLocked rebuilds the state after a truncation to the log end. Called with
// flushMu and appendMu held (appends wait: none may be checked against the state of the
// batches that are gone).
func (l *Log) reloadProducersLocked() error {
	l.pendingSnap.Store(nil)
	st, err := l.loadProducers(l.Segments(), batch.Offset(l.end.Load()))
	if err != nil {
		return err
	}
	l.producers = st
	return nil
}

// pruneSnapshots removes the snapshots below the log start but the newest of them (it may
// still be the one recovery starts from). Called with flushMu held.
func (l *Log) pruneSnapshots(start batch.Offset) {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return
	}
	below := 0
	for below < len(offs) && offs[below] < start {
		below++
	}
	for _, off := range offs[:max(below-1, 0)] {
		l.removeSnapshot(off)
	}
}

// removeAllSnapshots removes every snapshot (a full truncation).
func (l *Log) removeAllSnapshots() {
	offs, _ := l.snapshotOffsets()
	for _, off := range offs {
		l.removeSnapshot(off)
	}
}

// ExpireProducers drops the producers idle for Options.ProducerIDExpiration as of now (the
// broker calls it periodically) and returns how many it dropped.
func (l *Log) ExpireProducers(now time.Time) int {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0
	}
	return l.producers.Expire(now.UnixMilli(), l.opts.ProducerIDExpiration)
}

// Producers returns a copy of the log's producer entries, by producer id (DescribeProducers,
// tests).
func (l *Log) Producers() []producerstate.Entry {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.producers.Entries()
}

// ProducerCount is the number of producers the log's state knows.
func (l *Log) ProducerCount() int {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.producers.Len()
}
