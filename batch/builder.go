package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Producer-state sentinels, as Kafka writes them for a producer that is
// neither idempotent nor transactional.
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
)

// Header is a record header. Key is []byte rather than string so that a
// consumer decodes headers as views into the batch with no allocation; a
// string key would cost one allocation per header per record. Kafka requires
// keys to be non-null UTF-8, so a nil Key is written as an empty key.
type Header struct {
	Key   []byte
	Value []byte // nil is a null value
}

// Record is one record, as given to Builder.Append or filled by
// RecordIter.Next. Nil Key or Value means null; an empty non-nil slice is a
// present, empty one.
type Record struct {
	// Offset is set by RecordIter.Next and ignored by Builder.Append, which
	// numbers records 0, 1, 2... from the batch's base offset.
	Offset Offset
	// Timestamp in ms since the Unix epoch.
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// BuilderOptions configures a batch. Its zero value is not "no producer":
// producer id 0 is a valid id, so start from DefaultBuilderOptions, which
// sets ProducerID, ProducerEpoch and BaseSequence to -1.
type BuilderOptions struct {
	Compression Codec
	// CompressionLevel 0 picks the codec's default (gzip 6, lz4 fast, zstd
	// 3). Otherwise gzip 1-9, lz4 1-9 (HC), zstd 1-22 as in Kafka's
	// compression.<codec>.level; out-of-range values are clamped.
	CompressionLevel int
	ProducerID       int64 // NoProducerID (-1) unless idempotent
	ProducerEpoch    int16 // NoProducerEpoch (-1) unless idempotent
	BaseSequence     int32 // NoSequence (-1) unless idempotent
	Transactional    bool  // requires a producer id
}

// DefaultBuilderOptions returns options for an uncompressed batch from a
// producer that is not idempotent.
func DefaultBuilderOptions() BuilderOptions {
	return BuilderOptions{ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch, BaseSequence: NoSequence}
}

// Builder accumulates records into one batch: the client accumulator's open
// batch for a partition. Appending encodes each record straight into a
// reused buffer (no allocation once the buffer has grown); Build compresses
// once and fills in the header and CRC. A Builder is not safe for concurrent
// use. The zero value is not usable; call NewBuilder.
type Builder struct {
	opts BuilderOptions
	// buf is header space followed by the uncompressed records.
	// Invariant: len(buf) >= HeaderSize.
	buf []byte
	// out holds the compressed batch when opts.Compression != None.
	out []byte
	// recordsCRC is the CRC-32C of buf[HeaderSize:crcTo], taken while an uncompressed batch's
	// records are appended, a chunk at a time while they are still in the appending core's
	// cache; Build checksums the rest and combines it with the header's checksum. Re-reading
	// a megabyte batch at Build, on the sender's core, ran at a third of the speed
	// (BENCHMARKS.md, Produce, 100 B records). Invariant: HeaderSize <= crcTo <= len(buf).
	recordsCRC uint32
	crcTo      int
	// n is the number of records appended.
	n             int32
	baseTs, maxTs int64
	// built caches Build's result until the next Append or Reset.
	built Batch
}

// NewBuilder returns an empty Builder.
func NewBuilder(opts BuilderOptions) *Builder {
	b := &Builder{buf: make([]byte, HeaderSize, 4<<10)}
	b.Reset(opts)
	return b
}

// UseBuffer makes buf, of at least HeaderSize bytes, the builder's buffer, emptying the batch:
// batches are built in it for as long as they fit, and one that outgrows it moves to a buffer
// of its own. A client puts its batches where its broker can read them this way (shared
// memory).
func (b *Builder) UseBuffer(buf []byte) {
	b.buf = buf[:HeaderSize]
	b.Reset(b.opts)
}

// UseOutBuffer makes buf the buffer Build compresses into (a batch with a codec): the
// compressed batch is written there if it fits, else into a buffer of its own.
func (b *Builder) UseOutBuffer(buf []byte) {
	b.out = buf[:0]
	b.built = nil
}

// Reset empties the builder for a new batch, keeping its buffers.
func (b *Builder) Reset(opts BuilderOptions) {
	b.opts = opts
	b.buf = b.buf[:HeaderSize]
	b.recordsCRC, b.crcTo = 0, HeaderSize
	b.n = 0
	b.baseTs, b.maxTs = 0, 0
	b.built = nil
}

// SetProducerState sets the producer id, epoch and base sequence written by
// Build. Kafka's producer assigns the sequence when a batch is drained for
// sending, after its records were appended; this lets it do the same.
func (b *Builder) SetProducerState(id int64, epoch int16, baseSequence int32) {
	b.opts.ProducerID, b.opts.ProducerEpoch, b.opts.BaseSequence = id, epoch, baseSequence
	b.built = nil
}

// Prepare makes room for a batch of n bytes in all (header included) and writes that room
// once, without changing the batch: appends that fill it then allocate nothing and find its
// memory in the calling core's cache. A producer calls it before a batch opens, outside its
// locks: a buffer last read on another core (the sender checksums and writes it) would
// otherwise cost a cache miss per record, paid inside the lock.
func (b *Builder) Prepare(n int) {
	if n <= len(b.buf) {
		return
	}
	if cap(b.buf) < n {
		nb := make([]byte, len(b.buf), n)
		copy(nb, b.buf)
		b.buf = nb
	}
	clear(b.buf[len(b.buf):n])
}

// NumRecords is the number of records appended since the last Reset.
func (b *Builder) NumRecords() int { return int(b.n) }

// EstimatedSize is the size the batch would have uncompressed: header plus
// encoded records. Compare it with batch.size to decide when to close a
// batch; compression only makes the real batch smaller (almost always).
func (b *Builder) EstimatedSize() int { return len(b.buf) }

// RecordSize is how many bytes Append(r) would add to EstimatedSize now,
// so a caller can check a record fits before appending it.
func (b *Builder) RecordSize(r *Record) int {
	body := b.bodySize(r)
	return varintLen(int64(body)) + body
}

func (b *Builder) bodySize(r *Record) int {
	tsDelta := int64(0)
	if b.n > 0 {
		tsDelta = r.Timestamp - b.baseTs
	}
	size := 1 + // attributes
		varintLen(tsDelta) +
		varintLen(int64(b.n)) + // offsetDelta
		bytesFieldLen(r.Key) +
		bytesFieldLen(r.Value) +
		varintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		size += varintLen(int64(len(h.Key))) + len(h.Key) + bytesFieldLen(h.Value)
	}
	return size
}

// Append adds r to the batch. The first record's timestamp becomes the
// batch's base timestamp; later records may be earlier (negative deltas).
// r is copied; the builder keeps no reference to it. A record too large for
// a batch is accepted here and reported by Build.
func (b *Builder) Append(r *Record) {
	if b.n == 0 {
		b.baseTs, b.maxTs = r.Timestamp, r.Timestamp
	} else if r.Timestamp > b.maxTs {
		b.maxTs = r.Timestamp
	}
	body := b.bodySize(r)
	buf := b.buf
	if need := varintLen(int64(body)) + body; cap(buf)-len(buf) < need {
		// Grow once per record at most, geometrically, so that steady
		// state (after Reset) never allocates.
		nb := make([]byte, len(buf), max(2*cap(buf), len(buf)+need))
		copy(nb, buf)
		buf = nb
	}
	buf = appendVarint(buf, int64(body))
	buf = append(buf, 0) // attributes
	buf = appendVarint(buf, r.Timestamp-b.baseTs)
	buf = appendVarint(buf, int64(b.n))
	buf = appendBytesField(buf, r.Key)
	buf = appendBytesField(buf, r.Value)
	buf = appendVarint(buf, int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		buf = appendVarint(buf, int64(len(h.Key)))
		buf = append(buf, h.Key...)
		buf = appendBytesField(buf, h.Value)
	}
	b.buf = buf
	b.n++
	b.built = nil
	if len(buf)-b.crcTo >= crcChunk && len(buf) >= crcRunningMin && b.opts.Compression == None {
		b.recordsCRC = crc32.Update(b.recordsCRC, castagnoli, buf[b.crcTo:])
		b.crcTo = len(buf)
	}
}

// The running checksum starts once an uncompressed batch holds crcRunningMin bytes (still in
// the appending core's L2 cache) and then takes crcChunk bytes at a time (inside its L1 data
// cache, and enough to make the call's overhead negligible). Smaller batches are checksummed
// whole at Build: joining two checksums costs about 0.6 µs, a quarter of a 16 KiB batch's
// encoding.
const (
	crcRunningMin = 64 << 10
	crcChunk      = 8 << 10
)

// Build returns the finished batch: records compressed once with the
// configured codec, header filled in, CRC computed, baseOffset 0 and
// partitionLeaderEpoch -1 (the broker stamps both). The bytes belong to the
// Builder and stay valid until the next Append, SetProducerState or Reset;
// Build again without changes returns the same bytes without recompressing.
func (b *Builder) Build() (Batch, error) {
	if b.built != nil {
		return b.built, nil
	}
	if b.n == 0 {
		return nil, fmt.Errorf("%w: build: no records", ErrRecordCount)
	}
	o := &b.opts
	if o.Transactional && o.ProducerID < 0 {
		return nil, errors.New("batch: build: transactional batch needs a producer id")
	}
	if !o.Compression.valid() {
		return nil, fmt.Errorf("%w: build: %d", ErrUnknownCodec, int8(o.Compression))
	}
	// Oversized records are caught here, once, rather than on every Append;
	// MaxBatchSize also keeps every length within the int32 the format has.
	if len(b.buf) > MaxBatchSize {
		return nil, fmt.Errorf("%w: build: %d bytes uncompressed, max %d", ErrTooLarge, len(b.buf), MaxBatchSize)
	}
	out := b.buf
	if o.Compression != None {
		var err error
		out, err = compress(grow(b.out[:0], HeaderSize), o.Compression, o.CompressionLevel, b.buf[HeaderSize:])
		if err != nil {
			return nil, err
		}
		b.out = out
		if len(out) > MaxBatchSize {
			return nil, fmt.Errorf("%w: build: %d bytes compressed, max %d", ErrTooLarge, len(out), MaxBatchSize)
		}
	}
	attrs := int16(o.Compression)
	if o.Transactional {
		attrs |= AttrTransactional
	}
	putHeader(out, attrs, b.n-1, b.baseTs, b.maxTs, o.ProducerID, o.ProducerEpoch, o.BaseSequence, b.n)
	if o.Compression == None && b.crcTo > HeaderSize {
		b.recordsCRC = crc32.Update(b.recordsCRC, castagnoli, out[b.crcTo:])
		b.crcTo = len(out)
		headerCRC := crc32.Checksum(out[CRCStart:HeaderSize], castagnoli)
		binary.BigEndian.PutUint32(out[offCRC:], crcCombine(headerCRC, b.recordsCRC, len(out)-HeaderSize))
	} else {
		Batch(out).updateCRC()
	}
	b.built = Batch(out[:len(out):len(out)])
	return b.built, nil
}
