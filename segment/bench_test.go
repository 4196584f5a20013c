package segment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// appendPayload is n bytes of 1 KiB-record batches of batchSize bytes each, so one Append call
// carries one request's worth.
func appendPayload(b *testing.B, batchSize int) []byte {
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for bl.EstimatedSize()+1024 <= batchSize {
		bl.Append(&batch.Record{Timestamp: 1, Value: value})
	}
	out, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// BenchmarkAppend compares Log.Append (validate + stamp + one write + index) against a plain
// pwrite of the same bytes to a file in the same directory: the ratio is the log's overhead.
// Each sub-benchmark's files are removed when it ends.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		payload := appendPayload(b, size)
		b.Run(fmt.Sprintf("size=%dKiB/plain-write", size>>10), func(b *testing.B) {
			// The same file life as the log's active segment: one file growing by pwrite.
			f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			var pos int64
			for i := 0; i < b.N; i++ {
				if _, err := f.WriteAt(payload, pos); err != nil {
					b.Fatal(err)
				}
				pos += int64(len(payload))
			}
			b.StopTimer()
		})
		for _, mmap := range []bool{false, true} {
			name := "pwrite"
			if mmap {
				name = "mmap"
			}
			b.Run(fmt.Sprintf("size=%dKiB/log-%s", size>>10, name), func(b *testing.B) {
				// Default 1 GiB segments: run with -benchtime=Nx so that N appends stay below 1 GiB
				// and no roll (and its fsync of the whole segment) lands inside the timing.
				o := Options{MmapAppend: mmap, RetentionBytes: 256 << 20, Logger: quietLogger()}
				l, err := Open(filepath.Join(b.TempDir(), "p"), o)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				b.SetBytes(int64(len(payload)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// Append re-stamps the base offset in place (outside the CRC), so the same
					// bytes can be appended again.
					if _, err := l.Append(payload, 0); err != nil {
						b.Fatal(err)
					}
					if i%256 == 255 {
						b.StopTimer()
						if _, err := l.DeleteExpired(l.EndOffset()); err != nil { // bound the disk used
							b.Fatal(err)
						}
						b.StartTimer()
					}
				}
				b.StopTimer() // Close (final fsync) is not part of the append cost
			})
		}
	}
}

// BenchmarkAppendSynced is acks=all with write.caching=false: each append waits for the group
// commit fsync. 8 concurrent appenders share fsyncs.
func BenchmarkAppendSynced(b *testing.B) {
	payload := appendPayload(b, 16<<10)
	l, err := Open(filepath.Join(b.TempDir(), "p"), Options{SegmentBytes: 64 << 20, RetentionBytes: 256 << 20, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, len(payload))
		for pb.Next() {
			copy(buf, payload)
			info, err := l.Append(buf, 0)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.WaitSynced(context.Background(), info.LastOffset); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkOpen measures opening a 1 GiB log (16 segments of 64 MiB) after a clean close and
// after a crash that left the last 64 MiB segment unsynced and without a recovery point past
// its start. Set SLUICE_BENCH_OPEN=1 to run it: it writes 1 GiB.
func BenchmarkOpen(b *testing.B) {
	if os.Getenv("SLUICE_BENCH_OPEN") == "" {
		b.Skip("set SLUICE_BENCH_OPEN=1 to write and open a 1 GiB log")
	}
	dir := filepath.Join(b.TempDir(), "p")
	o := Options{SegmentBytes: 64 << 20, Logger: quietLogger()}
	l, err := Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	payload := appendPayload(b, 1<<20)
	buf := make([]byte, len(payload))
	for l.Size() < 1<<30 {
		copy(buf, payload)
		if _, err := l.Append(buf, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("clean", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			start := time.Now()
			l, err := Open(dir, o)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds()), "open-µs")
			b.StopTimer()
			_ = l.Close()
			b.StartTimer()
		}
	})
	b.Run("after-crash", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			// Simulate a crash: the recovery point still names the active segment's start, so
			// the whole last segment (64 MiB) must be scanned and its indexes rebuilt.
			segs := l.Segments()
			last := segs[len(segs)-1].Base()
			c := checkpoint{offset: last, segment: last, pos: 0, maxTs: -1}
			if err := os.WriteFile(filepath.Join(dir, checkpointFile), c.encode(), 0o644); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			l2, err := Open(dir, o)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = l2.Close()
			b.StartTimer()
		}
	})
}
