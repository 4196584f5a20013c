package segment

// Scrubbing: a sealed segment is re-read long after it was written, and every batch's length,
// magic and CRC checked again, to find bytes that changed on the disk since (a flipped bit, a
// misdirected write) before a consumer is served them. Recovery checks only what lies past
// the recovery point, and only after an unclean stop; without the scrub a sealed segment is
// never checked again, and clients that do not check CRCs would take bad records as good.
//
// A bad batch found is remembered on its segment (Segment.corrupt) and from then on a read
// that reaches it fails with a *CorruptDataError (ErrCorruptData) instead of serving it; a
// read that starts before it is cut short at its first byte, so it still serves every good
// batch ahead of it. The mark goes with the bytes: retention deleting the segment drops it,
// and so does a truncation that cuts the segment at or below the bad batch (the bytes past
// the cut are gone, and new batches will take their place). The marks live in memory: a
// restart forgets them, until a scrub finds the batches again (the broker's keeps a list of
// them and checks those first after a restart).

import (
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// CorruptBatch is a stretch of a sealed segment that failed the scrub: one bad batch, or, when
// the bad batch's length cannot be trusted (the next batch is not where it says), everything
// from it to the segment's end.
type CorruptBatch struct {
	Segment batch.Offset // the segment's base offset
	Pos     int64        // position of the bad batch: a batch boundary
	End     int64        // position after the stretch
	// FirstOffset is the first offset the stretch may hold: the offset after the batch before
	// it. EndOffset is the offset after it: the base of the next good batch, or of the next
	// segment. Reads of offsets in [FirstOffset, EndOffset) fail.
	FirstOffset batch.Offset
	EndOffset   batch.Offset
	// Reason says what was wrong (length, magic, offsets or CRC).
	Reason string
}

func (c *CorruptBatch) String() string {
	return fmt.Sprintf("segment %d, bytes [%d, %d), offsets [%d, %d): %s", c.Segment, c.Pos, c.End, c.FirstOffset, c.EndOffset, c.Reason)
}

// CorruptDataError is the error of a read that reaches a batch the scrub found bad. It wraps
// ErrCorruptData.
type CorruptDataError struct {
	Dir   string
	Batch CorruptBatch
}

func (e *CorruptDataError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrCorruptData, e.Dir, e.Batch.String())
}

func (e *CorruptDataError) Unwrap() error { return ErrCorruptData }

// ScrubCursor is where a scrub of a segment got to: a batch boundary and the offset the batch
// there should start at or after. The zero value is the segment's start.
type ScrubCursor struct {
	Pos    int64
	Offset batch.Offset
}

// ScrubResult is what one Scrub call did.
type ScrubResult struct {
	// Next is where to resume; Done reports that the segment has been read to its end (or is
	// no longer a sealed segment of the log, and has nothing left to scrub).
	Next ScrubCursor
	Done bool
	// Found is the bad stretches this call marked (not those marked before).
	Found []CorruptBatch
	// Bytes is how many bytes the call read.
	Bytes int64
}

// ScrubCandidates returns the segments Scrub may check, oldest first: every sealed segment
// whose batches are all durable (below SyncedOffset, so the bytes read are the bytes on the
// disk, and recovery will not scan them again). The active segment, and a sealed one whose
// fsync is still to come, are recovery's business, not the scrub's.
func (l *Log) ScrubCandidates() []*Segment {
	segs := l.Segments()
	synced := l.SyncedOffset()
	n := 0
	for n+1 < len(segs) && segs[n+1].base <= synced {
		n++
	}
	return segs[:n:n]
}

// minScrubBuf is the smallest read buffer Scrub takes: a batch header and then some.
const minScrubBuf = 4 << 10

// Scrub checks the batches of s, a segment from ScrubCandidates, from at onwards, reading in
// chunks of len(buf) bytes (vfs.ReadCold: the pages this brings into the cache are dropped
// again) and calling wait with each chunk's size before reading it: the caller's rate limit.
// It returns when it reaches the segment's end, or with wait's error (and the cursor to resume
// from) when wait fails. Each bad stretch found is marked on s (reads of it then fail) and
// returned in Found; after one whose length cannot be trusted, the rest of s is unreadable by
// the scrub too, and Scrub is done with it. An error reading the file is returned as is.
//
// A segment truncated or deleted during the scrub is left alone: nothing found in it is
// marked, and Scrub reports it done. A scrub in a log closed before or during it returns the
// log's ErrClosed (or ErrDeleted): what it found after the close is not marked.
func (l *Log) Scrub(s *Segment, at ScrubCursor, buf []byte, wait func(n int) error) (ScrubResult, error) {
	if len(buf) < minScrubBuf {
		buf = make([]byte, minScrubBuf)
	}
	// acquireFile: the FileCache may have closed a sealed segment's file; a reopen that
	// fails (the file limit) is the scrub's error, for its caller to retry later.
	if ok, err := s.acquireFile(); err != nil {
		return ScrubResult{Next: at}, err
	} else if !ok {
		if err := l.scrubClosed(s); err != nil {
			return ScrubResult{Next: at}, err
		}
		return ScrubResult{Next: at, Done: true}, nil
	}
	defer s.release()
	if at.Pos != 0 && !s.batchStartsAt(at) {
		// A cursor that is not a batch boundary of s (a damaged position file, or one saved
		// before a truncation rewrote the bytes) would have the scrub take a record's bytes
		// for a header, and mark good batches bad: the segment is read from its start.
		at = ScrubCursor{}
	}
	if at.Pos == 0 {
		at.Offset = s.base
	}
	// The generation before the size and any read: a truncation after this raises it, and then
	// nothing this scrub found is marked (mark), since the bytes it judged may be gone.
	cuts := s.cuts.Load()
	sc := scrub{l: l, s: s, buf: buf, wait: wait, end: s.Size(), cuts: cuts, res: ScrubResult{Next: at}}
	if !slices.Contains(l.ScrubCandidates(), s) {
		sc.res.Done = true
		return sc.res, nil
	}
	err := sc.run()
	if cerr := l.scrubClosed(s); cerr != nil {
		// The log closed under the scrub: what was found after the close is not marked (the
		// closed log serves no more reads), and its next log must be scrubbed again.
		return sc.res, cerr
	}
	if err != nil && (cuts%2 == 1 || s.cuts.Load() != cuts || !slices.Contains(l.ScrubCandidates(), s)) {
		// Truncated or deleted under the scrub (a read past the new end): nothing to report.
		sc.res.Done = true
		return sc.res, nil
	}
	return sc.res, err
}

// batchStartsAt reports whether a batch of s starts at at.Pos and is the one that holds
// at.Offset, or the first after it (the offset index and the batch headers agree), as at a
// cursor Scrub returned. Headers that cannot be read on the way (a damaged length) say no: a
// scrub from the segment's start finds them.
func (s *Segment) batchStartsAt(at ScrubCursor) bool {
	var hdr [batch.HeaderSize]byte
	pos, _, found, err := s.locate(at.Offset, s.Size(), &hdr)
	return err == nil && found && pos == at.Pos
}

// scrubClosed returns the error of a scrub of s in a log that has been closed (ErrClosed, or
// ErrDeleted): nothing the scrub found is marked then, so its caller must not count the
// segment as scrubbed (a log the broker reopens after a disk error is a new Log, whose
// segments are to be scrubbed again).
func (l *Log) scrubClosed(s *Segment) error {
	if e := l.closeErr.Load(); e != nil {
		return fmt.Errorf("scrub segment %d: %w", s.base, *e)
	}
	return nil
}

// scrub is one Scrub call's state.
type scrub struct {
	l    *Log
	s    *Segment
	buf  []byte
	wait func(n int) error
	end  int64  // the segment's size when the scrub began; sealed, it does not grow
	cuts uint64 // the segment's generation (Segment.cuts) when the scrub began
	res  ScrubResult
}

func (sc *scrub) run() error {
	pos, expect := sc.res.Next.Pos, sc.res.Next.Offset
	for pos < sc.end {
		n := int(min(int64(len(sc.buf)), sc.end-pos))
		if err := sc.wait(n); err != nil {
			sc.res.Next = ScrubCursor{pos, expect}
			return err
		}
		if err := sc.read(sc.buf[:n], pos); err != nil {
			sc.res.Next = ScrubCursor{pos, expect}
			return err
		}
		off := 0
		for off < n {
			p := pos + int64(off)
			if sc.end-p < batch.HeaderSize {
				return sc.bad(p, expect, fmt.Sprintf("%d trailing bytes are less than a batch header", sc.end-p))
			}
			if n-off < batch.HeaderSize {
				break // the header goes on in the next chunk
			}
			h := batch.Batch(sc.buf[off:n])
			size, err := batch.SizeOf(h)
			if err != nil {
				return sc.bad(p, expect, err.Error())
			}
			if p+int64(size) > sc.end {
				return sc.bad(p, expect, fmt.Sprintf("batch of %d bytes runs past the segment's end %d", size, sc.end))
			}
			var crc uint32
			if off+size <= n {
				crc = crc32.Checksum(h[batch.CRCStart:size], castagnoli)
			} else if off > 0 {
				break // read again from this batch
			} else if crc, err = sc.streamCRC(p, size, n); err != nil {
				sc.res.Next = ScrubCursor{pos, expect}
				return err
			}
			reason := ""
			if err := batch.CheckHeader(h, size); err != nil {
				reason = err.Error()
			} else if h.BaseOffset() < expect {
				reason = fmt.Sprintf("batch base offset %d below the expected %d", h.BaseOffset(), expect)
			} else if crc != h.CRC() {
				reason = fmt.Sprintf("%v: stored %#08x, computed %#08x", batch.ErrCRC, h.CRC(), crc)
			}
			if reason != "" {
				next, ok, err := sc.skip(p, size, expect, reason)
				if err != nil || !ok {
					return err
				}
				// Continue at the batch after the bad one, in a fresh chunk.
				off, expect = int(next.Pos-pos), next.Offset
				break
			}
			expect = h.NextOffset()
			off += size
		}
		pos += int64(off)
		sc.res.Next = ScrubCursor{pos, expect}
	}
	sc.res.Done = true
	return nil
}

// read fills p from the segment at pos. A short read (the file shorter than its size, which a
// sealed segment never is unless it was truncated meanwhile) is io.ErrUnexpectedEOF.
func (sc *scrub) read(p []byte, pos int64) error {
	n, err := vfs.ReadCold(sc.s.loadFile(), p, pos)
	sc.res.Bytes += int64(n)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("scrub segment %d at %d: %w", sc.s.base, pos, err)
}

// streamCRC computes the CRC of a batch larger than the buffer, whose first have bytes are in
// it, reading (and waiting for) the rest chunk by chunk.
func (sc *scrub) streamCRC(pos int64, size, have int) (uint32, error) {
	crc := crc32.Checksum(sc.buf[batch.CRCStart:have], castagnoli)
	var hdr [batch.HeaderSize]byte // the chunks overwrite the buffer that holds the header
	copy(hdr[:], sc.buf)
	for off := int64(have); off < int64(size); {
		n := int(min(int64(len(sc.buf)), int64(size)-off))
		if err := sc.wait(n); err != nil {
			return 0, err
		}
		if err := sc.read(sc.buf[:n], pos+off); err != nil {
			return 0, err
		}
		crc = crc32.Update(crc, castagnoli, sc.buf[:n])
		off += int64(n)
	}
	copy(sc.buf, hdr[:])
	return crc, nil
}

// skip marks the bad batch at p (of size bytes by its length field) and finds the batch after
// it: at p+size, if a plausible batch header is there (a valid length and magic, an offset
// past expect and below the next segment's base), and the bad stretch is then that one batch;
// otherwise the length is not to be trusted, the stretch runs to the segment's end, and ok is
// false (nothing further to scrub).
func (sc *scrub) skip(p int64, size int, expect batch.Offset, reason string) (next ScrubCursor, ok bool, err error) {
	q := p + int64(size)
	if q == sc.end {
		return ScrubCursor{}, false, sc.last(CorruptBatch{Pos: p, End: q, FirstOffset: expect, EndOffset: -1, Reason: reason})
	}
	if sc.end-q >= batch.HeaderSize {
		var hdr [batch.HeaderSize]byte
		if err := sc.wait(len(hdr)); err != nil {
			return ScrubCursor{}, false, err
		}
		if err := sc.read(hdr[:], q); err != nil {
			return ScrubCursor{}, false, err
		}
		h := batch.Batch(hdr[:])
		if nsize, err := batch.SizeOf(h); err == nil && q+int64(nsize) <= sc.end && h.Magic() == batch.Magic &&
			h.BaseOffset() > expect && h.BaseOffset() < sc.nextBase() {
			if err := sc.mark(CorruptBatch{Pos: p, End: q, FirstOffset: expect, EndOffset: h.BaseOffset(), Reason: reason}); err != nil {
				return ScrubCursor{}, false, err
			}
			return ScrubCursor{q, h.BaseOffset()}, true, nil
		}
	}
	return ScrubCursor{}, false, sc.bad(p, expect, reason+" (and no batch follows where its length says: the rest of the segment is unreadable)")
}

// bad marks everything from p to the segment's end as bad: the scrub of the segment is done.
func (sc *scrub) bad(p int64, expect batch.Offset, reason string) error {
	return sc.last(CorruptBatch{Pos: p, End: sc.end, FirstOffset: expect, EndOffset: -1, Reason: reason})
}

// last marks c, the last bad stretch of the segment (it runs to the end): the scrub is done.
func (sc *scrub) last(c CorruptBatch) error {
	sc.res.Next, sc.res.Done = ScrubCursor{sc.end, c.FirstOffset}, true
	return sc.mark(c)
}

// nextBase is the base offset of the segment after s (its batches' offsets are all below it).
func (sc *scrub) nextBase() batch.Offset {
	segs := sc.l.Segments()
	for i, s := range segs {
		if s == sc.s && i+1 < len(segs) {
			return segs[i+1].base
		}
	}
	return batch.Offset(sc.l.end.Load())
}

// mark records c on the segment, unless the segment changed since the scrub began (truncated,
// made active again, deleted: the bytes found bad may be gone), or c is marked already. An
// EndOffset of -1 means the next segment's base. Under appendMu, which truncation holds while
// it raises the segment's generation and drops the marks past its cut, so a mark never
// outlives the bytes it names: a segment cut since the scrub began (its generation moved) is
// not marked even once it has grown again past c.End with other batches and been sealed.
func (sc *scrub) mark(c CorruptBatch) error {
	l, s := sc.l, sc.s
	c.Segment = s.base
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return fmt.Errorf("scrub segment %d: %w", s.base, l.closedErr())
	}
	segs := l.Segments()
	i := slices.Index(segs, s)
	if i < 0 || i == len(segs)-1 || s.Size() < c.End || s.cuts.Load() != sc.cuts {
		return nil
	}
	if c.EndOffset < 0 {
		c.EndOffset = segs[i+1].base
	}
	var marks []CorruptBatch
	if old := s.corrupt.Load(); old != nil {
		if slices.ContainsFunc(*old, func(m CorruptBatch) bool { return m.Pos == c.Pos }) {
			return nil
		}
		marks = slices.Clone(*old)
	}
	marks = append(marks, c)
	slices.SortFunc(marks, func(a, b CorruptBatch) int { return int(a.Pos - b.Pos) })
	s.corrupt.Store(&marks)
	sc.res.Found = append(sc.res.Found, c)
	return nil
}

// dropCorruptFrom forgets the marks of the bytes at or past pos, which a truncation is cutting
// away. Called with appendMu held.
func (s *Segment) dropCorruptFrom(pos int64, endOffset batch.Offset) {
	old := s.corrupt.Load()
	if old == nil {
		return
	}
	var kept []CorruptBatch
	for _, m := range *old {
		if m.Pos < pos {
			m.End, m.EndOffset = min(m.End, pos), min(m.EndOffset, endOffset)
			kept = append(kept, m)
		}
	}
	if kept == nil {
		s.corrupt.Store(nil)
		return
	}
	s.corrupt.Store(&kept)
}

// Corrupt returns the bad stretches the scrub has found in the log's segments, oldest first:
// the replica is corrupt while there is one.
func (l *Log) Corrupt() []CorruptBatch {
	var out []CorruptBatch
	for _, s := range l.Segments() {
		if m := s.corrupt.Load(); m != nil {
			out = append(out, *m...)
		}
	}
	return out
}

// checkCorrupt applies s's marks to a read of off that would return bytes [pos, pos+n) of s:
// an error if the read starts in a bad stretch (or asks for an offset in one), else the n to
// read, cut at the first bad stretch past pos. pos < 0 checks only the offset.
func (l *Log) checkCorrupt(s *Segment, off batch.Offset, pos, n int64) (int64, error) {
	marks := s.corrupt.Load()
	if marks == nil {
		return n, nil
	}
	for _, m := range *marks {
		if (off >= m.FirstOffset && off < m.EndOffset) || (pos >= m.Pos && pos < m.End) {
			return 0, &CorruptDataError{Dir: l.dir, Batch: m}
		}
		if pos >= 0 && m.Pos > pos && m.Pos < pos+n {
			n = m.Pos - pos
		}
	}
	return n, nil
}
