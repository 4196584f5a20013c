package client

// Fuzz tests of the consumer's handling of decoded Fetch responses: fetcher.handle (which
// files a response's partitions as chunks), nextChunk, drain and decode (which turn chunks into
// records and positions), driven in-process. The fetcher is built but not started: the test
// plays its goroutine (prepare, the call, handle or release) and the network is replaced by a
// response the fuzzer builds, encoded and decoded with the wire codec into the fetcher's own
// response buffer, as Conn.callInto does. Poll runs for real, with a short context.
//
// The metadata knows the topic but no broker and no leader, so that a leader lookup (after a
// retriable error) fails at once without I/O; the harness then plays the lookup's success
// (leader 1, the fetcher under test) before each fetch.

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

const (
	fzTopic  = "t"
	fzBroker = int32(1)
)

// fzReader hands out the fuzzer's bytes as small decisions; past the end every decision is 0.
type fzReader struct{ b []byte }

func (r *fzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fzReader) empty() bool { return len(r.b) == 0 }

// intn returns a value in [0, n).
func (r *fzReader) intn(n int) int {
	if n <= 1 {
		return 0
	}
	if n <= 256 {
		return int(r.byte()) % n
	}
	return int(uint16(r.byte())<<8|uint16(r.byte())) % n
}

func (r *fzReader) bool() bool { return r.byte()&1 == 1 }

// rare reports a 1-in-n decision; never once the bytes are used up.
func (r *fzReader) rare(n int) bool { return r.intn(n) == n-1 }

// pick returns a value in [0, n) for a switch whose common case is the default: n-1 once the
// bytes are used up, so that the rare cases can be 0, 1, ...
func (r *fzReader) pick(n int) int { return n - 1 - r.intn(n) }

func (r *fzReader) u64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(r.byte())
	}
	return v
}

// offset returns an offset near base, or (rarely) an extreme one.
func (r *fzReader) offset(base int64) int64 {
	switch r.pick(8) {
	case 0:
		return int64(r.u64()) // anything, negative and huge included
	case 1:
		return math.MaxInt64 - int64(r.intn(8))
	case 2:
		return -1 - int64(r.intn(8))
	default:
		d := int64(r.intn(41)) // base, or within 20 of it
		if d > 20 {
			d = 20 - d
		}
		return base + d
	}
}

// errorCode picks a partition or request error code: mostly none, else a known code, a
// retriable one, or one outside the table.
func (r *fzReader) errorCode() wire.ErrorCode {
	switch r.pick(10) {
	case 0:
		return wire.ErrOffsetOutOfRange
	case 1:
		return wire.ErrNotLeaderOrFollower
	case 2:
		return wire.ErrUnknownTopicOrPartition
	case 3:
		return wire.ErrorCode(int16(r.byte())<<8 | int16(r.byte())) // anything, unknown codes included
	case 4:
		return wire.ErrCorruptMessage
	default:
		return wire.NoError
	}
}

var fzCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// fzFixCRC recomputes a batch's CRC after the test changed a field it covers.
func fzFixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[batch.CRCStart:], fzCastagnoli))
}

// fzBatchInfo is what the test knows of a batch it built: its partition, its records' offsets
// (base + i for the i-th record) and whether it was damaged (none of its records may reach
// the application).
type fzBatchInfo struct {
	part    int32
	base    int64
	count   int
	corrupt bool
}

// fzValue is the value of record i of batch id: it lets a returned record be traced to the
// batch it came from.
func fzValue(id uint32, i int) []byte {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v, id)
	binary.BigEndian.PutUint32(v[4:], uint32(i))
	return v
}

var fzCodecs = []batch.Codec{batch.None, batch.None, batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd}

// fzHarness is a consumer and its (not started) fetcher for broker 1.
type fzHarness struct {
	t     testing.TB
	c     *Consumer
	f     *fetcher
	parts int32

	batches map[uint32]fzBatchInfo // by id; nil: records are not traced (raw responses)
	nextID  uint32

	// The application's view, per partition: the last offset Poll returned since the last
	// explicit position change (-1: none), and whether the partition must end in an error.
	last      map[int32]int64
	mustError map[int32]string

	// seenBufs are the fetch buffers handed out, to check their reference counts.
	seenBufs map[*fetchBuf]bool

	// held are the records of the last Poll (ReuseRecordBuffers: valid until the next Poll)
	// with copies of their values.
	held     []Record
	heldVals [][]byte

	trace bool // log every step (only shown if the test fails)

	// FetchShared (FuzzConsumerFetchSharedResponse): responses carry file spans, of files the
	// test writes in dir.
	shared    bool
	dir       string
	spanFiles []*fzSpanFile
}

// fzWatchdog bounds one fuzz iteration: past d it prints every goroutine's stack and crashes
// the process, so that the fuzzer reports a hang as a failure with its input. Call the
// returned function when the iteration ends.
func fzWatchdog(d time.Duration) (stop func()) {
	t := time.AfterFunc(d, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "fuzz iteration still running after %v:\n%s\n", d, buf)
		panic(fmt.Sprintf("fuzz iteration still running after %v", d))
	})
	return func() { t.Stop() }
}

// fzTrace: log each step of an iteration, shown if it fails. Off in a fuzzing worker, where it
// would only slow the search; on when a failing input is run again with go test -run.
func fzTrace() bool {
	w := flag.Lookup("test.fuzzworker")
	return w == nil || w.Value.String() != "true"
}

func fzDiscardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newFzHarness builds a consumer as NewConsumer does, over a Client whose metadata was set by
// hand (no bootstrap: nothing is dialled), assigns parts partitions of fzTopic and seeks them
// to starts.
func newFzHarness(t testing.TB, cfg ConsumerConfig, parts int32, starts []int64) *fzHarness {
	cfg.Config.Logger = fzDiscardLogger()
	cfg.RetryBackoff = time.Millisecond
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cl := &Client{cfg: cfg.Config, conns: map[string]*Conn{}, noShm: map[string]bool{}}
	tm := TopicMetadata{Name: fzTopic}
	for p := range parts {
		tm.Partitions = append(tm.Partitions, PartitionMetadata{Partition: p, Leader: -1, LeaderEpoch: -1})
	}
	cl.meta.Store(&metadata{fetched: time.Now(), brokers: map[int32]wire.MetadataBroker{},
		topics: map[string]TopicMetadata{fzTopic: tm}})
	c := newConsumer(cfg, cl)

	// The fetcher, registered so that ensureFetcherLocked never starts a goroutine for it.
	f := &fetcher{c: c, broker: fzBroker, wake: make(chan struct{}, 1), index: map[TopicPartition]int{}, spans: map[TopicPartition]*fileSpan{}}
	f.cancelRequestFn = f.cancelRequest
	c.mu.Lock()
	c.mu.fetchers[fzBroker] = f
	c.mu.Unlock()

	h := &fzHarness{t: t, c: c, f: f, parts: parts, last: map[int32]int64{}, mustError: map[int32]string{},
		seenBufs: map[*fetchBuf]bool{}, trace: fzTrace()}
	tps := make([]TopicPartition, parts)
	for p := range parts {
		tps[p] = TopicPartition{fzTopic, p}
	}
	if err := c.Assign(tps); err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		h.seek(p, starts[int(p)%len(starts)])
	}
	return h
}

func (h *fzHarness) close() {
	c := h.c
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		h.t.Errorf("Close: %v", err)
	}
	c.mu.Lock()
	h.f.endRequestsLocked()
	c.mu.Unlock()
	h.f.closeSpans() // as the fetcher goroutine does when it stops
}

// seek is the application's Seek: an explicit position change.
func (h *fzHarness) seek(p int32, off int64) {
	if off < 0 {
		off = -off
		if off < 0 {
			off = 0
		}
	}
	if h.trace {
		h.t.Logf("seek %d to %d", p, off)
	}
	if err := h.c.Seek(TopicPartition{fzTopic, p}, off); err != nil {
		h.t.Fatalf("Seek(%d, %d): %v", p, off, err)
	}
	h.last[p] = -1
	delete(h.mustError, p)
}

// reassign unassigns p and assigns it again (a new partition state, waiting for a reset),
// then seeks it to off.
func (h *fzHarness) reassign(p int32, off int64) {
	var keep []TopicPartition
	for q := range h.parts {
		if q != p {
			keep = append(keep, TopicPartition{fzTopic, q})
		}
	}
	if err := h.c.Assign(keep); err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.Assign(append(keep, TopicPartition{fzTopic, p})); err != nil {
		h.t.Fatal(err)
	}
	h.seek(p, off)
}

// leaders plays a successful leader lookup (maintain) for partitions that lost theirs.
func (h *fzHarness) leaders() {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.mu.parts {
		if ps.leader < 0 {
			ps.leader = fzBroker
			c.wakeFetcherLocked(ps)
		}
	}
	select { // the wake-ups are for a goroutine that does not run
	case <-h.f.wake:
	default:
	}
}

// prepare plays the fetcher goroutine up to the call. It returns the request's partitions.
func (h *fzHarness) prepare() []fetchPart {
	_, n := h.f.prepare()
	if n == 0 {
		return nil
	}
	if fb := h.f.buf; fb != nil {
		if fb.refs != 0 {
			h.t.Fatalf("prepare took a fetch buffer still referenced %d times", fb.refs)
		}
		h.seenBufs[fb] = true
	}
	return append([]fetchPart(nil), h.f.sent...)
}

// deliver plays the rest of the fetcher's loop with body as the response: the call (the body
// read into the request's buffer and decoded), then handle, or release as run does when the
// call failed or was cancelled. cancelledWins: if a seek cancelled the request, the
// cancellation beat the response. It reports whether handle ran.
func (h *fzHarness) deliver(body []byte, cancelledWins bool) bool {
	f, c := h.f, h.c
	c.mu.Lock()
	cancelled := f.reqCtx != nil && f.reqCtx.Err() != nil
	c.mu.Unlock()
	if cancelled && cancelledWins {
		f.release(false)
		return false
	}
	// As Conn.callInto: the body goes into the request's buffer if it fits (overwriting
	// whatever it held: nothing may alias a buffer prepare took), else a new one.
	var buf []byte
	if fb := f.buf; fb != nil {
		buf = fb.b[:cap(fb.b)]
		for i := range buf {
			buf[i] = 0xa5
		}
		if cap(buf) >= len(body) {
			buf = buf[:len(body)]
		} else {
			buf = make([]byte, len(body), len(body)+len(body)/8)
		}
		fb.b = buf
	} else {
		buf = make([]byte, len(body))
	}
	copy(buf, body)
	f.resp.FetchResponse = wire.FetchResponse{Topics: f.resp.Topics[:0]}
	f.resp.Spans = f.resp.Spans[:0]
	var err error
	if h.shared {
		err = f.resp.ReadFrom(buf)
	} else {
		err = f.resp.FetchResponse.ReadFrom(buf)
	}
	if err != nil {
		// run's failure branch.
		f.release(true)
		c.cl.InvalidateMetadata()
		c.signal()
		return false
	}
	f.handle()
	return true
}

// snapshot is a partition's state as the application could see it.
type fzSnap struct {
	ok       bool
	epoch    uint64
	hasPos   bool
	position int64
	err      error
}

func (h *fzHarness) snapshot() map[int32]fzSnap {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int32]fzSnap{}
	for tp, ps := range c.mu.parts {
		out[tp.Partition] = fzSnap{true, ps.epoch, ps.hasPos, ps.position, ps.err}
	}
	return out
}

// checkState checks the consumer's invariants between steps (no request is out).
func (h *fzHarness) checkState(step string) {
	h.t.Helper()
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	queued := map[TopicPartition]int{}
	for _, ch := range c.mu.queue {
		ps := c.mu.parts[ch.tp]
		if ps == nil || ps.epoch != ch.epoch {
			h.t.Fatalf("%s: queued response of %s at epoch %d, partition %v", step, ch.tp, ch.epoch, ps)
		}
		queued[ch.tp]++
		if ch.buf != nil && ch.buf.refs <= 0 {
			h.t.Fatalf("%s: queued response of %s aliases a buffer with %d references", step, ch.tp, ch.buf.refs)
		}
	}
	limit := responsesAhead
	if h.shared {
		limit = maxSpanAhead // pieces of a span
	}
	for tp, ps := range c.mu.parts {
		if ps.hasPos && ps.position > ps.fetchOffset {
			h.t.Fatalf("%s: %s position %d beyond fetch offset %d", step, tp, ps.position, ps.fetchOffset)
		}
		if ps.inflight {
			h.t.Fatalf("%s: %s in flight with no request out", step, tp)
		}
		if ps.buffered != queued[tp] || ps.buffered < 0 || ps.buffered > limit {
			h.t.Fatalf("%s: %s buffered %d, queued %d", step, tp, ps.buffered, queued[tp])
		}
	}
	for fb := range h.seenBufs {
		if fb.refs < 0 {
			h.t.Fatalf("%s: fetch buffer with %d references", step, fb.refs)
		}
	}
}

// poll runs Poll with a short context and checks what it returned against the positions
// before it.
func (h *fzHarness) poll(step string) ([]Record, error) {
	h.t.Helper()
	// The records of the previous Poll are valid until this one.
	for i, r := range h.held {
		if string(r.Value) != string(h.heldVals[i]) {
			h.t.Fatalf("%s: value of %s-%d at %d changed before the next Poll: %x, was %x",
				step, r.Topic, r.Partition, r.Offset, r.Value, h.heldVals[i])
		}
	}
	before := h.snapshot()
	failedBefore := false
	for _, s := range before {
		failedBefore = failedBefore || s.err != nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	recs, err := h.c.Poll(ctx)
	cancel()
	if h.trace {
		var sb strings.Builder
		for _, r := range recs {
			fmt.Fprintf(&sb, " %d@%d", r.Partition, r.Offset)
		}
		h.t.Logf("%s: Poll:%s, %v", step, sb.String(), err)
	}
	after := h.snapshot()

	if failedBefore && (err == nil || len(recs) > 0) {
		h.t.Fatalf("%s: a partition had failed, yet Poll returned %d records, %v", step, len(recs), err)
	}
	if err != nil && len(recs) > 0 {
		h.t.Fatalf("%s: Poll returned %d records and %v", step, len(recs), err)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		// A partition error: it is some partition's, and names it.
		named := false
		for p, s := range after {
			if s.err != nil && s.err.Error() == err.Error() && strings.Contains(err.Error(), TopicPartition{fzTopic, p}.String()) {
				named = true
			}
		}
		if !named {
			h.t.Fatalf("%s: Poll error %q is no failed partition's", step, err)
		}
	}
	if len(recs) > h.c.cfg.MaxPollRecords {
		h.t.Fatalf("%s: %d records, max.poll.records %d", step, len(recs), h.c.cfg.MaxPollRecords)
	}
	for _, r := range recs {
		p := r.Partition
		b, a := before[p], after[p]
		if r.Topic != fzTopic || !b.ok {
			h.t.Fatalf("%s: record of %s-%d, not assigned", step, r.Topic, p)
		}
		if !b.hasPos {
			h.t.Fatalf("%s: record %d of %s-%d, which had no position", step, r.Offset, r.Topic, p)
		}
		if r.Offset < b.position {
			h.t.Fatalf("%s: record %d of partition %d below its position %d", step, r.Offset, p, b.position)
		}
		if l := h.last[p]; r.Offset <= l {
			h.t.Fatalf("%s: partition %d: record %d after record %d", step, p, r.Offset, l)
		}
		h.last[p] = r.Offset
		if a.epoch == b.epoch && a.hasPos && a.position <= r.Offset {
			h.t.Fatalf("%s: partition %d at %d after returning record %d", step, p, a.position, r.Offset)
		}
		if h.batches != nil {
			if len(r.Value) != 8 {
				h.t.Fatalf("%s: record %d of partition %d has value %x, no value the test produced", step, r.Offset, p, r.Value)
			}
			id, i := binary.BigEndian.Uint32(r.Value), int(binary.BigEndian.Uint32(r.Value[4:]))
			bi, ok := h.batches[id]
			switch {
			case !ok || i >= bi.count:
				h.t.Fatalf("%s: record %d of partition %d has value %x, no record the test produced", step, r.Offset, p, r.Value)
			case bi.part != p:
				h.t.Fatalf("%s: record %d of partition %d comes from a batch of partition %d", step, r.Offset, p, bi.part)
			case bi.corrupt:
				h.t.Fatalf("%s: record %d of partition %d comes from damaged batch %d", step, r.Offset, p, id)
			case r.Offset != bi.base+int64(i):
				h.t.Fatalf("%s: record %d of batch %d (base %d) returned at offset %d", step, i, id, bi.base, r.Offset)
			}
		}
	}
	for p, b := range before {
		a := after[p]
		if a.ok && b.ok && a.epoch == b.epoch && b.hasPos && (!a.hasPos || a.position < b.position) {
			h.t.Fatalf("%s: partition %d moved back from %d to %d (has %v) without a seek", step, p, b.position, a.position, a.hasPos)
		}
	}
	h.held, h.heldVals = recs, h.heldVals[:0]
	for _, r := range recs {
		h.heldVals = append(h.heldVals, append([]byte(nil), r.Value...))
	}
	if !h.c.cfg.ReuseRecordBuffers {
		// Without ReuseRecordBuffers records stay valid for good: keep checking them.
		h.held, h.heldVals = nil, nil
	}
	h.checkState(step)
	return recs, err
}

// busy reports whether a Poll would return at once: a response is queued or being drained, or
// a partition failed. Otherwise Poll waits out its context.
func (h *fzHarness) busy() bool {
	if h.pending() {
		return true
	}
	for _, s := range h.snapshot() {
		if s.err != nil {
			return true
		}
	}
	return false
}

// pending reports whether Poll has something to work on.
func (h *fzHarness) pending() bool {
	h.c.pollMu.Lock()
	cur := h.c.cur != nil
	h.c.pollMu.Unlock()
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return cur || len(h.c.mu.queue) > 0
}

// finish polls until nothing is left, seeking failed partitions (which hold Poll up) to their
// positions, then checks that every partition that had to fail did, and with
// ReuseRecordBuffers that every fetch buffer was given back.
func (h *fzHarness) finish() {
	if h.shared {
		// Poll reads what the spans hold (readFiles), then they are dropped: a Poll that
		// found one would queue a piece of it, and the buffer checks below need an end.
		for i := 0; i < 64 && h.spansLeft() > 0; i++ {
			if _, err := h.poll(fmt.Sprintf("span poll %d", i)); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				break
			}
		}
		h.f.closeSpans()
	}
	for round := 0; ; round++ {
		for i := 0; i < 1000 && h.pending(); i++ {
			if _, err := h.poll(fmt.Sprintf("final poll %d.%d", round, i)); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				break
			}
		}
		failed := false
		for p, s := range h.snapshot() {
			if s.err != nil {
				failed = true
				h.seek(p, s.position) // its error was returned: its duty is done
			}
		}
		if !failed {
			break
		}
		if round == 8 {
			h.t.Fatal("partitions still failing after seeks")
		}
	}
	if h.pending() {
		h.t.Fatalf("responses left undelivered after polling")
	}
	snap := h.snapshot()
	for p, why := range h.mustError {
		h.t.Fatalf("partition %d: %s, but the consumer reported no error (position %d, has %v)",
			p, why, snap[p].position, snap[p].hasPos)
	}
	if h.c.bufs != nil {
		h.poll("recycling poll") // the last Poll's records are dead: their buffers go back
		for fb := range h.seenBufs {
			if fb.refs != 0 {
				h.t.Fatalf("fetch buffer still referenced %d times with nothing queued", fb.refs)
			}
		}
	}
}

// spansLeft is how many partitions the fetcher reads from files.
func (h *fzHarness) spansLeft() int {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return len(h.f.spans)
}

// fzBuildRecords builds the records field of a partition's answer to a fetch at offset from:
// whole batches (with chosen bases, compression, gaps, control batches), some damaged, maybe
// a partial batch or garbage at the end. It notes the batches in h.batches and reports why
// the partition must fail when Poll reaches it, if it must: a whole batch is damaged that
// was built as a data batch, starts at or after from and after every batch before it (so no
// rule may skip it), and whose offsets do not overflow.
func (h *fzHarness) fzBuildRecords(r *fzReader, p int32, from int64) (records []byte, mustFail string) {
	records, mustFail, _, _ = h.fzBuildRecordsTraced(r, p, from)
	return records, mustFail
}

// fzBuildRecordsTraced is fzBuildRecords that also returns the id of each batch it built and
// where each ends in records as built (before a cut).
func (h *fzHarness) fzBuildRecordsTraced(r *fzReader, p int32, from int64) (records []byte, mustFail string, ids []uint32, ends []int) {
	n := r.intn(5)
	base := from
	switch r.pick(4) {
	case 0:
		base = r.offset(from)
	case 1:
		base = from - int64(r.intn(4)) // the batch holding from starts before it
	}
	type built struct {
		end     int // of its bytes in records
		base    int64
		next    int64 // as built
		corrupt bool
		control bool
	}
	var bs []built
	for range n {
		h.nextID++
		id := h.nextID
		count := 1 + r.intn(5)
		opts := batch.DefaultBuilderOptions()
		opts.Compression = fzCodecs[r.intn(len(fzCodecs))]
		bl := batch.NewBuilder(opts)
		for i := range count {
			bl.Append(&batch.Record{Timestamp: int64(1000 + i), Value: fzValue(id, i)})
		}
		bb, err := bl.Build()
		if err != nil {
			h.t.Fatal(err)
		}
		b := batch.Batch(append([]byte(nil), bb...))
		b.SetBaseOffset(batch.Offset(base))
		b.SetPartitionLeaderEpoch(int32(r.intn(3)))
		gap := 0
		if r.rare(6) { // compaction removed records at the end: lastOffsetDelta stays
			gap = 1 + r.intn(5)
			binary.BigEndian.PutUint32(b[23:27], uint32(count-1+gap))
			fzFixCRC(b)
		}
		control := false
		if r.rare(10) { // a control batch (valid): skipped
			binary.BigEndian.PutUint16(b[21:23], uint16(b.Attributes()|batch.AttrControl))
			fzFixCRC(b)
			control = true
		}
		info := fzBatchInfo{part: p, base: base, count: count}
		switch r.pick(16) {
		case 0: // a bit flipped inside the CRC's cover
			b[batch.CRCStart+r.intn(len(b)-batch.CRCStart)] ^= 1 << r.intn(8)
			info.corrupt = true
		case 1: // the CRC itself
			b[17+r.intn(4)] ^= 1 << r.intn(8)
			info.corrupt = true
		case 2: // the magic byte
			b[16] = byte(r.intn(256))
			info.corrupt = b[16] != batch.Magic
		case 3: // a bit of a header field inside the CRC's cover (attributes, lastOffsetDelta,
			// timestamps, producer fields, recordsCount)
			b[batch.CRCStart+r.intn(batch.HeaderSize-batch.CRCStart)] ^= 1 << r.intn(8)
			info.corrupt = true
		case 4: // the attributes' control bit
			b[22] ^= batch.AttrControl
			info.corrupt = true
		case 5: // a bit of lastOffsetDelta
			b[23+r.intn(4)] ^= 1 << r.intn(8)
			info.corrupt = true
		}
		h.batches[id] = info
		records = append(records, b...)
		next := base + int64(count+gap)
		if base > math.MaxInt64-int64(count+gap) {
			next = math.MinInt64 // overflows
		}
		bs = append(bs, built{len(records), base, next, info.corrupt, control})
		ids, ends = append(ids, id), append(ends, len(records))
		// The next batch: contiguous mostly, else anywhere (backwards included).
		switch r.pick(6) {
		case 0:
			base = r.offset(base)
		default:
			base += int64(count + gap)
		}
	}
	switch r.pick(6) {
	case 0: // a partial batch at the end, as a byte limit cuts it: not an error
		if len(records) > 0 {
			records = records[:len(records)-1-r.intn(min(len(records), batch.HeaderSize))]
		}
	case 1: // garbage at the end
		for range 1 + r.intn(16) {
			records = append(records, r.byte())
		}
	}
	floor := from
	for i, b := range bs {
		if b.end > len(records) {
			break // cut: not a whole batch
		}
		if b.corrupt && !b.control && b.base >= floor && b.next != math.MinInt64 {
			mustFail = fmt.Sprintf("its batch %d (base %d, fetched from %d) is damaged", i, b.base, from)
			break
		}
		if b.next != math.MinInt64 {
			floor = max(floor, b.next)
		}
	}
	return records, mustFail, ids, ends
}

// fzEntry is a partition entry of a response with why it must fail the partition ("" if it
// need not), should it be the entry handle files.
type fzEntry struct {
	p    wire.FetchResponsePartition
	fail string
	// The request's fetch offset, and the batches of p.Records (fzBuildRecordsTraced).
	from int64
	ids  []uint32
	ends []int
}

// fzBuildResponse builds a response to the request of sent. It returns the encoded body, and
// per requested partition why it must fail if handle files its (first) entry.
func (h *fzHarness) fzBuildResponse(r *fzReader, sent []fetchPart) (body []byte, fails map[int32]string) {
	sentAt := map[int32]int64{}
	for _, sp := range sent {
		sentAt[sp.tp.Partition] = sp.offset
	}
	policy := h.c.cfg.AutoOffsetReset
	entry := func(p int32, from int64) fzEntry {
		e := fzEntry{p: wire.FetchResponsePartition{Partition: p, ErrorCode: r.errorCode(),
			HighWatermark: r.offset(from), LastStableOffset: -1, LogStartOffset: r.offset(0)}, from: from}
		switch code := e.p.ErrorCode; {
		case code == wire.NoError:
			e.p.Records, e.fail, e.ids, e.ends = h.fzBuildRecordsTraced(r, p, from)
		case code == wire.ErrOffsetOutOfRange:
			if policy == OffsetResetNone {
				e.fail = "offset out of range with auto.offset.reset none"
			}
		case !code.Retriable():
			e.fail = fmt.Sprintf("it got error code %d", code)
		}
		if e.p.ErrorCode != wire.NoError && r.rare(16) { // records with an error code: ignored
			e.p.Records, _ = h.fzBuildRecords(r, p, from)
		}
		return e
	}
	var entries []fzEntry
	for _, sp := range sent {
		if r.rare(8) {
			continue // left out
		}
		entries = append(entries, entry(sp.tp.Partition, sp.offset))
		if r.rare(10) { // a duplicate entry, with other contents
			entries = append(entries, entry(sp.tp.Partition, sp.offset))
		}
	}
	if r.rare(6) { // a partition that may not have been asked for
		p := int32(r.intn(int(h.parts)+3)) - 1
		from, ok := sentAt[p]
		if !ok {
			from = r.offset(0)
		}
		e := entry(p, from)
		if !ok {
			e.fail = ""
		}
		entries = append(entries, e)
	}
	for i := len(entries) - 1; i > 0; i-- { // in any order
		j := r.intn(i + 1)
		entries[i], entries[j] = entries[j], entries[i]
	}
	var spans []wire.FileSpan
	if h.shared {
		spans = h.fzSpans(r, entries) // the i-th entry is the response's partition i
	}
	fails = map[int32]string{}
	t := wire.FetchResponseTopic{Topic: fzTopic}
	for _, e := range entries {
		if _, ok := fails[e.p.Partition]; !ok {
			fails[e.p.Partition] = e.fail // the first entry is the one handle files
		}
		t.Partitions = append(t.Partitions, e.p)
	}
	resp := wire.FetchResponse{}
	if r.rare(8) {
		resp.ErrorCode = r.errorCode() // a whole-request error, with the partitions anyway
	}
	if r.rare(8) {
		resp.Topics = append(resp.Topics, wire.FetchResponseTopic{Topic: fzTopic}) // an empty entry first
	}
	resp.Topics = append(resp.Topics, t)
	if r.rare(8) {
		resp.Topics = append(resp.Topics, wire.FetchResponseTopic{Topic: "other", Partitions: []wire.FetchResponsePartition{{Partition: 0}}})
	}
	if h.trace {
		for _, e := range entries {
			h.t.Logf("response entry: partition %d code %d, %s, fail %q", e.p.Partition, e.p.ErrorCode, fzDescribe(e.p.Records), e.fail)
		}
		for _, sp := range spans {
			h.t.Logf("span: %+v", sp)
		}
	}
	if h.shared {
		return (&wire.FetchSharedResponse{FetchResponse: resp, Spans: spans}).AppendTo(nil), fails
	}
	return resp.AppendTo(nil), fails
}

// fzDescribe lists the whole batches of records, for the trace.
func fzDescribe(records []byte) string {
	var sb strings.Builder
	rest := records
	for len(rest) > 0 {
		b, r, err := batch.Next(rest)
		if err != nil {
			fmt.Fprintf(&sb, "[%d bytes: %v]", len(rest), err)
			break
		}
		fmt.Fprintf(&sb, "[%d..%d n=%d ctl=%v valid=%v]", b.BaseOffset(), b.LastOffset(), b.NumRecords(), b.IsControl(), b.Validate() == nil)
		rest = r
	}
	return sb.String()
}

// fetchRound plays one fetch: leader lookups, prepare, maybe a seek while the request is out,
// the response r builds (or body, if not nil), and handle. It notes the partitions that must
// fail.
func (h *fzHarness) fetchRound(r *fzReader, body []byte) {
	h.leaders()
	sent := h.prepare()
	if sent == nil {
		return
	}
	if r.rare(8) { // a seek while the request is out: it cancels the request
		sp := sent[r.intn(len(sent))]
		h.seek(sp.tp.Partition, r.offset(sp.offset))
	}
	if h.trace {
		h.t.Logf("fetch %+v", sent)
	}
	var fails map[int32]string
	if body == nil {
		body, fails = h.fzBuildResponse(r, sent)
	}
	if h.deliver(body, r.bool()) {
		h.c.mu.Lock()
		for _, sp := range sent {
			why := fails[sp.tp.Partition]
			if ps := h.c.mu.parts[sp.tp]; why != "" && ps != nil && ps.epoch == sp.epoch {
				if _, ok := h.mustError[sp.tp.Partition]; !ok {
					h.mustError[sp.tp.Partition] = why
				}
			}
		}
		h.c.mu.Unlock()
	}
	h.checkState("after a fetch")
}

// failedFetch plays a fetch whose connection failed.
func (h *fzHarness) failedFetch() {
	h.leaders()
	if h.prepare() == nil {
		return
	}
	h.f.release(true)
	h.c.cl.InvalidateMetadata()
	h.c.signal()
	h.checkState("after a failed fetch")
}

func (h *fzHarness) position(p int32) int64 {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if ps := h.c.mu.parts[TopicPartition{fzTopic, p}]; ps != nil {
		return ps.position
	}
	return 0
}

// FuzzConsumerFetchResponse feeds the consumer fetch responses assembled from fuzzed fields
// (partitions asked for or not, left out, duplicated, error codes, offsets and high
// watermarks anywhere) around record batches built with batch.Builder (bases anywhere,
// backwards included, compression, compaction gaps, control batches, damaged CRCs and magic
// bytes, partial batches), interleaved with Polls, seeks, reassignments and failed fetches.
// It checks that nothing panics; that per partition Poll returns records in increasing
// offset order, never below the position it started from, each from the batch and at the
// offset the test gave it, and none from a damaged batch; that positions never move back
// without a seek and never pass the fetch offset; that a partition whose response must fail it
// (a damaged first batch, an error code the consumer cannot handle, out of range with
// auto.offset.reset none) does fail, with an error naming it, and stays failed; the queue and
// buffered counts agree; and with ReuseRecordBuffers that records stay intact until the next
// Poll and every response buffer is given back.
func FuzzConsumerFetchResponse(f *testing.F) {
	addFetchSeeds(f, 2654435761, 1)
	f.Fuzz(func(t *testing.T, reuse bool, data []byte) {
		defer fzWatchdog(10 * time.Second)()
		r := &fzReader{b: data}
		cfg := ConsumerConfig{
			ReuseRecordBuffers: reuse,
			MaxPollRecords:     1 + r.intn(8),
			AutoOffsetReset:    []string{OffsetResetEarliest, OffsetResetLatest, OffsetResetNone}[r.intn(3)],
			MaxDecompressed:    1 << 16,
		}
		parts := int32(1 + r.intn(3))
		starts := []int64{int64(r.intn(20)), int64(r.intn(20)), int64(r.intn(20))}
		h := newFzHarness(t, cfg, parts, starts)
		defer h.close()
		h.batches = map[uint32]fzBatchInfo{}
		for step := 0; step < 16 && !r.empty(); step++ {
			switch op := r.intn(12); {
			case op < 6:
				h.fetchRound(r, nil)
			case op < 9:
				if h.busy() || r.rare(8) { // an idle Poll only waits out its context
					h.poll(fmt.Sprintf("step %d poll", step))
				}
			case op == 9:
				p := int32(r.intn(int(parts)))
				h.seek(p, r.offset(h.position(p)))
				h.checkState("after a seek")
			case op == 10:
				p := int32(r.intn(int(parts)))
				h.reassign(p, r.offset(h.position(p)))
				h.checkState("after a reassignment")
			default:
				h.failedFetch()
			}
		}
		h.finish()
	})
}

// fzRawBatches encodes batches of n records each, the first at base, for the raw seeds.
func fzRawBatches(base int64, counts ...int) []byte {
	var out []byte
	for _, n := range counts {
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		for i := range n {
			bl.Append(&batch.Record{Timestamp: 1, Key: []byte("k"), Value: []byte(fmt.Sprint(base + int64(i)))})
		}
		b, err := bl.Build()
		if err != nil {
			panic(err)
		}
		b = append(batch.Batch(nil), b...)
		b.SetBaseOffset(batch.Offset(base))
		out = append(out, b...)
		base += int64(n)
	}
	return out
}

// FuzzConsumerFetchResponseRaw is FuzzConsumerFetchResponse with the whole response body
// from the fuzzer, decoded by the wire codec as a fetcher's call does (an undecodable body
// is a failed fetch). Three partitions start at offsets 0, 3 and 10, and every fetch is
// answered with the same body; between fetches Poll runs twice. It checks the invariants of
// FuzzConsumerFetchResponse that need no knowledge of the batches: no panic, per-partition
// increasing offsets never below the position, positions that never move back nor pass the
// fetch offset, errors that name a failed partition and stick, consistent queue counts, and
// with ReuseRecordBuffers record lifetimes and buffer reference counts.
func FuzzConsumerFetchResponseRaw(f *testing.F) {
	part := func(p int32, code wire.ErrorCode, records []byte) wire.FetchResponsePartition {
		return wire.FetchResponsePartition{Partition: p, ErrorCode: code, HighWatermark: 40, LastStableOffset: -1, LogStartOffset: 0, Records: records}
	}
	seeds := []wire.FetchResponse{
		{Topics: []wire.FetchResponseTopic{{Topic: fzTopic, Partitions: []wire.FetchResponsePartition{
			part(0, wire.NoError, fzRawBatches(0, 2, 3)), part(1, wire.NoError, fzRawBatches(2, 4)), part(2, wire.NoError, fzRawBatches(10, 1, 1, 1)),
		}}}},
		{Topics: []wire.FetchResponseTopic{{Topic: fzTopic, Partitions: []wire.FetchResponsePartition{
			part(2, wire.NoError, fzRawBatches(10, 3)[:70]), part(0, wire.ErrOffsetOutOfRange, nil), part(1, wire.ErrNotLeaderOrFollower, nil),
			part(1, wire.NoError, fzRawBatches(3, 2)), part(7, wire.NoError, fzRawBatches(0, 2)),
		}}}},
		{ErrorCode: wire.ErrorCode(-2), Topics: []wire.FetchResponseTopic{{Topic: "u"}, {Topic: fzTopic, Partitions: []wire.FetchResponsePartition{
			part(0, wire.ErrorCode(12345), nil), part(2, wire.NoError, fzRawBatches(8, 5)),
		}}}},
	}
	for i, s := range seeds {
		f.Add(i%2 == 0, s.AppendTo(nil))
	}
	f.Add(false, []byte{})
	f.Fuzz(func(t *testing.T, reuse bool, body []byte) {
		defer fzWatchdog(10 * time.Second)()
		h := newFzHarness(t, ConsumerConfig{ReuseRecordBuffers: reuse, MaxPollRecords: 3, AutoOffsetReset: OffsetResetEarliest,
			MaxDecompressed: 1 << 16}, 3, []int64{0, 3, 10})
		defer h.close()
		for round := range 3 {
			h.fetchRound(&fzReader{}, body)
			for i := 0; i < 2 && h.busy(); i++ {
				h.poll(fmt.Sprintf("round %d poll %d", round, i))
			}
		}
		h.finish()
	})
}

// addFetchSeeds adds the fetch fuzzers' seeds: an empty input, a short one, and 16 of
// xorshift bytes from seeds seed*mul+add.
func addFetchSeeds(f *testing.F, mul, add uint32) {
	f.Add(false, []byte{})
	f.Add(true, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6})
	for seed := range uint32(16) {
		data := make([]byte, 64+seed*24)
		x := seed*mul + add
		for i := range data {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			data[i] = byte(x)
		}
		f.Add(seed%2 == 0, data)
	}
}
