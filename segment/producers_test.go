package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/producerstate"
)

// idemBatch is a batch of n records from producer pid at epoch, sequences from seq.
func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.DefaultBuilderOptions())
	b.SetProducerState(pid, epoch, seq)
	for i := range n {
		b.Append(&batch.Record{Timestamp: 1000 + int64(seq) + int64(i), Value: fmt.Appendf(nil, "p%d-s%d", pid, seq+int32(i))})
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), out...)
}

// sequencesIn lists the values of the log's records: each record once means no duplicate.
func valuesIn(t testing.TB, l *Log) []string { return values(t, readAll(t, l, l.StartOffset())) }

func TestProducerDedup(t *testing.T) {
	l := mustOpen(t, "/p", testOptions(newMem(t)))
	defer l.Close()
	first := mustAppend(t, l, idemBatch(t, 5, 0, 0, 3))
	mustAppend(t, l, idemBatch(t, 5, 0, 3, 2))
	end := l.EndOffset()
	before := l.Producers()

	dup := mustAppend(t, l, idemBatch(t, 5, 0, 0, 3))
	if !dup.Duplicate || dup.FirstOffset != first.FirstOffset || dup.LastOffset != first.LastOffset || l.EndOffset() != end {
		t.Fatalf("a retry of the first batch: %+v (end %d→%d), want a duplicate at %d..%d with nothing written",
			dup, end, l.EndOffset(), first.FirstOffset, first.LastOffset)
	}
	notIdem := makeBatch(t, "plain", 1, 0)
	for _, c := range []struct {
		name string
		buf  []byte
		want error
	}{
		{"gap", idemBatch(t, 5, 0, 6, 1), producerstate.ErrOutOfOrderSequence},
		{"older epoch", func() []byte { mustAppendAt(t, l, 6, 3); return idemBatch(t, 6, 2, 0, 1) }(), producerstate.ErrInvalidProducerEpoch},
		{"unknown producer", idemBatch(t, 99, 0, 4, 1), producerstate.ErrUnknownProducerID},
		{"sequence without a producer", idemBatch(t, -1, -1, 0, 1), producerstate.ErrInvalidRecord},
		{"negative epoch", idemBatch(t, 8, -3, 0, 1), producerstate.ErrInvalidRecord},
		{"duplicate with another batch", append(append([]byte(nil), notIdem...), idemBatch(t, 5, 0, 3, 2)...), producerstate.ErrDuplicateSequence},
	} {
		t.Run(c.name, func(t *testing.T) {
			end, before := l.EndOffset(), l.Producers()
			if _, err := l.Append(c.buf, 7); !errors.Is(err, c.want) {
				t.Fatalf("Append = %v, want %v", err, c.want)
			}
			if l.EndOffset() != end || !slices.EqualFunc(before, l.Producers(), equalEntry) {
				t.Fatal("a refused append changed the log or the state")
			}
		})
	}
	_ = before
	want := []string{"p5-s0", "p5-s1", "p5-s2", "p5-s3", "p5-s4", "p6-s0", "p6-s1", "p6-s2"}
	if got := valuesIn(t, l); !slices.Equal(got, want) {
		t.Fatalf("the log holds %v, want %v", got, want)
	}
}

// mustAppendAt appends a batch of producer pid at epoch 3 from sequence 0.
func mustAppendAt(t testing.TB, l *Log, pid int64, epoch int16) {
	t.Helper()
	mustAppend(t, l, idemBatch(t, pid, epoch, 0, 3))
}

func equalEntry(a, b producerstate.Entry) bool {
	return a.ProducerID == b.ProducerID && a.Epoch == b.Epoch && a.LastTimestamp == b.LastTimestamp && slices.Equal(a.Runs, b.Runs)
}

// appendProducers appends rounds batches of 1-3 records from 3 producers, a retry of the
// previous batch of each now and then, from the producers' next sequences in next (updated).
func appendProducers(t testing.TB, l *Log, rounds int, next map[int64]int32) {
	t.Helper()
	for i := range rounds {
		pid := int64(i % 3)
		n := 1 + i%3
		info := mustAppend(t, l, idemBatch(t, pid, 0, next[pid], n))
		if info.Duplicate {
			t.Fatalf("round %d: a new batch was a duplicate", i)
		}
		if i%4 == 0 {
			if again := mustAppend(t, l, idemBatch(t, pid, 0, next[pid], n)); !again.Duplicate || again.FirstOffset != info.FirstOffset {
				t.Fatalf("round %d: a retry: %+v, want a duplicate at %d", i, again, info.FirstOffset)
			}
		}
		next[pid] += int32(n)
	}
}

// checkProducersRebuilt asserts that l's state is what its log implies: a retry of each
// producer's last batch is a duplicate at its first offsets, and the next sequence goes in.
func checkProducersRebuilt(t testing.TB, l *Log, want []producerstate.Entry) {
	t.Helper()
	if got := l.Producers(); !slices.EqualFunc(got, want, equalEntry) {
		t.Fatalf("producer state\n%+v\nwant\n%+v", got, want)
	}
	for _, e := range want {
		last := e.Runs[len(e.Runs)-1]
		n := int(last.LastSeq - last.FirstSeq + 1)
		info := mustAppend(t, l, idemBatch(t, e.ProducerID, e.Epoch, last.FirstSeq, n))
		if !info.Duplicate || info.FirstOffset != last.FirstOffset {
			t.Fatalf("producer %d's last batch again: %+v, want a duplicate at %d", e.ProducerID, info, last.FirstOffset)
		}
	}
}

func TestProducerStateFollower(t *testing.T) {
	leader := mustOpen(t, "/p", testOptions(newMem(t)))
	defer leader.Close()
	follower := mustOpen(t, "/f", testOptions(newMem(t)))
	defer follower.Close()
	appendProducers(t, leader, 200, map[int64]int32{})
	for _, b := range readAll(t, leader, 0) {
		if _, err := follower.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	// The follower, become leader, deduplicates exactly as the leader did.
	checkProducersRebuilt(t, follower, leader.Producers())
}

func TestProducerStateRecovery(t *testing.T) {
	for _, c := range []struct {
		name string
		// reopen returns the file system to reopen, after l (written to m) is closed or lost.
		reopen func(t *testing.T, m *vfs.MemFS, l *Log) *vfs.MemFS
		// wantSnapshotAtEnd: the reopened log found a snapshot at its end (a clean close).
		wantSnapshotAtEnd bool
	}{
		{"clean close", func(t *testing.T, m *vfs.MemFS, l *Log) *vfs.MemFS {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			return m
		}, true},
		{"crash after a sync", func(t *testing.T, m *vfs.MemFS, l *Log) *vfs.MemFS {
			syncLog(t, l)
			after := m.Crash(vfs.CrashOptions{})
			_ = l.Close()
			return after
		}, false},
		{"no snapshot", func(t *testing.T, m *vfs.MemFS, l *Log) *vfs.MemFS {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			removeSnapshots(t, m, -1)
			return m
		}, false},
		{"corrupt snapshots", func(t *testing.T, m *vfs.MemFS, l *Log) *vfs.MemFS {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			names := snapshotNames(t, m)
			for _, name := range names[len(names)-2:] { // the close's and the last roll's
				f, err := m.OpenReadWrite("/p/" + name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte{0xff, 0xfe}, 30); err != nil {
					t.Fatal(err)
				}
				_ = f.Close()
			}
			return m
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMem(t)
			o := testOptions(m)
			o.SegmentBytes = 4 << 10 // rolls, so there are snapshots to recover from
			l := mustOpen(t, "/p", o)
			next := map[int64]int32{}
			for range 5 { // with a flush between, so that several rolls' snapshots are written
				appendProducers(t, l, 60, next)
				syncLog(t, l)
			}
			want, end := l.Producers(), l.EndOffset()
			if len(snapshotNames(t, m)) < 2 {
				t.Fatalf("%d snapshots after %d segments", len(snapshotNames(t, m)), len(l.Segments()))
			}
			o.FS = c.reopen(t, m, l)
			fsys := o.FS.(*vfs.MemFS)
			l2 := mustOpen(t, "/p", o)
			defer l2.Close()
			if l2.EndOffset() != end {
				t.Fatalf("reopened at end %d, want %d", l2.EndOffset(), end)
			}
			names := snapshotNames(t, fsys)
			atEnd := len(names) > 0 && names[len(names)-1] == fmt.Sprintf("%020d%s", end, snapshotSuffix)
			if atEnd != c.wantSnapshotAtEnd {
				t.Fatalf("snapshots %v: one at the end %d is %v, want %v", names, end, atEnd, c.wantSnapshotAtEnd)
			}
			checkProducersRebuilt(t, l2, want)
		})
	}
}

func syncLog(t testing.TB, l *Log) {
	t.Helper()
	l.flushMu.Lock()
	err := l.flushLocked(true)
	l.flushMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

func snapshotNames(t testing.TB, m vfs.FS) []string {
	t.Helper()
	names, err := m.ReadDir("/p")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, snapshotSuffix) {
			out = append(out, n)
		}
	}
	return out
}

// removeSnapshots removes the snapshot files (all of them for n < 0).
func removeSnapshots(t testing.TB, m vfs.FS, n int) {
	t.Helper()
	for i, name := range snapshotNames(t, m) {
		if n >= 0 && i >= n {
			return
		}
		if err := m.Remove("/p/" + name); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProducerStateTruncation(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 4 << 10
	l := mustOpen(t, "/p", o)
	defer l.Close()
	appendProducers(t, l, 150, map[int64]int32{})
	mid := l.EndOffset() / 2
	// The state a log holding only the batches below the cut has: a fresh follower's.
	ref := mustOpen(t, "/ref", testOptions(m))
	defer ref.Close()
	for _, b := range readAll(t, l, 0) {
		if b.BaseOffset() >= mid {
			break
		}
		if _, err := ref.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.TruncateTo(mid); err != nil {
		t.Fatal(err)
	}
	for _, name := range snapshotNames(t, m) {
		var off int64
		fmt.Sscanf(name, "%d", &off)
		if batch.Offset(off) > l.EndOffset() {
			t.Fatalf("snapshot %s survived a truncation to %d", name, l.EndOffset())
		}
	}
	checkProducersRebuilt(t, l, ref.Producers())

	if err := l.TruncateFullyAndStartAt(l.EndOffset() + 100); err != nil {
		t.Fatal(err)
	}
	if n := l.ProducerCount(); n != 0 || len(snapshotNames(t, m)) != 0 {
		t.Fatalf("after a full truncation: %d producers, snapshots %v", n, snapshotNames(t, m))
	}
	if _, err := l.Append(idemBatch(t, 0, 0, 7, 1), 7); !errors.Is(err, producerstate.ErrUnknownProducerID) {
		t.Fatalf("a known producer's next batch after a full truncation: %v, want unknown producer", err)
	}
}

func TestProducerSnapshotsRetention(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 4 << 10
	o.RetentionBytes = 8 << 10
	l := mustOpen(t, "/p", o)
	defer l.Close()
	appendProducers(t, l, 300, map[int64]int32{})
	syncLog(t, l)
	res, err := l.DeleteExpired(l.EndOffset())
	if err != nil || res.Segments == 0 {
		t.Fatalf("retention: %+v, %v", res, err)
	}
	below := 0
	for _, name := range snapshotNames(t, m) {
		var off int64
		fmt.Sscanf(name, "%d", &off)
		if batch.Offset(off) < res.NewStart {
			below++
		}
	}
	if below > 1 {
		t.Fatalf("%d snapshots below the log start %d: %v", below, res.NewStart, snapshotNames(t, m))
	}
}

func TestProducerStateWriteFailure(t *testing.T) {
	sw := &vfs.Switch{Op: vfs.OpWrite, Match: func(p string) bool { return strings.HasSuffix(p, logSuffix) }, Err: syscall.ENOSPC}
	o := testOptions(&vfs.ErrorFS{FS: newMem(t), Inject: sw.Inject})
	l := mustOpen(t, "/p", o)
	defer l.Close()
	mustAppend(t, l, idemBatch(t, 1, 0, 0, 2))
	before := l.Producers()
	sw.Set(true)
	if _, err := l.Append(idemBatch(t, 1, 0, 2, 2), 7); err == nil {
		t.Fatal("an append with the disk full succeeded")
	}
	sw.Set(false)
	if !slices.EqualFunc(before, l.Producers(), equalEntry) {
		t.Fatalf("a failed write changed the state:\n%+v\n%+v", before, l.Producers())
	}
}

func TestExpireProducers(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1000)}
	o := testOptions(newMem(t))
	o.Now = clock.Now
	o.ProducerIDExpiration = time.Hour
	l := mustOpen(t, "/p", o)
	defer l.Close()
	mustAppend(t, l, idemBatch(t, 1, 0, 0, 1)) // max timestamp 1000
	if n := l.ExpireProducers(time.UnixMilli(1000).Add(59 * time.Minute)); n != 0 {
		t.Fatalf("expired %d after 59 minutes", n)
	}
	if n := l.ExpireProducers(time.UnixMilli(1000).Add(time.Hour)); n != 1 || l.ProducerCount() != 0 {
		t.Fatalf("expired %d after an hour, %d left", n, l.ProducerCount())
	}
	if _, err := l.Append(idemBatch(t, 1, 0, 1, 1), 7); !errors.Is(err, producerstate.ErrUnknownProducerID) {
		t.Fatalf("an expired producer's next batch: %v, want unknown producer", err)
	}
}

// TestProducerStateCrash crashes a log of idempotent batches at random points, keeping
// random prefixes of what was not synced (snapshots included): the reopened log's state is
// always the one its surviving batches imply, whatever snapshot the crash left.
func TestProducerStateCrash(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		m := newMem(t)
		o := testOptions(m)
		o.SegmentBytes = 3 << 10
		l := mustOpen(t, "/p", o)
		next := map[int64]int32{}
		for range 3 + rng.IntN(6) {
			appendProducers(t, l, 10+rng.IntN(40), next)
			if rng.IntN(2) == 0 {
				syncLog(t, l)
			}
		}
		after := m.Crash(vfs.CrashOptions{Rand: rng, KeepUnsyncedPrefix: true, KeepUnsyncedEntries: true, TearLastPage: rng.IntN(2) == 0})
		_ = l.Close()
		o.FS = after
		l2 := mustOpen(t, "/p", o)
		want := producerstate.New()
		for _, b := range readAll(t, l2, l2.StartOffset()) {
			want.Update(producerstate.InfoOf(b))
		}
		if got := l2.Producers(); !slices.EqualFunc(got, want.Entries(), equalEntry) {
			t.Fatalf("seed %d: after the crash the state is\n%+v\nthe log implies\n%+v", seed, got, want.Entries())
		}
		_ = l2.Close()
	}
}
