package broker

// The scrub's position file: where the scrub's pass got to, so that a restart goes on from
// there instead of from every partition's oldest segment. Without it, a broker restarted more
// often than a pass takes (a pass over 1 TiB at the default rate takes three days) would re-read
// its oldest segments again and again and never reach the others. It is advice: a missing,
// damaged or stale file only starts a new pass.
//
//	<log.dirs>/scrub-position, text, written to a temporary file, fsynced and renamed:
//	  sluice-scrub-position 1
//	  last <topic> <partition>
//	  <topic> <partition> <topic id, hex> <segment base> <position> <offset> <until> <done 0|1>
//	  ...

import (
	"bufio"
	"bytes"
	"encoding/hex"
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
	s.progress, s.last = progress, last
}

// scrubPositionPath is the position file of a broker with data in dir.
func scrubPositionPath(dir string) string { return filepath.Join(dir, scrubPositionFile) }
