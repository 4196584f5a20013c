package client

import "testing"

// The ring hands out spans in order, never wraps one, refuses what would overwrite a span not
// given back, and reuses space once it is.
func TestShmRingTakeGive(t *testing.T) {
	r := &shmRing{mem: make([]byte, 100)}
	type step struct {
		give    int64 // give back up to here first (0: nothing)
		take    int
		ok      bool
		pos     int
		end     int64
		comment string
	}
	for i, s := range []step{
		{take: 40, ok: true, pos: 0, end: 40},
		{take: 40, ok: true, pos: 40, end: 80},
		{take: 30, comment: "would wrap, and the start is in use"},
		{give: 40, take: 30, ok: true, pos: 0, end: 130, comment: "skips the last 20 bytes"},
		{take: 20, comment: "[30, 50) overlaps [40, 80), still in use"},
		{give: 80, take: 20, ok: true, pos: 30, end: 150},
		{take: 0, comment: "empty"},
		{take: 101, comment: "larger than the ring"},
		{give: 150, take: 100, ok: true, pos: 0, end: 300, comment: "the whole ring, after skipping to its start"},
		{take: 1, comment: "full"},
		{give: 300, take: 1, ok: true, pos: 0, end: 301},
	} {
		if s.give != 0 {
			r.give(s.give)
		}
		pos, end, ok := r.take(s.take)
		if ok != s.ok || (ok && (pos != s.pos || end != s.end)) {
			t.Fatalf("step %d (%s): take(%d) = %d, %d, %v; want %d, %d, %v", i, s.comment, s.take, pos, end, ok, s.pos, s.end, s.ok)
		}
	}
	r.give(10) // an older end changes nothing
	if r.tail.Load() != 300 {
		t.Fatalf("tail went back to %d", r.tail.Load())
	}
}
