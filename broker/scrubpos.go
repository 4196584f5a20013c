package broker

// The scrub's position file: where the scrub's pass got to, so that a restart goes on from
// there instead of from every partition's oldest segment. Without it, a broker restarted more
// often than a pass takes (a pass over 1 TiB at the default rate takes three days) would re-read
// its oldest segments again and again and never reach the others. It is advice: a missing,
// damaged or stale file only starts a new pass.
//
// The file also keeps the bad batches found (the marks live in memory, on the segments): a
// restart checks each again first, from its position (a mark is restored only if the bytes are
// still bad), instead of serving them until the scrub's next pass comes back to them.
//
//	<log.dirs>/scrub-position, text, written to a temporary file, fsynced and renamed:
//	  sluice-scrub-position 1
//	  last <topic> <partition>
//	  <topic> <partition> <topic id, hex> <segment base> <position> <offset> <until> <done 0|1>
//	  bad <topic> <partition> <topic id, hex> <segment base> <position> <end> <first offset> <end offset>
//	  ...

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/segment"
)

const (
	scrubPositionFile    = "scrub-position"
	scrubPositionHeader  = "sluice-scrub-position 1"
	scrubPositionEvery   = 10 * time.Second // the most often the file is written
	scrubPositionMaxSize = 64 << 20         // a file larger than this is not read
)

// savePosition writes the pass's state to path, at most every scrubPositionEvery unless force.
// An error is logged, not returned: the file is advice.
func (s *scrubber) savePosition(force bool) {
	if s.path == "" || (!force && time.Since(s.saved) < scrubPositionEvery) {
		return
	}
	s.saved = time.Now()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s\nlast %s %d\n", scrubPositionHeader, s.last.topic, s.last.partition)
	for tp, pr := range s.progress {
		id := pr.id
		done := 0
		if pr.done {
			done = 1
		}
		fmt.Fprintf(&buf, "%s %d %s %d %d %d %d %d\n", tp.topic, tp.partition, hex.EncodeToString(id[:]),
			pr.seg, pr.cur.Pos, pr.cur.Offset, pr.until, done)
	}
	bad := func(tp topicPartition, id cluster.TopicID, c segment.CorruptBatch) {
		fmt.Fprintf(&buf, "bad %s %d %s %d %d %d %d %d\n", tp.topic, tp.partition, hex.EncodeToString(id[:]),
			c.Segment, c.Pos, c.End, c.FirstOffset, c.EndOffset)
	}
	for _, p := range s.partitions() {
		for _, c := range p.log().Corrupt() {
			bad(p.tp, p.topicID, c)
		}
	}
	for _, m := range s.pending {
		bad(m.tp, m.id, m.c)
	}
	if err := writeFileSync(s.path, buf.Bytes()); err != nil {
		s.b.logger.Debug("scrub: position not saved", "err", err)
	}
}

// loadPosition reads the pass's state from path. A file that does not parse is ignored (a new
// pass); an entry of a partition whose topic has another id by the time the scrub comes to it
// is dropped then (step).
func (s *scrubber) loadPosition() {
	if s.path == "" {
		return
	}
	data, err := os.ReadFile(s.path)
	if err != nil || len(data) > scrubPositionMaxSize {
		return
	}
	progress := map[topicPartition]scrubProgress{}
	var last topicPartition
	var pending []savedMark
	sc := bufio.NewScanner(bytes.NewReader(data))
	if !sc.Scan() || sc.Text() != scrubPositionHeader {
		return
	}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "last" {
			n, err := strconv.ParseInt(f[2], 10, 32)
			if err != nil {
				return
			}
			last = topicPartition{f[1], int32(n)}
			continue
		}
		if len(f) == 9 && f[0] == "bad" {
			m, ok := parseBad(f[1:])
			if !ok {
				return
			}
			pending = append(pending, m)
			continue
		}
		var v [6]int64 // partition, segment base, position, offset, until, done
		var id cluster.TopicID
		if len(f) != 8 || hex.DecodedLen(len(f[2])) != len(id) {
			return
		}
		if _, err := hex.Decode(id[:], []byte(f[2])); err != nil {
			return
		}
		for i, field := range []string{f[1], f[3], f[4], f[5], f[6], f[7]} {
			if v[i], err = strconv.ParseInt(field, 10, 64); err != nil {
				return
			}
		}
		if v[0] < 0 || v[0] > 1<<31-1 || v[2] < 0 {
			return
		}
		progress[topicPartition{f[0], int32(v[0])}] = scrubProgress{id: id, seg: batch.Offset(v[1]),
			cur: segment.ScrubCursor{Pos: v[2], Offset: batch.Offset(v[3])}, until: batch.Offset(v[4]), done: v[5] == 1}
	}
	if sc.Err() != nil {
		return
	}
	s.progress, s.last, s.pending = progress, last, pending
}

// savedMark is a bad batch read from the position file, to be checked again (restoreMarks).
type savedMark struct {
	tp topicPartition
	id cluster.TopicID
	c  segment.CorruptBatch
}

// parseBad parses the fields of a "bad" line after the word.
func parseBad(f []string) (savedMark, bool) {
	var m savedMark
	var v [6]int64 // partition, segment base, position, end, first offset, end offset
	if hex.DecodedLen(len(f[2])) != len(m.id) {
		return m, false
	}
	if _, err := hex.Decode(m.id[:], []byte(f[2])); err != nil {
		return m, false
	}
	for i, field := range []string{f[1], f[3], f[4], f[5], f[6], f[7]} {
		var err error
		if v[i], err = strconv.ParseInt(field, 10, 64); err != nil {
			return m, false
		}
	}
	if v[0] < 0 || v[0] > 1<<31-1 || v[2] < 0 || v[3] <= v[2] {
		return m, false
	}
	m.tp = topicPartition{f[0], int32(v[0])}
	m.c = segment.CorruptBatch{Segment: batch.Offset(v[1]), Pos: v[2], End: v[3], FirstOffset: batch.Offset(v[4]), EndOffset: batch.Offset(v[5])}
	return m, true
}

// errRechecked stops a scrub that restoreMarks started once it is past the mark's bytes.
var errRechecked = errors.New("scrub: saved mark checked")

// restoreMarks checks again, first, the saved bad batches of the partitions now hosted (parts):
// each is scrubbed from its position to its end, which marks it again if it is still bad
// (and reports it as found). Those of partitions not hosted (yet: logs open lazily) wait.
func (s *scrubber) restoreMarks(ctx context.Context, parts []*partition) {
	hosted := map[topicPartition]*partition{}
	for _, p := range parts {
		hosted[p.tp] = p
	}
	kept := s.pending[:0]
	for _, m := range s.pending {
		p := hosted[m.tp]
		if p == nil {
			kept = append(kept, m)
			continue
		}
		if p.topicID != m.id || ctx.Err() != nil {
			continue
		}
		s.b.recheckMark(ctx, p, p.log(), m.c, s.buf, s.bucket.wait)
	}
	s.pending = kept
}

// recheckMark scrubs c's stretch again in l, p's log, from its position to its end, which
// marks it again (and reports it) if it is still bad. throttle is asked before each read.
func (b *Broker) recheckMark(ctx context.Context, p *partition, l *segment.Log, c segment.CorruptBatch, buf []byte, throttle func(context.Context, int) error) {
	for _, seg := range l.ScrubCandidates() {
		if seg.Base() != c.Segment {
			continue
		}
		left := c.End - c.Pos
		wait := func(n int) error {
			// Past the mark: stop. A header's read (the batch after a bad one) goes on, so
			// that the one-batch mark it decides is made.
			if left <= 0 && n > batch.HeaderSize {
				return errRechecked
			}
			left -= int64(n)
			return throttle(ctx, n)
		}
		res, err := l.Scrub(seg, segment.ScrubCursor{Pos: c.Pos, Offset: c.FirstOffset}, buf, wait)
		for _, found := range res.Found {
			b.replicaCorrupt(p, found)
		}
		if err != nil && !errors.Is(err, errRechecked) && ctx.Err() == nil {
			b.logger.Warn("scrub: checking a known bad batch again failed", "partition", p.tp.String(), "segment", int64(seg.Base()), "err", err)
		}
	}
}

// scrubPositionPath is the position file of a broker with data in dir.
func scrubPositionPath(dir string) string { return filepath.Join(dir, scrubPositionFile) }
