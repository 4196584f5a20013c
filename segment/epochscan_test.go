package segment

import (
	"slices"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// ScanLeaderEpochs rebuilds the epoch cache of a log that has none from its batch headers:
// one entry per rise of the epoch, at the base of its first batch, across segments, and
// ignoring batches without an epoch or with a lower one than the last entry's.
func TestScanLeaderEpochs(t *testing.T) {
	o := testOptions(newMem(t))
	o.SegmentBytes = 2 << 10
	l := mustOpen(t, "/p", o)
	defer l.Close()
	if got, err := l.ScanLeaderEpochs(); err != nil || len(got) != 0 {
		t.Fatalf("empty log: %v, %v", got, err)
	}
	var want []EpochStart
	epochs := []int32{-1, -1, 0, 0, 0, 2, 2, 1, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6}
	for i, e := range epochs {
		for range 6 { // six batches per epoch step, so that epochs span segments
			b := makeBatch(t, "e", 2+i%3, int64(i))
			info, err := l.Append(b, e)
			if err != nil {
				t.Fatal(err)
			}
			if e >= 0 && (len(want) == 0 || e > want[len(want)-1].Epoch) {
				want = append(want, EpochStart{Epoch: e, StartOffset: info.FirstOffset})
			}
		}
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("%d segments, want several", len(l.Segments()))
	}
	got, err := l.ScanLeaderEpochs()
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ScanLeaderEpochs: %v, %v; want %v", got, err, want)
	}
	// After a truncation that cuts epoch 6 and part of 5 away, and a reopen.
	cut := want[len(want)-1].StartOffset - 5
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	want = want[:len(want)-1]
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, "/p", o)
	defer l.Close()
	if got, err := l.ScanLeaderEpochs(); err != nil || !slices.Equal(got, want) {
		t.Fatalf("after TruncateTo(%d) and a reopen: %v, %v; want %v", cut, got, err, want)
	}
}

// SyncedOffset, the durable end a follower reports, is lowered by a truncation to the new end
// and rises again only as the new bytes are synced.
func TestTruncateLowersSyncedOffset(t *testing.T) {
	l := mustOpen(t, "/p", testOptions(newMem(t)))
	defer l.Close()
	for i := 0; len(l.Segments()) < 3; i++ {
		mustAppend(t, l, makeBatch(t, "s", 10, int64(i)))
	}
	if err := l.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l.SyncedOffset() != l.EndOffset() {
		t.Fatalf("synced %d, end %d after Sync", l.SyncedOffset(), l.EndOffset())
	}
	for _, off := range []batch.Offset{l.EndOffset() - 5, l.Segments()[1].Base() + 3, 0} {
		if err := l.TruncateTo(off); err != nil {
			t.Fatal(err)
		}
		if s, e := l.SyncedOffset(), l.EndOffset(); s > e || e > off {
			t.Fatalf("TruncateTo(%d): synced %d, end %d", off, s, e)
		}
		mustAppend(t, l, makeBatch(t, "n", 10, 1))
		if s := l.SyncedOffset(); s > l.EndOffset() {
			t.Fatalf("synced %d past the end %d", s, l.EndOffset())
		}
	}
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if l.SyncedOffset() != 500 || l.EndOffset() != 500 {
		t.Fatalf("after TruncateFullyAndStartAt(500): synced %d, end %d", l.SyncedOffset(), l.EndOffset())
	}
}
