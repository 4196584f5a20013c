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
// Bounded: a fixed number of appends. Every 100 of them the appender waits (polling, at most
// ten seconds) until each reader has read and the scrubber has passed over the log since, so
// that the load mixes however a loaded machine schedules the goroutines.
func TestTruncateUnderLoad(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		o := testOptions(fsys)
		o.SegmentBytes = 8 << 10
		o.OpenFiles = NewFileCache(1)
		l := mustOpen(t, dir, o)
		defer l.Close()

		const appends = 3000
		var stop atomic.Bool
		var wg sync.WaitGroup
		var failed atomic.Pointer[string]
		fail := func(msg string) {
			failed.CompareAndSwap(nil, &msg)
			stop.Store(true)
		}
		var truncations, reads, rereads, scrubbed, scrubPasses atomic.Int64
		var readsBy [2]atomic.Int64
		// waitFor polls until cond holds, or the load stops, or ten seconds pass: then the
		// goroutines it waits for were starved, and the test fails saying so.
		waitFor := func(what string, cond func() bool) bool {
			limit := time.Now().Add(10 * time.Second)
			for !cond() {
				if stop.Load() {
					return false
				}
				if time.Now().After(limit) {
					fail("starved: " + what)
					return false
				}
				runtime.Gosched()
			}
			return true
		}
		// mixed waits until each reader has read and the scrubber has made a whole pass (and
		// scrubbed a segment, if there was one to scrub) since it was called.
		mixed := func() bool {
			r0, r1, p, sc := readsBy[0].Load(), readsBy[1].Load(), scrubPasses.Load(), scrubbed.Load()
			candidates := len(l.ScrubCandidates()) > 0
			return waitFor("readers or scrubber made no progress", func() bool {
				return readsBy[0].Load() > r0 && readsBy[1].Load() > r1 && scrubPasses.Load() >= p+2 &&
					(!candidates || scrubbed.Load() > sc)
			})
		}
		emptied := newEmptiedSegments()

		wg.Add(1)
		go func() { // appender and, every so often, truncator: a follower's two writers
			defer wg.Done()
			defer stop.Store(true)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < appends && !stop.Load(); i++ {
				if _, err := l.Append(makeBatch(t, "s", 1+rng.IntN(8), int64(i)), int32(i/100)); err != nil {
					fail("append: " + err.Error())
					return
				}
				switch {
				case i%400 == 399: // before i%50 == 49, which it implies
					if _, err := l.DeleteExpired(l.EndOffset() / 2); err != nil {
						fail("retention: " + err.Error())
						return
					}
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
					emptied.note(l)
					truncations.Add(1)
				}
				if i%100 == 0 && !mixed() {
					return
				}
			}
			// The readers' held Slices and the scrub of what the last truncations left.
			if err := l.Sync(context.Background()); err != nil {
				fail("sync: " + err.Error())
				return
			}
			waitFor("no re-read or scrub", func() bool { return rereads.Load() > 0 && scrubbed.Load() > 0 })
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
					if rng.IntN(8) == 0 { // a ListOffsets by time: an answer or none, never an error
						if _, _, _, err := l.OffsetForTimestamp(int64(rng.IntN(3000))); err != nil {
							fail("offset for timestamp: " + err.Error())
							return
						}
					}
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
					readsBy[r].Add(1)
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
						if h.s.Truncated() && n > 0 && !bytes.Equal(again[:n], h.first[:n]) && !emptied.since(h.s) {
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
				scrubPasses.Add(1)
				runtime.Gosched()
			}
		}()
		wg.Wait()
		t.Logf("%d truncations, %d reads, %d re-reads, %d scrubs in %d passes", truncations.Load(), reads.Load(), rereads.Load(), scrubbed.Load(), scrubPasses.Load())
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

// emptiedSegments records the truncations that emptied a segment (a cut inside its first
// batch), after which appends go on in that file from its start: the exception of Slice's
// contract, where a Slice made before may read new bytes (and reports Truncated).
type emptiedSegments struct {
	mu   sync.Mutex
	cuts map[*Segment]uint64 // the segment's cuts after the last truncation that emptied it
}

func newEmptiedSegments() *emptiedSegments {
	return &emptiedSegments{cuts: make(map[*Segment]uint64)}
}

// note records, after a truncation of l and before any append, the active segment if the
// truncation emptied it.
func (e *emptiedSegments) note(l *Log) {
	segs := l.Segments()
	s := segs[len(segs)-1]
	if s.Size() != 0 || s.cuts.Load() == 0 {
		return // not emptied, or a new segment that a roll started
	}
	e.mu.Lock()
	e.cuts[s] = s.cuts.Load()
	e.mu.Unlock()
}

// since reports whether a truncation emptied the Slice's segment after the Slice was made.
func (e *emptiedSegments) since(sl Slice) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.cuts[sl.seg]
	return ok && c > sl.cuts
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
