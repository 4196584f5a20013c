package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// Scrub tests: a byte flipped in a sealed, fsynced segment's file (as the disk would) is found
// by Scrub, marked, and from then on no read serves it; the reads around it go on working, and
// the mark goes with the bytes (truncation, retention). The log is on the real file system, so
// the scrub's reads go through vfs.ReadCold's Linux path.

// scrubLog opens a log on disk with segments of 16 KiB and appends n batches of about 1 KiB,
// synced: every segment but the active one is a scrub candidate.
func scrubLog(t *testing.T, n int) *Log {
	t.Helper()
	o := testOptions(vfs.Default)
	o.SegmentBytes = 8 << 10
	l := mustOpen(t, t.TempDir(), o)
	t.Cleanup(func() { _ = l.Close() })
	for i := range n {
		mustAppend(t, l, paddedBatch(t, fmt.Sprintf("b%d", i), 3, 300))
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// paddedBatch is a batch of n records, each value tag-i padded to pad bytes.
func paddedBatch(t *testing.T, tag string, n, pad int) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.DefaultBuilderOptions())
	for i := range n {
		v := fmt.Sprintf("%s-%d", tag, i)
		b.Append(&batch.Record{Timestamp: 1000, Value: append([]byte(v), bytes.Repeat([]byte{' '}, pad-len(v))...)})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// batchesOf returns the positions and base offsets of the batches in segment s's file.
func batchesOf(t *testing.T, l *Log, s *Segment) (pos []int64, base []batch.Offset) {
	t.Helper()
	data, err := os.ReadFile(segmentPath(l.dir, s.base, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	data = data[:s.Size()]
	for p := 0; p < len(data); {
		b, _, err := batch.Next(data[p:])
		if err != nil {
			t.Fatal(err)
		}
		pos, base = append(pos, int64(p)), append(base, b.BaseOffset())
		p += len(b)
	}
	return pos, base
}

// flip xors one byte of segment s's log file at pos, behind the log's back.
func flip(t *testing.T, l *Log, s *Segment, pos int64) {
	t.Helper()
	f, err := os.OpenFile(segmentPath(l.dir, s.base, logSuffix), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

// scrubAll scrubs s to its end with a 4 KiB buffer and no rate limit, returning the sizes
// wait was asked for.
func scrubAll(t *testing.T, l *Log, s *Segment) (ScrubResult, []int) {
	t.Helper()
	var waits []int
	res, err := l.Scrub(s, ScrubCursor{}, make([]byte, 4<<10), func(n int) error { waits = append(waits, n); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done {
		t.Fatalf("scrub not done: %+v", res)
	}
	return res, waits
}

func wantCorrupt(t *testing.T, l *Log, off batch.Offset) *CorruptDataError {
	t.Helper()
	s, err := l.Read(off, 1<<20, l.EndOffset())
	s.Release()
	var ce *CorruptDataError
	if !errors.Is(err, ErrCorruptData) || !errors.As(err, &ce) {
		t.Fatalf("Read(%d) = %d bytes, %v; want a CorruptDataError", off, s.Len, err)
	}
	return ce
}

func TestScrubFindsFlippedRecordByteAndReadsRefuseIt(t *testing.T) {
	l := scrubLog(t, 40)
	cands := l.ScrubCandidates()
	if len(cands) < 2 {
		t.Fatalf("%d scrub candidates, want at least 2", len(cands))
	}
	s := cands[0]
	pos, base := batchesOf(t, l, s)
	if len(pos) < 4 {
		t.Fatalf("segment has %d batches", len(pos))
	}
	flip(t, l, s, pos[2]+batch.HeaderSize+3) // inside the records: only the CRC can tell

	res, waits := scrubAll(t, l, s)
	if len(res.Found) != 1 {
		t.Fatalf("found %+v, want one bad batch", res.Found)
	}
	got := res.Found[0]
	if got.Segment != s.base || got.Pos != pos[2] || got.End != pos[3] || got.FirstOffset != base[2] || got.EndOffset != base[3] {
		t.Fatalf("found %s; want bytes [%d, %d), offsets [%d, %d)", got.String(), pos[2], pos[3], base[2], base[3])
	}
	if got.Reason == "" {
		t.Fatal("no reason given")
	}
	total := 0
	for _, n := range waits {
		if n > 4<<10 {
			t.Fatalf("wait(%d): more than a chunk at once", n)
		}
		total += n
	}
	if total < int(s.Size()) || res.Bytes < s.Size() {
		t.Fatalf("waited for %d bytes and read %d of a %d-byte segment", total, res.Bytes, s.Size())
	}

	// A read from the start is cut short before the bad batch, and serves good batches only.
	sl, err := l.Read(base[0], 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if sl.Pos != pos[0] || int64(sl.Len) != pos[2]-pos[0] {
		t.Fatalf("read from %d: bytes [%d, +%d), want [%d, %d)", base[0], sl.Pos, sl.Len, pos[0], pos[2])
	}
	sl.Release()
	if vs := values(t, readRange(t, l, base[0], base[2])); len(vs) != 6 {
		t.Fatalf("values before the bad batch: %v", vs)
	}
	// Reads of the bad batch, at its first offset or inside it, fail.
	for _, off := range []batch.Offset{base[2], base[2] + 1, base[3] - 1} {
		if ce := wantCorrupt(t, l, off); ce.Batch.Pos != pos[2] {
			t.Fatalf("error names %s", ce.Batch.String())
		}
	}
	// After it, the log reads on to its end.
	if got := readAll(t, l, base[3]); len(got) == 0 {
		t.Fatal("nothing after the bad batch")
	}
	if c := l.Corrupt(); len(c) != 1 || c[0] != got {
		t.Fatalf("Corrupt() = %+v", c)
	}
	// A second scrub finds it again but marks (and reports) nothing new.
	if again, _ := scrubAll(t, l, s); len(again.Found) != 0 {
		t.Fatalf("second scrub reported %+v", again.Found)
	}
}

func TestScrubBadLengthMarksRestOfSegment(t *testing.T) {
	l := scrubLog(t, 40)
	cands := l.ScrubCandidates()
	s, next := cands[0], cands[1]
	pos, base := batchesOf(t, l, s)
	flip(t, l, s, pos[1]+10) // batchLength's third byte: the batch's end moves by 4 KiB

	res, _ := scrubAll(t, l, s)
	if len(res.Found) != 1 {
		t.Fatalf("found %+v, want one stretch", res.Found)
	}
	got := res.Found[0]
	if got.Pos != pos[1] || got.End != s.Size() || got.FirstOffset != base[1] || got.EndOffset != next.base {
		t.Fatalf("found %s; want bytes [%d, %d), offsets [%d, %d)", got.String(), pos[1], s.Size(), base[1], next.base)
	}
	wantCorrupt(t, l, base[1])
	wantCorrupt(t, l, base[len(base)-1])
	if vs := values(t, readRange(t, l, base[0], base[1])); len(vs) != 3 {
		t.Fatalf("values before the bad batch: %v", vs)
	}
	if got := readAll(t, l, next.base); len(got) == 0 {
		t.Fatal("nothing in the next segment")
	}
}

func TestScrubLeavesActiveSegmentToRecovery(t *testing.T) {
	l := scrubLog(t, 12)
	segs := l.Segments()
	active := segs[len(segs)-1]
	for _, s := range l.ScrubCandidates() {
		if s == active {
			t.Fatal("the active segment is a scrub candidate")
		}
		if i := indexOf(segs, s); segs[i+1].base > l.SyncedOffset() {
			t.Fatalf("segment %d is a candidate with unsynced batches", s.base)
		}
	}
	pos, base := batchesOf(t, l, active)
	flip(t, l, active, pos[0]+batch.HeaderSize+3)
	res, err := l.Scrub(active, ScrubCursor{}, nil, func(int) error { t.Fatal("the active segment was read"); return nil })
	if err != nil || !res.Done || len(res.Found) != 0 {
		t.Fatalf("Scrub(active) = %+v, %v", res, err)
	}
	if s, err := l.Read(base[0], 1<<20, l.EndOffset()); err != nil {
		t.Fatalf("read of the active segment: %v", err) // served as is: recovery's business
	} else {
		s.Release()
	}
}

func indexOf(segs []*Segment, s *Segment) int {
	for i := range segs {
		if segs[i] == s {
			return i
		}
	}
	return -1
}

func TestScrubStopsOnWaitErrorAndResumes(t *testing.T) {
	l := scrubLog(t, 40)
	s := l.ScrubCandidates()[0]
	pos, _ := batchesOf(t, l, s)
	last := pos[len(pos)-1]
	flip(t, l, s, last+batch.HeaderSize+3)
	stop := errors.New("stop")
	calls := 0
	buf := make([]byte, 4<<10)
	res, err := l.Scrub(s, ScrubCursor{}, buf, func(int) error {
		if calls++; calls > 1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || res.Done || len(res.Found) != 0 || res.Next.Pos == 0 || res.Next.Pos > 4<<10 {
		t.Fatalf("Scrub = %+v, %v; want stopped after the first chunk", res, err)
	}
	res, err = l.Scrub(s, res.Next, buf, func(int) error { return nil })
	if err != nil || !res.Done || len(res.Found) != 1 || res.Found[0].Pos != last {
		t.Fatalf("resumed Scrub = %+v, %v", res, err)
	}
}

func TestScrubMarkGoesWithTheBytes(t *testing.T) {
	l := scrubLog(t, 40)
	s := l.ScrubCandidates()[0]
	pos, base := batchesOf(t, l, s)
	flip(t, l, s, pos[2]+batch.HeaderSize+3)
	if res, _ := scrubAll(t, l, s); len(res.Found) != 1 {
		t.Fatalf("found %+v", res.Found)
	}
	// A truncation to the bad batch cuts its bytes away: the mark goes, and the offsets are
	// written again, readable.
	if err := l.TruncateTo(base[2]); err != nil {
		t.Fatal(err)
	}
	if c := l.Corrupt(); len(c) != 0 {
		t.Fatalf("Corrupt() after truncation = %+v", c)
	}
	mustAppend(t, l, paddedBatch(t, "again", 3, 300))
	if vs := values(t, readAll(t, l, base[0])); len(vs) != 9 || !strings.HasPrefix(vs[6], "again-0") {
		t.Fatalf("values after truncation: %v", vs)
	}

	// Retention deleting a marked segment drops its mark.
	l2 := scrubLog(t, 40)
	s2 := l2.ScrubCandidates()[0]
	pos2, _ := batchesOf(t, l2, s2)
	flip(t, l2, s2, pos2[1]+batch.HeaderSize+3)
	if res, _ := scrubAll(t, l2, s2); len(res.Found) != 1 {
		t.Fatalf("found %+v", res.Found)
	}
	o := l2.opts
	o.RetentionBytes = l2.Size() - s2.Size()
	l2.Reconfigure(o)
	if _, err := l2.DeleteExpired(l2.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if l2.Segments()[0] == s2 {
		t.Fatal("retention kept the first segment")
	}
	if c := l2.Corrupt(); len(c) != 0 {
		t.Fatalf("Corrupt() after retention = %+v", c)
	}
}

// A cursor that is not a batch boundary of the segment (a damaged position file, or a position
// saved before a truncation rewrote the segment's bytes) must not have the scrub read a record's
// bytes as a header and mark good batches corrupt: the segment is scrubbed from its start.
func TestScrubStaleCursorMarksNothing(t *testing.T) {
	l := scrubLog(t, 40)
	s := l.ScrubCandidates()[0]
	pos, base := batchesOf(t, l, s)
	if len(pos) < 3 {
		t.Fatalf("%d batches in the segment, want at least 3", len(pos))
	}
	for _, at := range []ScrubCursor{
		{Pos: pos[1] + 7, Offset: base[1]}, // inside a batch
		{Pos: pos[2], Offset: base[1]},     // a boundary, but not the offset's batch
		{Pos: s.Size() + 100, Offset: base[1]},
	} {
		res, err := l.Scrub(s, at, make([]byte, 16<<10), func(int) error { return nil })
		if err != nil {
			t.Fatalf("Scrub from %+v: %v", at, err)
		}
		if !res.Done || len(res.Found) != 0 || len(l.Corrupt()) != 0 {
			t.Fatalf("Scrub from %+v: done %v, found %v, marks %v; want done and nothing marked", at, res.Done, res.Found, l.Corrupt())
		}
		if res.Bytes != s.Size() {
			t.Fatalf("Scrub from %+v read %d bytes, want the whole segment's %d", at, res.Bytes, s.Size())
		}
	}
	readAll(t, l, 0) // every batch still served
	// (A 16 KiB buffer holds the 8 KiB segment: the bytes read are the bytes scrubbed.)
	// A cursor Scrub itself returned is kept.
	res, err := l.Scrub(s, ScrubCursor{Pos: pos[2], Offset: base[2]}, make([]byte, 16<<10), func(int) error { return nil })
	if err != nil || res.Bytes != s.Size()-pos[2] {
		t.Fatalf("Scrub from a boundary: %d bytes, %v; want the %d from it", res.Bytes, err, s.Size()-pos[2])
	}
}

// A scrub in a closed log reports the close (ErrClosed), not a segment done: what it would
// find is not marked, and its caller must scrub the segment again in the log that replaces it.
func TestScrubOfClosedLogReportsClosed(t *testing.T) {
	l := scrubLog(t, 40)
	s := l.ScrubCandidates()[0]
	pos, _ := batchesOf(t, l, s)
	flip(t, l, s, pos[1]+100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := l.Scrub(s, ScrubCursor{}, make([]byte, 16<<10), func(int) error { return nil })
	if !errors.Is(err, ErrClosed) || res.Done || len(res.Found) != 0 {
		t.Fatalf("Scrub of a closed log: done %v, found %v, %v; want ErrClosed, not done", res.Done, res.Found, err)
	}
}
