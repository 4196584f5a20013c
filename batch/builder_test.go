package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
)

var allCodecs = []Codec{None, Gzip, Snappy, LZ4, Zstd}

// sampleRecords covers nulls, empties, headers, large values spanning
// several codec blocks, and timestamps before the first (negative deltas).
func sampleRecords() []Record {
	big := bytes.Repeat([]byte("0123456789abcdef"), 10_000) // 160 KB: several lz4/snappy blocks
	return []Record{
		{Timestamp: 1_700_000_000_000, Key: []byte("key-0"), Value: []byte("value-0")},
		{Timestamp: 1_700_000_000_005, Key: nil, Value: []byte("null key")},
		{Timestamp: 1_699_999_999_000, Key: []byte("null value"), Value: nil},
		{Timestamp: 1_700_000_000_001, Key: []byte{}, Value: []byte{}},
		{Timestamp: 1_700_000_000_002, Key: []byte("h"), Value: []byte("headers"), Headers: []Header{
			{Key: []byte("trace-id"), Value: []byte("abc123")},
			{Key: []byte("null"), Value: nil},
			{Key: []byte("empty"), Value: []byte{}},
		}},
		{Timestamp: math.MinInt32, Key: []byte("very old"), Value: big},
		{Timestamp: 1_700_000_100_000, Key: []byte("last"), Value: []byte("v")},
	}
}

func equalRecords(t *testing.T, got, want []Record, base Offset) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != base+Offset(i) || g.Timestamp != w.Timestamp {
			t.Errorf("record %d: offset %d ts %d, want %d %d", i, g.Offset, g.Timestamp, base+Offset(i), w.Timestamp)
		}
		if !sameBytes(g.Key, w.Key) || !sameBytes(g.Value, w.Value) {
			t.Errorf("record %d: key %q value len %d, want %q len %d", i, g.Key, len(g.Value), w.Key, len(w.Value))
		}
		if len(g.Headers) != len(w.Headers) {
			t.Errorf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
			continue
		}
		for j := range w.Headers {
			if !bytes.Equal(g.Headers[j].Key, w.Headers[j].Key) || !sameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				t.Errorf("record %d header %d: %q=%q, want %q=%q", i, j,
					g.Headers[j].Key, g.Headers[j].Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
	}
}

// sameBytes is bytes.Equal that also tells null from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func readAllRecords(t *testing.T, b Batch, opts IterOptions) []Record {
	t.Helper()
	var out []Record
	it := b.Iter(opts)
	var r Record
	for it.Next(&r) {
		c := r
		c.Headers = append([]Header(nil), r.Headers...)
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterate: %v", err)
	}
	return out
}

func TestRoundTripEveryCodec(t *testing.T) {
	want := sampleRecords()
	for _, c := range allCodecs {
		for _, level := range []int{0, 1, 9} {
			t.Run(fmt.Sprintf("%s/level%d", c, level), func(t *testing.T) {
				opts := DefaultBuilderOptions()
				opts.Compression, opts.CompressionLevel = c, level
				bl := NewBuilder(opts)
				for i := range want {
					bl.Append(&want[i])
				}
				b, err := bl.Build()
				if err != nil {
					t.Fatal(err)
				}
				if err := b.ValidateStrict(); err != nil {
					t.Fatal(err)
				}
				if b.Compression() != c || b.NumRecords() != int32(len(want)) {
					t.Fatalf("codec %s count %d", b.Compression(), b.NumRecords())
				}
				if b.BaseTimestamp() != want[0].Timestamp || b.MaxTimestamp() != 1_700_000_100_000 {
					t.Fatalf("timestamps base %d max %d", b.BaseTimestamp(), b.MaxTimestamp())
				}
				b.SetBaseOffset(1000)
				equalRecords(t, readAllRecords(t, b, IterOptions{}), want, 1000)
				var d Decompressor
				equalRecords(t, readAllRecords(t, b, IterOptions{Decompressor: &d}), want, 1000)
				// Reuse the same Decompressor: state must not leak between batches.
				equalRecords(t, readAllRecords(t, b, IterOptions{Decompressor: &d}), want, 1000)
			})
		}
	}
}

func TestBuilderReuseAndOptions(t *testing.T) {
	opts := BuilderOptions{Compression: Zstd, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 100, Transactional: true}
	bl := NewBuilder(opts)
	if _, err := bl.Build(); !errors.Is(err, ErrRecordCount) {
		t.Fatalf("empty Build = %v", err)
	}
	r := Record{Timestamp: 1, Value: []byte("x")}
	bl.Append(&r)
	b1, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	if b1.ProducerID() != 42 || b1.ProducerEpoch() != 3 || b1.BaseSequence() != 100 || !b1.IsTransactional() {
		t.Fatalf("producer state %d %d %d %v", b1.ProducerID(), b1.ProducerEpoch(), b1.BaseSequence(), b1.IsTransactional())
	}
	if b1.PartitionLeaderEpoch() != -1 || b1.BaseOffset() != 0 {
		t.Fatalf("epoch %d base %d", b1.PartitionLeaderEpoch(), b1.BaseOffset())
	}
	b2, _ := bl.Build()
	if &b1[0] != &b2[0] {
		t.Fatal("second Build without changes recompressed")
	}
	bl.SetProducerState(7, 1, 9)
	b3, err := bl.Build()
	if err != nil || b3.ProducerID() != 7 || b3.BaseSequence() != 9 || b3.Validate() != nil {
		t.Fatalf("SetProducerState: %v %d %d", err, b3.ProducerID(), b3.BaseSequence())
	}

	bl.Reset(DefaultBuilderOptions())
	if bl.NumRecords() != 0 || bl.EstimatedSize() != HeaderSize {
		t.Fatalf("Reset left %d records, %d bytes", bl.NumRecords(), bl.EstimatedSize())
	}
	bl.Append(&r)
	b4, _ := bl.Build()
	if b4.ProducerID() != -1 || b4.IsTransactional() || b4.Compression() != None {
		t.Fatal("Reset kept old options")
	}

	bad := DefaultBuilderOptions()
	bad.Transactional = true
	bl.Reset(bad)
	bl.Append(&r)
	if _, err := bl.Build(); err == nil {
		t.Fatal("transactional batch without producer id built")
	}
	bad = DefaultBuilderOptions()
	bad.Compression = 6
	bl.Reset(bad)
	bl.Append(&r)
	if _, err := bl.Build(); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("codec 6: %v", err)
	}
}

func TestEstimatedSizeAndRecordSize(t *testing.T) {
	bl := NewBuilder(DefaultBuilderOptions())
	recs := sampleRecords()
	for i := range recs {
		before := bl.EstimatedSize()
		predicted := bl.RecordSize(&recs[i])
		bl.Append(&recs[i])
		if got := bl.EstimatedSize() - before; got != predicted {
			t.Fatalf("record %d: RecordSize %d, Append added %d", i, predicted, got)
		}
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != bl.EstimatedSize() {
		t.Fatalf("uncompressed batch is %d bytes, EstimatedSize %d", len(b), bl.EstimatedSize())
	}
}

func TestAppendDoesNotAllocate(t *testing.T) {
	bl := NewBuilder(DefaultBuilderOptions())
	r := Record{Timestamp: 1, Key: []byte("key"), Value: make([]byte, 100),
		Headers: []Header{{Key: []byte("h"), Value: []byte("v")}}}
	for range 200 {
		bl.Append(&r)
	}
	allocs := testing.AllocsPerRun(100, func() {
		bl.Reset(DefaultBuilderOptions())
		for range 100 {
			bl.Append(&r)
		}
		if _, err := bl.Build(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per 100 Appends + Build", allocs)
	}
}

func TestIterDoesNotAllocate(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			opts := DefaultBuilderOptions()
			opts.Compression = c
			bl := NewBuilder(opts)
			r := Record{Timestamp: 1, Key: []byte("key"), Value: bytes.Repeat([]byte("value "), 20),
				Headers: []Header{{Key: []byte("h"), Value: []byte("v")}, {Key: []byte("i")}}}
			for range 100 {
				bl.Append(&r)
			}
			b, err := bl.Build()
			if err != nil {
				t.Fatal(err)
			}
			var d Decompressor
			var rec Record
			run := func() {
				it := b.Iter(IterOptions{Decompressor: &d})
				n := 0
				for it.Next(&rec) {
					n++
				}
				if it.Err() != nil || n != 100 {
					t.Fatalf("%d records, %v", n, it.Err())
				}
			}
			run() // warm: decoder state, buffers, headers slice
			allocs := testing.AllocsPerRun(20, run)
			// The race detector makes sync.Pool drop a quarter of its Puts
			// on purpose, and klauspost's zstd decoder keeps its history
			// buffers in one, so under -race zstd allocates now and then.
			// .ci/run repeats the allocation tests without -race.
			if allocs != 0 && !(raceEnabled && c == Zstd) {
				t.Fatalf("%v allocs per 100-record batch", allocs)
			}
		})
	}
}

func TestParseCodec(t *testing.T) {
	for _, c := range allCodecs {
		got, err := ParseCodec(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCodec(%q) = %v, %v", c.String(), got, err)
		}
	}
	if c, err := ParseCodec("ZSTD"); err != nil || c != Zstd {
		t.Errorf("ParseCodec(ZSTD) = %v, %v", c, err)
	}
	for _, s := range []string{"", "producer", "brotli"} {
		if _, err := ParseCodec(s); !errors.Is(err, ErrUnknownCodec) {
			t.Errorf("ParseCodec(%q) = %v", s, err)
		}
	}
	if s := Codec(7).String(); s != "codec(7)" {
		t.Errorf("Codec(7).String() = %q", s)
	}
}

// TestPrepareChangesNothingAndMakesRoom: a prepared builder builds the same bytes as a fresh
// one, and appends that fill the prepared room allocate nothing.
func TestPrepareChangesNothingAndMakesRoom(t *testing.T) {
	recs := make([]Record, 50)
	for i := range recs {
		recs[i] = Record{Timestamp: int64(1000 + i), Key: []byte{byte(i)}, Value: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	build := func(prepare int) []byte {
		b := NewBuilder(DefaultBuilderOptions())
		b.Prepare(prepare)
		if b.EstimatedSize() != HeaderSize || b.NumRecords() != 0 {
			t.Fatalf("Prepare(%d) changed the batch: size %d, %d records", prepare, b.EstimatedSize(), b.NumRecords())
		}
		for i := range recs {
			b.Append(&recs[i])
		}
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), out...)
	}
	want := build(0)
	for _, n := range []int{1, HeaderSize, 100, 8 << 10, 64 << 10} {
		if got := build(n); !bytes.Equal(got, want) {
			t.Fatalf("Prepare(%d): the batch differs", n)
		}
	}
	b := NewBuilder(DefaultBuilderOptions())
	b.Prepare(len(want) + 64)
	allocs := testing.AllocsPerRun(10, func() {
		b.Reset(DefaultBuilderOptions())
		b.Prepare(len(want) + 64)
		for i := range recs {
			b.Append(&recs[i])
		}
	})
	if allocs != 0 {
		t.Errorf("appends into prepared room: %.0f allocations, want 0", allocs)
	}
	// A producer prepares a batch exactly as large as its partition's last one. The same
	// records must fit without growing the buffer, though Append cannot know the last record's
	// length prefix in advance (it used to demand room for the widest one, and doubled a
	// megabyte batch at its last record).
	exact := NewBuilder(DefaultBuilderOptions())
	exact.Prepare(len(want))
	for i := range recs {
		exact.Append(&recs[i])
	}
	if exact.EstimatedSize() != len(want) || cap(exact.buf) != len(want) {
		t.Errorf("batch of %d bytes prepared exactly: size %d, capacity %d (grown)", len(want), exact.EstimatedSize(), cap(exact.buf))
	}
}
