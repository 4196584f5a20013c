package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// A follower copies its leader's batches unchanged through AppendAsFollower: offsets and
// leader epochs as the leader stamped them, every CRC checked, the first batch at the log end
// exactly and each next one where the previous ends. These tests pin each refusal (typed, and
// nothing appended), that the stamps and bytes are kept, and that what a follower appended
// recovers byte for byte, with the same index lookups, after a clean reopen and after a crash.

// widenBatch raises b's lastOffsetDelta by extra and fixes its CRC: the batch then spans offsets
// past its last record, as a batch does on a compacted leader. Validate accepts it;
// ValidateStrict (a producer's batch) does not.
func widenBatch(b []byte, extra int32) {
	const offLastOffsetDelta = 23
	d := int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(d+extra))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[batch.CRCStart:], castagnoli))
}

// leaderBatch is a batch of n records as a leader stamped it: base offset and leader epoch.
func leaderBatch(t testing.TB, tag string, n int, base batch.Offset, epoch int32) []byte {
	t.Helper()
	b := makeBatch(t, tag, n, 1000+int64(base))
	batch.Batch(b).SetBaseOffset(base)
	batch.Batch(b).SetPartitionLeaderEpoch(epoch)
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func TestAppendAsFollowerRefusals(t *testing.T) {
	badCRC := leaderBatch(t, "c", 3, 10, 1)
	badCRC[len(badCRC)-1] ^= 0xff
	overflow := leaderBatch(t, "o", 1, 10, 1)
	torn := leaderBatch(t, "t", 3, 10, 1)
	tests := []struct {
		name  string
		start batch.Offset // the log holds [start, 10) before; start 10 is an empty log at 10
		buf   []byte
		want  error
	}{
		{"empty request", 0, nil, ErrCorrupt},
		{"bad CRC", 0, badCRC, ErrCorrupt},
		{"bad CRC after a good batch", 0, cat(leaderBatch(t, "a", 2, 10, 1), badCRC), ErrCorrupt},
		{"torn batch", 0, torn[:len(torn)-5], ErrCorrupt},
		{"trailing bytes", 0, cat(leaderBatch(t, "a", 2, 10, 1), []byte{1, 2, 3}), ErrCorrupt},
		{"negative base", 0, leaderBatch(t, "a", 2, -5, 1), ErrCorrupt},
		{"offsets overflow", 0, func() []byte {
			batch.Batch(overflow).SetBaseOffset(1<<63 - 1)
			return overflow
		}(), ErrCorrupt},
		{"gap after the log end", 0, leaderBatch(t, "a", 2, 11, 1), ErrNotContiguous},
		{"overlap with the log", 0, leaderBatch(t, "a", 2, 9, 1), ErrNotContiguous},
		{"restart far below", 0, leaderBatch(t, "a", 2, 0, 1), ErrNotContiguous},
		{"gap between batches", 0, cat(leaderBatch(t, "a", 2, 10, 1), leaderBatch(t, "b", 2, 13, 1)), ErrNotContiguous},
		{"overlap between batches", 0, cat(leaderBatch(t, "a", 2, 10, 1), leaderBatch(t, "b", 2, 11, 1)), ErrNotContiguous},
		{"same batch twice", 0, cat(leaderBatch(t, "a", 2, 10, 1), leaderBatch(t, "a", 2, 10, 1)), ErrNotContiguous},
		{"empty log: gap", 10, leaderBatch(t, "a", 2, 12, 1), ErrNotContiguous},
		{"empty log: below its start", 10, leaderBatch(t, "a", 2, 0, 1), ErrNotContiguous},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := mustOpen(t, "/p", testOptions(newMem(t)))
			defer l.Close()
			if tc.start == 10 {
				if err := l.TruncateFullyAndStartAt(10); err != nil {
					t.Fatal(err)
				}
			} else if _, err := l.AppendAsFollower(leaderBatch(t, "base", 10, 0, 1)); err != nil {
				t.Fatal(err)
			}
			end, size := l.EndOffset(), l.Size()
			buf := append([]byte(nil), tc.buf...)
			_, err := l.AppendAsFollower(buf)
			if !errors.Is(err, tc.want) {
				t.Fatalf("AppendAsFollower: %v, want %v", err, tc.want)
			}
			if errors.Is(tc.want, ErrNotContiguous) && !errors.Is(err, ErrOffsetOrder) {
				t.Fatalf("%v does not wrap ErrOffsetOrder (broker/errors.go maps it)", err)
			}
			if l.EndOffset() != end || l.Size() != size || l.Err() != nil {
				t.Fatalf("after the refusal: end %d size %d err %v, want end %d size %d and no error", l.EndOffset(), l.Size(), l.Err(), end, size)
			}
			if !bytes.Equal(buf, tc.buf) {
				t.Fatal("a refused append modified its buffer")
			}
			// The log still takes the right batch.
			if _, err := l.AppendAsFollower(leaderBatch(t, "next", 2, end, 1)); err != nil {
				t.Fatalf("the append at the log end after the refusal: %v", err)
			}
		})
	}
	// The contiguity message names both offsets, for the driver's log line.
	l := mustOpen(t, "/p", testOptions(newMem(t)))
	defer l.Close()
	_, err := l.AppendAsFollower(leaderBatch(t, "a", 2, 7, 1))
	if want := "first offset 7, want the log end 0"; err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("error %v, want it to say %q", err, want)
	}
}

// followerLog appends n leader batches from start, in requests of 1 to 3 batches, epochs
// changing every 7 batches, one batch in 5 widened past its records; it returns the bytes in
// log order.
func followerLog(t testing.TB, l *Log, start batch.Offset, n int) []byte {
	t.Helper()
	var all []byte
	next := start
	for i := 0; i < n; {
		var req []byte
		for k := 0; k < 1+i%3 && i < n; k++ {
			b := leaderBatch(t, fmt.Sprintf("f%d", i), 1+i%4, next, int32(3+i/7))
			if i%5 == 2 {
				widenBatch(b, 2)
			}
			next = batch.Batch(b).NextOffset()
			req = append(req, b...)
			i++
		}
		info, err := l.AppendAsFollower(append([]byte(nil), req...))
		if err != nil {
			t.Fatal(err)
		}
		if info.LastOffset != next-1 || l.EndOffset() != next {
			t.Fatalf("append: last %d, end %d; want %d, %d", info.LastOffset, l.EndOffset(), next-1, next)
		}
		all = append(all, req...)
	}
	return all
}

func TestAppendAsFollowerKeepsStampsAndRecovers(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 4 << 10 // several segments
	l := mustOpen(t, "/p", o)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	want := followerLog(t, l, 1000, 120)
	if len(l.Segments()) < 3 {
		t.Fatalf("%d segments, want the log to have rolled", len(l.Segments()))
	}
	check := func(stage string, l *Log) {
		t.Helper()
		if l.StartOffset() != 1000 {
			t.Fatalf("%s: start %d, want 1000", stage, l.StartOffset())
		}
		var got []byte
		for _, b := range readAll(t, l, 1000) {
			got = append(got, b...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the log's %d bytes differ from the leader's %d", stage, len(got), len(want))
		}
		// Every offset, a record's or a hole's, is found in the batch that spans it.
		for rest := want; len(rest) > 0; {
			b, r, _ := batch.Next(rest)
			for off := b.BaseOffset(); off <= b.LastOffset(); off++ {
				s, err := l.Read(off, 1, l.EndOffset())
				if err != nil {
					t.Fatalf("%s: Read(%d): %v", stage, off, err)
				}
				buf, err := s.AppendTo(nil)
				s.Release()
				if err != nil || !bytes.HasPrefix(buf, b) {
					t.Fatalf("%s: Read(%d) does not start with the batch at %d (%v)", stage, off, b.BaseOffset(), err)
				}
			}
			ts := batch.Batch(b).MaxTimestamp()
			if off, _, ok, err := l.OffsetForTimestamp(ts); err != nil || !ok || off < b.BaseOffset() || off > b.LastOffset() {
				t.Fatalf("%s: OffsetForTimestamp(%d) = %d, %v, %v; want in [%d, %d]", stage, ts, off, ok, err, b.BaseOffset(), b.LastOffset())
			}
			rest = r
		}
	}
	check("appended", l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, "/p", o)
	check("reopened", l)

	// More appends, synced, then a crash: recovery scans what follows the recovery point.
	want = append(want, followerLog(t, l, l.EndOffset(), 40)...)
	if err := l.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := m.Crash(vfs.CrashOptions{})
	o.FS = after
	o.OpenFiles = NewFileCache(2)
	l2 := mustOpen(t, "/p", o)
	defer l2.Close()
	check("after a crash", l2)
	l.Close()
}

// BenchmarkAppendAsFollower appends 16 KiB requests of leader-stamped batches (CRC checked,
// offsets checked, nothing stamped) at the log end, as a replica fetcher does.
func BenchmarkAppendAsFollower(b *testing.B) {
	payload := appendPayload(b, 16<<10)
	l, err := Open(filepath.Join(b.TempDir(), "p"), Options{RetentionBytes: 256 << 20, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	span := batch.Batch(payload).NextOffset() - batch.Batch(payload).BaseOffset()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		batch.Batch(payload).SetBaseOffset(batch.Offset(i) * span) // outside the CRC
		if _, err := l.AppendAsFollower(payload); err != nil {
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
	b.StopTimer()
}

// TestAppendAsFollowerLargerThanSegment: a follower's fetch response (up to
// replica.fetch.max.bytes, 1 MiB) may hold more bytes than segment.bytes, each of its batches
// fitting (the leader appended them one produce at a time). AppendAsFollower appends them all,
// rolling between batches as the leader did, rather than refuse the response ErrTooLarge: the
// follower would fetch the same bytes again and never get past them. One batch larger than a
// segment is still refused, and nothing of it is appended.
func TestAppendAsFollowerLargerThanSegment(t *testing.T) {
	o := testOptions(newMem(t)) // 16 KiB segments
	l := mustOpen(t, "/p", o)
	defer l.Close()
	var bufs [][]byte
	off := batch.Offset(0)
	for i := range 10 { // 10 × ~6 KiB: 60 KiB, several segments' worth
		b := sizedBatch(t, 6<<10, int64(1000+i))
		batch.Batch(b).SetBaseOffset(off)
		batch.Batch(b).SetPartitionLeaderEpoch(3)
		off = batch.Batch(b).NextOffset()
		bufs = append(bufs, b)
	}
	info, err := l.AppendAsFollower(cat(bufs...))
	if err != nil {
		t.Fatalf("AppendAsFollower of %d bytes in %d batches: %v", len(cat(bufs...)), len(bufs), err)
	}
	if info.FirstOffset != 0 || info.LastOffset != off-1 || info.Batches != len(bufs) {
		t.Fatalf("info %+v, want offsets [0, %d] in %d batches", info, off-1, len(bufs))
	}
	if l.EndOffset() != off {
		t.Fatalf("log end %d, want %d", l.EndOffset(), off)
	}
	got := readAll(t, l, 0)
	if len(got) != len(bufs) {
		t.Fatalf("read %d batches, want %d", len(got), len(bufs))
	}
	for i, b := range got {
		if !bytes.Equal(b, bufs[i]) {
			t.Fatalf("batch %d differs from the leader's", i)
		}
	}
	if n := len(l.Segments()); n < 4 {
		t.Fatalf("%d segments, want the batches spread over at least 4 of 16 KiB", n)
	}

	big := sizedBatch(t, 20<<10, 2000)
	batch.Batch(big).SetBaseOffset(off)
	if _, err := l.AppendAsFollower(big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a batch larger than a segment: %v, want ErrTooLarge", err)
	}
	if l.EndOffset() != off {
		t.Fatalf("log end %d after the refusal, want %d", l.EndOffset(), off)
	}
}
