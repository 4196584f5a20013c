package batch

import "fmt"

// IterOptions configures record iteration.
type IterOptions struct {
	// MaxDecompressed caps the decompressed size of a compressed batch's
	// records (ErrTooLarge past it). 0 means DefaultMaxDecompressed.
	MaxDecompressed int
	// Decompressor, if set, supplies reusable decoder state and the output
	// buffer, so decoding allocates nothing in steady state; records of a
	// compressed batch then alias its buffer and stay valid until its next
	// use. If nil, decoder state is borrowed from a pool and each compressed
	// batch gets a buffer of its own (one allocation per batch) that lives
	// as long as the records referencing it.
	Decompressor *Decompressor
}

// RecordIter iterates a batch's records, decompressing on the first call
// to Next. Typical use, allocation-free with a reused Record and
// Decompressor:
//
//	it := b.Iter(batch.IterOptions{Decompressor: d})
//	var r batch.Record
//	for it.Next(&r) {
//		use(r.Offset, r.Key, r.Value)
//	}
//	if err := it.Err(); err != nil { ... }
//
// Key, Value and header slices alias the batch (uncompressed) or the
// decompressed buffer (compressed); they are valid while those bytes are:
// until the batch's memory is reused, and for a compressed batch with a
// Decompressor until that Decompressor's next use. Copy what must outlive
// them. The iterator checks every length and varint against the bytes it
// has, the record count against the header, and offset deltas for strict
// increase within [0, lastOffsetDelta]; it never panics on corrupt input.
type RecordIter struct {
	b    Batch
	opts IterOptions
	// data is the records not yet read.
	data    []byte
	started bool
	err     error
	// left is the number of records the header promises beyond those read.
	left int32
	// read is the number of records returned, for error messages.
	read      int32
	prevDelta int64
	lastDelta int32
	base      Offset
	baseTs    int64
	maxTs     int64
	logAppend bool
}

// Iter returns an iterator over b's records. b need not be validated: a
// corrupt batch yields an error from Err, not a panic. The iterator is a
// value so that it can live on the caller's stack.
func (b Batch) Iter(opts IterOptions) RecordIter {
	return RecordIter{b: b, opts: opts}
}

// Reset points the iterator at another batch.
func (it *RecordIter) Reset(b Batch, opts IterOptions) {
	*it = RecordIter{b: b, opts: opts}
}

// Err is the error that stopped iteration, nil if every record the header
// promised was read and no bytes were left over.
func (it *RecordIter) Err() error { return it.err }

func (it *RecordIter) fail(format string, args ...any) bool {
	it.err = fmt.Errorf("%w: record %d: "+format, append([]any{ErrCorruptRecord, it.read}, args...)...)
	return false
}

func (it *RecordIter) start() error {
	b := it.b
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: %d bytes, header needs %d", ErrShort, len(b), HeaderSize)
	}
	it.left = b.NumRecords()
	if it.left < 0 {
		return fmt.Errorf("%w: recordsCount %d", ErrRecordCount, it.left)
	}
	it.prevDelta = -1
	it.lastDelta = b.LastOffsetDelta()
	it.base = b.BaseOffset()
	it.baseTs = b.BaseTimestamp()
	it.maxTs = b.MaxTimestamp()
	it.logAppend = b.LogAppendTime()
	data := b.Records()
	if c := b.Compression(); c != None {
		d := it.opts.Decompressor
		pooled := d == nil
		if pooled {
			d = decompressors.Get().(*Decompressor)
		}
		out, err := d.Decompress(c, data, it.opts.MaxDecompressed)
		if pooled {
			d.buf = nil // the records alias it; the pool must not hand it out
			decompressors.Put(d)
		}
		if err != nil {
			return err
		}
		data = out
	}
	if int64(it.left)*minRecordSize > int64(len(data)) {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrRecordCount, it.left, len(data))
	}
	it.data = data
	return nil
}

// Next decodes the next record into r, reusing r.Headers' backing array. It
// returns false at the end of the batch or on error (see Err).
func (it *RecordIter) Next(r *Record) bool {
	if it.err != nil {
		return false
	}
	if !it.started {
		it.started = true
		if it.err = it.start(); it.err != nil {
			return false
		}
	}
	if it.left == 0 {
		if len(it.data) != 0 {
			return it.fail("%d bytes after the last record", len(it.data))
		}
		return false
	}

	length, n := readVarint(it.data)
	// The smallest body is six one-byte fields (see minRecordSize).
	if n <= 0 || length < minRecordSize-1 || int64(length) > int64(len(it.data)-n) {
		return it.fail("bad length (varint %d bytes, value %d, %d bytes left)", n, length, len(it.data))
	}
	p := it.data[n : n+int(length)]
	it.data = it.data[n+int(length):]

	p = p[1:] // attributes: unused by v2 records
	tsDelta, n := readVarlong(p)
	if n <= 0 {
		return it.fail("bad timestampDelta")
	}
	p = p[n:]
	offDelta, n := readVarint(p)
	if n <= 0 || int64(offDelta) <= it.prevDelta || offDelta > it.lastDelta {
		return it.fail("offsetDelta %d after %d, lastOffsetDelta %d", offDelta, it.prevDelta, it.lastDelta)
	}
	p = p[n:]
	key, p, ok := readBytesField(p)
	if !ok {
		return it.fail("bad key")
	}
	value, p, ok := readBytesField(p)
	if !ok {
		return it.fail("bad value")
	}
	count, n := readVarint(p)
	// Each header takes at least two bytes, which bounds the headers slice
	// by the record's size.
	if n <= 0 || count < 0 || int64(count)*2 > int64(len(p)-n) {
		return it.fail("bad headersCount %d", count)
	}
	p = p[n:]
	headers := r.Headers[:0]
	for range count {
		var hk, hv []byte
		if hk, p, ok = readBytesField(p); !ok || hk == nil {
			return it.fail("bad header key")
		}
		if hv, p, ok = readBytesField(p); !ok {
			return it.fail("bad header value")
		}
		headers = append(headers, Header{Key: hk, Value: hv})
	}
	if len(p) != 0 {
		return it.fail("%d bytes past the last field", len(p))
	}

	it.prevDelta = int64(offDelta)
	it.left--
	it.read++
	r.Offset = it.base + Offset(offDelta)
	r.Timestamp = it.baseTs + tsDelta
	if it.logAppend {
		r.Timestamp = it.maxTs
	}
	r.Key, r.Value, r.Headers = key, value, headers
	return true
}

// readBytesField reads a nullable length-prefixed field (-1 is nil). The
// returned field's capacity is clipped so appending to it cannot overwrite
// the bytes after it.
func readBytesField(p []byte) (field, rest []byte, ok bool) {
	l, n := readVarint(p)
	switch {
	case n <= 0 || l < -1:
		return nil, p, false
	case l == -1:
		return nil, p[n:], true
	case int64(l) > int64(len(p)-n):
		return nil, p, false
	}
	end := n + int(l)
	return p[n:end:end], p[end:], true
}
