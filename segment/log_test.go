package segment

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/internal/vfs"
)

// modes runs a test on every combination of file system and append path.
func modes(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string, mmap bool)) {
	for _, mmap := range []bool{false, true} {
		name := "pwrite"
		if mmap {
			name = "mmap"
		}
		t.Run(name+"/os", func(t *testing.T) { fn(t, vfs.Default, filepath.Join(t.TempDir(), "p"), mmap) })
		t.Run(name+"/mem", func(t *testing.T) { fn(t, newMem(t), "/p", mmap) })
	}
}

func TestAppendReadReopen(t *testing.T) {
	modes(t, func(t *testing.T, fsys vfs.FS, dir string, mmap bool) {
		o := testOptions(fsys)
		o.MmapAppend = mmap
		l := mustOpen(t, dir, o)
		var want []string
		for i := range 150 {
			tag := fmt.Sprintf("b%d", i)
			info := mustAppend(t, l, makeBatch(t, tag, 5, int64(1000+i*10)))
			if info.FirstOffset != batch.Offset(i*5) || info.LastOffset != batch.Offset(i*5+4) || info.Records != 5 {
				t.Fatalf("append %d: %+v", i, info)
			}
			for j := range 5 {
				want = append(want, fmt.Sprintf("%s-%d", tag, j))
			}
		}
		if n := len(l.Segments()); n < 2 {
			t.Fatalf("expected the 16 KiB segment to roll, have %d segment(s)", n)
		}
		got := readAll(t, l, 0)
		if !slices.Equal(values(t, got), want) {
			t.Fatalf("read back differs")
		}
		for _, b := range got {
			if b.PartitionLeaderEpoch() != 7 {
				t.Fatalf("leader epoch not stamped: %d", b.PartitionLeaderEpoch())
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, dir, o)
		defer l.Close()
		if l.EndOffset() != 750 || l.StartOffset() != 0 {
			t.Fatalf("reopened: start %d end %d", l.StartOffset(), l.EndOffset())
		}
		if !slices.Equal(values(t, readAll(t, l, 0)), want) {
			t.Fatal("read back after reopen differs")
		}
		info := mustAppend(t, l, makeBatch(t, "after", 2, 5000))
		if info.FirstOffset != 750 {
			t.Fatalf("append after reopen got offset %d, want 750", info.FirstOffset)
		}
	})
}

func TestReadEdges(t *testing.T) {
	m := newMem(t)
	l := mustOpen(t, "/p", testOptions(m))
	defer l.Close()
	big := sizedBatch(t, 3000, 1)
	mustAppend(t, l, big)                     // offset 0
	mustAppend(t, l, makeBatch(t, "x", 3, 2)) // offsets 1..3

	// KIP-74: a first batch larger than maxBytes comes back whole.
	s, err := l.Read(0, 100, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if s.Len != len(big) || s.FirstOffset != 0 {
		t.Fatalf("oversized first batch: len %d first %d, want %d, 0", s.Len, s.FirstOffset, len(big))
	}
	s.Release()
	// A read from the middle of a batch starts at that batch.
	s, _ = l.Read(2, 1<<20, l.EndOffset())
	if s.FirstOffset != 1 {
		t.Fatalf("Read(2) starts at %d, want the batch at 1", s.FirstOffset)
	}
	s.Release()
	// upTo excludes batches at or after it.
	s, _ = l.Read(0, 1<<20, 1)
	if s.Len != len(big) {
		t.Fatalf("Read up to 1: %d bytes, want %d", s.Len, len(big))
	}
	s.Release()
	// At the end: empty, no error. Past it or below the start: out of range with bounds.
	if s, err := l.Read(4, 100, 4); err != nil || s.Len != 0 {
		t.Fatalf("Read at end: %+v %v", s, err)
	}
	var oor *OutOfRangeError
	if _, err := l.Read(5, 100, 5); !errors.As(err, &oor) || oor.Start != 0 || oor.End != 4 || !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read past end: %v", err)
	}
	if _, err := l.Read(-1, 100, 5); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read before start: %v", err)
	}
}

func TestAppendRejectsCorruptBatches(t *testing.T) {
	m := newMem(t)
	l := mustOpen(t, "/p", testOptions(m))
	defer l.Close()
	good := makeBatch(t, "g", 2, 1)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-1] ^= 1
	badMagic := append([]byte(nil), good...)
	badMagic[16] = 1
	tests := []struct {
		name string
		buf  []byte
	}{
		{"empty", nil},
		{"crc", flipped},
		{"magic", badMagic},
		{"truncated", good[:len(good)-3]},
		{"good then corrupt", append(append([]byte(nil), good...), flipped...)},
	}
	for _, tc := range tests {
		if _, err := l.Append(tc.buf, 0); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
	}
	if l.EndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("a rejected append changed the log: end %d size %d", l.EndOffset(), l.Size())
	}
}

// For random append sequences, reading any offset in [start, end) returns the batch holding it.
func TestPropertyReadFindsContainingBatch(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		m := newMem(t)
		o := testOptions(m)
		o.SegmentBytes = int64(4096 + rng.IntN(16384))
		o.IndexIntervalBytes = 1 + rng.IntN(2048)
		o.MmapAppend = seed%2 == 0
		l := mustOpen(t, "/p", o)
		type span struct{ first, last batch.Offset }
		var spans []span
		for i := range 150 {
			n := 1 + rng.IntN(6)
			var buf []byte
			for range n { // several batches per append
				buf = append(buf, makeBatch(t, fmt.Sprint(i), 1+rng.IntN(20), int64(i))...)
			}
			info := mustAppend(t, l, buf)
			off := info.FirstOffset
			for rest := buf; len(rest) > 0; {
				b, r, _ := batch.Next(rest)
				spans = append(spans, span{off, off + batch.Offset(b.LastOffsetDelta())})
				off += batch.Offset(b.LastOffsetDelta()) + 1
				rest = r
			}
		}
		check := func() {
			for off := l.StartOffset(); off < l.EndOffset(); off++ {
				s, err := l.Read(off, 1+rng.IntN(4096), l.EndOffset())
				if err != nil {
					t.Fatalf("seed %d: Read(%d): %v", seed, off, err)
				}
				buf, _ := s.AppendTo(nil)
				s.Release()
				b, _, err := batch.Next(buf)
				if err != nil {
					t.Fatalf("seed %d: Read(%d) returned no whole batch: %v", seed, off, err)
				}
				i := slices.IndexFunc(spans, func(sp span) bool { return sp.first <= off && off <= sp.last })
				if b.BaseOffset() != spans[i].first || b.LastOffset() != spans[i].last {
					t.Fatalf("seed %d: Read(%d) gave batch [%d, %d], want [%d, %d]", seed, off, b.BaseOffset(), b.LastOffset(), spans[i].first, spans[i].last)
				}
			}
		}
		check()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, "/p", o)
		check()
		l.Close()
	}
}

func TestRollBySegmentMs(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.SegmentMs = time.Hour
	l := mustOpen(t, "/p", o)
	defer l.Close()
	hour := time.Hour.Milliseconds()
	mustAppend(t, l, makeBatch(t, "a", 1, 10*hour))
	mustAppend(t, l, makeBatch(t, "b", 1, 10*hour+hour/2))
	if len(l.Segments()) != 1 {
		t.Fatal("rolled before segment.ms")
	}
	mustAppend(t, l, makeBatch(t, "c", 1, 11*hour+1))
	if segs := l.Segments(); len(segs) != 2 || segs[1].Base() != 2 {
		t.Fatalf("want a roll at offset 2 once the batch timestamp passed first+segment.ms; segments %d", len(segs))
	}
}

// TestRollBySegmentJitter: with segment.jitter.ms each segment rolls a random amount before
// segment.ms, drawn per segment and never past segment.ms; without it every segment rolls at
// segment.ms exactly.
func TestRollBySegmentJitter(t *testing.T) {
	minute := time.Minute.Milliseconds()
	// rollAges appends a batch a minute apart until the log has rolled segments times, and
	// returns the age in minutes of each segment's first batch when the next one rolled it.
	rollAges := func(jitter time.Duration, segments int) []int64 {
		o := testOptions(newMem(t))
		o.SegmentMs = time.Hour
		o.SegmentJitter = jitter
		l := mustOpen(t, "/p", o)
		defer l.Close()
		var ages []int64
		first, ts := int64(0), int64(0)
		mustAppend(t, l, makeBatch(t, "x", 1, ts))
		for len(ages) < segments {
			ts += minute
			n := len(l.Segments())
			mustAppend(t, l, makeBatch(t, "x", 1, ts))
			if len(l.Segments()) > n {
				ages = append(ages, (ts-first)/minute)
				first = ts
			}
			if ts-first > 2*time.Hour.Milliseconds() {
				t.Fatalf("jitter %v: no roll 2 h after a segment's first batch", jitter)
			}
		}
		return ages
	}
	for _, age := range rollAges(0, 5) {
		if age != 61 {
			t.Fatalf("no jitter: a segment rolled at %d min, want 61 (the first batch past segment.ms)", age)
		}
	}
	// A jitter larger than segment.ms is capped at it, as in Kafka.
	ages := rollAges(10*time.Hour, 50)
	distinct := map[int64]bool{}
	for _, age := range ages {
		if age < 1 || age > 61 {
			t.Fatalf("jitter: a segment rolled at %d min, want within (0, 61]", age)
		}
		distinct[age] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("jitter: 50 segments rolled at only %d different ages (%v): not drawn per segment", len(distinct), ages)
	}
}

func TestRetention(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(100 * time.Hour.Milliseconds())}
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 4096
	o.RetentionMs = 10 * time.Hour
	o.Now = clock.Now
	l := mustOpen(t, "/p", o)
	defer l.Close()
	// 20 segments of ~4 KiB, timestamps an hour apart.
	for i := range 20 {
		mustAppend(t, l, sizedBatch(t, 3000, int64(80+i)*time.Hour.Milliseconds()))
	}
	if err := l.Sync(context.Background()); err != nil { // lets the flusher finish rolled segments
		t.Fatal(err)
	}
	res, err := l.DeleteExpired(l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	// Records at hours 80..89 are more than 10 h old at hour 100.
	if res.Segments != 10 || l.StartOffset() != 10 || res.NewStart != 10 {
		t.Fatalf("time retention: %+v, start %d", res, l.StartOffset())
	}
	if _, err := l.Read(5, 100, l.EndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of a deleted offset: %v", err)
	}
	names, _ := m.ReadDir("/p")
	for _, n := range names {
		if filepath.Ext(n) == ".deleted" {
			t.Fatalf("retired file %s left behind with no reader", n)
		}
	}

	o.RetentionMs = -1
	o.RetentionBytes = 3 * 4096
	l.Reconfigure(o)
	res, err = l.DeleteExpired(l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	// As Kafka: delete while what remains would still be >= retention.bytes.
	segs := l.Segments()
	if res.Segments == 0 || l.Size() < 3*4096 || l.Size()-segs[0].Size() >= 3*4096 {
		t.Fatalf("size retention kept %d bytes in %d segments (%+v)", l.Size(), len(segs), res)
	}
}

// A reader holding a slice keeps a retired segment's file readable.
func TestRetentionWaitsForReaders(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 4096
	o.RetentionBytes = 1
	l := mustOpen(t, "/p", o)
	defer l.Close()
	for i := range 3 {
		mustAppend(t, l, sizedBatch(t, 3000, int64(i)))
	}
	_ = l.Sync(context.Background())
	s, err := l.Read(0, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteExpired(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	buf, err := s.AppendTo(nil)
	if err != nil || batch.Batch(buf).Validate() != nil {
		t.Fatalf("held slice unreadable after retention: %v", err)
	}
	s.Release()
}

func TestTruncateTo(t *testing.T) {
	modes(t, func(t *testing.T, fsys vfs.FS, dir string, mmap bool) {
		o := testOptions(fsys)
		o.MmapAppend = mmap
		l := mustOpen(t, dir, o)
		for i := range 100 {
			mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 4, int64(i)))
		}
		if err := l.TruncateTo(402); err != nil { // past the end: no-op
			t.Fatal(err)
		}
		if err := l.TruncateTo(202); err != nil { // inside the batch [200, 203]: it goes too
			t.Fatal(err)
		}
		if l.EndOffset() != 200 {
			t.Fatalf("end after TruncateTo(202) = %d, want 200", l.EndOffset())
		}
		if got := readAll(t, l, 0); len(got) != 50 || got[49].LastOffset() != 199 {
			t.Fatalf("after truncation: %d batches", len(got))
		}
		info := mustAppend(t, l, makeBatch(t, "new", 2, 1000))
		if info.FirstOffset != 200 {
			t.Fatalf("append after truncation at %d", info.FirstOffset)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, dir, o)
		if l.EndOffset() != 202 {
			t.Fatalf("reopened end %d, want 202", l.EndOffset())
		}
		if vs := values(t, readAll(t, l, 198)); vs[len(vs)-1] != "new-1" {
			t.Fatalf("tail after reopen: %v", vs)
		}
		if err := l.TruncateFullyAndStartAt(5000); err != nil {
			t.Fatal(err)
		}
		if l.StartOffset() != 5000 || l.EndOffset() != 5000 || len(l.Segments()) != 1 {
			t.Fatalf("after TruncateFullyAndStartAt: [%d, %d) in %d segments", l.StartOffset(), l.EndOffset(), len(l.Segments()))
		}
		mustAppend(t, l, makeBatch(t, "z", 1, 1))
		l.Close()
		l = mustOpen(t, dir, o)
		defer l.Close()
		if l.StartOffset() != 5000 || l.EndOffset() != 5001 {
			t.Fatalf("reopened after full truncation: [%d, %d)", l.StartOffset(), l.EndOffset())
		}
	})
}

func TestOffsetForTimestamp(t *testing.T) {
	m := newMem(t)
	l := mustOpen(t, "/p", testOptions(m))
	defer l.Close()
	// Batch i holds records with timestamps 1000*i + 0..9 at offsets 10i..10i+9.
	for i := range 200 {
		mustAppend(t, l, makeBatch(t, "t", 10, int64(1000*i)))
	}
	tests := []struct {
		ts      int64
		want    batch.Offset
		wantTs  int64
		wantHit bool
	}{
		{-5, 0, 0, true},
		{0, 0, 0, true},
		{5, 5, 5, true},
		{10, 10, 1000, true},
		{150_003, 1503, 150_003, true},
		{199_009, 1999, 199_009, true},
		{199_010, 0, -1, false},
	}
	for _, tc := range tests {
		off, ts, ok, err := l.OffsetForTimestamp(tc.ts)
		if err != nil || ok != tc.wantHit || (ok && (off != tc.want || ts != tc.wantTs)) {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d, %v", tc.ts, off, ts, ok, err, tc.want, tc.wantTs, tc.wantHit)
		}
	}
}

// Appenders and readers at once, under -race: every read sees whole, valid batches.
func TestConcurrentAppendAndRead(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.SegmentBytes = 8192
	l := mustOpen(t, "/p", o)
	defer l.Close()
	var wg sync.WaitGroup
	var stop atomic.Bool
	errs := make(chan error, 8)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				if _, err := l.Append(makeBatch(t, fmt.Sprintf("w%d-%d", w, i), 3, int64(i)), 0); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					_ = l.Sync(context.Background())
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(5, 6))
			for !stop.Load() {
				end := l.EndOffset()
				if end == 0 {
					continue
				}
				off := batch.Offset(rng.Int64N(int64(end)))
				s, err := l.Read(off, 2048, end)
				if err != nil {
					errs <- err
					return
				}
				buf, err := s.AppendTo(nil)
				s.Release()
				if err != nil {
					errs <- err
					return
				}
				b, _, err := batch.Next(buf)
				if err != nil || b.Validate() != nil || off < b.BaseOffset() || off > b.LastOffset() {
					errs <- fmt.Errorf("Read(%d): bad batch (%v)", off, err)
					return
				}
			}
		}()
	}
	go func() {
		for l.EndOffset() < 2700 && len(errs) == 0 {
			time.Sleep(time.Millisecond)
		}
		stop.Store(true)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if l.EndOffset() != 2700 {
		t.Fatalf("end %d, want 2700", l.EndOffset())
	}
}

// One fsync serves many waiters.
func TestGroupCommit(t *testing.T) {
	var counts [vfs.NumOps]atomic.Int64
	fsys := &vfs.ErrorFS{FS: newMem(t), Inject: vfs.Count(&counts)}
	l := mustOpen(t, "/p", testOptions(fsys))
	defer l.Close()
	before := counts[vfs.OpSync].Load()
	var wg sync.WaitGroup
	for i := range 50 {
		info := mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 1, 1))
		wg.Add(1)
		l.OnSynced(info.LastOffset, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if l.SyncedOffset() != 50 {
		t.Fatalf("synced %d, want 50", l.SyncedOffset())
	}
	if n := counts[vfs.OpSync].Load() - before; n >= 50 || n < 1 {
		t.Fatalf("%d fsyncs for 50 waiters: group commit is not grouping", n)
	}
}

func TestFlushMessages(t *testing.T) {
	m := newMem(t)
	o := testOptions(m)
	o.FlushMessages = 10
	l := mustOpen(t, "/p", o)
	defer l.Close()
	mustAppend(t, l, makeBatch(t, "a", 10, 1))
	deadline := time.Now().Add(5 * time.Second)
	for l.SyncedOffset() < 10 {
		if time.Now().After(deadline) {
			t.Fatal("flush.messages=10 did not sync 10 messages")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestChangedWakesOnAppend(t *testing.T) {
	m := newMem(t)
	l := mustOpen(t, "/p", testOptions(m))
	defer l.Close()
	ch := l.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any append")
	default:
	}
	mustAppend(t, l, makeBatch(t, "a", 1, 1))
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed by an append")
	}
}
