// Package segment owns a partition's log on disk: its segments (a log file of record batches plus
// an offset index and a time index), appends, reads by offset and by timestamp, rolling,
// retention, truncation for replication, group-commit flushing, and crash recovery.
//
// # On disk
//
//	<dir>/
//	  00000000000000000000.log        record batches back to back (batch package format)
//	  00000000000000000000.index      sparse offset index (index package format)
//	  00000000000000000000.timeindex  sparse time index
//	  00000000000000052311.log ...    the next segment: its name is its base offset
//	  recovery-point                  checkpoint, below
//	  leader-epoch-checkpoint         epoch -> start offset, Kafka's text format (replcheckpoint.go;
//	                                  written by the broker through WriteLeaderEpochCheckpoint)
//	  *.tmp                           a checkpoint being replaced (vfs.WriteFileAtomic); removed at open
//	  *.deleted                       segments retired while readers held them; removed at open
//	  stopped                         present once an I/O error stopped the log: the next open
//	                                  writes again what it scans (resource.go); removed then
//
// The recovery-point file (40 bytes, big-endian, written to a temporary file, fsynced, renamed,
// directory fsynced):
//
//	 0        4         5     8                  16               24         28              36           40
//	+--------+---------+-----+------------------+----------------+----------+---------------+------------+
//	| "SLRP" | version | pad | recovery offset  | segment base   | position | max timestamp | CRC-32C    |
//	|        | u8 = 1  |     | i64              | i64            | u32      | i64           | of [0, 36) |
//	+--------+---------+-----+------------------+----------------+----------+---------------+------------+
//
// It says: every batch below recovery offset is durable, and ends at byte position in the
// segment with that base, whose largest timestamp up to there is max timestamp; the index
// entries for those batches are durable too. Recovery scans
// only what lies past that point, so an open after a clean close (checkpoint at the log end)
// reads no record data at all, and an open after a crash reads only the unsynced tail.
//
// # Invariants
//
//   - Offsets in the log strictly increase; a segment's batches all have offsets >= its base and
//     < the next segment's base.
//   - Readers see a segment only up to its published size, which Append raises after the bytes
//     are written: a reader never sees a partially written batch.
//   - Every batch that Append has returned for passed its CRC check; every batch that recovery
//     keeps passed it again. The log is truncated at the first batch that does not.
//   - A batch of a sealed segment that the scrub (Scrub, scrub.go) found bad since is never
//     served: a read that reaches it fails with ErrCorruptData, one that starts before it is
//     cut short at its first byte. The mark lasts as long as the bytes: until retention deletes
//     the segment or a truncation cuts the batch away.
//   - The segment list is never empty and its last segment is the active one. Retention
//     (DeleteExpired) deletes only whole segments, each finished by the flusher and wholly
//     below the high watermark its caller gives; it deletes the active segment, as Kafka
//     does, only by first rolling a new empty one at the log end, so an emptied log has start
//     == end and appends go on at the same offset. The new segment is durable, and the
//     recovery point names it, before the old files are renamed away: a restart finds the
//     log end there (an empty last segment recovers to its base offset). A full truncation
//     (TruncateFullyAndStartAt, TruncateTo below the log start) keeps the same order: its new
//     segment is durable before the old files are renamed away, after the records at or past
//     its offset have been cut away (so the new segment never overlaps an old one on disk), and
//     a crash in between restarts the log at its old start or at the new one (or, with the
//     renames half done, at the base of the first old segment left), never at 0.
//   - A truncation never rewrites bytes a reader may hold: a Slice made before TruncateTo is
//     read (or sendfiled) as the bytes it named, or fewer (a short read), because a cut
//     segment left non-empty is sealed and the appends go on in a new one at the new end, and
//     the segments removed keep their files until their readers let go. A cut inside a
//     segment's first batch empties it, and appends go on in that file: Segment.cuts (a
//     sequence count, odd while a cut is under way) tells a Slice (AppendTo's ErrTruncated,
//     Truncated), a read in progress (which retries) and the scrub (which marks nothing found
//     before the cut) that the bytes they looked at may be gone.
//   - AppendAsFollower appends only batches contiguous with the log end (each base offset the
//     previous batch's next offset, the first the log end), keeping their offsets and leader
//     epochs; SyncedOffset never exceeds EndOffset and falls only at a truncation.
//   - Synced() never passes an offset whose bytes were not fsynced, nor one in a segment whose
//     directory entry was not (a roll is followed by a directory sync); an I/O error of the data
//     (a failed write, a failed fsync or msync of segment or index data) stops the log for good
//     (Err: appends and reads refused) and fails every waiter, so nothing unwritten is
//     acknowledged; only recovery (Open, with DistrustUnsynced after a failed fsync) brings it
//     back. Errors that leave the data alone (out of file descriptors, memory or disk space, at a
//     recovery-point write, a roll, index pages ahead, or an append's write) never stop it: the
//     work is retried with a capped backoff, logged once per episode, and appends meanwhile get
//     ErrUnavailable. resource.go holds the table of sites.
//
// # Concurrency and lock order
//
// Appenders serialise on Log.appendMu, which guards offset assignment, the active segment's
// write position, and the segment list (published to readers through an atomic pointer).
// Readers take no log lock: they load the segment list, take a reference on a segment, and read
// below its published size. The flusher goroutine owns syncing; it holds Log.flushMu across an
// fsync but never appendMu, so an fsync never blocks an append. Operations that rewrite the tail
// or the head (TruncateTo, DeleteExpired, Close) take flushMu and then appendMu: that is the
// lock order. DeleteExpired, when it rolls the active segment away, lets go of appendMu (not
// flushMu) while it syncs the sealed segment. Scrub reads like a reader (a reference, no lock)
// and takes appendMu alone, briefly, to mark a bad batch, so that a truncation (which drops
// the marks past its cut under appendMu) never leaves a mark on bytes it replaced.
//
// # Open files
//
// A segment's indexes are mapped and hold no file descriptor (package index). Its log file is
// open while the segment is active; once sealed and synced it is in the logs' shared FileCache
// (Options.OpenFiles, log.max.open.files), which closes the files of sealed segments no reader
// holds beyond its bound and lets the next read open them again (FileCache). A reader's
// reference (acquireFile) keeps the file open until it is released, so a Slice handed to
// sendfile never loses its file. A truncation that makes a sealed segment active again pins it
// (pinFile): the cache does not take it back, not even from a reader's reopen, until the
// flusher hands it over sealed. Readers load Segment.file under fileMu (loadFile), since a
// pin replaces a read-only file by a writable one. FileCache.mu comes before Segment.fileMu,
// and neither is held across anything but the open or close of a file.
package segment
