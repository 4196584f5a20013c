package segment

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// BenchmarkRecoverProducerState measures opening a log of idempotent batches (16 KiB each,
// from 1,000 producers in turn) after a clean close, with the producer-state snapshot the
// close wrote (nothing to replay) and without any snapshot (every batch header read, from the
// log start). The log is 256 MiB; SLUICE_BENCH_RECOVER_BYTES sets another size (the issue's
// figure is for 10 GiB: 10737418240). The files are in the page cache when it opens them.
func BenchmarkRecoverProducerState(b *testing.B) {
	size := int64(256 << 20)
	if s := os.Getenv("SLUICE_BENCH_RECOVER_BYTES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	dir := filepath.Join(b.TempDir(), "p")
	o := Options{Logger: quietLogger()} // 1 GiB segments, as a broker's default
	l, err := Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	const producers = 1000
	seqs := make([]int32, producers)
	bld := batch.NewBuilder(batch.DefaultBuilderOptions())
	value := make([]byte, 1000)
	var batches int64
	for i := 0; l.Size() < size; i++ {
		pid := i % producers
		bld.Reset(batch.DefaultBuilderOptions())
		bld.SetProducerState(int64(pid), 0, seqs[pid])
		for range 16 {
			bld.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Value: value})
		}
		out, err := bld.Build()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(out, 0); err != nil {
			b.Fatal(err)
		}
		seqs[pid] += 16
		batches++
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d MiB, %d batches, %d producers", size>>20, batches, producers)
	open := func(b *testing.B, before func()) {
		for b.Loop() {
			b.StopTimer()
			before()
			b.StartTimer()
			l, err := Open(dir, o)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if n := l.ProducerCount(); n != producers {
				b.Fatalf("recovered %d producers, want %d", n, producers)
			}
			_ = l.Close()
			b.StartTimer()
		}
	}
	b.Run("snapshot", func(b *testing.B) { open(b, func() {}) })
	b.Run("no-snapshot", func(b *testing.B) {
		open(b, func() {
			names, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
			for _, n := range names {
				if err := os.Remove(n); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
