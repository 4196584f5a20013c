package segment

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// makeBatch builds one uncompressed batch of n records whose values name the batch (tag) and
// the record, with timestamps ts, ts+1, ...
func makeBatch(t testing.TB, tag string, n int, ts int64) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.DefaultBuilderOptions())
	for i := range n {
		b.Append(&batch.Record{Timestamp: ts + int64(i), Key: []byte(tag), Value: []byte(fmt.Sprintf("%s-%d", tag, i))})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// sizedBatch builds one batch of about size bytes (one record).
func sizedBatch(t testing.TB, size int, ts int64) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.DefaultBuilderOptions())
	b.Append(&batch.Record{Timestamp: ts, Value: bytes.Repeat([]byte{'x'}, max(size-batch.HeaderSize-12, 1))})
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testOptions are small enough that tests roll, index and retain often. Their FileCache keeps
// 2 sealed segments' files open, so that every test reads through closed and reopened files.
func testOptions(fsys vfs.FS) Options {
	return Options{
		FS:                 fsys,
		SegmentBytes:       16 << 10,
		IndexIntervalBytes: 512,
		SegmentIndexBytes:  4 << 10,
		Logger:             quietLogger(),
		OpenFiles:          NewFileCache(2),
	}
}

func newMem(t testing.TB) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMemFS()
	if err := m.MkdirAll("/p", 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustOpen(t testing.TB, dir string, o Options) *Log {
	t.Helper()
	l, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(b, 7)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// readAll reads every batch in [from, end) through Read, checking each with Validate.
func readAll(t testing.TB, l *Log, from batch.Offset) []batch.Batch {
	t.Helper()
	return readRange(t, l, from, l.EndOffset())
}

// readRange reads every batch in [from, to) through Read, checking each with Validate.
func readRange(t testing.TB, l *Log, from, to batch.Offset) []batch.Batch {
	t.Helper()
	var out []batch.Batch
	off := from
	for off < to {
		s, err := l.Read(off, 1<<20, to)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		buf, err := s.AppendTo(nil)
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) == 0 {
			t.Fatalf("Read(%d) below %d returned nothing", off, to)
		}
		for len(buf) > 0 {
			b, rest, err := batch.Next(buf)
			if err != nil {
				break // partial batch at the end of a read
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("served a corrupt batch at offset %d: %v", b.BaseOffset(), err)
			}
			if b.LastOffset() >= off {
				out = append(out, b)
				off = b.NextOffset()
			}
			buf = rest
		}
	}
	return out
}

// values decodes the record values of batches, in order.
func values(t testing.TB, bs []batch.Batch) []string {
	t.Helper()
	var out []string
	for _, b := range bs {
		it := b.Iter(batch.IterOptions{})
		var r batch.Record
		for it.Next(&r) {
			out = append(out, string(r.Value))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// fakeClock is a settable clock for segment.ms and retention.ms.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
