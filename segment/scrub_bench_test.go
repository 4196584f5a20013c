package segment

import (
	"context"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// BenchmarkScrub is the scrub's cost per byte with no rate limit: one sealed 64 MiB segment of
// 1 MiB batches (the page cache holds it: the CPU's part, CRC and system calls, not the disk's),
// read in the driver's 1 MiB chunks. ns/op over SetBytes is the CPU per byte, one core.
func BenchmarkScrub(b *testing.B) {
	o := testOptions(vfs.Default)
	o.SegmentBytes = 64 << 20
	o.SegmentIndexBytes = 1 << 20
	l := mustOpen(b, b.TempDir(), o)
	defer l.Close()
	for l.Size() < 2*o.SegmentBytes {
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		for range 1024 {
			bl.Append(&batch.Record{Timestamp: 1, Value: make([]byte, 1000)})
		}
		out, err := bl.Build()
		if err != nil {
			b.Fatal(err)
		}
		mustAppend(b, l, append([]byte(nil), out...))
	}
	if err := l.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	s := l.ScrubCandidates()[0]
	buf := make([]byte, 1<<20)
	b.SetBytes(s.Size())
	b.ReportAllocs()
	for b.Loop() {
		res, err := l.Scrub(s, ScrubCursor{}, buf, func(int) error { return nil })
		if err != nil || !res.Done || len(res.Found) != 0 {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}
