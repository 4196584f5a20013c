package broker

// Behavior: the scrub.
//
// One goroutine for the whole broker re-reads the sealed, fsynced segments of every partition
// it hosts (segment.Log.Scrub: every batch's length, magic, offsets and CRC checked again), at
// most log.scrub.bytes.per.sec over all of them (a token bucket, so that the scrub's share of
// the disk does not grow with the partition count), in chunks of scrubChunk bytes. It takes the
// partitions in turn, one segment of each (in name order, so a pass is reproducible), and
// remembers in memory where each partition's scrub got to; a pass over every partition starts
// again from the oldest segments scrubRest after it began (at once if it took longer), or
// scrubIdle after a pass that found nothing sealed. The pass's state is saved in a small file
// (scrubpos.go) every 10 s at most and at Close, so that a restart goes on where it stopped.
//
// A bad batch is logged once, with the partition, the segment, its offsets and position, and
// marked on its segment: reads that reach it fail with CORRUPT_MESSAGE (never the bad bytes),
// reads before it still work, and the replica counts as corrupt (Metadata v1's
// corruptReplicas, `sluice topic describe`) until retention deletes the segment or a
// truncation cuts the batch away; across a restart too, as the position file keeps the bad
// batches found and the restarted scrub checks them again first. "Logged once" holds within a
// run: a restart that finds a batch bad again logs it again. The scrub never looks at the
// active segment, nor at bytes not yet fsynced: recovery checks those after an unclean stop.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/segment"
)

const (
	// scrubChunk is the scrub's read size: large enough that a pass costs few system calls
	// (four a second at the default rate), small enough that the token bucket's burst (one
	// chunk) stays a small share of the disk's time.
	scrubChunk = 1 << 20
	// scrubRest is the shortest time from the start of one pass to the start of the next, so
	// that a broker with little sealed data does not re-read it over and over at the full rate;
	// a pass longer than that is followed by the next at once.
	scrubRest = 10 * time.Minute
	// scrubIdle is the pause after a pass that found nothing sealed to read (a new broker, or
	// one whose partitions have one segment each): the next looks again soon.
	scrubIdle = 5 * time.Second
)

// scrubber is the scrub's state, owned by its goroutine (run).
type scrubber struct {
	b      *Broker
	bucket *tokenBucket
	buf    []byte
	// progress: where each partition's scrub got to in this pass. A partition not in it starts
	// at its oldest segment.
	progress map[topicPartition]scrubProgress
	last     topicPartition // the partition scrubbed last; the next turn takes the one after it
	// partitions lists the partitions to scrub (Broker.partitionList; tests give their own).
	partitions func() []*partition
	// path is the position file (scrubpos.go), "" for none; saved is when it was last written.
	path  string
	saved time.Time
	// pending: the bad batches the position file named, not yet checked again (restoreMarks).
	pending []savedMark
}

// scrubProgress is where a partition's scrub got to: the segment with base seg, at cur (the
// segment's start is the zero cursor); done once every candidate of this pass has been read.
// A pass takes the segments below until, the partition's synced offset when the pass first
// came to it: a partition written faster than the scrub reads would otherwise keep the pass
// chasing its newest segments and never back to its oldest.
type scrubProgress struct {
	id    cluster.TopicID // the partition's topic's: another topic of the name starts afresh
	seg   batch.Offset
	cur   segment.ScrubCursor
	until batch.Offset
	done  bool
}

func newScrubber(b *Broker, bytesPerSec int64, partitions func() []*partition, path string) *scrubber {
	return &scrubber{
		path:       path,
		b:          b,
		bucket:     newTokenBucket(bytesPerSec, scrubChunk),
		buf:        make([]byte, min(scrubChunk, max(bytesPerSec, 4<<10))),
		progress:   map[topicPartition]scrubProgress{},
		partitions: partitions,
	}
}

// scrubLoop is the broker's scrub goroutine (log.scrub.bytes.per.sec > 0).
func (b *Broker) scrubLoop() {
	defer b.wg.Done()
	newScrubber(b, b.cfg.ScrubBytesPerSec, b.partitionList, scrubPositionPath(b.cfg.DataDir)).run(b.ctx)
}

// run scrubs until ctx ends, from where the position file says the last run got to.
func (s *scrubber) run(ctx context.Context) {
	s.loadPosition()
	defer s.savePosition(true)
	start, read := time.Now(), int64(0)
	for ctx.Err() == nil {
		n, more := s.step(ctx)
		read += n
		if more {
			continue
		}
		// A pass is over: rest, then start again from every partition's oldest segment.
		rest := scrubIdle
		if read > 0 {
			rest = scrubRest - time.Since(start)
		}
		clear(s.progress)
		s.pending = nil // partitions not hosted for a whole pass are gone
		s.savePosition(true)
		if rest > 0 {
			t := time.NewTimer(rest)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		start, read = time.Now(), 0
	}
}

// step scrubs (the rest of) one segment of the next partition that has one left in this pass,
// and returns the bytes it read; more is false when no partition has one left.
func (s *scrubber) step(ctx context.Context) (read int64, more bool) {
	parts := s.partitions()
	if len(s.pending) > 0 {
		s.restoreMarks(ctx, parts)
	}
	slices.SortFunc(parts, func(a, b *partition) int { return compareTP(a.tp, b.tp) })
	// The partitions after the last one scrubbed, then those up to it: round robin.
	i, _ := slices.BinarySearchFunc(parts, s.last, func(p *partition, tp topicPartition) int { return compareTP(p.tp, tp) })
	if i < len(parts) && parts[i].tp == s.last {
		i++
	}
	for _, p := range append(parts[i:len(parts):len(parts)], parts[:i]...) {
		if ctx.Err() != nil {
			return 0, true
		}
		l := p.log() // one log for the turn: the log supervisor may swap in another meanwhile
		pr, ok := s.progress[p.tp]
		if !ok || pr.id != p.topicID {
			pr = scrubProgress{id: p.topicID, until: l.SyncedOffset()}
		}
		if pr.done {
			continue
		}
		seg := s.nextSegment(l, pr)
		if seg == nil {
			pr.done = true
			s.progress[p.tp] = pr
			continue
		}
		if seg.Base() != pr.seg {
			pr.seg, pr.cur = seg.Base(), segment.ScrubCursor{}
		}
		s.last = p.tp
		before := pr
		res, err := l.Scrub(seg, pr.cur, s.buf, func(n int) error { return s.bucket.wait(ctx, n) })
		for _, c := range res.Found {
			s.b.replicaCorrupt(p, c)
		}
		switch {
		case err == nil && res.Done:
			// Past this segment: the next turn of this partition takes the one after it.
			pr.seg, pr.cur = seg.Base()+1, segment.ScrubCursor{}
		case err == nil:
			pr.cur = res.Next
		case ctx.Err() != nil:
			return res.Bytes, true // stopping
		case errors.Is(err, segment.ErrClosed) && p.log() != l:
			// The log supervisor closed the log and swapped in a new one (heal.go) during the
			// turn: what the scrub found after the close went unmarked, so this segment is
			// scrubbed again, from where this turn began, in the new log at the next turn.
			s.progress[p.tp] = before
			return res.Bytes, true
		case errors.Is(err, segment.ErrDeleted):
			// The partition is going.
			pr.done = true
		case errors.Is(err, segment.ErrClosed):
			// Closed, not (yet) replaced: the broker is stopping, or the supervisor is reopening
			// the log (the new one may take a while to recover). The partition is left as it
			// is until it has a log again; the other partitions go on.
			continue
		case errors.Is(err, segment.ErrReopen):
			// The segment's file, closed by the FileCache, could not open again (the file
			// limit): the same segment, from the same place, at the partition's next turn.
		default:
			// A read error on a sealed segment: the disk's to report (fetches of these bytes
			// fail with KAFKA_STORAGE_ERROR too). The scrub goes on with the next segment.
			s.b.logger.Warn("scrub: reading a segment failed", "partition", p.tp.String(), "segment", int64(seg.Base()), "err", err)
			pr.seg, pr.cur = seg.Base()+1, segment.ScrubCursor{}
		}
		s.progress[p.tp] = pr
		s.savePosition(false)
		return res.Bytes, true
	}
	return 0, false
}

// nextSegment is the first scrub candidate of l at or after the segment pr names and below
// its pass's end.
func (s *scrubber) nextSegment(l *segment.Log, pr scrubProgress) *segment.Segment {
	for _, seg := range l.ScrubCandidates() {
		if seg.Base() >= pr.until {
			break
		}
		if seg.Base() >= pr.seg {
			return seg
		}
	}
	return nil
}

func compareTP(a, b topicPartition) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition) - int(b.partition)
}

// replicaCorrupt reports a bad stretch the scrub found and marked in p's log: the replica is
// corrupt from now on (partition.corrupt), and reads that reach the stretch fail with
// CORRUPT_MESSAGE.
//
// Replication hook: once replicas exist, this is where a corrupt follower truncates its log to
// c.FirstOffset and fetches the range again from its leader, and a corrupt leader asks the
// controller to hand leadership to a healthy in-sync replica (and then does the same as a
// follower). On a single replica there is no good copy to fetch: the batch stays unreadable
// until retention deletes its segment.
func (b *Broker) replicaCorrupt(p *partition, c segment.CorruptBatch) {
	b.logger.Error("scrub: corrupt batch on disk; reads that reach it fail with CORRUPT_MESSAGE",
		"partition", p.tp.String(), "segment", int64(c.Segment), "position", c.Pos, "bytes", c.End-c.Pos,
		"offsets", fmt.Sprintf("[%d, %d)", c.FirstOffset, c.EndOffset), "reason", c.Reason)
}

// corrupt reports whether the scrub has found a bad batch in the partition's log that is still
// there: the replica is corrupt.
func (p *partition) corrupt() bool { return len(p.log().Corrupt()) > 0 }
