package segment

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// Crash at random points: after reopening, the log is a prefix of what was appended and holds
// at least everything that was synced, for every way a crash can leave the unsynced tail.
func TestCrashKeepsSyncedPrefix(t *testing.T) {
	crashes := []struct {
		name string
		opts func(r *rand.Rand) vfs.CrashOptions
	}{
		{"drop-unsynced", func(*rand.Rand) vfs.CrashOptions { return vfs.CrashOptions{} }},
		{"keep-prefix", func(r *rand.Rand) vfs.CrashOptions {
			return vfs.CrashOptions{Rand: r, KeepUnsyncedPrefix: true, KeepUnsyncedEntries: true}
		}},
		{"torn-page", func(r *rand.Rand) vfs.CrashOptions {
			return vfs.CrashOptions{Rand: r, KeepUnsyncedPrefix: true, TearLastPage: true, KeepUnsyncedEntries: true}
		}},
	}
	for _, crash := range crashes {
		for _, mmap := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/mmap=%v", crash.name, mmap), func(t *testing.T) {
				for seed := uint64(0); seed < 12; seed++ {
					crashOnce(t, seed, mmap, crash.opts)
				}
			})
		}
	}
}

func crashOnce(t *testing.T, seed uint64, mmap bool, crashOpts func(*rand.Rand) vfs.CrashOptions) {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 6000
	o.MmapAppend = mmap
	l := mustOpen(t, "/p", o)
	var appended []string
	synced := 0
	rounds := 20 + rng.IntN(60)
	for i := range rounds {
		tag := fmt.Sprintf("r%d", i)
		n := 1 + rng.IntN(8)
		mustAppend(t, l, makeBatch(t, tag, n, int64(i)))
		for j := range n {
			appended = append(appended, fmt.Sprintf("%s-%d", tag, j))
		}
		if rng.IntN(4) == 0 {
			if err := l.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			synced = len(appended)
		}
		if rng.IntN(10) == 0 { // a checkpoint now and then
			l.flushMu.Lock()
			_ = l.flushLocked(true)
			l.flushMu.Unlock()
			synced = max(synced, int(l.SyncedOffset()))
		}
	}
	// Whatever the log claims durable (also after the flusher finished a rolled segment on its
	// own) must survive.
	synced = max(synced, int(l.SyncedOffset()))
	after := m.Crash(crashOpts(rng))
	_ = l.Close() // fails: the old file system is gone

	o.FS = after
	l2 := mustOpen(t, "/p", o)
	defer l2.Close()
	got := values(t, readAll(t, l2, 0))
	if len(got) < synced {
		t.Fatalf("seed %d: %d records after crash, but %d were synced", seed, len(got), synced)
	}
	if !slices.Equal(got, appended[:len(got)]) {
		t.Fatalf("seed %d: recovered log is not a prefix of what was appended", seed)
	}
	// The recovered log takes appends at its end.
	info := mustAppend(t, l2, makeBatch(t, "post", 1, 1))
	if int(info.FirstOffset) != len(got) {
		t.Fatalf("seed %d: append after recovery at %d, want %d", seed, info.FirstOffset, len(got))
	}
}

// corruptTail closes a log of several segments, then damages the last segment's file at a
// random point (truncation or a bit flip) and reopens with no recovery point, so recovery scans.
func TestRecoveryCutsAtFirstBadBatch(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		m := newMem(t)
		o := testOptions(m)
		l := mustOpen(t, "/p", o)
		var appended []string
		for i := range 120 {
			tag := fmt.Sprintf("c%d", i)
			mustAppend(t, l, makeBatch(t, tag, 3, int64(i)))
			appended = append(appended, tag+"-0", tag+"-1", tag+"-2")
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		segs, _ := m.ReadDir("/p")
		var lastLog string
		for _, n := range segs {
			if strings.HasSuffix(n, ".log") {
				lastLog = "/p/" + n
			}
		}
		f, _ := m.OpenReadWrite(lastLog)
		size, _ := f.Size()
		at := rng.Int64N(size)
		// The partition leader epoch (bytes 12..15 of a batch) is outside the CRC, as in Kafka:
		// a flip there cannot be detected.
		undetectable := false
		orig := make([]byte, size)
		_, _ = f.ReadAt(orig, 0)
		for pos, rest := int64(0), orig; len(rest) > 0; {
			b, r, err := batch.Next(rest)
			if err != nil {
				break
			}
			if at >= pos+12 && at < pos+16 {
				undetectable = true
			}
			pos += int64(len(b))
			rest = r
		}
		damage := "truncate"
		if seed%2 == 0 {
			damage = "flip"
			one := make([]byte, 1)
			_, _ = f.ReadAt(one, at)
			one[0] ^= 1 << rng.IntN(8)
			_, _ = f.WriteAt(one, at)
		} else {
			_ = f.Truncate(at)
		}
		// Without the recovery point the damaged segment is scanned; with it a clean open would
		// trust it, which is the point of the checkpoint after a clean close.
		_ = m.Remove("/p/recovery-point")

		l2 := mustOpen(t, "/p", o)
		got := values(t, readAll(t, l2, 0)) // readAll fails on any batch that does not validate
		if !slices.Equal(got, appended[:len(got)]) {
			t.Fatalf("seed %d (%s at %d): recovered log is not a prefix", seed, damage, at)
		}
		if len(got) == len(appended) && !(damage == "flip" && undetectable) {
			t.Fatalf("seed %d (%s at %d of %d): damage not detected", seed, damage, at, size)
		}
		l2.Close()
	}
}

// Every segment's index deleted or scrambled: rebuilt from the log, with identical lookups.
func TestIndexRebuilt(t *testing.T) {
	for _, damage := range []string{"delete", "scramble", "truncate-odd"} {
		t.Run(damage, func(t *testing.T) {
			m := newMem(t)
			o := testOptions(m)
			o.SegmentBytes = 6000
			l := mustOpen(t, "/p", o)
			for i := range 300 {
				mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 2, int64(i*10)))
			}
			lookups := func(l *Log) []string {
				var out []string
				for _, s := range l.Segments() {
					for i := range s.offsets.Len() {
						out = append(out, fmt.Sprint(s.offsets.Entry(i)))
					}
					for i := range s.times.Len() {
						out = append(out, fmt.Sprint(s.times.Entry(i)))
					}
				}
				return out
			}
			want := lookups(l)
			if len(l.Segments()) < 3 || len(want) < 10 {
				t.Fatalf("test needs several indexed segments: %d segments, %d entries", len(l.Segments()), len(want))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			names, _ := m.ReadDir("/p")
			rng := rand.New(rand.NewPCG(1, 2))
			for _, n := range names {
				if !strings.HasSuffix(n, "index") {
					continue
				}
				path := "/p/" + n
				switch damage {
				case "delete":
					_ = m.Remove(path)
				case "scramble":
					f, _ := m.OpenReadWrite(path)
					size, _ := f.Size()
					junk := make([]byte, size)
					for i := range junk {
						junk[i] = byte(rng.Uint32())
					}
					_, _ = f.WriteAt(junk, 0)
				case "truncate-odd":
					f, _ := m.OpenReadWrite(path)
					size, _ := f.Size()
					if size > 3 {
						_ = f.Truncate(size - 3)
					}
				}
			}
			l2 := mustOpen(t, "/p", o)
			defer l2.Close()
			if got := lookups(l2); !slices.Equal(got, want) {
				t.Fatalf("rebuilt indexes differ:\n got %v\nwant %v", got, want)
			}
			if len(readAll(t, l2, 0)) != 300 {
				t.Fatal("log lost batches")
			}
		})
	}
}

// After a clean close, Open reads no record data: the recovery point says the log ends where the
// files end.
func TestCleanOpenReadsNoData(t *testing.T) {
	for _, mmap := range []bool{false, true} {
		m := newMem(t)
		var counts [vfs.NumOps]atomic.Int64
		var logReads atomic.Int64
		fsys := &vfs.ErrorFS{FS: m, Inject: func(op vfs.Op, path string) error {
			counts[op].Add(1)
			if op == vfs.OpRead && strings.HasSuffix(path, ".log") {
				logReads.Add(1)
			}
			return nil
		}}
		o := testOptions(fsys)
		o.MmapAppend = mmap
		l := mustOpen(t, "/p", o)
		for i := range 200 {
			mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 3, int64(i)))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		logReads.Store(0)
		l2 := mustOpen(t, "/p", o)
		if n := logReads.Load(); n != 0 {
			t.Fatalf("mmap=%v: clean open read segment data %d times", mmap, n)
		}
		if l2.EndOffset() != 600 {
			t.Fatalf("clean open: end %d, want 600", l2.EndOffset())
		}
		l2.Close()
	}
}

// A failed write or fsync stops the log: the failed append is not acknowledged, waiters get the
// error, later appends fail, and what was acknowledged before survives a reopen.
func TestDiskErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   vfs.Op
		err  error
	}{
		{"write-EIO", vfs.OpWrite, vfs.EIO},
		{"sync-ENOSPC", vfs.OpSync, vfs.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			var armed atomic.Bool
			fsys := &vfs.ErrorFS{FS: m, Inject: func(op vfs.Op, path string) error {
				if armed.Load() && op == tc.op && strings.HasSuffix(path, ".log") {
					return tc.err
				}
				return nil
			}}
			l := mustOpen(t, "/p", testOptions(fsys))
			mustAppend(t, l, makeBatch(t, "ok", 2, 1))
			if err := l.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			info, err := l.Append(makeBatch(t, "bad", 2, 2), 0)
			if tc.op == vfs.OpWrite {
				if !errors.Is(err, ErrFailed) || !errors.Is(err, tc.err) {
					t.Fatalf("append on EIO: %v", err)
				}
			} else {
				if err != nil {
					t.Fatalf("append before the failing sync: %v", err)
				}
				if err := l.WaitSynced(context.Background(), info.LastOffset); !errors.Is(err, ErrFailed) || !errors.Is(err, tc.err) {
					t.Fatalf("WaitSynced on a failing fsync: %v", err)
				}
				if l.SyncedOffset() > 2 {
					t.Fatalf("synced offset %d advanced past the failed fsync", l.SyncedOffset())
				}
			}
			if _, err := l.Append(makeBatch(t, "after", 1, 3), 0); !errors.Is(err, ErrFailed) {
				t.Fatalf("append after a disk error: %v", err)
			}
			if err := l.WaitSynced(context.Background(), 0); !errors.Is(err, ErrFailed) {
				t.Fatalf("WaitSynced on a failed log: %v", err)
			}
			_ = l.Close()
			armed.Store(false)
			l2 := mustOpen(t, "/p", testOptions(m))
			defer l2.Close()
			if got := values(t, readAll(t, l2, 0)); len(got) < 2 || got[0] != "ok-0" || got[1] != "ok-1" {
				t.Fatalf("acknowledged records lost: %v", got)
			}
		})
	}
}

// Recovery must never panic or serve a corrupt batch, whatever the segment file holds.
func FuzzRecovery(f *testing.F) {
	var seedLog []byte
	for i := range 5 {
		b := batch.Batch(makeBatch(f, fmt.Sprint(i), 2, int64(i)))
		b.SetBaseOffset(batch.Offset(i * 2))
		seedLog = append(seedLog, b...)
	}
	f.Add(seedLog, uint16(0), byte(0))
	f.Add(seedLog, uint16(100), byte(0xff))
	f.Add([]byte{}, uint16(0), byte(0))
	f.Fuzz(func(t *testing.T, data []byte, at uint16, xor byte) {
		if len(data) > 1<<16 {
			return
		}
		data = append([]byte(nil), data...)
		if len(data) > 0 {
			data[int(at)%len(data)] ^= xor
		}
		m := newMem(t)
		f, _ := m.Create("/p/00000000000000000000.log")
		_, _ = f.WriteAt(data, 0)
		l, err := Open("/p", testOptions(m))
		if err != nil {
			return // an I/O-level refusal is fine; a panic is not
		}
		defer l.Close()
		if l.Size() > int64(len(data)) {
			t.Fatalf("recovered %d bytes from a %d-byte file", l.Size(), len(data))
		}
		readAll(t, l, l.StartOffset()) // fails the test on any batch that does not validate
	})
}

// The recovery-point encoding round-trips, and any damage is detected rather than trusted.
func TestCheckpointEncoding(t *testing.T) {
	c := checkpoint{offset: 1234, segment: 1000, pos: 56789, maxTs: 1700000000000}
	b := c.encode()
	if len(b) != checkpointSize {
		t.Fatalf("encoded %d bytes, the format says %d", len(b), checkpointSize)
	}
	got, err := decodeCheckpoint(b)
	if err != nil || got != c {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x10
		if _, err := decodeCheckpoint(bad); err == nil {
			t.Fatalf("flip in byte %d accepted", i)
		}
	}
	if _, err := decodeCheckpoint(b[:30]); err == nil {
		t.Fatal("truncated checkpoint accepted")
	}
}

// A closed segment whose time index lost its entries (truncated to nothing) is rebuilt at open:
// trusted as it is, the segment would have no max timestamp, and time retention would never
// delete it or any segment after it, and lookups by timestamp would skip it.
func TestEmptyTimeIndexOfClosedSegmentIsRebuilt(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(100 * time.Hour.Milliseconds())}
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 4096
	o.RetentionMs = 10 * time.Hour
	o.Now = clock.Now
	l := mustOpen(t, "/p", o)
	for i := range 4 {
		mustAppend(t, l, sizedBatch(t, 3000, int64(80+i)*time.Hour.Milliseconds()))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := m.OpenReadWrite(segmentPath("/p", 0, timeIndexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	l = mustOpen(t, "/p", o)
	defer l.Close()
	if off, _, ok, err := l.OffsetForTimestamp(80 * time.Hour.Milliseconds()); err != nil || !ok || off != 0 {
		t.Errorf("OffsetForTimestamp(hour 80) = %d, %v, %v; want offset 0", off, ok, err)
	}
	res, err := l.DeleteExpired(l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	// All four are expired: the three closed ones and the active one (rolled away first).
	if res.Segments != 4 || !res.Rolled || l.StartOffset() != 4 {
		t.Fatalf("time retention after the restart: %+v, start %d; want 4 segments deleted", res, l.StartOffset())
	}
}

// A segment whose time index filled keeps a slot for its max timestamp: after a restart the
// segment is still found by lookups up to its newest record and is not deleted by time
// retention before that record is retention.ms old. (Batches appended in one call after the
// index filled used to leave the segment's max timestamp unrecorded.)
func TestFullTimeIndexKeepsMaxTimestamp(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.SegmentIndexBytes = 24 // two time index entries, three offset index entries
	o.IndexIntervalBytes = 1
	o.RetentionMs = time.Hour
	clock := &fakeClock{now: time.UnixMilli(1000)}
	o.Now = clock.Now
	l := mustOpen(t, "/p", o)
	mustAppend(t, l, makeBatch(t, "a", 1, 1000))
	var multi []byte
	for i, tag := range []string{"b", "c", "d"} {
		multi = append(multi, makeBatch(t, tag, 1, int64(2000+1000*i))...)
	}
	mustAppend(t, l, multi) // offsets 1-3, timestamps 2000-4000
	mustAppend(t, l, makeBatch(t, "e", 1, 5000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, "/p", o)
	defer l.Close()
	if off, ts, ok, err := l.OffsetForTimestamp(3500); err != nil || !ok || off != 3 || ts != 4000 {
		t.Errorf("after a restart OffsetForTimestamp(3500) = %d (timestamp %d, %v, %v), want 3 (4000)", off, ts, ok, err)
	}
	clock.now = time.UnixMilli(3000 + time.Hour.Milliseconds()) // an hour after 3000, not after 4000
	res, err := l.DeleteExpired(l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() > 1 { // offsets 2 and 3 (3000, 4000) are younger than retention.ms
		t.Errorf("retention deleted a segment whose newest record is younger than retention.ms: %+v", res)
	}
}
