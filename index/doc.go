// Package index owns the sparse, memory-mapped index files that sit beside each log segment: the
// offset index (offset -> byte position in the segment) and the time index (timestamp -> offset).
//
// Both files are arrays of fixed-size big-endian entries, preallocated to segment.index.bytes when
// the segment is active and trimmed to their real size when it rolls (a log closing cleanly
// leaves its active segment's preallocated, for the next open to append to):
//
//	offset index entry (8 bytes)              time index entry (12 bytes)
//	+---------------+---------------+         +-------------------------------+---------------+
//	| relOffset u32 | position  u32 |         | timestamp i64 (ms)            | relOffset u32 |
//	+---------------+---------------+         +-------------------------------+---------------+
//
// relOffset is the entry's offset minus the segment's base offset. The segment appends an offset
// entry for a batch's base offset and position once index.interval.bytes have been written since
// the previous entry, never for position 0 (the batch at the start of the segment needs no entry:
// a lookup that finds nothing answers the segment start). So a real offset entry never has
// position 0, and an all-zero entry marks the unused preallocated tail of a file that was not
// trimmed (an unclean stop). Time entries hold the running maximum timestamp and the base offset
// of the batch that reached it; timestamps strictly increase.
//
// Files: an index holds no file descriptor once mapped (the mapping keeps the file); it opens
// the file by its path again only to resize and remap it (Trim, MakeWritable, TruncateTo of a
// trimmed index), and opens it before it unmaps anything, so a failed open (EMFILE) leaves the
// index as it was. Pages are faulted in as they are touched: opening an index reads nothing
// but the pages its binary search for the last entry visits, below the file's first hole.
//
// Invariants: entries are strictly increasing in both fields (offset index) or in timestamp and
// non-decreasing in offset (time index); entries [0, Len()) are immutable once published, so
// lookups run concurrently with one appender; the index's own read-write lock keeps lookups off
// a mapping that Truncate, Trim or MakeWritable replace; Close must follow the last lookup (the
// segment's reference count sees to it). Appends come from one goroutine at a time.
package index
