package vfs

// ColdReader is a File that can read a range without leaving in the page cache the pages the
// read itself brought in (readCold in cold_linux.go).
type ColdReader interface {
	ReadCold(p []byte, off int64) (int, error)
}

// ReadCold reads len(p) bytes at off, as ReadAt, for a background reader such as the log
// scrubber: pages of the range that were already cached stay cached, and pages the read had
// to fetch from the disk are dropped from the cache afterwards, so that re-reading cold data
// does not evict the hot data that fetches are served from. Files that cannot (MemFS,
// systems without the advice) are read with ReadAt.
func ReadCold(f File, p []byte, off int64) (int, error) {
	if c, ok := as[ColdReader](f); ok {
		return c.ReadCold(p, off)
	}
	return f.ReadAt(p, off)
}
