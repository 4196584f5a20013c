package segment

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/retry"
	"github.com/sluicemq/sluice/internal/vfs"
)

// What the log does when an operation fails. One rule decides: the log stops (fail: Err is set
// for good, every waiter fails, the broker reopens it through recovery) only when data it
// promised may not be on the disk as promised; everything else is retried.
//
//	site                                     error              the log
//	recovery-point write (flusher)           any                keeps serving; the flusher
//	                                                            retries with backoff; the old
//	                                                            file stays valid
//	index pages ahead (prefault, flusher)    any                appends refused (ErrUnavailable)
//	                                                            until a retry faults them in;
//	                                                            reads go on
//	roll: new segment's files and indexes    any                that append refused
//	                                                            (ErrUnavailable); the new
//	                                                            files are removed; the next
//	                                                            append tries again
//	append write                             ENOSPC, EDQUOT     the partial write is cut; that
//	                                                            append refused (ErrUnavailable)
//	append write                             other (EIO)        stopped
//	fsync or msync of segment or index data  any (ENOSPC too)   stopped, never retried
//	fsync of the directory after a roll      EMFILE, ENFILE,    nothing more counted durable
//	                                         ENOMEM, ENOSPC     (waiters wait) until a retry
//	                                                            syncs it
//	fsync of the directory after a roll      other (EIO)        stopped
//	trimming a finished segment's indexes    EMFILE, ENFILE,    the segment's data is synced and
//	                                         ENOMEM             counted durable; the trim (which
//	                                                            reopens the index by path) is
//	                                                            retried; retention waits for it
//	trimming a finished segment's indexes    other              stopped
//	truncation, and its recovery point       any                stopped
//
// Why each: the recovery point says only that everything below it is durable; it is written
// to a temporary file and renamed, so a write that fails leaves the old one, which says less
// but is still true, and a restart then scans a little more. Index pages that cannot be
// faulted in would crash the process (SIGBUS) at the appender's store, so the appender must
// not write there, but nothing written is in doubt. A roll creates files that nothing refers
// to until it succeeds, and removes them when it fails. An append whose write found no space
// wrote at most part of the batch past the published size, which no reader sees and no
// waiter counts: the log cuts it (a crash must not find half of it, or whole batches never
// acknowledged) and goes on. A failed fsync is different: the kernel may have dropped the
// dirty pages or kept them marked clean, so a retry could report success for data that never
// reached the disk; the bytes past the last good sync cannot be trusted, and only recovery
// (a rescan of what the disk holds, every batch's CRC checked, the tail written again:
// Options.DistrustUnsynced) brings the log back. The mmap appender's write fails only in a
// remap, which may have lost its mapping: stopped too. The directory sync after a roll opens
// the directory (EMFILE) and is what makes the new segment's file survive a power loss: until
// it succeeds its records are not counted durable, so acks=all waits (and times out, which the
// producer retries) rather than being answered for records a power loss could take.

// stoppedFile marks a log stopped by an I/O error of its data, so that the next Open recovers
// it as DistrustUnsynced whoever opens it: the broker's supervisor, or a restart that came
// before it could (the page cache, and its pages marked clean after a failed writeback, outlive
// the process). Recovery removes it.
const stoppedFile = "stopped"

// markStopped writes stoppedFile, as well as the disk lets it: on a disk that fails every
// write, recovery fails too until it is back, and the mark is written by then or not needed.
func (l *Log) markStopped(err error) {
	fsys := l.opts.FS
	f, cerr := fsys.Create(filepath.Join(l.dir, stoppedFile))
	if cerr != nil {
		l.logger.Warn("could not mark the stopped log for a distrustful recovery", "err", cerr)
		return
	}
	_, werr := f.WriteAt([]byte(err.Error()+"\n"), 0)
	werr = errors.Join(werr, f.Sync(), f.Close(), fsys.SyncDir(l.dir))
	if werr != nil {
		l.logger.Warn("could not mark the stopped log for a distrustful recovery", "err", werr)
	}
}

// stoppedBefore reports whether the log was marked stopped (markStopped) and not recovered
// since.
func (l *Log) stoppedBefore() bool {
	f, err := l.opts.FS.Open(filepath.Join(l.dir, stoppedFile))
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

// resourceState is how the log retries what failed for a reason that passes.
//
// Ownership: held is set and cleared under flushMu and loaded by appenders without it;
// appends is guarded by appendMu; the rest by flushMu.
type resourceState struct {
	// held, while set, refuses every append with the error it holds (ErrUnavailable wrapping
	// why): the active segment's next index pages could not be faulted in.
	held atomic.Pointer[error]
	// appends is the episode of appends refused with ErrUnavailable (a failed roll, a write
	// that found no space); the next append that succeeds ends it.
	appends retry.Episode

	// rolls counts the segments created by rolls (guarded by appendMu); dirSynced is the count
	// when the directory's entries were last made durable (flushMu), -1 before the first time.
	// Records in a segment whose directory entry may not be durable are not counted durable:
	// a power loss could take the whole file (the recovery point's directory sync, which
	// used to cover this, may be failing for a while now).
	rolls, dirSynced int64
	dirOwed          bool // a directory sync failed and none has succeeded since
	dirFailed        retry.Episode

	backoff          retry.Backoff
	timer            *time.Timer // sends on Log.retryKick when the next retry is due; nil until one is
	checkpointOwed   bool        // a recovery-point write failed and none has succeeded since
	checkpointFailed retry.Episode
	prefaultFailed   retry.Episode
	// trimOwed: a sealed segment's data is synced but its index trim, which opens the index
	// file again, met a resource error; the flusher finishes it at a retry.
	trimOwed   bool
	trimFailed retry.Episode
}

func (r *resourceState) init(o *Options, logger *slog.Logger) {
	r.backoff = retry.Backoff{Min: o.RetryBackoff, Max: o.RetryBackoffMax}
	r.appends = retry.Episode{Logger: logger, What: "append"}
	r.checkpointFailed = retry.Episode{Logger: logger, What: "recovery point write"}
	r.prefaultFailed = retry.Episode{Logger: logger, What: "faulting in the active segment's index pages (appends are refused meanwhile)"}
	r.trimFailed = retry.Episode{Logger: logger, What: "trimming a sealed segment's indexes (retention waits for it meanwhile)"}
	r.dirFailed = retry.Episode{Logger: logger, What: "syncing the log directory (the newest segment's records are not acknowledged meanwhile)"}
	r.dirSynced = -1
}

// dirDurableLocked makes the directory's entries durable if a segment was created since they
// last were (rolls is the count the caller snapshot under appendMu with the offsets it means to
// count durable), and reports whether they are. A transient failure is retried by the flusher;
// another stops the log. Called with flushMu held.
func (l *Log) dirDurableLocked(rolls int64) (bool, error) {
	if rolls == l.res.dirSynced {
		return true, nil
	}
	err := l.opts.FS.SyncDir(l.dir)
	if err == nil {
		l.res.dirSynced = rolls
		if l.res.dirOwed {
			l.res.dirOwed = false
			l.res.dirFailed.Succeed(l.opts.Now())
			l.retriedLocked()
		}
		return true, nil
	}
	err = fmt.Errorf("sync log directory: %w", err)
	if !vfs.IsTransient(err) {
		return false, l.fail(err)
	}
	l.res.dirOwed = true
	l.res.dirFailed.Fail(l.opts.Now(), err)
	l.armRetryLocked()
	return false, err
}

// heldErr is the error appends get while they are held, or nil.
func (r *resourceState) heldErr() error {
	if e := r.held.Load(); e != nil {
		return *e
	}
	return nil
}

// armRetryLocked schedules the flusher's next retry after the backoff. Called with flushMu held.
func (l *Log) armRetryLocked() {
	d := l.res.backoff.Next()
	if l.res.timer == nil {
		l.res.timer = time.AfterFunc(d, func() {
			select {
			case l.retryKick <- struct{}{}:
			default:
			}
		})
		return
	}
	l.res.timer.Reset(d)
}

// retryLocked is the flusher's retry: the held index pages first (appends wait on them), then
// the owed recovery point. Called with flushMu held.
func (l *Log) retryLocked() {
	if l.Err() != nil {
		return
	}
	if l.res.held.Load() != nil {
		l.prefaultActiveLocked()
	}
	if l.res.checkpointOwed || l.res.dirOwed || l.res.trimOwed {
		_ = l.flushLocked(true)
	}
}

// stopRetryLocked stops the retry timer (Close). Called with flushMu held.
func (l *Log) stopRetryLocked() {
	if l.res.timer != nil {
		l.res.timer.Stop()
	}
}

// retriedLocked resets the backoff once nothing the flusher retries is failing. Called with
// flushMu held.
func (l *Log) retriedLocked() {
	if !l.res.checkpointOwed && !l.res.dirOwed && !l.res.trimOwed && l.res.held.Load() == nil {
		l.res.backoff.Reset()
	}
}

// checkpointFailedLocked records a failed recovery-point write: the flusher writes one again
// after the backoff (and at each checkpoint interval). It returns err for callers that must
// not go on without the new recovery point (DeleteExpired, truncations). Called with flushMu
// held.
func (l *Log) checkpointFailedLocked(err error) error {
	l.res.checkpointOwed = true
	l.res.checkpointFailed.Fail(l.opts.Now(), err, "recovery_point", l.checkpoint.offset)
	l.armRetryLocked()
	return err
}

// checkpointWrittenLocked ends a run of failed recovery-point writes. Called with flushMu held
// (or by recovery, before the flusher starts).
func (l *Log) checkpointWrittenLocked() {
	if !l.res.checkpointOwed {
		return
	}
	l.res.checkpointOwed = false
	l.res.checkpointFailed.Succeed(l.opts.Now(), "recovery_point", l.checkpoint.offset)
	l.retriedLocked()
}

// errTrimLater is what Segment.finish returns when the segment's data is synced but its index
// trim met a resource error (finishSealedLocked retries it).
var errTrimLater = errors.New("index trim deferred")

// trimFailedLocked records a sealed segment whose data is synced but whose index trim must be
// tried again (errTrimLater): the flusher does after the backoff. It returns the error, as
// ErrUnavailable, for the callers that must not go on without the segment finished
// (retention, which deletes only finished segments and moves the recovery point first).
// Called with flushMu held.
func (l *Log) trimFailedLocked(s *Segment, err error) error {
	l.res.trimOwed = true
	l.res.trimFailed.Fail(l.opts.Now(), err, "segment", s.base)
	l.armRetryLocked()
	return fmt.Errorf("%w: segment %d: %w", ErrUnavailable, s.base, err)
}

// trimmedLocked ends a run of deferred index trims: every sealed segment is finished. Called
// with flushMu held.
func (l *Log) trimmedLocked() {
	if !l.res.trimOwed {
		return
	}
	l.res.trimOwed = false
	l.res.trimFailed.Succeed(l.opts.Now())
	l.retriedLocked()
}

// prefaultLocked faults in s's next index pages. When it cannot, appends are held (refused
// with ErrUnavailable) until a retry can: the appender's stores there would crash the process.
// It reports whether the pages are ready. Called with flushMu held.
func (l *Log) prefaultLocked(s *Segment) bool {
	err := s.prefaultIndexes()
	if err == nil {
		if l.res.held.Load() != nil {
			l.res.held.Store(nil)
			l.res.prefaultFailed.Succeed(l.opts.Now(), "segment", s.base)
			l.retriedLocked()
		}
		return true
	}
	held := fmt.Errorf("%w: the index pages ahead cannot be faulted in: %w", ErrUnavailable, err)
	// The retry (prefaultActiveLocked) must not take the segment for done at its size: appends,
	// refused meanwhile, may never grow it past the last size that was.
	s.prefaultedAt.Store(-1)
	l.res.held.Store(&held)
	l.res.prefaultFailed.Fail(l.opts.Now(), err, "segment", s.base)
	l.armRetryLocked()
	return false
}

// refuseLocked answers an append that the log could not take for now (rollLocked failed, or
// the write found no space and was cut), without stopping the log: the episode is logged once.
// Called with appendMu held.
func (l *Log) refuseLocked(err error) error {
	l.res.appends.Fail(l.opts.Now(), err)
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// appendedLocked ends a run of refused appends. Called with appendMu held, after an append
// succeeded.
func (l *Log) appendedLocked() {
	if failing, _ := l.res.appends.Failing(); failing {
		l.res.appends.Succeed(l.opts.Now(), "log_end", l.end.Load())
	}
}

// cutWrite undoes what a failed write of an append at pos may have left past it (a short write
// before the error), for an error that says nothing about the data already written (no space).
// It reports whether the log may go on: only for pwrite, whose failed write leaves the
// segment's state as it was; the mmap appender's write fails only in a remap, which may have
// lost its mapping. Called with appendMu held.
func (l *Log) cutWrite(s *Segment, pos int64, err error) bool {
	if !vfs.IsNoSpace(err) {
		return false
	}
	a, ok := s.app.(pwriteAppender)
	if !ok {
		return false
	}
	size, serr := a.f.Size()
	if serr != nil {
		return false
	}
	if size > pos {
		// No sync: nothing past pos is promised, and a crash before the cut reaches the disk
		// finds the partial batch, whose length or CRC recovery refuses.
		if terr := a.f.Truncate(pos); terr != nil {
			return false
		}
	}
	return true
}

// rewrite writes bytes [from, to) of s's log file again, as read (Options.DistrustUnsynced),
// so that the sync after it writes them to the disk.
func (s *Segment) rewrite(from, to int64, buf []byte) error {
	for pos := from; pos < to; {
		n := int(min(int64(len(buf)), to-pos))
		if _, err := s.file.ReadAt(buf[:n], pos); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("rewrite segment %d at %d: %w", s.base, pos, err)
		}
		if _, err := s.file.WriteAt(buf[:n], pos); err != nil {
			return fmt.Errorf("rewrite segment %d at %d: %w", s.base, pos, err)
		}
		pos += int64(n)
	}
	return nil
}
