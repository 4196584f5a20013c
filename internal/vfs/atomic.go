package vfs

import (
	"fmt"
	"path/filepath"
)

// WriteFileAtomic replaces the file at path with data so that a crash at any point leaves either
// the old file or the new one, never a mix: it writes path+".tmp", fsyncs it, renames it over
// path and fsyncs the directory. A crash before the rename leaves the old file and a stray
// ".tmp" (whole or torn) that readers of path never look at; the owner of the directory removes
// it at its next open (segment's listSegments removes every "*.tmp").
//
// It is the one home of the checkpoint write: the recovery point, the leader-epoch and
// replication-offset checkpoints.
func WriteFileAtomic(fsys FS, path string, data []byte) error {
	return replaceFile(fsys, path, data, true)
}

// ReplaceFile is WriteFileAtomic without its fsyncs: a reader never sees half a file, but a
// crash may leave the old file, the new one, or the new one empty or torn. For files whose
// readers detect damage themselves and can do without them (segment's producer-state
// snapshots carry a CRC, and recovery falls back to an older one).
func ReplaceFile(fsys FS, path string, data []byte) error {
	return replaceFile(fsys, path, data, false)
}

func replaceFile(fsys FS, path string, data []byte, durable bool) error {
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	if !durable {
		return nil
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("atomic write: sync directory: %w", err)
	}
	return nil
}
