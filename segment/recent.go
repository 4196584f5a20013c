package segment

import (
	"sync"

	"github.com/sluicemq/sluice/batch"
)

// recentBatchCount is how many of the last batches appended to the active segment a Segment
// remembers: enough to cover what a caught-up reader asks for between two of its fetches.
const recentBatchCount = 32

// recentBatches remembers the headers and positions of the last batches appended to a
// segment, so that a read at the log's tail, which is most reads (caught-up consumers and
// followers fetch what was appended since their last fetch, and every read bounded by the
// high watermark also locates the batch that holds it), finds its batches without reading
// their headers from the file: on a virtual machine each such pread is microseconds.
//
// Invariant: the entries are consecutive batches of the segment, each starting where the one
// before it ends, the newest being the last batch appended. The appender records under
// Log.appendMu; readers look up concurrently; mu guards the ring (a plain mutex: both sides
// hold it for a 61-byte copy or a scan of at most 32 headers). A truncation forgets everything
// (reset); sealing the segment drops the ring (Segment.recent), as nothing stays recent.
type recentBatches struct {
	mu   sync.Mutex
	ring [recentBatchCount]recentBatch
	n    int // entries recorded since the last reset; the newest is ring[(n-1)%len]
}

type recentBatch struct {
	pos int64
	hdr [batch.HeaderSize]byte
}

// record notes a batch just written at pos.
func (r *recentBatches) record(b batch.Batch, pos int64) {
	r.mu.Lock()
	e := &r.ring[r.n%recentBatchCount]
	e.pos = pos
	copy(e.hdr[:], b[:batch.HeaderSize])
	r.n++
	r.mu.Unlock()
}

func (r *recentBatches) reset() {
	r.mu.Lock()
	r.n = 0
	r.mu.Unlock()
}

// locate answers Segment.locate from memory when it can: the position and header (copied
// into hdr) of the first batch below limit whose last offset is >= off, and whether there is
// one. ok is false when the remembered batches cannot tell (off may lie in an earlier
// batch): the caller reads the file.
func (r *recentBatches) locate(off batch.Offset, limit int64, hdr *[batch.HeaderSize]byte) (pos int64, h batch.Batch, found, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0, nil, false, false
	}
	oldest := r.n - min(r.n, recentBatchCount)
	if batch.Batch(r.ring[(r.n-1)%recentBatchCount].hdr[:]).LastOffset() < off {
		return limit, nil, false, true // off is past every batch
	}
	// The oldest remembered batch whose last offset is >= off: newest first, as tail reads
	// want the last few batches.
	i := r.n - 1
	for i > oldest && batch.Batch(r.ring[(i-1)%recentBatchCount].hdr[:]).LastOffset() >= off {
		i--
	}
	e := &r.ring[i%recentBatchCount]
	if i == oldest && batch.Batch(e.hdr[:]).BaseOffset() > off {
		return 0, nil, false, false // a batch older than any remembered may hold off
	}
	if e.pos >= limit {
		return limit, nil, false, true // not published below limit
	}
	copy(hdr[:], e.hdr[:])
	return e.pos, batch.Batch(hdr[:]), true, true
}
