package segment

import (
	"errors"
	"fmt"
)

var (
	// ErrOffsetOutOfRange is returned by Read for an offset below the log start or past the log end.
	ErrOffsetOutOfRange = errors.New("segment: offset out of range")
	// ErrCorrupt is returned by Append for a batch that fails validation; nothing is appended.
	ErrCorrupt = errors.New("segment: corrupt batch")
	// ErrOffsetOrder is wrapped by the errors of AppendAsFollower for batches whose offsets do
	// not continue the log (ErrNotContiguous).
	ErrOffsetOrder = errors.New("segment: batch offsets out of order")
	// ErrNotContiguous is returned by AppendAsFollower when the first batch's base offset is
	// not the log end, or a batch's base is not the previous batch's next offset (a gap or an
	// overlap); the message names both offsets. It wraps ErrOffsetOrder.
	ErrNotContiguous = fmt.Errorf("%w: not contiguous with the log", ErrOffsetOrder)
	// ErrFailed wraps the disk error that stopped the log; every later append returns it.
	ErrFailed = errors.New("segment: log failed after a disk error")
	// ErrClosed is returned by operations on a closed log.
	ErrClosed = errors.New("segment: log closed")
	// ErrDeleted is returned by operations on a log that Delete closed (its partition was
	// deleted), instead of ErrClosed, which it wraps: a caller can tell a partition that is gone
	// from a log closed for another reason (shutdown).
	ErrDeleted = fmt.Errorf("%w: deleted", ErrClosed)
	// ErrUnavailable is returned by Append when the log cannot take the append for now, for
	// want of something that comes back by itself: a file descriptor, memory or disk space
	// for a new segment at a roll, disk space for the write itself, or the active segment's
	// next index pages. Nothing was written and the log is not stopped (Err is nil): the
	// append may be retried, and the error wraps the cause.
	ErrUnavailable = errors.New("segment: log cannot take appends for now")
	// ErrCorruptData is wrapped by the *CorruptDataError of a read that reaches a batch the
	// scrub found bad on the disk (scrub.go): the bytes are not served.
	ErrCorruptData = errors.New("segment: corrupt data in the log")
	// ErrTooLarge is returned by Append for a request larger than a whole segment can hold.
	ErrTooLarge = errors.New("segment: append larger than segment.bytes")
	// ErrReopen is returned by a read of a sealed segment whose log file the FileCache had
	// closed and that could not be opened again (EMFILE: the process at its file limit). It
	// is the read's error, retriable; the log is not failed, its data being intact.
	ErrReopen = errors.New("segment: cannot reopen segment file")
	// ErrTruncated is returned by Slice.AppendTo when a truncation cut the slice's segment
	// during or before the read: the bytes are not returned. Read again.
	ErrTruncated = errors.New("segment: log truncated under a read")
	// ErrBadCheckpoint is wrapped by the *BadCheckpointError (naming the file and line) of a
	// leader-epoch or replication-offset checkpoint that does not parse.
	ErrBadCheckpoint = errors.New("segment: bad checkpoint file")
)
