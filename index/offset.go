package index

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// Frozen format constants.
const (
	OffsetEntrySize = 8
	TimeEntrySize   = 12
)

// RelOffset is an offset relative to its segment's base offset.
type RelOffset uint32

// Pos is a byte position in a segment's log file. Segments are capped below 4 GiB so that a
// position fits the index's 32 bits.
type Pos uint32

// OffsetEntry maps the base offset of a batch to its position in the segment.
type OffsetEntry struct {
	Offset batch.Offset
	Pos    Pos
}

// OffsetIndex is a segment's sparse offset index.
type OffsetIndex struct {
	base batch.Offset
	f    *entryFile
}

// OpenOffsetIndex opens or creates the offset index at path for the segment starting at base.
// A writable index is preallocated to maxBytes. It does not check the entries against the log;
// call Check for that.
func OpenOffsetIndex(fsys vfs.FS, path string, base batch.Offset, maxBytes int, writable bool) (*OffsetIndex, error) {
	f, err := openEntryFile(fsys, path, OffsetEntrySize, maxBytes, writable, func(b []byte) bool {
		// Position 0 is never indexed, so it marks an unused entry.
		return binary.BigEndian.Uint32(b[4:8]) == 0
	})
	if err != nil {
		return nil, err
	}
	return &OffsetIndex{base: base, f: f}, nil
}

func (x *OffsetIndex) decode(b []byte) OffsetEntry {
	return OffsetEntry{
		Offset: x.base + batch.Offset(binary.BigEndian.Uint32(b[0:4])),
		Pos:    Pos(binary.BigEndian.Uint32(b[4:8])),
	}
}

// Base is the segment's base offset.
func (x *OffsetIndex) Base() batch.Offset { return x.base }

// Len is the number of entries.
func (x *OffsetIndex) Len() int { return x.f.len() }

// Full reports whether the index can take no more entries (the segment must roll).
func (x *OffsetIndex) Full() bool { return x.f.full() }

// Entry returns entry i, 0 <= i < Len(), or (base, 0) when i is not an entry (any more: a
// truncation may have come between Len and Entry).
func (x *OffsetIndex) Entry(i int) (e OffsetEntry) {
	if !x.f.read(i, func(b []byte) { e = x.decode(b) }) {
		return OffsetEntry{Offset: x.base}
	}
	return e
}

// Lookup returns the entry with the greatest offset <= target, or (base, 0) when there is none:
// the position from which a forward scan finds the batch holding target. It does not allocate.
// The search and the read of the entry it finds are one step: a truncation or trim running
// meanwhile (which may shrink or replace the mapping) comes before or after both.
func (x *OffsetIndex) Lookup(target batch.Offset) (e OffsetEntry) {
	if target < x.base {
		return OffsetEntry{Offset: x.base}
	}
	rel := uint64(target - x.base)
	if !x.f.find(func(b []byte) bool { return uint64(binary.BigEndian.Uint32(b[0:4])) <= rel },
		func(b []byte) { e = x.decode(b) }) {
		return OffsetEntry{Offset: x.base}
	}
	return e
}

// LookupPos returns the entry with the greatest position <= pos, or (base, 0); as Lookup, in
// one step.
func (x *OffsetIndex) LookupPos(pos Pos) (e OffsetEntry) {
	if !x.f.find(func(b []byte) bool { return Pos(binary.BigEndian.Uint32(b[4:8])) <= pos },
		func(b []byte) { e = x.decode(b) }) {
		return OffsetEntry{Offset: x.base}
	}
	return e
}

// Append adds an entry. Offsets and positions must strictly increase, and pos must be > 0.
func (x *OffsetIndex) Append(off batch.Offset, pos Pos) error {
	rel := off - x.base
	if off < x.base || rel > batch.Offset(^uint32(0)) || pos == 0 {
		return fmt.Errorf("%w: offset %d position %d in index based at %d", ErrOrder, off, pos, x.base)
	}
	if n := x.Len(); n > 0 {
		last := x.Entry(n - 1)
		if off <= last.Offset || pos <= last.Pos {
			return fmt.Errorf("%w: (%d, %d) after (%d, %d)", ErrOrder, off, pos, last.Offset, last.Pos)
		}
	}
	return x.f.append(func(b []byte) {
		binary.BigEndian.PutUint32(b[0:4], uint32(rel))
		binary.BigEndian.PutUint32(b[4:8], uint32(pos))
	})
}

// TruncateTo drops the entries for offsets >= off.
func (x *OffsetIndex) TruncateTo(off batch.Offset) error {
	if off <= x.base {
		return x.f.truncate(0)
	}
	rel := uint64(off - x.base)
	keep := x.f.search(func(b []byte) bool { return uint64(binary.BigEndian.Uint32(b[0:4])) < rel })
	return x.f.truncate(keep)
}

// TruncateToPos drops the entries at positions >= pos.
func (x *OffsetIndex) TruncateToPos(pos Pos) error {
	keep := x.f.search(func(b []byte) bool { return Pos(binary.BigEndian.Uint32(b[4:8])) < pos })
	return x.f.truncate(keep)
}

// Check verifies that entries strictly increase and point inside a log of logSize bytes.
func (x *OffsetIndex) Check(logSize int64) error {
	var prev OffsetEntry
	for i := range x.Len() {
		e := x.Entry(i)
		if i > 0 && (e.Offset <= prev.Offset || e.Pos <= prev.Pos) {
			return fmt.Errorf("%w: %s: entry %d (%d, %d) after (%d, %d)", ErrCorrupt, x.f.path, i, e.Offset, e.Pos, prev.Offset, prev.Pos)
		}
		if int64(e.Pos) >= logSize {
			return fmt.Errorf("%w: %s: entry %d position %d beyond log size %d", ErrCorrupt, x.f.path, i, e.Pos, logSize)
		}
		prev = e
	}
	return nil
}

// Flush makes the entries appended so far durable.
func (x *OffsetIndex) Flush() error { return x.f.flush() }

// Trim shrinks the file to its entries, syncs it, and makes the index read-only.
func (x *OffsetIndex) Trim() error { return x.f.trim() }

// MakeWritable reverses Trim.
func (x *OffsetIndex) MakeWritable(maxBytes int) error { return x.f.makeWritable(maxBytes) }

// Prefault faults in the pages the next entries will be written to, up to 32 KiB ahead, so that
// Append takes no page fault (a writer's first store to a page of a shared mapping, or its first
// since the page was written back: on a virtual machine with shadowed page tables, tens of
// microseconds and now and then milliseconds). For the appender's owner to call from another
// goroutine, often: it costs little when the pages are ready. A system without the advice does
// nothing; an error means a store to those pages would fault fatally (SIGBUS: no disk space
// for the page, an I/O error), so the caller must not let the appender write there.
func (x *OffsetIndex) Prefault() error { return x.f.prefault(prefaultAhead) }

// Close unmaps and closes the file.
func (x *OffsetIndex) Close() error { return x.f.close() }
