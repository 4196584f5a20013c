package segment

import (
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// The remembered tail batches answer locate exactly as the offset index and the file do, for
// every offset and for limits below the segment's size (a reader that loaded the size before
// later appends), across offset gaps (a follower's appends) and a truncation; and they do
// answer reads of the last batches, which is what they are for.
func TestRecentBatchesAgreeWithTheFile(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 1 << 20 // one segment
	l := mustOpen(t, "/p", o)
	defer l.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	next := batch.Offset(0)
	var ends []int64 // segment size after each append
	check := func(stage string) {
		t.Helper()
		s := l.active
		size := s.size.Load()
		limits := []int64{size}
		for range 3 {
			if len(ends) > 0 {
				limits = append(limits, ends[rng.IntN(len(ends))])
			}
		}
		answered := 0
		var hdrA, hdrB [batch.HeaderSize]byte
		for _, limit := range limits {
			for off := batch.Offset(-1); off <= next+2; off++ {
				pos, h, found, ok := recentOf(s).locate(off, limit, &hdrA)
				if !ok {
					continue
				}
				answered++
				wantPos, wantH, wantFound, err := s.locateInFile(off, limit, &hdrB)
				if err != nil {
					t.Fatal(err)
				}
				if pos != wantPos || found != wantFound || (found && string(h) != string(wantH)) {
					t.Fatalf("%s: locate(%d, limit %d) from memory: pos %d found %v; from the file: pos %d found %v",
						stage, off, limit, pos, found, wantPos, wantFound)
				}
			}
		}
		if answered == 0 {
			t.Fatalf("%s: the remembered batches answered nothing", stage)
		}
	}
	appendSome := func(n int) {
		for range n {
			b := makeBatch(t, "r", 1+rng.IntN(5), 1)
			if rng.IntN(4) == 0 {
				widenBatch(b, int32(1+rng.IntN(3))) // offsets without records, as after compaction upstream
			}
			batch.Batch(b).SetBaseOffset(next)
			info, err := l.AppendAsFollower(b)
			if err != nil {
				t.Fatal(err)
			}
			next = info.LastOffset + 1
			ends = append(ends, l.active.size.Load())
		}
	}
	appendSome(10) // fewer than the ring holds
	check("10 batches")
	appendSome(100) // the ring has wrapped
	check("110 batches")
	// The last batch is found from memory, without the file.
	var hdr [batch.HeaderSize]byte
	if _, _, found, ok := l.active.recent.Load().locate(next-1, l.active.size.Load(), &hdr); !ok || !found {
		t.Fatalf("the last batch: found %v, answered %v", found, ok)
	}
	if err := l.TruncateTo(next - 20); err != nil {
		t.Fatal(err)
	}
	next = l.EndOffset()
	ends = ends[:0]
	if _, _, _, ok := l.active.recent.Load().locate(next-1, l.active.size.Load(), &hdr); ok {
		t.Fatal("remembered batches survived a truncation")
	}
	appendSome(40)
	check("after a truncation")
	got := readAll(t, l, 0)
	if len(got) == 0 || got[len(got)-1].NextOffset() != next {
		t.Fatalf("read back %d batches ending at %d, want the end %d", len(got), got[len(got)-1].NextOffset(), next)
	}
}

// recentOf is s's ring, or an empty one for a sealed segment (which answers nothing).
func recentOf(s *Segment) *recentBatches {
	if r := s.recent.Load(); r != nil {
		return r
	}
	return new(recentBatches)
}
