package segment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// retentionLog opens a log at hour 100 of a fake clock holding a closed segment (offset 0, hour
// 80) and an active one (offsets 1-3, hours 81-82), the closed one finished by the flusher.
func retentionLog(t *testing.T, fsys vfs.FS, dir string, mmap bool, o Options) *Log {
	t.Helper()
	clock := &fakeClock{now: time.UnixMilli(100 * time.Hour.Milliseconds())}
	o.FS, o.MmapAppend, o.Now = fsys, mmap, clock.Now
	o.SegmentBytes = 4096
	o.Logger = quietLogger()
	l := mustOpen(t, dir, o)
	hour := time.Hour.Milliseconds()
	mustAppend(t, l, sizedBatch(t, 4060, 80*hour)) // fills the segment: the next append rolls
	mustAppend(t, l, makeBatch(t, "a", 2, 81*hour))
	mustAppend(t, l, makeBatch(t, "b", 1, 82*hour))
	if segs := l.Segments(); len(segs) != 2 || segs[1].Base() != 1 {
		t.Fatalf("setup: want segments at 0 and 1, have %d (last at %d)", len(segs), segs[len(segs)-1].Base())
	}
	if err := l.Sync(context.Background()); err != nil { // the flusher finishes the closed one
		t.Fatal(err)
	}
	return l
}

// As Kafka's: when retention selects every segment, the active one too, and the high watermark
// has reached the log end, a new empty segment is rolled at the log end and the others are
// deleted: the log start becomes the log end, appends go on at the same offset, and a restart
// finds both. A segment holding an offset at or above the high watermark stays. A positive
// retention.bytes never deletes the active segment (the log without it would be below the
// limit), as in Kafka; only retention.bytes=0 (ZeroRetentionBytes) does.
func TestRetentionDeletesActiveSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		// wantAll: retention deletes the active segment once the high watermark allows it.
		wantAll bool
	}{
		{"retention.ms", Options{RetentionMs: 10 * time.Hour}, true},
		{"retention.bytes=0", Options{RetentionMs: -1, RetentionBytes: ZeroRetentionBytes}, true},
		{"retention.bytes=1", Options{RetentionMs: -1, RetentionBytes: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			modes(t, func(t *testing.T, fsys vfs.FS, dir string, mmap bool) {
				l := retentionLog(t, fsys, dir, mmap, tc.o)
				defer func() { _ = l.Close() }()
				const end = 4

				// Nothing at or above the high watermark goes: not the closed segment while
				// the watermark is inside it, not the active one until it reaches the end.
				if res, err := l.DeleteExpired(0); err != nil || res.Segments != 0 || l.StartOffset() != 0 {
					t.Fatalf("high watermark 0: %+v, %v, start %d; want nothing deleted", res, err, l.StartOffset())
				}
				if res, err := l.DeleteExpired(end - 1); err != nil || res.Segments != 1 || res.Rolled || l.StartOffset() != 1 {
					t.Fatalf("high watermark %d: %+v, %v, start %d; want only the closed segment deleted", end-1, res, err, l.StartOffset())
				}
				res, err := l.DeleteExpired(end)
				if err != nil {
					t.Fatal(err)
				}
				if !tc.wantAll {
					if res.Segments != 0 || l.StartOffset() != 1 || l.EndOffset() != end {
						t.Fatalf("deleted the active segment: %+v, log [%d, %d)", res, l.StartOffset(), l.EndOffset())
					}
					return
				}
				if res.Segments != 1 || !res.Rolled || res.NewStart != end {
					t.Fatalf("high watermark at the log end: %+v; want the active segment rolled and deleted", res)
				}
				checkEmptiedAt(t, l, end)

				// A restart right away: the empty last segment is the log end.
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				o := l.opts
				l = mustOpen(t, dir, o)
				checkEmptiedAt(t, l, end)

				// Appends go on at the same offset, and a second restart keeps them.
				if info := mustAppend(t, l, makeBatch(t, "c", 2, 99*time.Hour.Milliseconds())); info.FirstOffset != end {
					t.Fatalf("append after retention emptied the log at %d, want %d", info.FirstOffset, end)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = mustOpen(t, dir, o)
				if l.StartOffset() != end || l.EndOffset() != end+2 {
					t.Fatalf("after a restart the log is [%d, %d), want [%d, %d)", l.StartOffset(), l.EndOffset(), end, end+2)
				}
				if got := strings.Join(values(t, readAll(t, l, end)), ","); got != "c-0,c-1" {
					t.Fatalf("log holds %q, want c-0,c-1", got)
				}
			})
		})
	}
}

// checkEmptiedAt checks a log that retention emptied at end: one empty segment at end, the log
// start and end both at end, a read below it out of range and a read at it empty.
func checkEmptiedAt(t *testing.T, l *Log, end batch.Offset) {
	t.Helper()
	if l.StartOffset() != end || l.EndOffset() != end {
		t.Fatalf("log is [%d, %d), want [%d, %d)", l.StartOffset(), l.EndOffset(), end, end)
	}
	if segs := l.Segments(); len(segs) != 1 || segs[0].Base() != end || segs[0].Size() != 0 {
		t.Fatalf("want one empty segment at %d, have %d (first at %d)", end, len(segs), segs[0].Base())
	}
	var oor *OutOfRangeError
	if _, err := l.Read(end-1, 1<<20, end); !errors.As(err, &oor) || oor.Start != end || oor.End != end {
		t.Fatalf("read of a deleted offset: %v, want out of range [%d, %d]", err, end, end)
	}
	s, err := l.Read(end, 1<<20, end)
	if err != nil || s.Len != 0 {
		t.Fatalf("read at the log end: %d bytes, %v", s.Len, err)
	}
	s.Release()
	if l.MaxTimestamp() != -1 {
		t.Fatalf("empty log has max timestamp %d", l.MaxTimestamp())
	}
}

// A crash after retention emptied the log (or during it, before the old files are renamed
// away) never moves the log end back: the new segment is durable and the rolled one synced
// before anything is deleted, and after the deletion the renames are durable too.
func TestRetentionOfActiveSegmentSurvivesCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		// crashAtRetire crashes just before the first segment file is renamed away.
		crashAtRetire bool
	}{
		{"after", false},
		{"before-renames", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			var armed atomic.Bool
			var crashed atomic.Pointer[vfs.MemFS]
			efs := &vfs.ErrorFS{FS: m, Inject: func(op vfs.Op, path string) error {
				if op == vfs.OpRename && strings.HasSuffix(path, logSuffix+deletedSuffix) && armed.Load() && crashed.Load() == nil {
					crashed.Store(m.Crash(vfs.CrashOptions{}))
					return vfs.EIO
				}
				return nil
			}}
			l := retentionLog(t, efs, "/p", false, Options{RetentionMs: 10 * time.Hour})
			// Unsynced records in the active segment: the crash must not lose them while the
			// log end moves on.
			mustAppend(t, l, makeBatch(t, "u", 3, 83*time.Hour.Milliseconds()))
			const end = 7
			armed.Store(tc.crashAtRetire)
			_, err := l.DeleteExpired(end)
			after := crashed.Load()
			if tc.crashAtRetire {
				if after == nil || err == nil {
					t.Fatalf("no crash at the renames (err %v)", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				after = m.Crash(vfs.CrashOptions{})
			}
			_ = l.Close() // fails: the file system crashed

			o := l.opts
			o.FS = after
			l2 := mustOpen(t, "/p", o)
			defer l2.Close()
			if l2.EndOffset() != end {
				t.Fatalf("after the crash the log ends at %d, want %d", l2.EndOffset(), end)
			}
			if !tc.crashAtRetire && l2.StartOffset() != end {
				t.Fatalf("after the crash the log starts at %d, want %d: deleted segments came back", l2.StartOffset(), end)
			}
			// Whatever came back is whole (offset 0 is the sized batch, 1-6 these).
			want := []string{"a-0", "a-1", "b-0", "u-0", "u-1", "u-2"}
			from := max(l2.StartOffset(), 1)
			if got := values(t, readAll(t, l2, from)); strings.Join(got, ",") != strings.Join(want[from-1:], ",") {
				t.Fatalf("after the crash the log holds %q from %d", got, from)
			}
			if info := mustAppend(t, l2, makeBatch(t, "post", 1, 1)); info.FirstOffset != end {
				t.Fatalf("append after the crash at %d, want %d", info.FirstOffset, end)
			}
		})
	}
}

// Retention rolling the active segment away while appends and reads go on: every appended
// batch is either below the log start (deleted) or readable whole, offsets are never reused,
// and reads never see a corrupt batch. Run it under -race.
func TestRetentionRacesAppends(t *testing.T) {
	for _, mmap := range []bool{false, true} {
		t.Run(fmt.Sprintf("mmap=%v", mmap), func(t *testing.T) {
			m := newMem(t)
			o := testOptions(m)
			o.MmapAppend = mmap
			o.SegmentBytes = 8192
			o.RetentionMs = time.Hour
			clock := &fakeClock{now: time.UnixMilli(100 * time.Hour.Milliseconds())}
			o.Now = clock.Now // never changed: every record (timestamp ~0) has expired
			l := mustOpen(t, "/p", o)
			defer l.Close()

			const wantRolls = 20
			var rolls atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			wg.Add(2)
			go func() { // retention, as the broker's loop
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					res, err := l.DeleteExpired(l.EndOffset())
					if err != nil {
						errs <- fmt.Errorf("DeleteExpired: %w", err)
						return
					}
					if res.Rolled {
						rolls.Add(1)
					}
				}
			}()
			go func() { // a reader at the log start
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					s, err := l.Read(l.StartOffset(), 1<<20, l.EndOffset())
					if errors.Is(err, ErrOffsetOutOfRange) {
						continue // the start moved since it was loaded
					}
					if err != nil {
						errs <- fmt.Errorf("Read: %w", err)
						return
					}
					buf, err := s.AppendTo(nil)
					s.Release()
					if err != nil {
						errs <- fmt.Errorf("read slice: %w", err)
						return
					}
					for len(buf) > 0 {
						b, rest, err := batch.Next(buf)
						if err != nil {
							break // a partial batch at the end
						}
						if err := b.Validate(); err != nil {
							errs <- fmt.Errorf("read a corrupt batch at %d: %w", b.BaseOffset(), err)
							return
						}
						buf = rest
					}
				}
			}()

			var infos []AppendInfo
			deadline := time.Now().Add(30 * time.Second)
			for rolls.Load() < wantRolls && time.Now().Before(deadline) && len(errs) == 0 {
				info := mustAppend(t, l, makeBatch(t, fmt.Sprintf("r%d", len(infos)), 1+len(infos)%3, int64(len(infos))))
				if n := len(infos); n > 0 && info.FirstOffset != infos[n-1].LastOffset+1 {
					t.Fatalf("append %d at %d, after %d: an offset reused or skipped", n, info.FirstOffset, infos[n-1].LastOffset)
				}
				infos = append(infos, info)
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if rolls.Load() < wantRolls {
				t.Fatalf("retention rolled the active segment away %d times in 30 s of appends, want %d", rolls.Load(), wantRolls)
			}

			start := l.StartOffset()
			for i, info := range infos {
				if info.LastOffset < start {
					continue // deleted
				}
				if info.FirstOffset < start {
					t.Fatalf("append %d [%d, %d] straddles the log start %d", i, info.FirstOffset, info.LastOffset, start)
				}
				s, err := l.Read(info.FirstOffset, 1<<20, l.EndOffset())
				if err != nil {
					t.Fatalf("append %d at %d, above the log start %d, unreadable: %v", i, info.FirstOffset, start, err)
				}
				buf, err := s.AppendTo(nil)
				s.Release()
				if err != nil {
					t.Fatal(err)
				}
				b, _, err := batch.Next(buf)
				if err != nil || b.BaseOffset() != info.FirstOffset {
					t.Fatalf("append %d at %d, above the log start %d, lost: %v", i, info.FirstOffset, start, err)
				}
				if got := values(t, []batch.Batch{b}); got[0] != fmt.Sprintf("r%d-0", i) {
					t.Fatalf("append %d at %d holds %q", i, info.FirstOffset, got)
				}
			}
		})
	}
}

// A segment whose files cannot be renamed away (the rename fails) has them removed instead:
// left under their names, they would be segments again at the next start, and the records
// retention deleted would come back below a log start that moved back.
func TestRetentionRemovesFilesItCannotRename(t *testing.T) {
	m := newMem(t)
	efs := &vfs.ErrorFS{FS: m, Inject: func(op vfs.Op, path string) error {
		if op == vfs.OpRename && strings.HasSuffix(path, deletedSuffix) {
			return vfs.EIO
		}
		return nil
	}}
	l := retentionLog(t, efs, "/p", false, Options{RetentionMs: 10 * time.Hour})
	end := l.EndOffset()
	res, err := l.DeleteExpired(end)
	if err != nil {
		t.Fatalf("retention with renames failing: %v (the files could be removed)", err)
	}
	if res.NewStart != end {
		t.Fatalf("retention moved the start to %d, want the log end %d", res.NewStart, end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o := l.opts
	o.FS = m
	l2 := mustOpen(t, "/p", o)
	defer l2.Close()
	if l2.StartOffset() != end || l2.EndOffset() != end {
		t.Fatalf("reopened: log [%d, %d), want [%d, %d): deleted segments came back", l2.StartOffset(), l2.EndOffset(), end, end)
	}
}

// TestRetentionBoundedByHighWatermark: with replication, retention never deletes a segment
// holding an offset at or above the high watermark (records not yet committed), however
// expired; for every high watermark, it deletes exactly the expired segments whose offsets all
// lie below it (the next segment's base at or below it), and never moves the log start past it.
func TestRetentionBoundedByHighWatermark(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(100 * time.Hour.Milliseconds())}
	o := testOptions(newMem(t))
	o.Now, o.RetentionMs = clock.Now, time.Hour // every record below is 90 hours old
	l := mustOpen(t, "/p", o)
	defer l.Close()
	for i := 0; len(l.Segments()) < 6; i++ {
		mustAppend(t, l, makeBatch(t, "r", 10, 10*time.Hour.Milliseconds()))
	}
	if err := l.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	end := l.EndOffset()
	for hw := batch.Offset(0); hw <= end+7; hw += 7 {
		segs := l.Segments()
		want := 0 // the sealed segments whose next segment starts at or below hw
		for want+1 < len(segs) && segs[want+1].Base() <= hw {
			want++
		}
		if want == len(segs)-1 && hw >= l.EndOffset() && segs[want].Size() > 0 {
			want++ // the active one too, by a roll at the log end
		}
		res, err := l.DeleteExpired(hw)
		if err != nil {
			t.Fatal(err)
		}
		if res.Segments != want {
			t.Fatalf("DeleteExpired(%d) deleted %d segments, want %d", hw, res.Segments, want)
		}
		if start := l.StartOffset(); start > hw {
			t.Fatalf("DeleteExpired(%d) moved the log start to %d, past the high watermark", hw, start)
		}
	}
}
