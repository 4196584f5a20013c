package segment

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// TestTruncateUnderLoad runs appends, reads (Read then AppendTo, and sendfile-shaped reads
// that go back to the Slice's file at its position after the log has moved on), scrubs and
// TruncateTo's at once on a log of small segments whose FileCache holds one file, so that
// truncations land in sealed segments the cache closed, readers reopen files a truncation is
// pinning, and scrubs run over segments being cut. Run it with -race: it is the test of the
// three races of issue #21 (FileCache pinFile against acquireFile, readFrom loading the file
// without fileMu, a scrub's finding marked after a truncation rewrote its bytes). It checks
// TruncateTo's contract for reads in flight (Slice): a read of a Slice made before a
// truncation returns a prefix of the bytes it first read, or its segment reports the cut
// (Truncated); every batch served passes its CRC; the scrub, over a log whose bytes are all
// good, marks nothing; and the log ends intact (every batch readable, end as appended).
// Bounded: a fixed number of appends, or two seconds, whichever comes first.
func TestTruncateUnderLoad(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		o := testOptions(fsys)
		o.SegmentBytes = 8 << 10
		o.OpenFiles = NewFileCache(1)
		l := mustOpen(t, dir, o)
		defer l.Close()

		const appends = 3000
		deadline := time.Now().Add(2 * time.Second)
		var stop atomic.Bool
		var wg sync.WaitGroup
		var failed atomic.Pointer[string]
		fail := func(msg string) {
			failed.CompareAndSwap(nil, &msg)
			stop.Store(true)
		}
		var truncations, reads, rereads, scrubbed atomic.Int64

		wg.Add(1)
		go func() { // appender and, every so often, truncator: a follower's two writers
			defer wg.Done()
			defer stop.Store(true)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < appends && !stop.Load() && time.Now().Before(deadline); i++ {
				if _, err := l.Append(makeBatch(t, "s", 1+rng.IntN(8), int64(i)), int32(i/100)); err != nil {
					fail("append: " + err.Error())
					return
				}
				switch {
				case i%50 == 49:
					if err := l.Sync(context.Background()); err != nil { // scrub candidates
						fail("sync: " + err.Error())
						return
					}
				case i%37 == 36:
					start, end := l.StartOffset(), l.EndOffset()
					off := end - batch.Offset(rng.IntN(int(min(end-start, 200))+1))
					if err := l.TruncateTo(off); err != nil {
						fail("truncate: " + err.Error())
						return
					}
					if l.EndOffset() > off || l.SyncedOffset() > l.EndOffset() {
						fail("truncation left the end or synced offset past the cut")
						return
					}
					truncations.Add(1)
				case i%400 == 399:
					if _, err := l.DeleteExpired(l.EndOffset() / 2); err != nil {
						fail("retention: " + err.Error())
						return
					}
				}
			}
		}()

		for r := range 2 {
			wg.Add(1)
			go func() { // readers: random offsets, half of them reading their Slice again later
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 7))
				var held []heldSlice
				for !stop.Load() {
					start, end := l.StartOffset(), l.EndOffset()
					if end == start {
						runtime.Gosched()
						continue
					}
					off := start + batch.Offset(rng.IntN(int(end-start)))
					s, err := l.Read(off, 1+rng.IntN(4<<10), end)
					if errors.Is(err, ErrOffsetOutOfRange) || errors.Is(err, ErrReopen) {
						continue // moved by a truncation or retention meanwhile
					}
					if err != nil {
						fail("read: " + err.Error())
						return
					}
					first, err := s.AppendTo(nil)
					if errors.Is(err, ErrTruncated) {
						s.Release()
						continue
					}
					if err != nil {
						fail("AppendTo: " + err.Error())
						return
					}
					if msg := checkBatches(first); msg != "" {
						fail(msg)
						return
					}
					reads.Add(1)
					if rng.IntN(2) == 0 || s.Len == 0 {
						s.Release()
						continue
					}
					held = append(held, heldSlice{s, first})
					if len(held) > 4 { // the sendfile: the Slice's file, at its position, later
						h := held[0]
						held = held[1:]
						again := make([]byte, h.s.Len)
						n, _ := h.s.File.ReadAt(again, h.s.Pos)
						if !h.s.Truncated() && !bytes.Equal(again[:n], h.first[:n]) {
							fail("a Slice read again returned other bytes than it first did, with no cut reported")
							return
						}
						if h.s.Truncated() && n > 0 && !bytes.Equal(again[:n], h.first[:n]) && h.s.seg.size.Load() > 0 && !cutInFirstBatch(h) {
							fail("a Slice of a segment cut and rolled returned new bytes at its positions")
							return
						}
						h.s.Release()
						rereads.Add(1)
					}
				}
				for _, h := range held {
					h.s.Release()
				}
			}()
		}

		wg.Add(1)
		go func() { // scrubber
			defer wg.Done()
			buf := make([]byte, 4<<10)
			for !stop.Load() {
				for _, s := range l.ScrubCandidates() {
					res, err := l.Scrub(s, ScrubCursor{}, buf, func(int) error { return nil })
					if err != nil && !errors.Is(err, ErrReopen) {
						fail("scrub: " + err.Error())
						return
					}
					if len(res.Found) > 0 {
						fail("the scrub marked a good batch: " + res.Found[0].String())
						return
					}
					scrubbed.Add(1)
				}
				runtime.Gosched()
			}
		}()
		wg.Wait()
		if msg := failed.Load(); msg != nil {
			t.Fatal(*msg)
		}
		if c := l.Corrupt(); len(c) > 0 {
			t.Fatalf("corrupt marks on a good log: %v", c)
		}
		if truncations.Load() == 0 || reads.Load() == 0 || rereads.Load() == 0 || scrubbed.Load() == 0 {
			t.Fatalf("the load did not mix: %d truncations, %d reads, %d re-reads, %d scrubs",
				truncations.Load(), reads.Load(), rereads.Load(), scrubbed.Load())
		}
		// Whole and contiguous at the end, as a reopen finds it.
		bs := readAll(t, l, l.StartOffset())
		for i := 1; i < len(bs); i++ {
			if bs[i].BaseOffset() != bs[i-1].NextOffset() {
				t.Fatalf("batch at %d follows one ending before %d", bs[i].BaseOffset(), bs[i-1].NextOffset())
			}
		}
		end := l.EndOffset()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, dir, o)
		if l.EndOffset() != end || len(readAll(t, l, l.StartOffset())) != len(bs) {
			t.Fatalf("reopened: end %d with %d batches, want %d with %d", l.EndOffset(), len(readAll(t, l, l.StartOffset())), end, len(bs))
		}
	})
}

type heldSlice struct {
	s     Slice
	first []byte
}

// cutInFirstBatch reports whether the held slice's segment may have been emptied by a cut (the
// exception of Slice's contract): it now holds fewer bytes than the slice's first batch ends at.
func cutInFirstBatch(h heldSlice) bool {
	return h.s.Pos == 0 || h.s.seg.size.Load() <= h.s.Pos
}

// checkBatches says what is wrong with buf, whole batches and perhaps a partial one at the
// end, or "".
func checkBatches(buf []byte) string {
	for len(buf) > 0 {
		b, rest, err := batch.Next(buf)
		if err != nil {
			return "" // a partial batch at the end
		}
		if err := b.Validate(); err != nil {
			return "served a corrupt batch: " + err.Error()
		}
		buf = rest
	}
	return ""
}

// TestScrubFindingOutlivedByTruncation is the race of a scrub's mark against a truncation,
// made deterministic with the scrub's wait hook: the scrub has read a bad batch of a sealed
// segment when, before it marks it, a truncation empties that segment, new batches fill it
// again past the bad stretch's end and it is sealed and synced once more. The finding names
// bytes that are gone: nothing may be marked, and the new batches must read back.
func TestScrubFindingOutlivedByTruncation(t *testing.T) {
	m := newMem(t)
	l := mustOpen(t, "/p", testOptions(m))
	defer l.Close()
	for i := 0; len(l.Segments()) < 3; i++ {
		mustAppend(t, l, makeBatch(t, "old", 20, int64(i)))
	}
	if err := l.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := l.Segments()[0]
	bs := readRange(t, l, s.base, l.Segments()[1].base)
	// Flip a record byte of the segment's second batch on the disk.
	f, err := m.OpenReadWrite(segmentPath("/p", s.base, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{'X'}, int64(len(bs[0])+len(bs[1])-3)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	refilled := false
	wait := func(n int) error {
		if n != batch.HeaderSize || refilled { // skip's read of the header after the bad batch
			return nil
		}
		refilled = true
		if err := l.TruncateTo(s.base); err != nil {
			return err
		}
		for i := 0; len(l.Segments()) < 2; i++ {
			mustAppend(t, l, makeBatch(t, "new", 20, int64(i)))
		}
		return l.Sync(t.Context())
	}
	res, err := l.Scrub(s, ScrubCursor{}, make([]byte, 4<<10), wait)
	if err != nil {
		t.Fatal(err)
	}
	if !refilled {
		t.Fatal("the scrub found no bad batch: the test did not interleave the truncation")
	}
	if len(res.Found) > 0 || len(l.Corrupt()) > 0 {
		t.Fatalf("a finding from before the truncation was marked on new bytes: %v", l.Corrupt())
	}
	if s.Size() < int64(len(bs[0])+len(bs[1])) || !slices.Contains(l.ScrubCandidates(), s) {
		t.Fatal("the segment was not refilled and sealed past the bad stretch: the test proves nothing")
	}
	for _, v := range values(t, readAll(t, l, s.base)) {
		if !strings.HasPrefix(v, "new-") {
			t.Fatalf("read %q after the truncation, want only new records", v)
		}
	}
}
