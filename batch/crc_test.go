package batch

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	splits := [][2]int{{0, 0}, {0, 1}, {1, 0}, {61, 1}, {61, 7}, {61, 16 << 10}, {0, 300 << 10}, {4096, 4096}, {1, 300<<10 - 1}}
	for i := 0; i < 200; i++ {
		a := rng.IntN(len(data))
		splits = append(splits, [2]int{a, rng.IntN(len(data) - a + 1)})
	}
	for _, s := range splits {
		a, b := data[:s[0]], data[s[0]:s[0]+s[1]]
		want := crc32.Checksum(data[:s[0]+s[1]], castagnoli)
		got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b))
		if got != want {
			t.Fatalf("combine(%d bytes, %d bytes) = %#x, want %#x", len(a), len(b), got, want)
		}
	}
}

func TestMulModPIdentity(t *testing.T) {
	one := uint32(1) << 31
	for _, v := range []uint32{0, 1, one, 0xdeadbeef, castagnoliPoly} {
		if got := mulModP(one, v); got != v {
			t.Errorf("1·%#x = %#x", v, got)
		}
	}
	if got := xPow8n(0); got != one {
		t.Errorf("x^0 = %#x", got)
	}
}

func BenchmarkCRCCombine(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = crcCombine(uint32(i), 0x1234, 1<<20+i&1023)
	}
}

// TestBuilderRunningCRC checks the checksum Build writes when the records' checksum was taken
// while they were appended: batches ending before, on and past chunk boundaries, built again
// after more appends or new producer state, and reused after Reset.
func TestBuilderRunningCRC(t *testing.T) {
	value := make([]byte, crcRunningMin+2*crcChunk)
	for i := range value {
		value[i] = byte(i * 7)
	}
	check := func(t *testing.T, bt Batch, records int) {
		t.Helper()
		if err := bt.Validate(); err != nil {
			t.Fatalf("%d records: %v", records, err)
		}
		if got, want := bt.CRC(), crc32.Checksum(bt[CRCStart:], castagnoli); got != want {
			t.Fatalf("%d records: crc %#x, want %#x", records, got, want)
		}
		if n := len(readAllRecords(t, bt, IterOptions{})); n != records {
			t.Fatalf("iterated %d records, want %d", n, records)
		}
	}
	bl := NewBuilder(DefaultBuilderOptions())
	many := func(n, size int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = size
		}
		return s
	}
	for _, sizes := range [][]int{
		{0}, {100}, many(30, 3000), // small batches: checksummed at Build
		{crcRunningMin - 100}, {crcRunningMin}, {crcRunningMin + 2*crcChunk}, // one record at the threshold
		append(many(21, 3000), 3000, 3000, 3000, 3000, 3000), // crosses the threshold, then chunks
		append(many(25, 3000), 1, 8000, 8191, 0, 8193, 17, 40000, 3),
	} {
		bl.Reset(DefaultBuilderOptions())
		for i, n := range sizes {
			bl.Append(&Record{Timestamp: int64(1000 + i), Key: []byte("k"), Value: value[:n]})
			bt, err := bl.Build() // a Build between appends must not disturb the running checksum
			if err != nil {
				t.Fatal(err)
			}
			check(t, bt, i+1)
		}
		if running := bl.EstimatedSize() >= crcRunningMin; running != (bl.crcTo > HeaderSize) {
			t.Fatalf("%d bytes: running checksum covers up to %d", bl.EstimatedSize(), bl.crcTo)
		}
		bl.SetProducerState(77, 3, 1000)
		bt, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		check(t, bt, len(sizes))
		if bt.ProducerID() != 77 || bt.BaseSequence() != 1000 {
			t.Fatalf("producer state not written: %d %d", bt.ProducerID(), bt.BaseSequence())
		}
	}
}
