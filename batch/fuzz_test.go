package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"runtime/metrics"
	"testing"
)

// Seeds are built in code and kept small; generated corpora are not
// committed unless they found a bug.

func seedBatches(t testing.TB) [][]byte {
	seeds := [][]byte{goldenBatch()}
	small := sampleRecords()[:5]
	for _, c := range allCodecs {
		opts := DefaultBuilderOptions()
		opts.Compression = c
		bl := NewBuilder(opts)
		for i := range small {
			bl.Append(&small[i])
		}
		b, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, bytes.Clone(b))
	}
	return seeds
}

func crcOK(b []byte) bool {
	return crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) == binary.BigEndian.Uint32(b[17:])
}

// drain iterates every record, returning the error and checking the
// iterator never hands out more records than the header promises.
func drain(t *testing.T, b Batch, d *Decompressor) error {
	it := b.Iter(IterOptions{MaxDecompressed: 1 << 20, Decompressor: d})
	var r Record
	n := 0
	for it.Next(&r) {
		n++
		if int32(n) > b.NumRecords() {
			t.Fatalf("iterator returned %d records, header says %d", n, b.NumRecords())
		}
	}
	return it.Err()
}

func FuzzValidate(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
		f.Add(s[:len(s)-1])
	}
	f.Add([]byte{})
	var d Decompressor
	f.Fuzz(func(t *testing.T, data []byte) {
		b := Batch(data)
		err := b.Validate()
		if err != nil {
			_ = drain(t, b, &d) // must not panic on anything
			return
		}
		if len(data) < HeaderSize || b.Size() != len(data) || b.Magic() != Magic {
			t.Fatalf("accepted a batch with len %d size %d magic %d", len(data), b.Size(), b.Magic())
		}
		if !crcOK(data) {
			t.Fatal("accepted a batch whose CRC is wrong")
		}
		if b.NumRecords() < 0 || int64(b.NumRecords()) > int64(b.LastOffsetDelta())+1 {
			t.Fatalf("accepted count %d lastOffsetDelta %d", b.NumRecords(), b.LastOffsetDelta())
		}
		_ = drain(t, b, &d)
	})
}

func FuzzNext(f *testing.F) {
	seeds := seedBatches(f)
	f.Add(bytes.Join(seeds, nil))
	f.Add(append(bytes.Clone(seeds[0]), seeds[1][:20]...))
	f.Add(seeds[2])
	f.Fuzz(func(t *testing.T, data []byte) {
		rest := data
		for len(rest) > 0 {
			b, r, err := Next(rest)
			if err != nil {
				if len(r) != len(rest) {
					t.Fatal("Next consumed input on error")
				}
				if errors.Is(err, ErrShort) {
					if s, serr := SizeOf(rest); serr == nil && s <= len(rest) {
						t.Fatalf("ErrShort with a whole %d-byte batch in %d bytes", s, len(rest))
					}
				}
				return
			}
			if len(b) != b.Size() || len(b)+len(r) != len(rest) || len(b) < HeaderSize {
				t.Fatalf("split %d + %d from %d, size %d", len(b), len(r), len(rest), b.Size())
			}
			if b.Validate() == nil && !crcOK(b) {
				t.Fatal("Validate accepted a wrong CRC")
			}
			rest = r
		}
	})
}

func heapAllocBytes(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzIter wraps arbitrary record bytes in a batch with a correct CRC and
// arbitrary attributes and counts, so the fuzzer reaches the record decoder
// and the codecs rather than dying at the CRC.
func FuzzIter(f *testing.F) {
	for _, s := range seedBatches(f) {
		b := Batch(s)
		f.Add(uint16(b.Attributes()), b.NumRecords(), b.LastOffsetDelta(), []byte(b.Records()))
	}
	f.Add(uint16(0), int32(3), int32(2), []byte{0x0c, 0, 0, 0, 1, 1, 0})
	f.Add(uint16(Zstd), int32(1), int32(0), []byte{0x28, 0xb5, 0x2f, 0xfd})

	var d Decompressor
	// Warm the decoders so one-off setup is not charged to an input.
	for _, c := range allCodecs {
		comp, _ := compress(nil, c, 0, []byte("warm"))
		_, _ = d.Decompress(c, comp, 1<<20)
	}
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, attrs uint16, count, lastDelta int32, records []byte) {
		if len(records) > 1<<20 {
			return
		}
		b := make([]byte, HeaderSize, HeaderSize+len(records))
		b = append(b, records...)
		putHeader(b, int16(attrs), lastDelta, 1000, 2000, -1, -1, -1, count)
		Batch(b).updateCRC()
		before := heapAllocBytes(sample)
		it := Batch(b).Iter(IterOptions{MaxDecompressed: limit, Decompressor: &d})
		var r Record
		n := int32(0)
		for it.Next(&r) {
			n++
			if r.Offset < 0 || r.Offset > Offset(lastDelta) {
				t.Fatalf("offset %d outside [0, %d]", r.Offset, lastDelta)
			}
		}
		if int64(n) > max(int64(count), 0) {
			t.Fatalf("%d records from a header promising %d", n, count)
		}
		if it.Err() == nil && n != count {
			t.Fatalf("clean end after %d of %d records", n, count)
		}
		// Output at most twice the cap, the zstd window (8 MiB at this cap),
		// an lz4 scratch block (4 MiB), headers bounded by the input.
		const fixed = 2*limit + 8<<20 + 4<<20 + 1<<20
		if got := heapAllocBytes(sample) - before; got > fixed+uint64(64*len(records)) {
			t.Fatalf("allocated %d bytes for %d input bytes", got, len(records))
		}
	})
}

func fuzzDecompress(f *testing.F, c Codec) {
	for _, src := range [][]byte{nil, []byte("hello hello hello"), logLines(2000)} {
		comp, err := compress(nil, c, 0, src)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(comp)
	}
	var d Decompressor
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := d.Decompress(c, data, limit)
		if err == nil && len(out) > limit {
			t.Fatalf("%d bytes past a %d cap", len(out), limit)
		}
		if err != nil && !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("unwrapped error %v", err)
		}
		// And the input as plain data round-trips.
		comp, err := compress(nil, c, 0, data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Decompress(c, comp, max(len(data), 1))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round trip of %d bytes: %v", len(data), err)
		}
	})
}

func FuzzDecompressGzip(f *testing.F)   { fuzzDecompress(f, Gzip) }
func FuzzDecompressSnappy(f *testing.F) { fuzzDecompress(f, Snappy) }
func FuzzDecompressLZ4(f *testing.F)    { fuzzDecompress(f, LZ4) }
func FuzzDecompressZstd(f *testing.F)   { fuzzDecompress(f, Zstd) }
