package batch

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrShort means the input holds less than one whole batch (or header).
	// At the end of a fetch response or a torn log tail this is expected.
	ErrShort = errors.New("batch: short buffer")
	// ErrInvalidLength means batchLength is impossible or disagrees with the
	// bytes given.
	ErrInvalidLength = errors.New("batch: invalid length")
	// ErrBadMagic means the batch is not RecordBatch v2.
	ErrBadMagic = errors.New("batch: bad magic")
	// ErrCRC means the CRC-32C over [CRCStart, end) does not match.
	ErrCRC = errors.New("batch: crc mismatch")
	// ErrRecordCount means recordsCount disagrees with lastOffsetDelta or
	// with the bytes that should hold the records.
	ErrRecordCount = errors.New("batch: bad record count")
	// ErrTooLarge means decompressed records would pass the caller's cap, or
	// a built batch would pass MaxBatchSize.
	ErrTooLarge = errors.New("batch: too large")
	// ErrCorruptRecord means the records (or the compressed blob holding
	// them) do not parse.
	ErrCorruptRecord = errors.New("batch: corrupt record")
	// ErrUnknownCodec means the compression attribute or codec name is not
	// one of none, gzip, snappy, lz4, zstd.
	ErrUnknownCodec = errors.New("batch: unknown codec")
)
