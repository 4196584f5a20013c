package segment

import (
	"context"

	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// BenchmarkRead reads 16 KiB batches back from sealed segments through Log.Read (offset index
// lookup, header scan, Slice) and Slice.AppendTo, the path of every fetch, with the sealed
// segments' files always open (no FileCache), held by a FileCache that has room for them
// (a read marks its segment used), and by one so small that every read reopens its segment's
// file and closes another's (the worst case, of a broker reading more segments than
// log.max.open.files at once).
func BenchmarkRead(b *testing.B) {
	for _, mode := range []struct {
		name  string
		cache *FileCache
	}{{"no-cache", nil}, {"cache-hit", NewFileCache(1 << 10)}, {"cache-miss", NewFileCache(1)}} {
		b.Run(mode.name, func(b *testing.B) {
			o := Options{SegmentBytes: 1 << 20, Logger: quietLogger(), OpenFiles: mode.cache}
			l, err := Open(filepath.Join(b.TempDir(), "p"), o)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			payload := appendPayload(b, 16<<10)
			buf := make([]byte, len(payload))
			for len(l.Segments()) < 9 {
				copy(buf, payload)
				if _, err := l.Append(buf, 0); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			segs := l.Segments()
			end := l.EndOffset()
			var dst []byte
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Alternate between segments so a cache of 1 reopens at every read.
				s := segs[i%(len(segs)-1)]
				off := s.Base() + batch.Offset(i%7)
				sl, err := l.Read(off, len(payload), end)
				if err != nil {
					b.Fatal(err)
				}
				if dst, err = sl.AppendTo(dst[:0]); err != nil {
					b.Fatal(err)
				}
				sl.Release()
			}
		})
	}
}
