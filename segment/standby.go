package segment

import (
	"errors"
	"path/filepath"

	"github.com/sluicemq/sluice/internal/vfs"
)

// The standby segment: the next segment's log file, created and reserved ahead of the roll.
//
// Reserving an active segment's blocks (Options.PreallocateBytes) runs fallocate on the file
// the appends write, and fallocate holds the inode lock that pwrite needs: now and then it
// reads a block bitmap from the disk under it, and an append waits 10-15 ms (BENCHMARKS.md,
// ninth session). So once the active segment is half full the flusher creates the next
// segment's file under a temporary name and reserves it whole, step by step, while nothing
// writes to it; the roll renames it into place, and the new active segment needs no fallocate
// at all. A log that never fills half a segment never makes one; a leftover from a crash ends
// in ".tmp" and Open removes it. It costs up to segment.bytes of reserved disk per log whose
// active segment is past half, given back when the segment is finished (truncated to its size)
// or the log closes.

// standbyName is the standby segment's file name in the log's directory.
const standbyName = "standby.log.tmp"

// standbyFile is a standby segment's file and how much of it is reserved.
type standbyFile struct {
	f        vfs.File
	reserved int64
}

// wantStandby reports whether the log makes standby segments at all.
func (l *Log) wantStandby() bool {
	return l.opts.PreallocateBytes > 0 && !l.opts.MmapAppend
}

// prepareStandbyLocked creates the standby segment if there is none, or goes on reserving it,
// one PreallocateBytes step at a time, until it is reserved up to segmentBytes; then it is
// published for the next roll. It stops early for an fsync someone waits for (the next disk
// housekeeping resumes it). Errors only mean no standby: the roll then creates its file as
// before. Called with flushMu held.
func (l *Log) prepareStandbyLocked(segmentBytes int64) {
	if l.standby.Load() != nil {
		return
	}
	sb := l.standbyPrep
	if sb == nil {
		f, err := l.opts.FS.Create(filepath.Join(l.dir, standbyName))
		if err != nil {
			return
		}
		sb = &standbyFile{f: f}
		l.standbyPrep = sb
	}
	step := l.opts.PreallocateBytes
	for sb.reserved < segmentBytes {
		if l.syncWanted() {
			return // an acks=all producer waits for the flusher: resume later
		}
		n := min(step, segmentBytes-sb.reserved)
		if err := vfs.Preallocate(sb.f, sb.reserved, n); err != nil {
			l.dropStandbyLocked()
			return
		}
		sb.reserved += n
	}
	l.standbyPrep = nil
	l.standby.Store(sb)
}

// dropStandbyLocked deletes the standby segment, in preparation or published. Called with
// flushMu held, from the flusher or once it has stopped (Close).
func (l *Log) dropStandbyLocked() error {
	var errs []error
	dropped := false
	for _, sb := range []*standbyFile{l.standbyPrep, l.standby.Swap(nil)} {
		if sb != nil {
			errs = append(errs, sb.f.Close())
			dropped = true
		}
	}
	l.standbyPrep = nil
	if dropped {
		if err := l.opts.FS.Remove(filepath.Join(l.dir, standbyName)); err != nil && !errors.Is(err, errNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// takeStandby renames the published standby segment, if any, to the log file of the segment
// at base and returns its file and how much of it is reserved; nil if there is none or the
// rename failed (then the roll creates the file as before). Called with appendMu held.
func (l *Log) takeStandby(logPath string) *standbyFile {
	sb := l.standby.Swap(nil)
	if sb == nil {
		return nil
	}
	if err := l.opts.FS.Rename(filepath.Join(l.dir, standbyName), logPath); err != nil {
		_ = sb.f.Close()
		_ = l.opts.FS.Remove(filepath.Join(l.dir, standbyName))
		return nil
	}
	return sb
}
