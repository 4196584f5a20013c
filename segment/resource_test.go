package segment

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// What a log does when an operation fails for want of a resource (EMFILE) or of disk space
// (ENOSPC), site by site (the table in resource.go), and that it comes back once the error
// clears. Each scenario appends and syncs some batches (the acknowledged ones), turns the
// injection on, drives the site (a checkpoint, a roll, an append, an fsync), checks what the
// log does, turns the injection off, and checks the log is whole again:
//
//   - serves: the log keeps taking appends, syncing them and serving reads throughout, and the
//     flusher's retry brings the recovery point up to date by itself, logging the episode
//     twice (once when it starts, once when it ends), however many attempts failed.
//   - refuses: the append that meets the error gets ErrUnavailable (retriable) and the log is
//     not stopped; reads go on; the appends after the error clears succeed, at the next
//     offsets, by themselves.
//   - stops: the log stops (ErrFailed), waiters fail, reads are refused; reopened (with
//     DistrustUnsynced, as the broker does) once the error clears, it holds every batch
//     acknowledged before and takes appends again.
func TestResourceErrorsBySite(t *testing.T) {
	const (
		serves = iota
		refuses
		stops
	)
	isFile := func(suffix string) func(string) bool {
		return func(path string) bool { return strings.HasSuffix(path, suffix) }
	}
	notFirst := func(suffix string) func(string) bool {
		first := filepath.Base(segmentPath("", 0, suffix))
		return func(path string) bool { return strings.HasSuffix(path, suffix) && filepath.Base(path) != first }
	}
	for _, tc := range []struct {
		name  string
		op    vfs.Op
		path  func(string) bool
		errno syscall.Errno
		// drive makes the log meet the error; it returns the values it appended on the way
		// and the error the caller saw, if any.
		drive func(t *testing.T, l *Log) ([]string, error)
		want  int
	}{
		{"checkpoint create EMFILE", vfs.OpCreate, isFile(checkpointFile + ".tmp"), syscall.EMFILE, driveCheckpoint, serves},
		{"checkpoint write ENOSPC", vfs.OpWrite, isFile(checkpointFile + ".tmp"), syscall.ENOSPC, driveCheckpoint, serves},
		{"checkpoint fsync ENOSPC", vfs.OpSync, isFile(checkpointFile + ".tmp"), syscall.ENOSPC, driveCheckpoint, serves},
		{"index open at roll EMFILE", vfs.OpOpen, notFirst(indexSuffix), syscall.EMFILE, driveRoll, refuses},
		{"index open at roll ENFILE", vfs.OpOpen, notFirst(timeIndexSuffix), syscall.ENFILE, driveRoll, refuses},
		{"index map at roll ENOMEM", vfs.OpMap, notFirst(indexSuffix), syscall.ENOMEM, driveRoll, refuses},
		{"index pages at roll ENOSPC", vfs.OpPopulate, notFirst(timeIndexSuffix), syscall.ENOSPC, driveRoll, refuses},
		{"index pages ahead ENOSPC", vfs.OpPopulate, isFile(indexSuffix), syscall.ENOSPC, drivePrefault, refuses},
		{"append write ENOSPC", vfs.OpWrite, isFile(logSuffix), syscall.ENOSPC, driveAppend, refuses},
		{"append write EDQUOT", vfs.OpWrite, isFile(logSuffix), syscall.EDQUOT, driveAppend, refuses},
		{"append write EIO", vfs.OpWrite, isFile(logSuffix), syscall.EIO, driveAppend, stops},
		{"fsync ENOSPC", vfs.OpSync, isFile(logSuffix), syscall.ENOSPC, driveSync, stops},
		{"fsync EMFILE", vfs.OpSync, isFile(logSuffix), syscall.EMFILE, driveSync, stops},
		{"fsync EIO", vfs.OpSync, isFile(logSuffix), syscall.EIO, driveSync, stops},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var on atomic.Bool
			var hits atomic.Int64
			fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
				if on.Load() && op == tc.op && tc.path(path) {
					hits.Add(1)
					return tc.errno
				}
				return nil
			}}
			logs := &syncBuffer{}
			o := resourceOptions(fsys, logs)
			dir := t.TempDir()
			l := mustOpen(t, dir, o)
			defer func() { l.Close() }()
			acked := appendSynced(t, l, 6, "before")

			on.Store(true)
			appended, err := tc.drive(t, l)
			acked = append(acked, appended...)
			waitUntil(t, "the injected error", func() bool { return hits.Load() > 0 })
			switch tc.want {
			case serves:
				if err != nil || l.Err() != nil {
					t.Fatalf("the log did not keep serving: %v (log error %v)", err, l.Err())
				}
				acked = append(acked, appendSynced(t, l, 3, "during")...)
				if got := values(t, readAll(t, l, 0)); !equalStrings(got, acked) {
					t.Fatalf("read %d records during the failures, want %d", len(got), len(acked))
				}
				waitUntil(t, "a second failed attempt", func() bool { return hits.Load() >= 2 })
				if n := strings.Count(logs.String(), "recovery point write failed; retrying"); n != 1 {
					t.Fatalf("%d log lines for the failures, want 1:\n%s", n, logs)
				}
			case refuses:
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, tc.errno) {
					t.Fatalf("append: %v, want ErrUnavailable wrapping %v", err, tc.errno)
				}
				if l.Err() != nil {
					t.Fatalf("the log stopped: %v", l.Err())
				}
				if got := values(t, readAll(t, l, 0)); !equalStrings(got, acked) {
					t.Fatalf("read %d records while appends are refused, want %d", len(got), len(acked))
				}
			case stops:
				if !errors.Is(err, ErrFailed) || !errors.Is(l.Err(), tc.errno) {
					t.Fatalf("got %v, log error %v; want the log stopped by %v", err, l.Err(), tc.errno)
				}
				if _, err := l.Read(0, 1<<20, l.EndOffset()); !errors.Is(err, ErrFailed) {
					t.Fatalf("read from the stopped log: %v, want ErrFailed", err)
				}
				if _, err := l.Append(makeBatch(t, "after", 1, 1), 7); !errors.Is(err, ErrFailed) {
					t.Fatalf("append to the stopped log: %v, want ErrFailed", err)
				}
			}

			on.Store(false)
			if tc.want == stops {
				l.Close()
				o.DistrustUnsynced = true
				l = mustOpen(t, dir, o)
			}
			switch tc.want {
			case serves:
				waitUntil(t, "the recovery point at the log end", func() bool {
					cp, ok, _ := readCheckpoint(l)
					return ok && cp.offset == l.EndOffset()
				})
				waitUntil(t, "the log line saying it is over", func() bool {
					return strings.Contains(logs.String(), "recovery point write succeeded again")
				})
			case refuses:
				// The first append after the error clears may still be held until the
				// flusher's retry faults the pages in: retried as a client would.
				waitUntil(t, "an append to succeed", func() bool {
					_, err := l.Append(makeBatch(t, "after-0", 1, 1), 7)
					if err != nil && !errors.Is(err, ErrUnavailable) {
						t.Fatalf("append after the error cleared: %v", err)
					}
					return err == nil
				})
				acked = append(acked, "after-0-0")
				if err := l.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			acked = append(acked, appendSynced(t, l, 5, "after")...)
			// A stopped log may keep the batch whose fsync failed: it was never acknowledged,
			// and recovery found it whole.
			if got := acknowledged(values(t, readAll(t, l, 0))); !equalStrings(got, acked) {
				t.Fatalf("after the error cleared the log holds %v, want the %d acknowledged %v", got, len(acked), acked)
			}
			if tc.want == stops {
				return
			}
			l.Close()
			l = mustOpen(t, dir, o)
			if got := acknowledged(values(t, readAll(t, l, 0))); !equalStrings(got, acked) {
				t.Fatalf("reopened, the log holds %v, want %v", got, acked)
			}
		})
	}
}

// driveCheckpoint waits for the flusher's checkpoint ticker (resourceOptions: 5 ms) to have
// failed.
func driveCheckpoint(t *testing.T, l *Log) ([]string, error) {
	return appendSynced(t, l, 1, "cp"), nil // the recovery point now lags the log end
}

// driveRoll appends until an append rolls (resourceOptions: 4 batches a segment).
func driveRoll(t *testing.T, l *Log) ([]string, error) {
	segs := len(l.Segments())
	var appended []string
	for i := range 8 {
		b := makeBatch(t, "roll-"+string(rune('a'+i)), 1, 1)
		b = append(b[:0:0], sizedBatchLike(t, b, 4<<10)...)
		if _, err := l.Append(b, 7); err != nil {
			return appended, err
		}
		appended = append(appended, values(t, []batch.Batch{b})...)
		if len(l.Segments()) != segs {
			t.Fatal("the log rolled through the injected error")
		}
	}
	t.Fatal("no append rolled")
	return nil, nil
}

// sizedBatchLike is a one-record batch of about size bytes whose value is b's tag padded.
func sizedBatchLike(t *testing.T, b []byte, size int) []byte {
	t.Helper()
	v := values(t, []batch.Batch{b})[0]
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	bl.Append(&batch.Record{Timestamp: 1, Value: []byte(v + strings.Repeat(".", size))})
	out, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// drivePrefault appends until the flusher, faulting in the index pages ahead, holds appends.
func drivePrefault(t *testing.T, l *Log) ([]string, error) {
	var err error
	var appended []string
	waitUntil(t, "appends held", func() bool {
		_, err = l.Append(makeBatch(t, "held", 1, 1), 7)
		if err == nil {
			appended = append(appended, "held-0")
		}
		return err != nil
	})
	return appended, err
}

func driveAppend(t *testing.T, l *Log) ([]string, error) {
	_, err := l.Append(makeBatch(t, "lost", 2, 1), 7)
	return nil, err
}

func driveSync(t *testing.T, l *Log) ([]string, error) {
	if _, err := l.Append(makeBatch(t, "unsynced", 1, 1), 7); err != nil {
		t.Fatal(err)
	}
	return nil, l.Sync(context.Background())
}

// resourceOptions roll every 4 batches of 4 KiB, checkpoint every 5 ms, retry every 5-20 ms,
// and log to logs.
func resourceOptions(fsys vfs.FS, logs *syncBuffer) Options {
	o := testOptions(fsys)
	o.CheckpointInterval = 5 * time.Millisecond
	o.RetryBackoff, o.RetryBackoffMax = 5*time.Millisecond, 20*time.Millisecond
	o.WritebackBytes = 1 << 10 // the flusher wakes at every append, and faults the index pages in
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	return o
}

// appendSynced appends n one-record batches tagged tag and syncs them: acknowledged as
// acks=all would be. It returns their values.
func appendSynced(t *testing.T, l *Log, n int, tag string) []string {
	t.Helper()
	var out []string
	for i := range n {
		b := makeBatch(t, tag+"-"+string(rune('a'+i)), 1, int64(i))
		mustAppend(t, l, b)
		out = append(out, tag+"-"+string(rune('a'+i))+"-0")
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	return out
}

// acknowledged drops the values of the batches that met the error (never acknowledged).
func acknowledged(vals []string) []string {
	var out []string
	for _, v := range vals {
		if !strings.HasPrefix(v, "unsynced-") && !strings.HasPrefix(v, "lost-") {
			out = append(out, v)
		}
	}
	return out
}

func equalStrings(a, b []string) bool { return len(a) == len(b) && hasPrefix(a, b) }

func hasPrefix(a, prefix []string) bool {
	if len(a) < len(prefix) {
		return false
	}
	for i := range prefix {
		if a[i] != prefix[i] {
			return false
		}
	}
	return true
}

// syncBuffer is a bytes.Buffer that the flusher and the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A log reopened with DistrustUnsynced writes again every byte recovery scans past the recovery
// point before it syncs them (a second fsync after a failed one may find their pages clean and
// write nothing), and nothing before it: those bytes were synced.
func TestDistrustUnsyncedRewritesTheScannedTail(t *testing.T) {
	var counting atomic.Bool
	var written atomic.Int64
	fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if counting.Load() && op == vfs.OpWrite && strings.HasSuffix(path, logSuffix) {
			written.Add(1)
		}
		return nil
	}}
	o := testOptions(fsys)
	o.DistrustUnsynced = true
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	for range 3 {
		mustAppend(t, l, makeBatch(t, "x", 2, 1))
	}
	l.Close() // the recovery point at the log end
	reopen := func(what string, wantWrites int64) {
		written.Store(0)
		counting.Store(true)
		l = mustOpen(t, dir, o)
		counting.Store(false)
		if n := written.Load(); n != wantWrites {
			t.Fatalf("%s: %d writes to the log file at open, want %d", what, n, wantWrites)
		}
	}
	reopen("after a clean close", 0)
	end := l.EndOffset()
	mustAppend(t, l, makeBatch(t, "tail", 2, 1))
	// The recovery point stays at end; the tail is in the file, past it, and is written again
	// in one write of the scan buffer.
	abandon(l)
	reopen("with a tail past the recovery point", 1)
	defer l.Close()
	if l.EndOffset() != end+2 {
		t.Fatalf("recovered to %d, want %d", l.EndOffset(), end+2)
	}
	if got := values(t, readAll(t, l, end)); !equalStrings(got, []string{"tail-0", "tail-1"}) {
		t.Fatalf("recovered tail %v", got)
	}
}

// abandon stops a log's flusher and releases its files without a final sync or recovery point,
// as a crash leaves them (the page cache keeps what was written).
func abandon(l *Log) {
	l.appendMu.Lock()
	l.closed = true
	l.appendMu.Unlock()
	close(l.stop)
	<-l.done
	l.flushMu.Lock()
	l.stopRetryLocked()
	_ = l.dropStandbyLocked()
	for _, s := range l.Segments() {
		s.release()
	}
	l.flushMu.Unlock()
}

// A recovery point that could not be written for several rolls leaves sealed segments past it.
// Recovery scans them, and syncs each before the new recovery point says they are durable
// (a crash may have left their bytes in the page cache alone); with DistrustUnsynced it first
// writes them again.
func TestRecoverySyncsTheSealedSegmentsItScanned(t *testing.T) {
	var failCheckpoint, counting atomic.Bool
	var syncs, writes atomic.Int64
	first := filepath.Base(segmentPath("", 0, logSuffix))
	fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if failCheckpoint.Load() && op == vfs.OpCreate && strings.HasSuffix(path, checkpointFile+".tmp") {
			return syscall.EMFILE
		}
		if counting.Load() && strings.HasSuffix(path, logSuffix) && filepath.Base(path) != first {
			switch op {
			case vfs.OpSync:
				syncs.Add(1)
			case vfs.OpWrite:
				writes.Add(1)
			}
		}
		return nil
	}}
	o := testOptions(fsys)
	o.PreallocateBytes = -1 // no standby segments: every roll creates its segment
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	failCheckpoint.Store(true)
	var want []string
	for i := range 12 { // 3 segments of 4
		b := sizedBatchLike(t, makeBatch(t, "s-"+string(rune('a'+i)), 1, 1), 4<<10)
		mustAppend(t, l, b)
		want = append(want, values(t, []batch.Batch{b})...)
	}
	if n := len(l.Segments()); n < 3 {
		t.Fatalf("%d segments, want 3 or more", n)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	abandon(l)
	failCheckpoint.Store(false)

	o.DistrustUnsynced = true
	counting.Store(true)
	l = mustOpen(t, dir, o)
	counting.Store(false)
	defer l.Close()
	segs := len(l.Segments())
	// Every segment but the first (which the recovery point names) was scanned: each is
	// written again and synced (the sealed ones by finish, the active one by syncRecovered).
	if n := syncs.Load(); n < int64(segs-1) {
		t.Fatalf("%d syncs of the %d scanned segments at open", n, segs-1)
	}
	if n := writes.Load(); n < int64(segs-1) {
		t.Fatalf("%d writes to the %d scanned segments at open", n, segs-1)
	}
	if got := values(t, readAll(t, l, 0)); !equalStrings(got, want) {
		t.Fatalf("recovered %d records, want %d", len(got), len(want))
	}
}

// A new segment's records are not counted durable (Synced, acks=all waiters) until the log
// directory's entry for it is: a power loss could take the whole file otherwise. The recovery
// point's write used to be what synced the directory after a roll; with that write failing
// (EMFILE) the flusher syncs the directory itself, and while that fails too, waiters wait and a
// retry releases them once it can. MemFS's crash drops the directory entries never synced.
func TestRolledSegmentIsDurableBeforeItsRecordsAre(t *testing.T) {
	var failCheckpoint, failDir atomic.Bool
	m := newMem(t)
	fsys := &vfs.ErrorFS{FS: m, Inject: func(op vfs.Op, path string) error {
		switch {
		case failCheckpoint.Load() && op == vfs.OpCreate && strings.HasSuffix(path, checkpointFile+".tmp"):
			return syscall.EMFILE
		case failDir.Load() && op == vfs.OpSyncDir:
			return syscall.EMFILE
		}
		return nil
	}}
	o := testOptions(fsys)
	o.RetryBackoff, o.RetryBackoffMax = time.Millisecond, 5*time.Millisecond
	l := mustOpen(t, "/p", o)
	var want []string
	appendOne := func(i int) {
		b := sizedBatchLike(t, makeBatch(t, "d-"+string(rune('a'+i)), 1, 1), 4<<10)
		mustAppend(t, l, b)
		want = append(want, values(t, []batch.Batch{b})...)
	}
	appendOne(0)
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Two rolls, with neither the recovery point nor the directory synced after them: the
	// new segments' records are not durable yet.
	failCheckpoint.Store(true)
	failDir.Store(true)
	for i := 1; len(l.Segments()) < 3; i++ {
		appendOne(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := l.Sync(ctx)
	cancel()
	if err == nil {
		t.Fatal("Sync returned with the new segments' directory entries not durable")
	}
	if l.Err() != nil {
		t.Fatalf("a directory sync failing with EMFILE stopped the log: %v", l.Err())
	}
	if synced, base := l.SyncedOffset(), l.Segments()[1].Base(); synced > base {
		t.Fatalf("synced offset %d past the base %d of a segment whose entry is not durable", synced, base)
	}
	failDir.Store(false) // the flusher's retry syncs it; the next Sync returns
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	crashed := m.Crash(vfs.CrashOptions{})
	_ = l.Close()
	o.FS = crashed
	l = mustOpen(t, "/p", o)
	defer l.Close()
	if got := values(t, readAll(t, l, 0)); !equalStrings(got, want) {
		t.Fatalf("after the crash: %d records, want the %d synced", len(got), len(want))
	}
}

// A log stopped by an I/O error of its data is marked so, and the next Open recovers it as
// DistrustUnsynced even without the option (a broker restarted before its supervisor reopened
// the log: the page cache, with pages a failed writeback left marked clean, outlives the
// process), then clears the mark.
func TestStoppedLogIsRecoveredDistrustfullyAfterARestart(t *testing.T) {
	var failSync, counting atomic.Bool
	var writes atomic.Int64
	fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
		if failSync.Load() && op == vfs.OpSync && strings.HasSuffix(path, logSuffix) {
			return syscall.EIO
		}
		if counting.Load() && op == vfs.OpWrite && strings.HasSuffix(path, logSuffix) {
			writes.Add(1)
		}
		return nil
	}}
	o := testOptions(fsys)
	dir := t.TempDir()
	l := mustOpen(t, dir, o)
	acked := appendSynced(t, l, 3, "a")
	failSync.Store(true)
	mustAppend(t, l, makeBatch(t, "unsynced", 1, 1))
	if err := l.Sync(context.Background()); !errors.Is(err, ErrFailed) {
		t.Fatalf("sync: %v, want the log stopped", err)
	}
	failSync.Store(false)
	l.Close()
	mark := filepath.Join(dir, stoppedFile)
	if _, err := vfs.Default.Open(mark); err != nil {
		t.Fatalf("the stopped log is not marked: %v", err)
	}

	counting.Store(true)
	l = mustOpen(t, dir, o) // o.DistrustUnsynced is false
	counting.Store(false)
	defer l.Close()
	if writes.Load() == 0 {
		t.Fatal("recovery did not write the unsynced tail again")
	}
	if _, err := vfs.Default.Open(mark); err == nil {
		t.Fatal("the mark is still there after recovery")
	}
	if got := acknowledged(values(t, readAll(t, l, 0))); !equalStrings(got, acked) {
		t.Fatalf("recovered %v, want %v", got, acked)
	}
}

// Opening a log whose index (or any file) cannot be opened for want of a descriptor or of
// memory fails with an error that vfs.IsResource recognises, for the caller to retry (the
// broker's supervisor does), and changes nothing: the next Open, once descriptors are back,
// finds every record.
func TestOpenOutOfDescriptorsFailsRetriably(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    vfs.Op
		errno syscall.Errno
	}{
		{"index open EMFILE", vfs.OpOpen, syscall.EMFILE},
		{"index open ENFILE", vfs.OpOpen, syscall.ENFILE},
		{"index map ENOMEM", vfs.OpMap, syscall.ENOMEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var on atomic.Bool
			fsys := &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
				if on.Load() && op == tc.op && strings.HasSuffix(path, indexSuffix) {
					return tc.errno
				}
				return nil
			}}
			o := testOptions(fsys)
			dir := t.TempDir()
			l := mustOpen(t, dir, o)
			acked := appendSynced(t, l, 4, "a")
			l.Close()
			on.Store(true)
			if l, err := Open(dir, o); err == nil {
				l.Close()
				t.Fatal("opened with the index refused")
			} else if !vfs.IsResource(err) {
				t.Fatalf("Open: %v, want an error vfs.IsResource recognises", err)
			}
			on.Store(false)
			l = mustOpen(t, dir, o)
			defer l.Close()
			if got := values(t, readAll(t, l, 0)); !equalStrings(got, acked) {
				t.Fatalf("reopened: %v, want %v", got, acked)
			}
		})
	}
}
