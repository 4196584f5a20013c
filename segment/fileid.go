package segment

import (
	"path/filepath"

	"github.com/sluicemq/sluice/internal/vfs"
)

// FileID names a segment file for a reader in another process on this host (the broker's
// FetchShared): the absolute path it was created at, and the device and inode numbers that let
// the reader tell, once it has opened the path, that it reached this file and not one renamed
// over it since.
type FileID struct {
	Path     string
	Dev, Ino uint64
}

// noFileID is Segment.id for a file that has no FileID.
var noFileID FileID

// FileID returns the slice's segment file's FileID; ok is false for an empty slice or a file
// with no operating-system descriptor (MemFS) or one that cannot be stat'ed.
func (s *Slice) FileID() (FileID, bool) {
	if s.seg == nil {
		return FileID{}, false
	}
	return s.seg.fileID()
}

func (s *Segment) fileID() (FileID, bool) {
	if id := s.id.Load(); id != nil {
		return *id, id != &noFileID
	}
	id := &noFileID
	if fd, ok := vfs.FdOf(s.loadFile()); ok {
		if dev, ino, err := statID(fd); err == nil {
			if path, err := filepath.Abs(segmentPath(s.dir, s.base, logSuffix)); err == nil {
				id = &FileID{Path: path, Dev: dev, Ino: ino}
			}
		}
	}
	s.id.CompareAndSwap(nil, id) // a racing first reader computed the same
	id = s.id.Load()
	return *id, id != &noFileID
}
