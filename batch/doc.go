// Package batch owns the record batch: Kafka's RecordBatch v2 format, byte
// for byte, so that bytes stored by Sluice can be served unchanged to a Kafka
// client. It builds batches (producer side), validates them (broker side),
// iterates their records (consumer side) and implements the codecs with the
// framing Kafka clients use.
//
// The package is pure: no goroutines, no I/O, no clock. Every decoder bounds
// every length against the bytes it was given (or an explicit decompression
// cap) before slicing or allocating, so corrupt input yields an error, never
// a panic or an unbounded allocation.
//
// # Batch layout
//
// All integers are big-endian. Offsets and sizes below are part of the
// format and frozen: changing any of them breaks every stored segment and
// Kafka compatibility.
//
//	 offset  size  field
//	+------+-----+----------------------+
//	|    0 |   8 | baseOffset           |  stamped by the broker
//	|    8 |   4 | batchLength          |  bytes after this field: size = 12 + batchLength
//	|   12 |   4 | partitionLeaderEpoch |  stamped by the broker
//	|   16 |   1 | magic (= 2)          |
//	|   17 |   4 | crc (uint32)         |  CRC-32C (Castagnoli) of bytes [21, end)
//	+------+-----+----------------------+ <- CRC coverage starts here (CRCStart = 21)
//	|   21 |   2 | attributes           |
//	|   23 |   4 | lastOffsetDelta      |
//	|   27 |   8 | baseTimestamp        |  ms; timestamp of the first record
//	|   35 |   8 | maxTimestamp         |  ms
//	|   43 |   8 | producerId           |  -1: no producer id
//	|   51 |   2 | producerEpoch        |  -1: none
//	|   53 |   4 | baseSequence         |  -1: none
//	|   57 |   4 | recordsCount         |
//	|   61 |   … | records              |  compressed as one blob if attributes say so
//	+------+-----+----------------------+
//
// baseOffset and partitionLeaderEpoch sit before the CRC'd region on
// purpose: the broker stamps them into a producer's batch without touching
// (or recomputing) the CRC, which is what lets it append the bytes as they
// came.
//
// Attributes (int16):
//
//	bits 0-2  compression: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
//	bit  3    timestamp type: 0 create time, 1 log append time
//	bit  4    transactional
//	bit  5    control batch
//	bit  6    delete horizon set (baseTimestamp is the delete horizon)
//	bits 7-15 unused, zero
//
// # Record layout
//
// Records follow the header back to back (after decompression, if any).
// varint and varlong are zigzag-encoded LEB128 of an int32 and an int64 (at
// most 5 and 10 bytes).
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused, 0
//	timestampDelta  varlong  relative to baseTimestamp; may be negative
//	offsetDelta     varint   relative to baseOffset
//	keyLength       varint   -1: null key
//	key             bytes
//	valueLength     varint   -1: null value
//	value           bytes
//	headersCount    varint
//	headers:        headerKeyLength varint (>= 0), headerKey bytes (UTF-8),
//	                headerValueLength varint (-1: null), headerValue bytes
//
// # Codecs
//
// The compressed records blob uses the framing Kafka's Java client reads and
// writes: gzip streams; snappy in xerial framing (magic "\x82SNAPPY\x00",
// version 1, compatible 1, then [int32 length][snappy block] chunks of at
// most 32 KiB input), with raw snappy accepted on read; LZ4 frames with
// independent 64 KiB blocks and no content checksum; standard zstd frames.
//
// # Lifetimes
//
// A Batch is a view: it never copies. Records returned by a RecordIter alias
// the batch bytes (uncompressed batches) or the decompression buffer
// (compressed batches); see RecordIter for how long they stay valid.
package batch
