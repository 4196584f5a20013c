package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicemq/sluice/batch"
)

// The record accumulator: per partition, one open batch that Send appends to, then closed
// batches waiting for the partition's sender, then batches in flight. Memory is reserved per
// batch from bufferMemory, as Kafka's BufferPool hands out batch.size buffers.

// appendSlack is how much earlier than batch.size a batch closes. Builder.Append grows its
// buffer unless a 5-byte length varint plus the record fit in it, up to 4 bytes more than the
// record's encoded size; without the slack the last record of nearly every batch would double
// a buffer that is exactly batch.size (a power of two, as the default) to twice that.
const appendSlack = 5

// accTopic is the producer's state for one topic.
type accTopic struct {
	name string
	// parts is indexed by partition. Invariant: it only grows (under Producer.topicsMu).
	parts atomic.Pointer[[]*accPartition]
	// live is the topic's partition count in the latest metadata, which Send partitions over:
	// fewer than parts after the topic was deleted and created again with fewer partitions.
	live   atomic.Int32
	sticky stickyPartition
}

// grow extends the topic to n partitions. Callers hold Producer.topicsMu.
func (t *accTopic) grow(p *Producer, n int) {
	var old []*accPartition
	if cur := t.parts.Load(); cur != nil {
		old = *cur
	}
	parts := make([]*accPartition, n)
	copy(parts, old)
	for i := len(old); i < n; i++ {
		ap := &accPartition{p: p, topic: t, partition: int32(i)}
		ap.mu.nextSeq = 1
		parts[i] = ap
	}
	t.parts.Store(&parts)
}

// accPartition is one partition's batches. Its mu is the only lock a Send takes (beyond the
// per-batch memory reservation), so Sends to different partitions never contend.
type accPartition struct {
	p         *Producer
	topic     *accTopic
	partition int32

	// owner is the sender serving the partition, nil while it holds no batch; written under
	// mu. Invariant: a partition with an open, ready or in-flight batch has an owner, and is in
	// that owner's active set.
	owner atomic.Pointer[brokerSender]

	// lastBytes and lastRecs are the encoded size and the callback count (len(recs)) of the
	// partition's last closed batch: how much of a new batch newBatch warms. Written under mu.
	lastBytes, lastRecs atomic.Int32

	mu struct {
		sync.Mutex
		// open is the batch Send appends to, nil if none.
		open *accBatch
		// ready are closed batches waiting to be sent. Invariant: ascending seq (a retried
		// batch goes back in seq order); all older than open.
		ready []*accBatch
		// inflight counts this partition's batches in requests awaiting an answer, and
		// inflightOn is the sender that sent the last of them: a partition moved to another
		// sender (its leader moved) sends nothing there until inflight is 0 (drain).
		inflight   int
		inflightOn *brokerSender
		// incomplete holds the seq of each batch whose callbacks have not all run, ascending.
		incomplete []uint64
		// nextSeq numbers batches in creation order, from 1.
		nextSeq uint64
		// flushTo: open batches with seq <= flushTo are sent without waiting for linger.ms.
		flushTo uint64
		// hdrs is scratch space for converting a record's headers.
		hdrs []batch.Header
		// idem is the partition's idempotence state (Producer.idem only).
		idem partitionSequences
	}
}

// pendingRecord is what a batch keeps of each record to complete it.
type pendingRecord struct {
	cb                 func(RecordMetadata, error)
	ts                 time.Time // as Send took it; the batch has it in ms
	keySize, valueSize int32     // -1: null
}

// nullableLen is len(b), or -1 for a nil slice (a null key or value).
func nullableLen(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// accBatch is one batch of one partition: open (accepting records), ready (closed, waiting for
// the sender), or in flight. Once closed it is owned by one goroutine at a time: the sender
// that drained it, the receiver awaiting its response, or whoever completes it.
type accBatch struct {
	part    *accPartition
	seq     uint64
	builder *batch.Builder
	// recs has one entry per record from the first record with a callback on, in offset
	// order; reused. recsFrom is the offset delta of recs[0] in the batch: the records before
	// it have nothing to complete, so fire-and-forget Sends (nil callback) leave recs empty.
	recs     []pendingRecord
	recsFrom int
	created  time.Time // linger.ms and delivery.timeout.ms count from here
	reserved int64     // bytes of buffer.memory held
	attempts int       // failed sends so far
	retryAt  time.Time // not before this (its backoff), while its leader stays (leaderMoved)
	lastErr  error
	// failedLeader and failedEpoch are the partition's leader (the broker the batch failed on)
	// and its leader epoch (as the metadata had it then, -1 if unknown) at the batch's last
	// failure: its backoff was for that leader.
	failedLeader, failedEpoch int32
	// alone: send it as its partition's only batch in a request. Set when it failed together
	// with other batches of its partition in one append, with an error that may be any one
	// batch's (too large, corrupt): alone, each batch gets its own verdict.
	alone bool
	// expired: its delivery.timeout.ms passed while it was in flight (expireInFlight). Its
	// callbacks have run and Flush no longer waits for it, but its request still holds it,
	// with its memory and its slot, until the request ends (a response, which is ignored for
	// it, or request.timeout.ms): endExpired. Owned by the receiver, as the batch is then.
	expired bool
	built   batch.Batch // Build's result, set when drained
	// Idempotence (Producer.idem): sequenced once the batch was first drained, it carries
	// stamp's producer id and epoch and the sequences [seqStart, seqEnd) of its partition
	// (counts that do not wrap: the header has seqStart modulo 2^31); sent once it went out
	// with that stamp, so that sending it again is a retry.
	sequenced, sent  bool
	stamp            *producerID
	seqStart, seqEnd int64
	ordinal          int64 // its request's place among the partition's (partitionSequences.batches)
	// slot is the batch's buffer in the producer's shared-memory region, or nil: the builder
	// builds in it, and the batch goes to the broker as a pointer into it (SharedRegion). Its
	// guard word is renewed before each new batch is built in it (newBatch).
	slot []byte
}

// tryAppend appends r to the partition's open batch if it fits. Otherwise it closes the open
// batch and, given nb (a batch from newBatch holding memory the caller reserved), opens nb with
// r in it; with nb == nil it returns false so that the caller can reserve memory and prepare a
// batch outside the lock (or move a keyless record to another partition). A batch it does not
// open goes back to the free list and its memory is released. bound is recordBound(r).
func (ap *accPartition) tryAppend(r *Record, ts time.Time, cb func(RecordMetadata, error), bound int, nb *accBatch) (bool, error) {
	p := ap.p
	ap.mu.Lock()
	if p.closed.Load() {
		ap.mu.Unlock()
		p.discardBatch(nb)
		return false, ErrProducerClosed
	}
	br := batch.Record{Timestamp: ts.UnixMilli(), Key: r.Key, Value: r.Value, Headers: ap.headersLocked(r.Headers)}
	var wake *brokerSender
	if b := ap.mu.open; b != nil {
		// The bound settles most records without sizing them exactly (Append sizes them again).
		if est := b.builder.EstimatedSize() + appendSlack; est+bound <= p.cfg.BatchSize || est+b.builder.RecordSize(&br) <= p.cfg.BatchSize {
			b.append(&br, ts, cb)
			if b.builder.EstimatedSize() >= p.cfg.BatchSize {
				ap.closeOpenLocked()
				wake = ap.owner.Load()
			}
			clear(br.Headers)
			ap.mu.Unlock()
			wake.signal()
			p.discardBatch(nb)
			return true, nil
		}
		ap.closeOpenLocked()
		wake = ap.owner.Load()
	}
	if nb == nil {
		clear(br.Headers)
		ap.mu.Unlock()
		wake.signal()
		return false, nil
	}
	b := nb
	b.part, b.seq, b.created = ap, ap.mu.nextSeq, time.Now()
	ap.mu.nextSeq++
	ap.mu.incomplete = append(ap.mu.incomplete, b.seq)
	b.append(&br, ts, cb)
	clear(br.Headers)
	ap.mu.open = b
	if b.builder.EstimatedSize() >= p.cfg.BatchSize {
		ap.closeOpenLocked() // one record filled it
	}
	owner := ap.owner.Load()
	if owner == nil {
		owner = p.route(p.client.meta.Load(), ap)
		ap.owner.Store(owner)
		owner.add(ap)
	}
	ap.mu.Unlock()
	owner.signal() // a new batch: its sender arms its linger timer
	return true, nil
}

// headersLocked converts headers to the batch's form without copying: the keys are viewed as
// bytes (read only; Append copies them). The caller clears the result after Append so that it
// does not pin the record's slices.
func (ap *accPartition) headersLocked(hs []Header) []batch.Header {
	if len(hs) == 0 {
		return nil
	}
	out := ap.mu.hdrs[:0]
	for i := range hs {
		k := hs[i].Key
		out = append(out, batch.Header{Key: unsafe.Slice(unsafe.StringData(k), len(k)), Value: hs[i].Value})
	}
	ap.mu.hdrs = out
	return out
}

func (b *accBatch) append(br *batch.Record, ts time.Time, cb func(RecordMetadata, error)) {
	b.builder.Append(br)
	if len(b.recs) == 0 {
		if cb == nil {
			return
		}
		b.recsFrom = b.builder.NumRecords() - 1
	}
	// Record sizes are bounded by max.request.size (an int32 on the wire).
	b.recs = append(b.recs, pendingRecord{cb: cb, ts: ts,
		keySize: int32(nullableLen(br.Key)), valueSize: int32(nullableLen(br.Value))})
}

// detachOpenLocked takes the open batch out of the accumulator, shrinking its memory
// reservation to its actual size.
func (ap *accPartition) detachOpenLocked() *accBatch {
	b := ap.mu.open
	ap.mu.open = nil
	ap.lastBytes.Store(int32(b.builder.EstimatedSize()))
	ap.lastRecs.Store(int32(len(b.recs)))
	if slack := b.reserved - int64(b.builder.EstimatedSize()); slack > 0 {
		b.reserved -= slack
		ap.p.mem.release(slack)
	}
	return b
}

// closeOpenLocked moves the open batch to the ready queue.
func (ap *accPartition) closeOpenLocked() {
	ap.mu.ready = append(ap.mu.ready, ap.detachOpenLocked())
}

// headLocked returns the next batch to send: the oldest ready one, else the open one.
func (ap *accPartition) headLocked() (b *accBatch, open bool) {
	if len(ap.mu.ready) > 0 {
		return ap.mu.ready[0], false
	}
	return ap.mu.open, ap.mu.open != nil
}

func (ap *accPartition) popReadyLocked() {
	n := copy(ap.mu.ready, ap.mu.ready[1:])
	ap.mu.ready[n] = nil
	ap.mu.ready = ap.mu.ready[:n]
}

// requeueLocked puts a batch that failed back among the ready ones, in seq order (the halves
// of a split batch, which share its seq, in sequence order).
func (ap *accPartition) requeueLocked(b *accBatch) {
	i := len(ap.mu.ready)
	for i > 0 && (ap.mu.ready[i-1].seq > b.seq || ap.mu.ready[i-1].seq == b.seq && ap.mu.ready[i-1].seqStart > b.seqStart) {
		i--
	}
	ap.mu.ready = append(ap.mu.ready, nil)
	copy(ap.mu.ready[i+1:], ap.mu.ready[i:])
	ap.mu.ready[i] = b
}

// lingerDoneLocked reports whether the open batch b may be sent: linger.ms has passed, or a
// Flush or Close wants it now.
func (ap *accPartition) lingerDoneLocked(b *accBatch, now time.Time) bool {
	return !now.Before(b.created.Add(ap.p.cfg.Linger)) || b.seq <= ap.mu.flushTo || ap.p.closed.Load()
}

// doneThroughLocked reports whether every batch with seq <= seq has completed.
func (ap *accPartition) doneThroughLocked(seq uint64) bool {
	return len(ap.mu.incomplete) == 0 || ap.mu.incomplete[0] > seq
}

func (ap *accPartition) removeIncompleteLocked(seq uint64) {
	inc := ap.mu.incomplete
	for i, s := range inc {
		if s == seq {
			copy(inc[i:], inc[i+1:])
			ap.mu.incomplete = inc[:len(inc)-1]
			return
		}
	}
}

// batchPool is a free list of batches with their builders and callback slices, bounded at
// buffer.memory / batch.size entries, like Kafka's BufferPool of batch.size buffers. (A
// sync.Pool is emptied by every GC, and a producer with a full buffer would then grow a new
// builder for most batches.)
type batchPool struct {
	mu   sync.Mutex
	free []*accBatch
	max  int
}

func (bp *batchPool) get() *accBatch {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	n := len(bp.free)
	if n == 0 {
		return nil
	}
	b := bp.free[n-1]
	bp.free[n-1] = nil
	bp.free = bp.free[:n-1]
	return b
}

// put keeps b for get, unless the pool is full; it reports whether it kept it.
func (bp *batchPool) put(b *accBatch) bool {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if len(bp.free) < bp.max {
		bp.free = append(bp.free, b)
		return true
	}
	return false
}

// newBatch prepares a batch for ap, holding reserved bytes of buffer.memory: one from the free
// list (or a new one), warmed for as much as ap's last batch held. Callers hold no lock.
func (p *Producer) newBatch(ap *accPartition, reserved int64) *accBatch {
	b := p.batches.get()
	if b == nil {
		b = &accBatch{builder: batch.NewBuilder(p.builderOpts)}
	}
	if p.region != nil && b.slot == nil {
		if b.slot = p.region.takeSlot(); b.slot != nil {
			p.useSlot(b)
		}
	}
	b.builder.Reset(p.builderOpts)
	warm := func() { b.warm(min(int(ap.lastBytes.Load()), p.cfg.BatchSize), int(ap.lastRecs.Load())) }
	if b.slot == nil {
		warm()
	} else if !p.region.write(func() { p.region.renew(b.slot); warm() }) {
		// The producer is closing and its region is gone: this batch will not be opened,
		// but nothing may write to the slot's old memory either.
		p.dropSlot(b)
	}
	b.recs, b.recsFrom = b.recs[:0], 0
	b.reserved, b.attempts, b.retryAt, b.lastErr, b.built, b.alone, b.expired = reserved, 0, time.Time{}, nil, nil, false, false
	b.sequenced, b.sent, b.stamp, b.seqStart, b.seqEnd = false, false, nil, 0, 0
	return b
}

// warm writes, in bulk, the memory the batch's records are expected to take: the first bytes
// of its builder's buffer and recs entries of its callback slice. A reused batch's memory was
// last read on other cores (sender, receiver) or has left the cache while buffer.memory was
// full; written a record at a time, nearly every unlock of accPartition.mu (a locked
// instruction, which waits for the stores before it) would wait for a cache line, while here
// the misses overlap (see PRODUCER.md).
func (b *accBatch) warm(bytes, recs int) {
	b.builder.Prepare(bytes)
	if recs > 0 {
		b.recs = slices.Grow(b.recs[:0], recs)
		clear(b.recs[:recs])
	}
}

// useSlot has b's builder build in b.slot: its records, or with a codec the compressed batch
// (the batch that is sent).
func (p *Producer) useSlot(b *accBatch) {
	if p.builderOpts.Compression == batch.None {
		b.builder.UseBuffer(b.slot)
	} else {
		b.builder.UseOutBuffer(b.slot)
	}
}

// dropSlot takes b off its slot for good (the slot is not given back).
func (p *Producer) dropSlot(b *accBatch) {
	b.slot = nil
	if p.builderOpts.Compression == batch.None {
		b.builder.UseBuffer(make([]byte, batch.HeaderSize, 4<<10))
	} else {
		b.builder.UseOutBuffer(nil)
	}
}

// discardBatch gives back a batch from newBatch that was not opened.
func (p *Producer) discardBatch(b *accBatch) {
	if b == nil {
		return
	}
	p.mem.release(b.reserved)
	p.recycleBatch(b)
}

func (p *Producer) recycleBatch(b *accBatch) {
	clear(b.recs) // drop the callbacks
	b.part, b.lastErr, b.built, b.stamp = nil, nil, nil, nil
	if b.slot != nil {
		p.useSlot(b) // back from a buffer of its own, if the batch had outgrown the slot
	}
	if b.builder.EstimatedSize() > 2*p.cfg.BatchSize || !p.batches.put(b) {
		// A large record's buffer (let it go rather than pin it in the pool), or the pool is
		// full: the batch goes, and its slot back to the region.
		if b.slot != nil {
			p.region.putSlot(b.slot)
		}
	}
}

// complete runs b's callbacks with the outcome (base: offset of the first record, -1 if
// unknown; appendTime: the broker's LogAppendTime or -1), then forgets the batch and releases
// its memory. wasInflight says whether b is counted in its partition's inflight.
func (p *Producer) complete(b *accBatch, base, appendTime int64, err error, wasInflight bool) {
	ap := b.part
	b.callback(base, appendTime, err)
	ap.mu.Lock()
	if wasInflight {
		ap.mu.inflight--
	}
	if b.sequenced {
		ap.mu.idem.doneLocked(b, err == nil)
	}
	ap.removeIncompleteLocked(b.seq)
	owner := ap.owner.Load()
	moved := ap.mu.inflight == 0 && ap.mu.inflightOn != owner
	ap.mu.Unlock()
	if wasInflight && (p.cfg.MaxInFlight == 1 || moved) {
		owner.signal() // the partition's next batch may go (to its new leader, if moved)
	}
	p.mem.release(b.reserved)
	p.recycleBatch(b)
	p.batchCompleted()
}

// expireInFlight completes b, in flight past its delivery deadline, with err (as Kafka's
// producer does, Sender.getExpiredInflightBatches): its callbacks run and Flush stops waiting
// for it. Its request still holds it: the batch stays counted in its partition's inflight and
// keeps its memory (buffer.memory, and the bytes the request points to, which a broker may
// still read) until the request ends, when the receiver calls endExpired instead of handling
// the batch's result. Called by the receiver, which owns b.
func (p *Producer) expireInFlight(b *accBatch, err error) {
	ap := b.part
	b.expired = true
	b.callback(-1, -1, err)
	clear(b.recs) // ran: nothing may call them again
	b.recs = b.recs[:0]
	ap.mu.Lock()
	if b.sequenced {
		ap.mu.idem.doneLocked(b, false) // its outcome is unknown
	}
	ap.removeIncompleteLocked(b.seq)
	ap.mu.Unlock()
	p.batchCompleted()
}

// endExpired lets go of a batch that expireInFlight completed, once its request has ended:
// whatever the request's outcome, it changes nothing for the batch's records.
func (p *Producer) endExpired(b *accBatch) {
	ap := b.part
	ap.mu.Lock()
	ap.mu.inflight--
	owner := ap.owner.Load()
	moved := ap.mu.inflight == 0 && ap.mu.inflightOn != owner
	ap.mu.Unlock()
	if p.cfg.MaxInFlight == 1 || moved {
		owner.signal() // the partition's next batch may go
	}
	p.mem.release(b.reserved)
	p.recycleBatch(b)
}

// callback runs b's callbacks with the outcome (see complete).
func (b *accBatch) callback(base, appendTime int64, err error) {
	ap := b.part
	md := RecordMetadata{Topic: ap.topic.name, Partition: ap.partition, Offset: -1}
	for i := range b.recs {
		rec := &b.recs[i]
		if rec.cb == nil {
			continue
		}
		md.Offset = -1
		if err == nil && base >= 0 {
			md.Offset = base + int64(b.recsFrom+i)
		}
		md.Timestamp = rec.ts
		if err == nil && appendTime >= 0 {
			md.Timestamp = time.UnixMilli(appendTime)
		}
		md.KeySize, md.ValueSize = int(rec.keySize), int(rec.valueSize)
		rec.cb(md, err)
	}
}

// inFlightTimeoutErr is the error of a batch whose delivery.timeout.ms passed while it was in
// flight to broker, in a request sent at sentAt.
func (p *Producer) inFlightTimeoutErr(b *accBatch, broker int32, sentAt, now time.Time) error {
	ap := b.part
	if b.lastErr != nil {
		return fmt.Errorf("%w: %s-%d: %d records in flight to broker %d for %v (attempt %d), not acknowledged within delivery.timeout.ms %v: %w; last error: %w",
			ErrDeliveryTimeout, ap.topic.name, ap.partition, b.builder.NumRecords(), broker, now.Sub(sentAt).Round(time.Millisecond), b.attempts+1,
			p.cfg.DeliveryTimeout, context.DeadlineExceeded, b.lastErr)
	}
	return fmt.Errorf("%w: %s-%d: %d records in flight to broker %d for %v, not acknowledged within delivery.timeout.ms %v: %w",
		ErrDeliveryTimeout, ap.topic.name, ap.partition, b.builder.NumRecords(), broker, now.Sub(sentAt).Round(time.Millisecond),
		p.cfg.DeliveryTimeout, context.DeadlineExceeded)
}

// deliveryTimeoutErr is the error of a batch that outlived delivery.timeout.ms.
func (p *Producer) deliveryTimeoutErr(b *accBatch) error {
	ap := b.part
	if b.lastErr != nil {
		return fmt.Errorf("%w: %s-%d: %d records not acknowledged within delivery.timeout.ms %v (%d attempts): %w; last error: %w",
			ErrDeliveryTimeout, ap.topic.name, ap.partition, b.builder.NumRecords(), p.cfg.DeliveryTimeout, b.attempts, context.DeadlineExceeded, b.lastErr)
	}
	if e := p.pidErr.Load(); e != nil && p.idem && !b.sequenced {
		return fmt.Errorf("%w: %s-%d: %d records not sent within delivery.timeout.ms %v: %w; no producer id: %w",
			ErrDeliveryTimeout, ap.topic.name, ap.partition, b.builder.NumRecords(), p.cfg.DeliveryTimeout, context.DeadlineExceeded, *e)
	}
	return fmt.Errorf("%w: %s-%d: %d records not sent within delivery.timeout.ms %v: %w",
		ErrDeliveryTimeout, ap.topic.name, ap.partition, b.builder.NumRecords(), p.cfg.DeliveryTimeout, context.DeadlineExceeded)
}

// bufferMemory is buffer.memory: a counting semaphore over bytes. Reserving is one CAS when
// there is room; Send blocks in reserve only when there is none.
type bufferMemory struct {
	limit   int64
	used    atomic.Int64
	waiters atomic.Int32
	mu      sync.Mutex    // guards freed
	freed   chan struct{} // closed (and replaced) by release while waiters > 0
}

func (m *bufferMemory) init(limit int64) {
	m.limit = limit
	m.freed = make(chan struct{})
}

func (m *bufferMemory) tryReserve(n int64) bool {
	for {
		u := m.used.Load()
		if u+n > m.limit {
			return false
		}
		if m.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// reserve takes n bytes, waiting until deadline (max.block.ms from the start of the Send), ctx
// or closing ends.
func (m *bufferMemory) reserve(ctx context.Context, n int64, deadline time.Time, maxBlock time.Duration, closing <-chan struct{}) error {
	if m.tryReserve(n) {
		return nil
	}
	m.waiters.Add(1)
	defer m.waiters.Add(-1)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		m.mu.Lock()
		ch := m.freed
		m.mu.Unlock()
		if m.tryReserve(n) {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("%w: %d bytes not available within max.block.ms %v (buffer.memory %d, %d in use): %w",
				ErrBufferFull, n, maxBlock, m.limit, m.used.Load(), context.DeadlineExceeded)
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for %d bytes: %w", ErrBufferFull, n, ctx.Err())
		case <-closing:
			return ErrProducerClosed
		}
	}
}

func (m *bufferMemory) release(n int64) {
	if n == 0 {
		return
	}
	m.used.Add(-n)
	if m.waiters.Load() > 0 {
		m.mu.Lock()
		close(m.freed)
		m.freed = make(chan struct{})
		m.mu.Unlock()
	}
}
