package segment

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/index"
)

// Open opens the log in dir, creating it if needed, and recovers it: segments before the
// recovery point are trusted (their indexes are sanity-checked and rebuilt if they fail); the
// bytes after it are scanned batch by batch and the log is truncated at the first bad one. The
// flusher goroutine starts; Close stops it.
func Open(dir string, opts Options) (*Log, error) {
	o := opts.withDefaults()
	l := &Log{
		dir:      dir,
		opts:     o,
		logger:   o.Logger.With("log", dir),
		kick:     make(chan struct{}, 1),
		diskWork: make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),

		reconfigured: make(chan struct{}, 1),
		retryKick:    make(chan struct{}, 1),
	}
	l.flushMs.Store(int64(o.FlushMs))
	l.res.init(&l.opts, l.logger)
	if err := o.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	stopped := l.stoppedBefore()
	if stopped {
		l.logger.Warn("log was stopped by an I/O error: recovery writes again what it scans")
		l.opts.DistrustUnsynced = true
	}
	segs, err := l.recover()
	if err == nil {
		// Before the stopped mark goes: a log whose producer state cannot be rebuilt fails
		// to open, and keeps the mark.
		l.producers, err = l.loadProducers(segs, segs[len(segs)-1].nextOffset)
	}
	if err != nil {
		for _, s := range segs {
			_ = s.closeFiles()
		}
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	if stopped {
		// Not durable until the next directory sync: a crash before it only distrusts again.
		if err := o.FS.Remove(filepath.Join(dir, stoppedFile)); err != nil {
			l.logger.Warn("could not clear the stopped mark", "err", err)
		}
	}
	l.segments.Store(&segs)
	l.active = segs[len(segs)-1]
	l.start.Store(int64(segs[0].base))
	l.end.Store(int64(l.active.nextOffset))
	l.synced.Store(int64(l.active.nextOffset))
	go l.flushLoop()
	return l, nil
}

// parseBase reads the offset a segment file (or a producer-state snapshot) is named by: 20
// decimal digits.
func parseBase(stem string) (batch.Offset, bool) {
	off, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || len(stem) != 20 || off < 0 {
		return 0, false
	}
	return batch.Offset(off), true
}

// listSegments removes leftovers (retired segments, temp files, indexes without a log) and
// returns the base offsets of the segments, ascending.
func (l *Log) listSegments() ([]batch.Offset, error) {
	fsys := l.opts.FS
	names, err := fsys.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	logs := map[string]bool{}
	var bases []batch.Offset
	for _, name := range names {
		if stem, ok := strings.CutSuffix(name, logSuffix); ok {
			base, ok := parseBase(stem)
			if !ok {
				l.logger.Warn("ignoring file that is not a segment", "file", name)
				continue
			}
			logs[stem] = true
			bases = append(bases, base)
		}
	}
	for _, name := range names {
		stem, _, _ := strings.Cut(name, ".")
		orphan := (strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix)) && !logs[stem]
		if strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, ".tmp") || orphan {
			if err := fsys.Remove(l.dir + "/" + name); err != nil {
				return nil, err
			}
		}
	}
	return bases, nil // ReadDir sorts, and the 20-digit names sort numerically
}

func (l *Log) recover() ([]*Segment, error) {
	o := &l.opts
	bases, err := l.listSegments()
	if err != nil {
		return nil, err
	}
	if len(bases) == 0 {
		s, err := createSegment(o, l.dir, 0, nil, false)
		if err != nil {
			return nil, err
		}
		// A log with one empty segment and no recovery point recovers to that (an empty
		// segment scans in no time): writing the point would cost each new partition an
		// fsync of a file and of its directory for nothing.
		l.checkpoint = emptyCheckpoint(0)
		return []*Segment{s}, nil
	}
	cp, haveCP, err := readCheckpoint(l)
	if err != nil {
		l.logger.Warn("recovery point unreadable; scanning every segment", "err", err)
	}
	if haveCP && !containsBase(bases, cp.segment) {
		l.logger.Warn("recovery point names a missing segment; scanning every segment", "segment", cp.segment)
		haveCP = false
	}
	if haveCP {
		l.checkpoint = cp
	}

	var buf []byte // scan allocates it: a log opened after a clean close scans nothing
	var segs []*Segment
	next := bases[0]
	scanned := false
	for i, base := range bases {
		last := i == len(bases)-1
		s, err := openSegment(o, l.dir, base)
		if err != nil {
			return segs, err
		}
		segs = append(segs, s)
		if base < next {
			return segs, fmt.Errorf("segment %d overlaps the previous one, which ends at %d", base, next)
		}
		fileSize, err := s.file.Size()
		if err != nil {
			return segs, err
		}
		var r scanResult
		rescanFrom := fileSize // where the bytes not known to be durable start (DistrustUnsynced)
		switch {
		case haveCP && base < cp.segment && !last:
			r, err = l.openTrusted(s, fileSize, bases[i+1], buf)
		case haveCP && base == cp.segment:
			r, err = l.openFromCheckpoint(s, fileSize, cp, buf)
			scanned = scanned || r.end < fileSize || r.batches > 0
			rescanFrom = min(cp.pos, fileSize)
		case fileSize == 0 && last && len(bases) == 1:
			// An empty log without a recovery point (a new partition that was never written):
			// nothing to scan, nothing to sync, no point to record (see emptyCheckpoint).
			r, err = l.openEmpty(s)
		default:
			rescanFrom = 0
			if err = s.rebuildIndexes(o, true); err == nil {
				r = s.scan(o, 0, fileSize, base, buf)
			}
			scanned = true
		}
		if err != nil {
			return segs, err
		}
		s.nextOffset = max(r.nextOffset, base)
		s.size.Store(r.end)
		if r.stop != nil {
			l.logger.Warn("truncating log at the first invalid batch",
				"segment", base, "offset", r.nextOffset, "position", r.end,
				"bytes_dropped", fileSize-r.end, "segments_dropped", len(bases)-1-i, "reason", r.stop)
			if err := s.file.Truncate(r.end); err != nil {
				return segs, err
			}
			for _, later := range bases[i+1:] {
				dropped, err := openSegment(o, l.dir, later)
				if err != nil {
					return segs, err
				}
				if err := dropped.retire(); err != nil {
					return segs, err
				}
			}
			last = true
			bases = bases[:i+1]
		}
		if o.DistrustUnsynced && rescanFrom < r.end {
			if len(buf) == 0 {
				buf = make([]byte, scanBufferSize)
			}
			if err := s.rewrite(rescanFrom, r.end, buf); err != nil {
				return segs, err
			}
		}
		if last {
			if err := s.activate(o); err != nil {
				return segs, err
			}
			if err := l.syncRecovered(s, scanned); err != nil {
				return segs, err
			}
			break
		}
		if !s.finished {
			if err := s.sealLocked(); err != nil {
				return segs, err
			}
			if err := s.finish(); err != nil {
				return segs, err
			}
		}
		s.cacheFile() // sealed: the FileCache may close it (finish did for one just sealed)
		next = s.nextOffset
	}
	return segs, nil
}

func containsBase(bases []batch.Offset, b batch.Offset) bool {
	for _, x := range bases {
		if x == b {
			return true
		}
	}
	return false
}

// emptyCheckpoint is the recovery point of a log whose one segment, at base, is empty: the
// state a missing recovery-point file implies, since recovery then scans that segment, which
// holds nothing.
func emptyCheckpoint(base batch.Offset) checkpoint {
	return checkpoint{offset: base, segment: base, pos: 0, maxTs: -1}
}

// openEmpty opens the indexes of the empty only segment of a log that has no recovery point,
// cutting any entries they hold (they can index nothing), and records the recovery point that
// the missing file implies so that none is written until there is data.
func (l *Log) openEmpty(s *Segment) (scanResult, error) {
	err := s.openIndexes(&l.opts, true)
	if err == nil {
		err = errors.Join(s.offsets.TruncateTo(s.base), s.times.TruncateTo(s.base))
	}
	if err != nil {
		l.logger.Warn("rebuilding index", "segment", s.base, "reason", err)
		if err := s.rebuildIndexes(&l.opts, true); err != nil {
			return scanResult{}, err
		}
	}
	l.checkpoint = emptyCheckpoint(s.base)
	return scanResult{end: 0, nextOffset: s.base}, nil
}

// openTrusted opens a segment that lies wholly before the recovery point without reading its
// batches, unless its indexes fail their sanity check, in which case they are rebuilt.
func (l *Log) openTrusted(s *Segment, fileSize int64, nextBase batch.Offset, buf []byte) (scanResult, error) {
	o := &l.opts
	err := s.indexesExist(o)
	if err == nil {
		err = s.openIndexes(o, false)
	}
	if err == nil {
		err = errors.Join(s.offsets.Check(fileSize), s.times.Check(nextBase))
	}
	if err == nil && fileSize > 0 && s.times.Len() == 0 {
		// A segment's first batch always has a time index entry: an empty time index lost
		// them, and trusting it would leave the segment without a max timestamp, which keeps
		// time retention from deleting it and every later segment, and hides it from lookups
		// by timestamp.
		err = fmt.Errorf("%w: time index of segment %d holds no entry for %d bytes of batches", index.ErrCorrupt, s.base, fileSize)
	}
	if err != nil {
		l.logger.Warn("rebuilding index", "segment", s.base, "reason", err)
		if err := s.rebuildIndexes(o, true); err != nil {
			return scanResult{}, err
		}
		return s.scan(o, 0, fileSize, s.base, buf), nil
	}
	if last, ok := s.times.Last(); ok {
		s.maxTs.Store(last.Timestamp)
		s.firstTs = s.times.Entry(0).Timestamp
	}
	s.finished, s.syncedSize = true, fileSize
	return scanResult{end: fileSize, nextOffset: nextBase}, nil
}

// openFromCheckpoint trusts the segment up to the checkpoint's position and scans the rest.
func (l *Log) openFromCheckpoint(s *Segment, fileSize int64, cp checkpoint, buf []byte) (scanResult, error) {
	o := &l.opts
	if fileSize < cp.pos {
		l.logger.Warn("segment is shorter than its recovery point; scanning it whole",
			"segment", s.base, "size", fileSize, "recovery_position", cp.pos)
		if err := s.rebuildIndexes(o, true); err != nil {
			return scanResult{}, err
		}
		return s.scan(o, 0, fileSize, s.base, buf), nil
	}
	err := s.indexesExist(o)
	if err == nil {
		err = s.openIndexes(o, true)
	}
	if err == nil {
		// The kernel may have written back index pages past the recovery point, so entries there
		// can point past the data that survived: check order only, then cut them.
		err = errors.Join(s.offsets.Check(math.MaxInt64), s.times.Check(math.MaxInt64))
	}
	if err == nil {
		err = errors.Join(s.offsets.TruncateToPos(indexPos(cp.pos)), s.times.TruncateTo(cp.offset))
	}
	if err != nil {
		l.logger.Warn("rebuilding index", "segment", s.base, "reason", err)
		if err := s.rebuildIndexes(o, true); err != nil {
			return scanResult{}, err
		}
		return s.scan(o, 0, fileSize, s.base, buf), nil
	}
	if n := s.offsets.Len(); n > 0 {
		s.lastIndexedPos = int64(s.offsets.Entry(n - 1).Pos)
	}
	if s.times.Len() > 0 {
		s.firstTs = s.times.Entry(0).Timestamp
	}
	s.maxTs.Store(cp.maxTs)
	s.syncedSize = cp.pos
	return s.scan(o, cp.pos, fileSize, cp.offset, buf), nil
}

// syncRecovered makes a recovered tail durable and records it as the new recovery point, so the
// next open does not scan it again.
func (l *Log) syncRecovered(active *Segment, scanned bool) error {
	size := active.size.Load()
	cp := checkpoint{offset: active.nextOffset, segment: active.base, pos: size, maxTs: active.maxTs.Load()}
	if !scanned && cp == l.checkpoint {
		return nil
	}
	if err := active.app.sync(0, size); err != nil {
		return err
	}
	active.syncedSize = size
	if err := errors.Join(active.offsets.Flush(), active.times.Flush()); err != nil {
		return err
	}
	return l.writeCheckpoint(cp)
}

// indexesExist reports a missing index file as an error, so that the caller rebuilds it rather
// than trusting the empty index that opening would create.
func (s *Segment) indexesExist(o *Options) error {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		f, err := o.FS.Open(segmentPath(s.dir, s.base, suffix))
		if err != nil {
			return fmt.Errorf("index of segment %d: %w", s.base, err)
		}
		_ = f.Close()
	}
	return nil
}
