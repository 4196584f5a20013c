package index

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// TimeEntry says that every record before Offset's batch has a timestamp <= Timestamp, and that
// the batch at Offset reaches it.
type TimeEntry struct {
	Timestamp int64
	Offset    batch.Offset
}

// TimeIndex is a segment's sparse time index.
type TimeIndex struct {
	base batch.Offset
	f    *entryFile
}

// OpenTimeIndex opens or creates the time index at path; see OpenOffsetIndex.
func OpenTimeIndex(fsys vfs.FS, path string, base batch.Offset, maxBytes int, writable bool) (*TimeIndex, error) {
	f, err := openEntryFile(fsys, path, TimeEntrySize, maxBytes, writable, func(b []byte) bool {
		// Only a first entry can be (0, 0): losing it costs a slower lookup, never a wrong one.
		return binary.BigEndian.Uint64(b[0:8]) == 0 && binary.BigEndian.Uint32(b[8:12]) == 0
	})
	if err != nil {
		return nil, err
	}
	return &TimeIndex{base: base, f: f}, nil
}

func (x *TimeIndex) decode(b []byte) TimeEntry {
	return TimeEntry{
		Timestamp: int64(binary.BigEndian.Uint64(b[0:8])),
		Offset:    x.base + batch.Offset(binary.BigEndian.Uint32(b[8:12])),
	}
}

// Len is the number of entries.
func (x *TimeIndex) Len() int { return x.f.len() }

// Full reports whether the index can take no more entries.
func (x *TimeIndex) Full() bool { return x.f.full() }

// Free is how many more entries the index can take (0 when read-only).
func (x *TimeIndex) Free() int { return x.f.free() }

// Entry returns entry i, 0 <= i < Len(), or (-1, base) when i is not an entry (any more: a
// truncation may have come between Len and Entry).
func (x *TimeIndex) Entry(i int) (e TimeEntry) {
	if !x.f.read(i, func(b []byte) { e = x.decode(b) }) {
		return TimeEntry{Timestamp: -1, Offset: x.base}
	}
	return e
}

// Last returns the newest entry, if any.
func (x *TimeIndex) Last() (e TimeEntry, ok bool) {
	ok = x.f.last(func(b []byte) { e = x.decode(b) })
	return e, ok
}

// Lookup returns the entry with the greatest timestamp < ts, or (-1, base) when there is none: a
// forward scan from its offset finds the first batch with a timestamp >= ts. The search and
// the read of the entry it finds are one step, as in OffsetIndex.Lookup.
func (x *TimeIndex) Lookup(ts int64) (e TimeEntry) {
	if !x.f.find(func(b []byte) bool { return int64(binary.BigEndian.Uint64(b[0:8])) < ts },
		func(b []byte) { e = x.decode(b) }) {
		return TimeEntry{Timestamp: -1, Offset: x.base}
	}
	return e
}

// Append adds an entry if ts is greater than the last entry's; it reports whether it did.
func (x *TimeIndex) Append(ts int64, off batch.Offset) (bool, error) {
	rel := off - x.base
	if off < x.base || rel > batch.Offset(^uint32(0)) {
		return false, fmt.Errorf("%w: offset %d in time index based at %d", ErrOrder, off, x.base)
	}
	if last, ok := x.Last(); ok {
		if ts <= last.Timestamp {
			return false, nil
		}
		if off < last.Offset {
			return false, fmt.Errorf("%w: offset %d before %d", ErrOrder, off, last.Offset)
		}
	}
	err := x.f.append(func(b []byte) {
		binary.BigEndian.PutUint64(b[0:8], uint64(ts))
		binary.BigEndian.PutUint32(b[8:12], uint32(rel))
	})
	return err == nil, err
}

// TruncateTo drops the entries for offsets >= off.
func (x *TimeIndex) TruncateTo(off batch.Offset) error {
	if off <= x.base {
		return x.f.truncate(0)
	}
	rel := uint64(off - x.base)
	keep := x.f.search(func(b []byte) bool { return uint64(binary.BigEndian.Uint32(b[8:12])) < rel })
	return x.f.truncate(keep)
}

// Check verifies that timestamps strictly increase, offsets do not decrease, and offsets stay
// below end (the segment's next offset).
func (x *TimeIndex) Check(end batch.Offset) error {
	var prev TimeEntry
	for i := range x.Len() {
		e := x.Entry(i)
		if i > 0 && (e.Timestamp <= prev.Timestamp || e.Offset < prev.Offset) {
			return fmt.Errorf("%w: %s: entry %d (%d, %d) after (%d, %d)", ErrCorrupt, x.f.path, i, e.Timestamp, e.Offset, prev.Timestamp, prev.Offset)
		}
		if e.Offset >= end {
			return fmt.Errorf("%w: %s: entry %d offset %d beyond segment end %d", ErrCorrupt, x.f.path, i, e.Offset, end)
		}
		prev = e
	}
	return nil
}

// Flush makes the entries appended so far durable.
func (x *TimeIndex) Flush() error { return x.f.flush() }

// Trim shrinks the file to its entries, syncs it, and makes the index read-only.
func (x *TimeIndex) Trim() error { return x.f.trim() }

// MakeWritable reverses Trim.
func (x *TimeIndex) MakeWritable(maxBytes int) error { return x.f.makeWritable(maxBytes) }

// Prefault faults in the pages the next entries will be written to, up to 32 KiB ahead, so that
// Append takes no page fault (a writer's first store to a page of a shared mapping, or its first
// since the page was written back: on a virtual machine with shadowed page tables, tens of
// microseconds and now and then milliseconds). For the appender's owner to call from another
// goroutine, often: it costs little when the pages are ready. A system without the advice does
// nothing; an error means a store to those pages would fault fatally (SIGBUS: no disk space
// for the page, an I/O error), so the caller must not let the appender write there.
func (x *TimeIndex) Prefault() error { return x.f.prefault(prefaultAhead) }

// PrefaultFirst is Prefault for the page of the next entry alone, for a segment becoming
// active, whose first append writes a time index entry at once.
func (x *TimeIndex) PrefaultFirst() error { return x.f.prefault(TimeEntrySize) }

// Close unmaps and closes the file.
func (x *TimeIndex) Close() error { return x.f.close() }
