package index

import "errors"

var (
	// ErrCorrupt is returned by Open when an index fails its sanity check; the segment rebuilds
	// the index from the log.
	ErrCorrupt = errors.New("index: corrupt")
	// ErrFull is returned by Append when the preallocated file has no room; the segment rolls.
	ErrFull = errors.New("index: full")
	// ErrOrder is returned by Append for an entry that does not advance the index.
	ErrOrder = errors.New("index: entry out of order")
	// ErrReadOnly is returned by Append on an index that was trimmed or opened read-only.
	ErrReadOnly = errors.New("index: read-only")
)
