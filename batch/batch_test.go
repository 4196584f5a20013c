package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// goldenRecords is the records section of goldenBatch, encoded by hand from
// the spec (zigzag varints), not by the code under test:
//
//	record 0: ts 1000 (delta 0), key "k1", value "v1", no headers
//	record 1: ts 995 (delta -5), null key, value "hello", header "h" = null
var goldenRecords = []byte{
	0x14,     // length 10
	0x00,     // attributes
	0x00,     // timestampDelta 0
	0x00,     // offsetDelta 0
	0x04,     // keyLength 2
	'k', '1', //
	0x04,     // valueLength 2
	'v', '1', //
	0x00, // headersCount 0
	0x1c, // length 14
	0x00, // attributes
	0x09, // timestampDelta -5
	0x02, // offsetDelta 1
	0x01, // keyLength -1 (null)
	0x0a, // valueLength 5
	'h', 'e', 'l', 'l', 'o',
	0x02,      // headersCount 1
	0x02, 'h', // header key "h"
	0x01, // header value null
}

// goldenBatch builds the expected bytes field by field, with the CRC
// computed here by hash/crc32 directly.
func goldenBatch() []byte {
	b := make([]byte, 0, HeaderSize+len(goldenRecords))
	b = binary.BigEndian.AppendUint64(b, 0)                                        // baseOffset
	b = binary.BigEndian.AppendUint32(b, uint32(HeaderSize-12+len(goldenRecords))) // batchLength
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)                               // partitionLeaderEpoch -1
	b = append(b, 2)                                                               // magic
	b = binary.BigEndian.AppendUint32(b, 0)                                        // crc, below
	b = binary.BigEndian.AppendUint16(b, 0)                                        // attributes
	b = binary.BigEndian.AppendUint32(b, 1)                                        // lastOffsetDelta
	b = binary.BigEndian.AppendUint64(b, 1000)                                     // baseTimestamp
	b = binary.BigEndian.AppendUint64(b, 1000)                                     // maxTimestamp
	b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff)                       // producerId -1
	b = binary.BigEndian.AppendUint16(b, 0xffff)                                   // producerEpoch -1
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)                               // baseSequence -1
	b = binary.BigEndian.AppendUint32(b, 2)                                        // recordsCount
	b = append(b, goldenRecords...)
	crc := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(b[17:], crc)
	return b
}

func goldenInput() []Record {
	return []Record{
		{Timestamp: 1000, Key: []byte("k1"), Value: []byte("v1")},
		{Timestamp: 995, Value: []byte("hello"), Headers: []Header{{Key: []byte("h")}}},
	}
}

func TestGoldenLayout(t *testing.T) {
	want := goldenBatch()
	if len(want) != 87 {
		t.Fatalf("golden batch is %d bytes, want 87", len(want))
	}
	bl := NewBuilder(DefaultBuilderOptions())
	for _, r := range goldenInput() {
		bl.Append(&r)
	}
	got, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("layout mismatch\ngot  %x\nwant %x", []byte(got), want)
	}
	if err := got.ValidateStrict(); err != nil {
		t.Fatal(err)
	}

	b := Batch(want)
	checks := []struct {
		name      string
		got, want int64
	}{
		{"BaseOffset", int64(b.BaseOffset()), 0},
		{"BatchLength", int64(b.BatchLength()), 75},
		{"Size", int64(b.Size()), 87},
		{"PartitionLeaderEpoch", int64(b.PartitionLeaderEpoch()), -1},
		{"Magic", int64(b.Magic()), 2},
		{"CRC", int64(b.CRC()), int64(binary.BigEndian.Uint32(want[17:]))},
		{"Attributes", int64(b.Attributes()), 0},
		{"Compression", int64(b.Compression()), int64(None)},
		{"LastOffsetDelta", int64(b.LastOffsetDelta()), 1},
		{"LastOffset", int64(b.LastOffset()), 1},
		{"NextOffset", int64(b.NextOffset()), 2},
		{"BaseTimestamp", b.BaseTimestamp(), 1000},
		{"MaxTimestamp", b.MaxTimestamp(), 1000},
		{"ProducerID", b.ProducerID(), -1},
		{"ProducerEpoch", int64(b.ProducerEpoch()), -1},
		{"BaseSequence", int64(b.BaseSequence()), -1},
		{"NumRecords", int64(b.NumRecords()), 2},
		{"len(Records)", int64(len(b.Records())), int64(len(goldenRecords))},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if b.LogAppendTime() || b.IsTransactional() || b.IsControl() {
		t.Error("attribute flags set on a plain batch")
	}

	it := b.Iter(IterOptions{})
	var r Record
	var recs []Record
	for it.Next(&r) {
		c := r
		c.Headers = append([]Header(nil), r.Headers...)
		recs = append(recs, c)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("got %d records", len(recs))
	}
	if recs[0].Offset != 0 || recs[0].Timestamp != 1000 || string(recs[0].Key) != "k1" || string(recs[0].Value) != "v1" || len(recs[0].Headers) != 0 {
		t.Errorf("record 0 = %+v", recs[0])
	}
	if recs[1].Offset != 1 || recs[1].Timestamp != 995 || recs[1].Key != nil || string(recs[1].Value) != "hello" {
		t.Errorf("record 1 = %+v", recs[1])
	}
	if len(recs[1].Headers) != 1 || string(recs[1].Headers[0].Key) != "h" || recs[1].Headers[0].Value != nil {
		t.Errorf("record 1 headers = %+v", recs[1].Headers)
	}
}

func TestValidateEveryBitFlipInCRCRegion(t *testing.T) {
	b := goldenBatch()
	if err := Batch(b).Validate(); err != nil {
		t.Fatal(err)
	}
	for i := CRCStart; i < len(b); i++ {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if err := Batch(c).Validate(); err == nil {
				t.Fatalf("flip of byte %d bit %d accepted", i, bit)
			} else if !errors.Is(err, ErrCRC) {
				t.Fatalf("flip of byte %d bit %d: %v, want ErrCRC", i, bit, err)
			}
		}
	}
	// The CRC field itself: any flip must also be caught.
	for i := offCRC; i < CRCStart; i++ {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if err := Batch(c).Validate(); !errors.Is(err, ErrCRC) {
				t.Fatalf("flip of crc byte %d bit %d: %v", i, bit, err)
			}
		}
	}
}

// withCRC sets b's CRC to match its contents, so a test can reach the checks
// after the CRC.
func withCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestValidateRejects(t *testing.T) {
	g := goldenBatch()
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(g)) }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"header only partly", g[:40], ErrShort},
		{"truncated records", g[:len(g)-1], ErrShort},
		{"trailing byte", append(bytes.Clone(g), 0), ErrInvalidLength},
		{"batchLength too small", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[8:], 48)
			return b
		}), ErrInvalidLength},
		{"batchLength negative", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[8:], 0x80000000)
			return b
		}), ErrInvalidLength},
		{"batchLength absurd", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[8:], MaxBatchSize)
			return b
		}), ErrInvalidLength},
		{"magic 1", mod(func(b []byte) []byte { b[16] = 1; return b }), ErrBadMagic},
		{"magic 3", mod(func(b []byte) []byte { b[16] = 3; return b }), ErrBadMagic},
		{"crc", mod(func(b []byte) []byte { b[17]++; return b }), ErrCRC},
		{"negative count", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 0xffffffff)
			return withCRC(b)
		}), ErrRecordCount},
		{"count above lastOffsetDelta+1", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 3)
			return withCRC(b)
		}), ErrRecordCount},
		{"negative lastOffsetDelta", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[23:], 0xffffffff)
			binary.BigEndian.PutUint32(b[57:], 0)
			return withCRC(b)
		}), ErrRecordCount},
		{"count cannot fit", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[23:], 99)
			binary.BigEndian.PutUint32(b[57:], 4) // 4*7 > 26 bytes
			return withCRC(b)
		}), ErrRecordCount},
		{"unknown codec", mod(func(b []byte) []byte {
			b[22] = 5
			return withCRC(b)
		}), ErrUnknownCodec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Batch(tt.b).Validate()
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestValidateAcceptsCompactedGaps(t *testing.T) {
	// Compaction may remove records, leaving count < lastOffsetDelta+1 and
	// even an empty batch; Validate accepts both, ValidateStrict neither.
	for _, count := range []uint32{0, 1} {
		b := goldenBatch()
		binary.BigEndian.PutUint32(b[23:], 7)
		binary.BigEndian.PutUint32(b[57:], count)
		withCRC(b)
		if err := Batch(b).Validate(); err != nil {
			t.Errorf("count %d: Validate = %v", count, err)
		}
		if err := Batch(b).ValidateStrict(); !errors.Is(err, ErrRecordCount) {
			t.Errorf("count %d: ValidateStrict = %v, want ErrRecordCount", count, err)
		}
	}
}

func TestStampingKeepsCRC(t *testing.T) {
	b := Batch(goldenBatch())
	b.SetBaseOffset(1 << 40)
	b.SetPartitionLeaderEpoch(17)
	if err := b.ValidateStrict(); err != nil {
		t.Fatal(err)
	}
	if b.BaseOffset() != 1<<40 || b.PartitionLeaderEpoch() != 17 {
		t.Fatalf("stamp lost: %d %d", b.BaseOffset(), b.PartitionLeaderEpoch())
	}
	if b.LastOffset() != 1<<40+1 || b.NextOffset() != 1<<40+2 {
		t.Fatalf("LastOffset %d NextOffset %d", b.LastOffset(), b.NextOffset())
	}
	it := b.Iter(IterOptions{})
	var r Record
	for want := Offset(1 << 40); it.Next(&r); want++ {
		if r.Offset != want {
			t.Fatalf("offset %d, want %d", r.Offset, want)
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
}

func TestSetLogAppendTime(t *testing.T) {
	b := Batch(goldenBatch())
	b.SetLogAppendTime(5000)
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if !b.LogAppendTime() || b.MaxTimestamp() != 5000 {
		t.Fatalf("LogAppendTime %v MaxTimestamp %d", b.LogAppendTime(), b.MaxTimestamp())
	}
	it := b.Iter(IterOptions{})
	var r Record
	for it.Next(&r) {
		if r.Timestamp != 5000 {
			t.Fatalf("timestamp %d, want log append time", r.Timestamp)
		}
	}
}

func TestSizeOf(t *testing.T) {
	hdr := func(l uint32) []byte {
		b := make([]byte, 12)
		binary.BigEndian.PutUint32(b[8:], l)
		return b
	}
	tests := []struct {
		name string
		hdr  []byte
		size int
		err  error
	}{
		{"short", make([]byte, 11), 0, ErrShort},
		{"minimum", hdr(49), 61, nil},
		{"below minimum", hdr(48), 0, ErrInvalidLength},
		{"zero", hdr(0), 0, ErrInvalidLength},
		{"negative", hdr(0xffffffff), 0, ErrInvalidLength},
		{"max", hdr(MaxBatchSize - 12), MaxBatchSize, nil},
		{"over max", hdr(MaxBatchSize - 11), 0, ErrInvalidLength},
	}
	for _, tt := range tests {
		size, err := SizeOf(tt.hdr)
		if size != tt.size || !errors.Is(err, tt.err) {
			t.Errorf("%s: SizeOf = %d, %v; want %d, %v", tt.name, size, err, tt.size, tt.err)
		}
	}
}

func TestNext(t *testing.T) {
	g := goldenBatch()
	var buf []byte
	for i := range 3 {
		b := Batch(bytes.Clone(g))
		b.SetBaseOffset(Offset(i * 2))
		buf = append(buf, b...)
	}
	full := len(buf)
	buf = append(buf, g[:30]...) // a partial batch, as at the end of a fetch

	rest := buf
	var n int
	for {
		b, r, err := Next(rest)
		if errors.Is(err, ErrShort) {
			if len(rest) != 30 || len(r) != 30 {
				t.Fatalf("ErrShort with %d bytes left", len(rest))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		if b.BaseOffset() != Offset(n*2) {
			t.Fatalf("batch %d base offset %d", n, b.BaseOffset())
		}
		if cap(b) != len(b) {
			t.Fatal("Next must clip capacity")
		}
		n++
		rest = r
	}
	if n != 3 || full != 3*len(g) {
		t.Fatalf("split %d batches", n)
	}

	bad := bytes.Clone(g)
	bad[16] = 1
	if _, _, err := Next(bad); !errors.Is(err, ErrBadMagic) {
		t.Errorf("bad magic: %v", err)
	}
	binary.BigEndian.PutUint32(bad[8:], 3)
	if _, _, err := Next(bad); !errors.Is(err, ErrInvalidLength) {
		t.Errorf("bad length: %v", err)
	}
	if _, _, err := Next(g[:5]); !errors.Is(err, ErrShort) {
		t.Errorf("5 bytes: %v", err)
	}
}

func TestIterRejectsCorruptRecords(t *testing.T) {
	// Each case edits the golden records and fixes the header (count,
	// lastOffsetDelta, length, CRC) so only the record decoder can object.
	type edit struct {
		name    string
		records []byte
		count   int32
		last    int32
	}
	rec := func(mod func(r []byte) []byte) []byte { return mod(bytes.Clone(goldenRecords)) }
	tests := []edit{
		{"missing record", goldenRecords, 3, 2},
		{"trailing bytes", append(bytes.Clone(goldenRecords), 0), 2, 1},
		{"length past end", rec(func(r []byte) []byte { r[11] = 0x7e; return r }), 2, 1},
		{"length too small", rec(func(r []byte) []byte { r[0] = 0x02; return r }), 2, 1},
		{"negative length", rec(func(r []byte) []byte { r[0] = 0x03; return r }), 2, 1},
		{"key past record", rec(func(r []byte) []byte { r[4] = 0x20; return r }), 2, 1},
		{"key length -2", rec(func(r []byte) []byte { r[4] = 0x03; return r }), 2, 1},
		{"offsetDelta not increasing", rec(func(r []byte) []byte { r[14] = 0x00; return r }), 2, 1},
		{"offsetDelta past lastOffsetDelta", rec(func(r []byte) []byte { r[14] = 0x04; return r }), 2, 1},
		{"null header key", rec(func(r []byte) []byte { r[23] = 0x01; return r }), 2, 1},
		{"huge headersCount", rec(func(r []byte) []byte { r[22] = 0x7e; return r }), 2, 1},
		{"overlong varint", rec(func(r []byte) []byte {
			return append([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, r...)
		}), 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := goldenBatch()[:HeaderSize]
			b = append(b, tt.records...)
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
			binary.BigEndian.PutUint32(b[23:], uint32(tt.last))
			binary.BigEndian.PutUint32(b[57:], uint32(tt.count))
			withCRC(b)
			if err := Batch(b).Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			it := Batch(b).Iter(IterOptions{})
			var r Record
			for it.Next(&r) {
			}
			if !errors.Is(it.Err(), ErrCorruptRecord) {
				t.Fatalf("Err = %v, want ErrCorruptRecord", it.Err())
			}
		})
	}
}

func TestVarint(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 1 << 20, -(1 << 31), 1<<31 - 1} {
		enc := appendVarint(nil, v)
		if len(enc) != varintLen(v) {
			t.Errorf("varintLen(%d) = %d, encoded %d", v, varintLen(v), len(enc))
		}
		got, n := readVarint(enc)
		if int64(got) != v || n != len(enc) {
			t.Errorf("readVarint(%d) = %d, %d", v, got, n)
		}
		gl, n := readVarlong(enc)
		if gl != v || n != len(enc) {
			t.Errorf("readVarlong(%d) = %d, %d", v, gl, n)
		}
	}
	for _, v := range []int64{1 << 31, -(1 << 31) - 1, 1 << 62, -(1 << 63)} {
		enc := appendVarint(nil, v)
		if _, n := readVarint(enc); n > 0 {
			t.Errorf("readVarint accepted out-of-range %d", v)
		}
		if got, n := readVarlong(enc); got != v || n != len(enc) || n != varintLen(v) {
			t.Errorf("readVarlong(%d) = %d, %d", v, got, n)
		}
	}
	if _, n := readVarint([]byte{0x80}); n != 0 {
		t.Errorf("truncated varint: n = %d", n)
	}
	if _, n := readVarlong([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}); n >= 0 {
		t.Errorf("11-byte varlong: n = %d", n)
	}
}
