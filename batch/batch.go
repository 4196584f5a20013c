package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Offset is a record's logical position in a partition. It is a distinct
// type so that the compiler rejects mixing it with byte positions.
type Offset int64

// Format constants. They are part of the on-disk and on-wire format.
const (
	// HeaderSize is the size of the fixed batch header; records start here.
	HeaderSize = 61
	// Magic is the only batch format version this package reads or writes.
	Magic = 2
	// LengthFieldEnd is the number of bytes up to and including batchLength:
	// a batch's total size is LengthFieldEnd + batchLength.
	LengthFieldEnd = 12
	// CRCStart is the first byte covered by the CRC; the CRC covers
	// [CRCStart, end of batch).
	CRCStart = 21
	// MaxBatchSize bounds a batch's total size. Anything larger is treated as
	// a corrupt length rather than a reason to allocate or wait for a
	// gigabyte.
	MaxBatchSize = 1 << 30

	// minRecordSize is the smallest possible encoded record: a one-byte
	// length, attributes, timestampDelta, offsetDelta, keyLength,
	// valueLength and headersCount.
	minRecordSize = 7
)

// Attribute bits (see the package doc).
const (
	AttrCompressionMask = 0x07
	AttrLogAppendTime   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
	AttrDeleteHorizon   = 0x40
)

// Field offsets within the header.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordsCount    = 57
)

// castagnoli is hardware-accelerated on amd64 and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is a view over exactly one batch's bytes (len(b) == b.Size() once
// validated). Accessors never allocate or copy. The header accessors read
// fixed positions only, so they also work on a slice holding just the first
// HeaderSize bytes of a batch, such as a header read from a segment file;
// they panic if len(b) < HeaderSize, like any out-of-range slice access, so
// call them after Next, SizeOf or Validate has checked the length.
type Batch []byte

// BaseOffset is the offset of the batch's first record.
func (b Batch) BaseOffset() Offset { return Offset(be64(b[offBaseOffset:])) }

// SetBaseOffset stamps the base offset. The field is outside the CRC, so the
// batch stays valid.
func (b Batch) SetBaseOffset(o Offset) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(o))
}

// BatchLength is the header's batchLength field: bytes after that field.
func (b Batch) BatchLength() int32 { return int32(binary.BigEndian.Uint32(b[offBatchLength:])) }

// Size is the batch's total size as its header claims: LengthFieldEnd +
// batchLength. It can be wrong for an unvalidated batch.
func (b Batch) Size() int { return LengthFieldEnd + int(b.BatchLength()) }

// PartitionLeaderEpoch is the leader epoch the broker stamped on append.
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
}

// SetPartitionLeaderEpoch stamps the leader epoch. The field is outside the
// CRC, so the batch stays valid.
func (b Batch) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(e))
}

// Magic is the format version byte; 2 for every batch this package accepts.
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// CRC is the stored CRC-32C of bytes [CRCStart, end).
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }

// Attributes is the raw attributes field.
func (b Batch) Attributes() int16 { return int16(binary.BigEndian.Uint16(b[offAttributes:])) }

// Compression is the codec of the records blob. It may be an unknown value
// for an unvalidated batch.
func (b Batch) Compression() Codec { return Codec(b.Attributes() & AttrCompressionMask) }

// LogAppendTime reports whether timestamps are the broker's append time
// (maxTimestamp) rather than the producer's create time.
func (b Batch) LogAppendTime() bool { return b.Attributes()&AttrLogAppendTime != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (b Batch) IsTransactional() bool { return b.Attributes()&AttrTransactional != 0 }

// IsControl reports whether the batch holds control records (transaction
// markers) rather than user data.
func (b Batch) IsControl() bool { return b.Attributes()&AttrControl != 0 }

// LastOffsetDelta is the offset delta of the last record, which compaction
// preserves even when it removes that record.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
}

// LastOffset is the offset of the batch's last record.
func (b Batch) LastOffset() Offset { return b.BaseOffset() + Offset(b.LastOffsetDelta()) }

// NextOffset is the offset that follows the batch.
func (b Batch) NextOffset() Offset { return b.LastOffset() + 1 }

// BaseTimestamp is the first record's timestamp in ms (or the delete
// horizon, if AttrDeleteHorizon is set).
func (b Batch) BaseTimestamp() int64 { return int64(be64(b[offBaseTimestamp:])) }

// MaxTimestamp is the largest record timestamp in ms, or the log append time.
func (b Batch) MaxTimestamp() int64 { return int64(be64(b[offMaxTimestamp:])) }

// ProducerID is the idempotent producer id, or -1.
func (b Batch) ProducerID() int64 { return int64(be64(b[offProducerID:])) }

// ProducerEpoch is the producer epoch, or -1.
func (b Batch) ProducerEpoch() int16 {
	return int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
}

// BaseSequence is the first record's sequence number, or -1.
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[offBaseSequence:])) }

// NumRecords is the recordsCount field.
func (b Batch) NumRecords() int32 { return int32(binary.BigEndian.Uint32(b[offRecordsCount:])) }

// Records returns the bytes after the header: the records, compressed as one
// blob if Compression() != None. It aliases b.
func (b Batch) Records() []byte { return b[HeaderSize:] }

// SetLogAppendTime marks the batch as carrying log append time ts, as a
// broker configured with log.message.timestamp.type=LogAppendTime must.
// Unlike the offset and epoch stamps these fields are inside the CRC, so the
// CRC is recomputed (one pass over the batch, no copy). Call it only on a
// validated batch.
func (b Batch) SetLogAppendTime(ts int64) {
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(b.Attributes()|AttrLogAppendTime))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	b.updateCRC()
}

// SetProducerState stamps a built batch with another producer id, epoch and base sequence (an
// idempotent producer starting a partition's sequences over, KIP-360) and recomputes the CRC,
// which covers those fields: one pass over the batch, no copy, nothing decompressed. A b too
// short for a header, or whose batchLength disagrees with len(b), is left unchanged and
// reported (ErrShort, ErrInvalidLength); the records are not checked.
func (b Batch) SetProducerState(producerID int64, producerEpoch int16, baseSequence int32) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: set producer state: %d bytes, header is %d", ErrShort, len(b), HeaderSize)
	}
	if b.Size() != len(b) {
		return fmt.Errorf("%w: set producer state: batchLength says %d bytes, have %d", ErrInvalidLength, b.Size(), len(b))
	}
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	b.updateCRC()
	return nil
}

func (b Batch) computeCRC() uint32 { return crc32.Checksum(b[CRCStart:], castagnoli) }

func (b Batch) updateCRC() { binary.BigEndian.PutUint32(b[offCRC:], b.computeCRC()) }

// Validate checks, without decompressing, that b is exactly one well-formed
// batch: a sane length equal to len(b), magic 2, a matching CRC, a known
// codec, 0 <= recordsCount <= lastOffsetDelta+1 (compaction leaves gaps), and
// for uncompressed batches room for recordsCount minimal records. Offsets
// are not checked: they are outside the CRC and the broker overwrites them.
func (b Batch) Validate() error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: %d bytes, header needs %d", ErrShort, len(b), HeaderSize)
	}
	size, err := SizeOf(b)
	if err != nil {
		return err
	}
	if size != len(b) {
		if size > len(b) {
			return fmt.Errorf("%w: batchLength says %d bytes, have %d", ErrShort, size, len(b))
		}
		return fmt.Errorf("%w: batchLength says %d bytes, have %d", ErrInvalidLength, size, len(b))
	}
	if m := b.Magic(); m != Magic {
		return fmt.Errorf("%w: %d", ErrBadMagic, m)
	}
	// The CRC before the other header rules: a flipped bit in the covered header fields is
	// reported as the CRC mismatch it is.
	if got, want := b.computeCRC(), b.CRC(); got != want {
		return fmt.Errorf("%w: computed %#08x, header has %#08x", ErrCRC, got, want)
	}
	return CheckHeader(b, size)
}

// CheckHeader applies the rules of Validate that need only the header and the batch's total
// size: magic, a known codec, and record-count sanity. Validate is CheckHeader plus the length
// and the CRC; log recovery uses CheckHeader and computes the CRC while streaming a batch from
// disk, so a large batch is never held in memory. h needs at least HeaderSize bytes.
func CheckHeader(h Batch, size int) error {
	if m := h.Magic(); m != Magic {
		return fmt.Errorf("%w: %d", ErrBadMagic, m)
	}
	c := h.Compression()
	if !c.valid() {
		return fmt.Errorf("%w: compression attribute %d", ErrUnknownCodec, int8(c))
	}
	n, last := h.NumRecords(), h.LastOffsetDelta()
	if n < 0 || last < 0 || int64(n) > int64(last)+1 {
		return fmt.Errorf("%w: recordsCount %d, lastOffsetDelta %d", ErrRecordCount, n, last)
	}
	if c == None && int64(n)*minRecordSize > int64(size-HeaderSize) {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrRecordCount, n, size-HeaderSize)
	}
	return nil
}

// ValidateStrict is Validate plus what a broker requires of a batch a
// producer sends: at least one record and no offset gaps (recordsCount ==
// lastOffsetDelta+1), since gaps can only come from compaction.
func (b Batch) ValidateStrict() error {
	if err := b.Validate(); err != nil {
		return err
	}
	n, last := b.NumRecords(), b.LastOffsetDelta()
	if n < 1 || last != n-1 {
		return fmt.Errorf("%w: produced batch has recordsCount %d, lastOffsetDelta %d",
			ErrRecordCount, n, last)
	}
	return nil
}

// SizeOf returns the total size of the batch whose header starts hdr, read
// from its first LengthFieldEnd bytes. It is the only check needed to step
// from batch to batch in a log or fetch response.
func SizeOf(hdr []byte) (int, error) {
	if len(hdr) < LengthFieldEnd {
		return 0, fmt.Errorf("%w: %d bytes, length field needs %d", ErrShort, len(hdr), LengthFieldEnd)
	}
	l := int64(int32(binary.BigEndian.Uint32(hdr[offBatchLength:])))
	if l < HeaderSize-LengthFieldEnd || l > MaxBatchSize-LengthFieldEnd {
		return 0, fmt.Errorf("%w: batchLength %d", ErrInvalidLength, l)
	}
	return LengthFieldEnd + int(l), nil
}

// Next splits the first batch off buf, a concatenation of batches, checking
// its length and magic but not its CRC (call Validate for that). It returns
// ErrShort when buf holds less than a whole batch, which is normal at the
// end of a fetch response; any other error means the bytes are not a batch.
// The returned batch's capacity is clipped so appending to it cannot
// overwrite rest.
func Next(buf []byte) (b Batch, rest []byte, err error) {
	size, err := SizeOf(buf)
	if err != nil {
		return nil, buf, err
	}
	if len(buf) < size {
		return nil, buf, fmt.Errorf("%w: batch needs %d bytes, have %d", ErrShort, size, len(buf))
	}
	if m := int8(buf[offMagic]); m != Magic {
		return nil, buf, fmt.Errorf("%w: %d", ErrBadMagic, m)
	}
	return Batch(buf[:size:size]), buf[size:], nil
}

func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// putHeader writes every header field of b but the CRC, which covers the records too: baseOffset
// 0 and leader epoch -1 (the broker stamps both).
func putHeader(b []byte, attrs int16, lastOffsetDelta int32, baseTs, maxTs int64,
	producerID int64, producerEpoch int16, baseSequence, count int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LengthFieldEnd))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], math.MaxUint32) // -1: not yet stamped
	b[offMagic] = Magic
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTs))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(b[offRecordsCount:], uint32(count))
}
