package batch

import (
	"fmt"
	"testing"
)

// batchSize is Kafka's default batch.size: the builder is closed near it.
const batchSize = 16 << 10

// BenchmarkBuilderAppend measures the producer's per-record cost: each op is one Append, and
// a batch is built and reset whenever it reaches its size, so Build's share is amortised as in
// a real accumulator. The 1 MiB batches take the running checksum (crcRunningMin); on one core
// the data is in cache either way, so this shows its cost, not the cross-core saving that
// end-to-end runs measure.
func BenchmarkBuilderAppend(b *testing.B) {
	for _, bc := range []struct{ size, batchSize int }{{100, batchSize}, {1 << 10, batchSize}, {1 << 10, 1 << 20}} {
		size, batchSize := bc.size, bc.batchSize
		name := fmt.Sprintf("value=%dB", size)
		if batchSize != 16<<10 {
			name += fmt.Sprintf("/batch=%dKiB", batchSize>>10)
		}
		b.Run(name, func(b *testing.B) {
			lines := logLines(64 * size)
			r := Record{Timestamp: 1_764_439_200_000, Key: []byte("order-12345")}
			bl := NewBuilder(DefaultBuilderOptions())
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				off := i % 64 * size
				r.Value = lines[off : off+size]
				r.Timestamp++
				if bl.EstimatedSize()+bl.RecordSize(&r) > batchSize && bl.NumRecords() > 0 {
					if _, err := bl.Build(); err != nil {
						b.Fatal(err)
					}
					bl.Reset(DefaultBuilderOptions())
				}
				bl.Append(&r)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func buildBatch(tb testing.TB, c Codec, valueSize, total int) Batch {
	opts := DefaultBuilderOptions()
	opts.Compression = c
	bl := NewBuilder(opts)
	lines := logLines(total + valueSize)
	for off := 0; bl.EstimatedSize()+valueSize+32 <= total; off += valueSize {
		bl.Append(&Record{Timestamp: int64(off), Value: lines[off : off+valueSize]})
	}
	bt, err := bl.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return bt
}

// BenchmarkValidate is the broker's per-batch cost on produce: dominated by
// the CRC-32C pass.
func BenchmarkValidate(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			bt := buildBatch(b, None, 1<<10, size)
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			for b.Loop() {
				if err := bt.ValidateStrict(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIter is the consumer's per-record cost on an uncompressed 16 KiB
// batch of 1 KiB records.
func BenchmarkIter(b *testing.B) {
	bt := buildBatch(b, None, 1<<10, batchSize)
	var d Decompressor
	var r Record
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		it := bt.Iter(IterOptions{Decompressor: &d})
		for it.Next(&r) {
			n++
		}
		if it.Err() != nil {
			b.Fatal(it.Err())
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// codecInput is 256 KiB of log lines: a large producer batch.
var codecInput = logLines(256 << 10)

// BenchmarkCompress reports MB/s of input and the compression ratio
// (input/output) for each codec at its default level.
func BenchmarkCompress(b *testing.B) {
	for _, c := range allCodecs[1:] {
		b.Run(c.String(), func(b *testing.B) {
			var out []byte
			b.SetBytes(int64(len(codecInput)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if out, err = compress(out[:0], c, 0, codecInput); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(codecInput))/float64(len(out)), "ratio")
		})
	}
}

// BenchmarkDecompress reports MB/s of decompressed output.
func BenchmarkDecompress(b *testing.B) {
	for _, c := range allCodecs[1:] {
		b.Run(c.String(), func(b *testing.B) {
			comp := mustCompress(b, c, 0, codecInput)
			var d Decompressor
			b.SetBytes(int64(len(codecInput)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Decompress(c, comp, len(codecInput)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(codecInput))/float64(len(comp)), "ratio")
		})
	}
}
