package segment

import (
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/batch"
)

// TestBytesFrom: the bytes of the batches at and past an offset, across segments; the batch
// holding the offset counts whole; 0 at the end; the whole log before the start.
func TestBytesFrom(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{SegmentBytes: 300})
	t.Cleanup(func() { _ = l.Close() })
	var ends []batch.Offset
	var sizes []int64
	for i := range 12 {
		before := l.Size()
		mustAppend(t, l, makeBatch(t, fmt.Sprintf("batch-%d-padding-padding-", i), 2, int64(i)))
		ends = append(ends, l.EndOffset())
		sizes = append(sizes, l.Size()-before)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("%d segments, want several", len(l.Segments()))
	}
	total := l.Size()
	for i, end := range ends {
		var want int64
		for _, s := range sizes[i+1:] {
			want += s
		}
		got, err := l.BytesFrom(end)
		if err != nil || got != want {
			t.Errorf("BytesFrom(%d) = %d, %v; want %d (the batches after the %dth)", end, got, err, want, i)
		}
		if i > 0 {
			// An offset inside batch i counts batch i whole.
			mid := ends[i-1] + 1
			if got, _ := l.BytesFrom(mid); got != want+sizes[i] {
				t.Errorf("BytesFrom(%d) = %d, want %d", mid, got, want+sizes[i])
			}
		}
	}
	if got, _ := l.BytesFrom(0); got != total {
		t.Errorf("BytesFrom(0) = %d, want the whole log %d", got, total)
	}
}
