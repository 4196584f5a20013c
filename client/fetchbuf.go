package client

import "github.com/sluicemq/sluice/batch"

// Reused buffers for ConsumerConfig.ReuseRecordBuffers.
//
// The records a Poll returns alias three kinds of memory, each reused once that Poll's records
// are dead, that is when the next Poll starts:
//
//   - fetch responses: each fetcher reads its responses into fetchBufs (Conn.CallInto). A
//     response is split into one chunk per partition; the buffer goes back to its fetcher's
//     free list when every chunk that aliases it has been drained (or dropped) and the Poll
//     that returned their last records is over.
//   - decompressed batches: each compressed batch is decompressed by a batch.Decompressor of
//     its own, taken from a small set and returned at the next Poll (except the one whose
//     batch Poll is still in the middle of).
//   - the []Record slice and the records' []Header (Consumer.headers): one array each, refilled
//     by every Poll.
//
// Lifetimes, with one partition and the fetcher's prefetch (the response Poll is draining,
// and responsesAhead = 2 more queued or in flight):
//
//	Poll 1: A A A A           starts A (in buffer 1): B and C are fetched into buffers 2, 3
//	Poll 2: A A | B B         ends A, starts B: D is fetched into buffer 4, as Poll 2's
//	                          records still alias buffer 1
//	Poll 3: B B B B           Poll 2's records are dead: buffer 1 is free again
//
// so a fetcher needs four buffers in steady state, and more only while several partitions'
// chunks share responses.
//
// Bounds: a fetcher keeps at most idleBufs idle buffers (fetchBufsIdle, or three per
// partition of its largest request), gives each response the smallest that holds it, and
// never pools one larger than fetch.max.bytes plus slack (a larger response, possible when a partition's first batch
// exceeds every limit, gets a buffer of its own that is dropped once used). A pooled buffer
// larger than one partition's full response (max.partition.fetch.bytes and slack, or a span's
// piece) that is four times larger than what it held for fetchBufShrinkAfter responses in a
// row is dropped too, so one burst of large multi-partition responses does not pin its memory
// forever. Buffers up to one partition's full response (or, for a fetcher that reads files, a
// full piece of a span: keptBufBytesLocked) are kept whatever they hold: a consumer at the
// log's tail gets small responses, and a full one after each pause in its polling; dropping the grown buffers
// after each such catch-up made a consumer at 300 MB/s allocate (and the collector clear) about
// 50 fresh half-megabyte buffers a second. At most
// maxPollDecompressors decompressors exist; past that, and for batches over
// maxRingBatchBytes, a batch gets a fresh buffer (as in the default mode) that the garbage
// collector reclaims.
const (
	fetchBufsIdle        = responsesAhead + 2 // a steady stream's buffers, kept through a pause
	fetchBufShrinkAfter  = 16
	maxPollDecompressors = 64
	maxRingBatchBytes    = 1 << 20
	// maxHeaderKeys bounds the table of interned header keys (both modes).
	maxHeaderKeys = 256
)

// fetchBuf is one reused fetch response buffer.
type fetchBuf struct {
	f *fetcher
	b []byte // the last response's body; its capacity is what is reused
	// refs counts the chunks that alias b and are not yet recycled. Guarded by Consumer.mu.
	refs int
	// small counts consecutive responses that used less than a quarter of b.
	small int
}

// takeBufLocked returns a buffer for the fetcher's next response, which may need up to want
// bytes: the smallest idle one that holds want, else the largest (Conn.CallInto grows it if
// the response needs more). With several partitions, responses of one partition and of all of
// them alternate; taking the last buffer returned gave a full response a one-partition buffer
// to grow, and dropped that one: 17 % of a 4-partition consume was read into fresh memory.
// Called with Consumer.mu held.
func (f *fetcher) takeBufLocked(want int) *fetchBuf {
	best := -1
	for i, fb := range f.free {
		c := cap(fb.b)
		if best < 0 {
			best = i
			continue
		}
		bc := cap(f.free[best].b)
		if (c >= want && (bc < want || c < bc)) || (bc < want && c > bc) {
			best = i
		}
	}
	if best < 0 {
		return &fetchBuf{f: f}
	}
	fb := f.free[best]
	last := len(f.free) - 1
	f.free[best], f.free[last] = f.free[last], nil
	f.free = f.free[:last]
	return fb
}

// responseBufBytes is the most a response for parts partitions can need (KIP-74's oversized
// first batch aside): what a buffer for it should hold so as not to grow.
func (c *Consumer) responseBufBytes(parts int) int {
	records := min(int64(c.cfg.FetchMaxBytes), int64(parts)*int64(c.cfg.MaxPartitionFetchBytes))
	return int(records) + 64<<10
}

// putBufLocked takes back a buffer nothing aliases any more, unless it is too large to keep
// or there are enough idle ones. Called with Consumer.mu held.
func (f *fetcher) putBufLocked(fb *fetchBuf) {
	if c := cap(fb.b); c > 0 {
		if len(fb.b) < c/4 {
			fb.small++
		} else {
			fb.small = 0
		}
		if c > f.c.maxPooledFetchBytes() || (fb.small >= fetchBufShrinkAfter && c > f.keptBufBytesLocked()) {
			fb.b, fb.small = nil, 0 // the next response gets a buffer of its own size
		}
	}
	if len(f.free) < f.idleBufs() {
		f.free = append(f.free, fb)
	}
}

// idleBufs is how many idle buffers the fetcher keeps: fetchBufsIdle, or, when its requests
// carry several partitions, as many as those partitions can have responses at once (each has
// at most responsesAhead waiting or in flight and one being drained). Fewer, and a buffer
// dropped when the responses of several partitions come back together is allocated afresh
// a moment later.
func (f *fetcher) idleBufs() int {
	return max(fetchBufsIdle, (responsesAhead+1)*f.maxParts, f.spanBufs)
}

// grownBufBytes is the most a fetch buffer grows to for a response of limit bytes of records:
// the records, the response's metadata (64 KiB covers it), and the eighth that Conn.CallInto
// adds when it grows a buffer.
func grownBufBytes(limit int) int { return limit + limit/8 + 64<<10 }

// partitionFetchBufBytes is what a buffer grows to for one partition's full response
// (max.partition.fetch.bytes). Buffers up to it are never shrunk.
func (c *Consumer) partitionFetchBufBytes() int { return grownBufBytes(c.cfg.MaxPartitionFetchBytes) }

// keptBufBytesLocked is the size up to which the fetcher keeps a buffer whatever it holds: one
// partition's full response (partitionFetchBufBytes), or, once it reads spans of files, a full
// piece of one (spanPieceFactor × max.partition.fetch.bytes), which is larger: a consumer that
// catches up from the files after each pause, and gets small responses at the tail in
// between, needs those buffers again at the next pause. Called with Consumer.mu held.
func (f *fetcher) keptBufBytesLocked() int {
	n := f.c.partitionFetchBufBytes()
	if f.spanBufs > 0 {
		n = max(n, spanPieceFactor*f.c.cfg.MaxPartitionFetchBytes)
	}
	return n
}

// maxPooledFetchBytes is the largest fetch buffer worth keeping: one grown for a full response
// (fetch.max.bytes).
func (c *Consumer) maxPooledFetchBytes() int { return grownBufBytes(c.cfg.FetchMaxBytes) }

// pollBufs is the memory a Poll's records alias that is not a fetch response. Guarded by
// Consumer.pollMu.
type pollBufs struct {
	recs []Record
	// retired are the fetch buffers of chunks finished (or dropped) by the current Poll,
	// released at the next.
	retired []*fetchBuf
	// held are the decompressors whose output the current Poll's records alias; free are
	// the others.
	held, free []*batch.Decompressor
	created    int
}

// recycle runs at the start of each Poll in ReuseRecordBuffers mode: the previous Poll's
// records are dead, so what they alias can be reused, except what c.cur still needs (its
// response buffer, and the decompressed batch it is in the middle of).
func (c *Consumer) recycle() {
	pb := c.bufs
	pb.recs = pb.recs[:0]
	c.headers = c.headers[:0]
	if len(pb.retired) > 0 {
		c.mu.Lock()
		for _, fb := range pb.retired {
			c.unrefLocked(fb)
		}
		c.mu.Unlock()
		clear(pb.retired)
		pb.retired = pb.retired[:0]
	}
	var keep *batch.Decompressor
	if c.cur != nil && c.cur.inBatch {
		keep = c.cur.dec
	}
	for _, d := range pb.held {
		if d != keep {
			pb.free = append(pb.free, d)
		}
	}
	clear(pb.held)
	pb.held = pb.held[:0]
	if keep != nil {
		pb.held = append(pb.held, keep)
	}
}

// unrefLocked drops one chunk's reference to fb. Called with Consumer.mu held.
func (c *Consumer) unrefLocked(fb *fetchBuf) {
	if fb.refs--; fb.refs == 0 {
		fb.f.putBufLocked(fb)
	}
}

// newChunkLocked returns an empty chunk, a freed one if there is one. c.mu must be held.
func (c *Consumer) newChunkLocked() *chunk {
	if n := len(c.mu.freeChunks); n > 0 {
		ch := c.mu.freeChunks[n-1]
		c.mu.freeChunks[n-1] = nil
		c.mu.freeChunks = c.mu.freeChunks[:n-1]
		return ch
	}
	return new(chunk)
}

// maxFreeChunks bounds the free list: a few responses per partition in flight and buffered.
const maxFreeChunks = 64

// freeChunkLocked takes back a retired chunk that nothing refers to any more (Poll's records
// alias the response buffer and the decompressors, never the chunk). c.mu must be held.
func (c *Consumer) freeChunkLocked(ch *chunk) {
	if len(c.mu.freeChunks) < maxFreeChunks {
		*ch = chunk{}
		c.mu.freeChunks = append(c.mu.freeChunks, ch)
	}
}

// retire notes that ch is done with: its response buffer can be reused once the records of
// the current Poll are dead.
func (c *Consumer) retire(ch *chunk) {
	if ch.buf != nil && c.bufs != nil {
		c.bufs.retired = append(c.bufs.retired, ch.buf)
		ch.buf = nil
	}
	ch.dec = nil
}

// decompressor returns a decompressor for a compressed batch of n bytes whose records the
// current Poll may return, or nil for the default (a buffer of the batch's own).
func (pb *pollBufs) decompressor(n int) *batch.Decompressor {
	if n > maxRingBatchBytes {
		return nil
	}
	var d *batch.Decompressor
	if k := len(pb.free); k > 0 {
		d = pb.free[k-1]
		pb.free[k-1] = nil
		pb.free = pb.free[:k-1]
	} else if pb.created < maxPollDecompressors {
		d = new(batch.Decompressor)
		pb.created++
	} else {
		return nil
	}
	pb.held = append(pb.held, d)
	return d
}

// headerKey returns k as a string, interned: a consumer sees the same few header keys over
// and over, and a lookup by []byte conversion does not allocate. Called with pollMu held.
func (c *Consumer) headerKey(k []byte) string {
	if s, ok := c.headerKeys[string(k)]; ok {
		return s
	}
	s := string(k)
	if len(c.headerKeys) < maxHeaderKeys {
		c.headerKeys[s] = s
	}
	return s
}
