package segment

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sluicemq/sluice/internal/vfs"
)

// The standby segment: the next segment's log file, created and reserved ahead of the roll.
//
// Reserving an active segment's blocks (Options.PreallocateBytes) runs fallocate on the file
// the appends write, and fallocate holds the inode lock that pwrite needs: now and then it
// reads a block bitmap from the disk under it, and an append waits 10-15 ms (BENCHMARKS.md,
// End-to-end latency). So once the active segment is half full the flusher creates the next
// segment's file under a temporary name and reserves it whole, step by step, while nothing
// writes to it; the roll renames it into place, and the new active segment needs no fallocate
// at all. A log that never fills half a segment never makes one; a leftover from a crash ends
// in ".tmp" and Open removes it. It costs up to segment.bytes of reserved disk per log whose
// active segment is past half, given back when the segment is finished (truncated to its size)
// or the log closes, or at once by DropStandby; each step is first granted by Options.Reserve
// (the broker's bound by free space).

// standbyPrefix starts a standby segment's file name in the log's directory; each standby has
// a name of its own (standbyPrefix, a sequence number, ".log.tmp"), so that making the next one
// can never open the file a roll is renaming.
const standbyPrefix = "standby-"

// standbyFile is a standby segment's file, its path and how much of it is reserved.
type standbyFile struct {
	f        vfs.File
	path     string
	reserved int64
}

// wantStandby reports whether the log makes standby segments at all.
func (l *Log) wantStandby() bool {
	return l.opts.PreallocateBytes > 0 && !l.opts.MmapAppend
}

// prepareStandbyLocked creates the standby segment if there is none, or goes on reserving it,
// one PreallocateBytes step at a time, until it is reserved up to segmentBytes; then it is
// published for the next roll. After its first step it stops for an fsync someone waits for,
// and the flusher resumes it when that is done. A failure only means no standby until the
// next roll (so a full disk is not filled and emptied again at every wake-up): the roll then
// creates its file as before. Called with flushMu held.
func (l *Log) prepareStandbyLocked(active *Segment, segmentBytes int64) {
	if l.standby.Load() != nil || l.standbyFailed && l.standbyFailedAt == active.base {
		return
	}
	sb := l.standbyPrep
	if sb == nil {
		l.standbySeq++
		path := filepath.Join(l.dir, fmt.Sprintf("%s%d.log.tmp", standbyPrefix, l.standbySeq))
		f, err := l.opts.FS.Create(path)
		if err != nil {
			l.standbyFailed, l.standbyFailedAt = true, active.base
			return
		}
		sb = &standbyFile{f: f, path: path}
		l.standbyPrep = sb
	}
	step := l.opts.PreallocateBytes
	for steps := 0; sb.reserved < segmentBytes; steps++ {
		if steps > 0 && l.syncWanted() {
			return // an acks=all producer waits for the flusher: resumed after the fsync
		}
		n := min(step, segmentBytes-sb.reserved)
		if !l.opts.mayReserve(n) { // the disk is getting full: give the steps made back
			_ = l.dropStandbyLocked()
			l.standbyFailed, l.standbyFailedAt = true, active.base
			return
		}
		if err := vfs.Preallocate(sb.f, sb.reserved, n); err != nil {
			_ = l.dropStandbyLocked()
			l.standbyFailed, l.standbyFailedAt = true, active.base
			return
		}
		sb.reserved += n
	}
	l.standbyPrep = nil
	l.standby.Store(sb)
}

// DropStandby deletes the standby segment, made or in preparation, to give its reserved blocks
// back: the broker calls it when the disk runs low. No other is made for the active segment
// (as after a failure to make one); the next roll creates its segment's file as it does
// without a standby, and the segment after it may have one again if Options.Reserve allows.
func (l *Log) DropStandby() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.appendMu.Lock()
	active := l.active.base
	l.appendMu.Unlock()
	l.standbyFailed, l.standbyFailedAt = true, active
	return l.dropStandbyLocked()
}

// dropStandbyLocked deletes the standby segment, in preparation or published. Called with
// flushMu held: from the flusher, from DropStandby, or once the flusher has stopped (Close).
func (l *Log) dropStandbyLocked() error {
	var errs []error
	for _, sb := range []*standbyFile{l.standbyPrep, l.standby.Swap(nil)} {
		if sb == nil {
			continue
		}
		errs = append(errs, sb.f.Close())
		if err := l.opts.FS.Remove(sb.path); err != nil && !errors.Is(err, errNotExist) {
			errs = append(errs, err)
		}
	}
	l.standbyPrep = nil
	return errors.Join(errs...)
}

// takeStandby renames the published standby segment, if any, to logPath and returns it, its
// file opened again under that name (so that errors and the file system see the segment's own
// name); nil if there is none or that failed (then the roll creates the file as before).
// Called with appendMu held.
func (l *Log) takeStandby(logPath string) *standbyFile {
	sb := l.standby.Swap(nil)
	if sb == nil {
		return nil
	}
	_ = sb.f.Close()
	if err := l.opts.FS.Rename(sb.path, logPath); err != nil {
		_ = l.opts.FS.Remove(sb.path)
		return nil
	}
	f, err := l.opts.FS.OpenReadWrite(logPath)
	if err != nil {
		return nil // createSegment replaces it with a new file
	}
	return &standbyFile{f: f, path: logPath, reserved: sb.reserved}
}
