package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// The scrub's driver: its rate (a token bucket, on synctest's clock), its round robin over the
// partitions, and its stop; the broker's config key and Close. The end-to-end behaviour (a flip
// found, the consumer refused, describe) is client's TestScrubFindsFlipAndConsumerGetsCorruptMessage.

func TestTokenBucketHonoursRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newTokenBucket(1<<20, 1<<20)
		start := time.Now()
		// The first MiB is the burst; the next ten take a second each.
		for range 11 {
			if err := tb.wait(context.Background(), 1<<20); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Fatalf("11 MiB at 1 MiB/s with a 1 MiB burst took %v, want 10s", d)
		}
		// An idle stretch refills at most the burst.
		time.Sleep(time.Hour)
		start = time.Now()
		for range 3 {
			if err := tb.wait(context.Background(), 1<<20); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("3 MiB after an idle hour took %v, want 2s", d)
		}
		// A wait larger than the burst goes through at once when full, and is paid off after.
		time.Sleep(time.Hour)
		start = time.Now()
		if err := tb.wait(context.Background(), 3<<20); err != nil {
			t.Fatal(err)
		}
		if err := tb.wait(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 2*time.Second {
			t.Fatalf("4 MiB and a byte took %v, want 2s or more", d)
		}
		// A cancelled wait returns at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := tb.wait(ctx, 10<<20); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait = %v", err)
		}
	})
}

// scrubPartition opens a log in its own directory with segments of 256 KiB and about size
// bytes of sealed, synced batches of 16 KiB, and flips a byte of the last sealed segment's last
// batch: the scrub finds it only once it has read the whole partition.
func scrubPartition(t *testing.T, name string, size int) *partition {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := segment.Open(dir, segment.Options{SegmentBytes: 256 << 10, Logger: testConfig(t, dir).Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for l.Size() < int64(size)+256<<10 {
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		bl.Append(&batch.Record{Timestamp: 1, Value: make([]byte, 16<<10)})
		b, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(append([]byte(nil), b...), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	cands := l.ScrubCandidates()
	last := cands[len(cands)-1]
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%020d.log", last.Base())), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, last.Size()-100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p := &partition{tp: topicPartition{name, 0}}
	p.current.Store(l)
	return p
}

func TestScrubberRoundRobinAtItsRateAndStops(t *testing.T) {
	parts := []*partition{scrubPartition(t, "a", 2<<20), scrubPartition(t, "b", 2<<20)}
	var sealed int64
	for _, p := range parts {
		for _, s := range p.log().ScrubCandidates() {
			sealed += s.Size()
		}
	}
	b := &Broker{logger: testConfig(t, t.TempDir()).Logger}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := newScrubber(b, 1<<20, func() []*partition { return append([]*partition(nil), parts...) }, "")
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.run(ctx)
		}()
		defer func() { cancel(); <-done }() // also when the test fails
		found := func() int {
			n := 0
			for _, p := range parts {
				if p.corrupt() {
					n++
				}
			}
			return n
		}
		// By 2 s at most 3 MiB (the 1 MiB burst, then 1 MiB/s) of the partitions' 4 MiB has
		// been read: neither flip, at the end of each, can have been reached. A scrub that
		// took one partition whole before the other would have found the first by now.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := found(); n != 0 {
			t.Fatalf("%d flips found within 2 s at 1 MiB/s", n)
		}
		time.Sleep(time.Duration(float64(sealed)/(1<<20)*float64(time.Second)) + time.Second)
		synctest.Wait()
		if n := found(); n != 2 {
			t.Fatalf("%d of 2 flips found after reading %d bytes at 1 MiB/s", n, sealed)
		}
		// The pass is over; the scrubber rests, and stops when told.
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the scrubber did not stop")
		}
	})
}

func TestScrubConfig(t *testing.T) {
	if got := DefaultConfig().ScrubBytesPerSec; got != 4<<20 {
		t.Fatalf("default log.scrub.bytes.per.sec %d", got)
	}
	for _, tc := range []struct {
		value string
		want  int64
		ok    bool
	}{{"0", -1, true}, {"-1", -1, true}, {"1048576", 1 << 20, true}, {"-2", 0, false}, {"x", 0, false}} {
		var c Config
		err := c.Set("log.scrub.bytes.per.sec", tc.value)
		if (err == nil) != tc.ok || c.ScrubBytesPerSec != tc.want {
			t.Errorf("log.scrub.bytes.per.sec=%s: %d, %v", tc.value, c.ScrubBytesPerSec, err)
		}
	}
}

// TestCloseStopsScrub closes a broker whose scrub is waiting for its rate (1 byte a second)
// in the middle of a sealed segment: Close must stop it, not wait for it.
func TestCloseStopsScrub(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ScrubBytesPerSec = 1
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1, wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("4096")})
	for range 10 {
		produce(t, c, "t", 0, -1, records(t, string(make([]byte, 1000))))
	}
	p := b.partition("t", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(p.log().ScrubCandidates()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("no sealed segment")
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- b.Close(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not return: the scrub was not stopped")
	}
}

// TestFetchOfScrubbedBadBatch marks a bad batch through the scrub and fetches around it through
// the handler: Fetch and FetchShared at the bad batch answer CORRUPT_MESSAGE; a fetch from
// before it stops short of it, inline or as a span of the file (which a client reads itself).
func TestFetchOfScrubbedBadBatch(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ScrubBytesPerSec = -1
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	pos1 := markBadBatch(t, b, c)

	if got := fetchP(t, c, "t", 0, 1, 0, 1); got.ErrorCode != wire.ErrCorruptMessage || len(got.Records) != 0 {
		t.Fatalf("fetch at the bad batch: %v, %d bytes", got.ErrorCode, len(got.Records))
	}
	if got := fetchP(t, c, "t", 0, 0, 0, 1); got.ErrorCode != wire.NoError || int64(len(got.Records)) != pos1 {
		t.Fatalf("fetch before the bad batch: %v, %d bytes, want %d", got.ErrorCode, len(got.Records), pos1)
	}
	if got := fetchedValues(t, fetchP(t, c, "t", 0, 2, 0, 1).Records); len(got) == 0 {
		t.Fatal("nothing fetched after the bad batch")
	}
	u := dial(t, "unix://"+b.UnixAddr().String())
	resp := fetchShared(t, u, "t", []int32{0}, 1, 1<<20, 1)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != wire.ErrCorruptMessage || len(resp.Spans) != 0 {
		t.Fatalf("FetchShared at the bad batch: %v, %d spans", code, len(resp.Spans))
	}
	resp = fetchShared(t, u, "t", []int32{0}, 0, 1<<20, 1)
	if len(resp.Spans) != 1 || resp.Spans[0].Pos != 0 || int64(resp.Spans[0].Len) != pos1 {
		t.Fatalf("FetchShared before the bad batch: spans %+v, want [0, %d)", resp.Spans, pos1)
	}
}

// TestScrubPositionSurvivesRestart stops a scrub most of the way through its pass and starts
// another on the same position file: it goes on from there (both flips, at the ends of the
// partitions, are found within the time a scrub from the start could not have reached them).
func TestScrubPositionSurvivesRestart(t *testing.T) {
	parts := []*partition{scrubPartition(t, "a", 2<<20), scrubPartition(t, "b", 2<<20)}
	for i, p := range parts {
		p.topicID[0] = byte(i + 1)
	}
	path := filepath.Join(t.TempDir(), scrubPositionFile)
	b := &Broker{logger: testConfig(t, t.TempDir()).Logger}
	list := func() []*partition { return append([]*partition(nil), parts...) }
	found := func() int {
		n := 0
		for _, p := range parts {
			if p.corrupt() {
				n++
			}
		}
		return n
	}
	synctest.Test(t, func(t *testing.T) {
		for run := range 2 {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				newScrubber(b, 1<<20, list, path).run(ctx)
			}()
			time.Sleep(2 * time.Second)
			synctest.Wait()
			cancel()
			<-done
			if n, want := found(), 2*run; n != want {
				t.Fatalf("run %d: %d flips found after 2 s, want %d", run, n, want)
			}
		}
	})
	// A damaged file is a new pass.
	if err := os.WriteFile(path, []byte("sluice-scrub-position 1\nlast a 0\na x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newScrubber(b, 1, list, path)
	s.loadPosition()
	if len(s.progress) != 0 {
		t.Fatalf("damaged position file loaded as %+v", s.progress)
	}
}

// TestScrubMarksSurviveRestart: the bad batches found are saved with the position, and a
// restarted scrub checks them again before anything else, restoring the marks of those still
// bad (and only those: a batch whose bytes are good again is served).
func TestScrubMarksSurviveRestart(t *testing.T) {
	parts := []*partition{scrubPartition(t, "a", 2<<20), scrubPartition(t, "b", 2<<20)}
	for i, p := range parts {
		p.topicID[0] = byte(i + 1)
	}
	path := filepath.Join(t.TempDir(), scrubPositionFile)
	b := &Broker{logger: testConfig(t, t.TempDir()).Logger}
	list := func() []*partition { return append([]*partition(nil), parts...) }
	scrubFor := func(d time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				newScrubber(b, 1<<20, list, path).run(ctx)
			}()
			time.Sleep(d)
			synctest.Wait()
			cancel()
			<-done
		})
	}
	scrubFor(time.Minute) // the whole pass: both found
	for _, p := range parts {
		if !p.corrupt() {
			t.Fatalf("%s not found corrupt", p.tp)
		}
	}
	// Restart: the logs open again without marks; b's byte is repaired meanwhile.
	for i, p := range parts {
		c := p.log().Corrupt()[0]
		dir := p.log().Dir()
		if err := p.log().Close(); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%020d.log", c.Segment)), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			var one [1]byte
			if _, err := f.WriteAt(one[:], c.End-100); err != nil { // the value's zero byte back
				t.Fatal(err)
			}
			f.Close()
		}
		l, err := segment.Open(dir, segment.Options{SegmentBytes: 256 << 10, Logger: b.logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		p.current.Store(l)
	}
	// Half a second: the burst covers the two rechecks; a new pass would need 3 s to get there.
	scrubFor(500 * time.Millisecond)
	if !parts[0].corrupt() || parts[1].corrupt() {
		t.Fatalf("after the restart: a corrupt %v (want true), b corrupt %v (want false)", parts[0].corrupt(), parts[1].corrupt())
	}
}

// markBadBatch writes topic t (one partition, 300 kB segments) through c, flips a byte in the
// value of its batch at offset 1, in its first sealed segment, and scrubs that segment, which
// marks the batch [1, 2) bad. It returns the batch's position in the segment.
func markBadBatch(t *testing.T, b *Broker, c *client.Conn) int64 {
	t.Helper()
	createTopic(t, c, "t", 1, wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("300000")})
	big := string(make([]byte, 80<<10))
	for range 6 {
		produce(t, c, "t", 0, -1, records(t, big))
	}
	p := b.partition("t", 0)
	waitUntil(t, "a sealed segment", func() bool { return len(p.log().ScrubCandidates()) > 0 })
	seg := p.log().ScrubCandidates()[0]
	sl, err := p.log().Read(1, 1, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	pos1 := sl.Pos
	sl.Release()
	f, err := os.OpenFile(filepath.Join(b.cfg.DataDir, "t-0", fmt.Sprintf("%020d.log", seg.Base())), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1}, pos1+1000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	res, err := p.log().Scrub(seg, segment.ScrubCursor{}, make([]byte, 1<<20), func(int) error { return nil })
	if err != nil || len(res.Found) != 1 || res.Found[0].FirstOffset != 1 || res.Found[0].EndOffset != 2 {
		t.Fatalf("scrub: %+v, %v", res, err)
	}
	return pos1
}

// A log that an I/O error stopped and the supervisor reopened keeps refusing the bad batch the
// scrub had found in it: the new log's segments are checked again before it serves, not at the
// scrub's next pass (days away on a large broker).
func TestReopenedLogKeepsScrubMarks(t *testing.T) {
	dir := t.TempDir()
	part := filepath.Join(dir, "t-0") + string(filepath.Separator)
	failing := partitionLogFault(vfs.OpSync, part, syscall.EIO)
	cfg := testConfig(t, dir)
	cfg.ScrubBytesPerSec = -1
	cfg.LogRetryBackoff, cfg.LogRetryBackoffMax = 10*time.Millisecond, 10*time.Millisecond
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: failing.Inject}
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	markBadBatch(t, b, c)
	p := b.partition("t", 0)
	old := p.log()

	failing.Set(true)
	if got := produce(t, c, "t", 0, wire.AcksAll, records(t, "x")); got.ErrorCode != wire.ErrKafkaStorageError {
		t.Fatalf("acks=all produce whose fsync failed: %v, want KAFKA_STORAGE_ERROR", got.ErrorCode)
	}
	failing.Set(false)
	waitUntil(t, "the supervisor to reopen the log", func() bool { l := p.log(); return l != old && l.Err() == nil })
	if !p.corrupt() {
		t.Fatal("the reopened log lost the scrub's mark")
	}
	if got := fetchP(t, c, "t", 0, 1, 0, 1); got.ErrorCode != wire.ErrCorruptMessage || len(got.Records) != 0 {
		t.Fatalf("fetch at the bad batch after the reopen: %v, %d bytes", got.ErrorCode, len(got.Records))
	}
	if got := fetchP(t, c, "t", 0, 0, 0, 1); got.ErrorCode != wire.NoError || len(got.Records) == 0 {
		t.Fatalf("fetch before the bad batch after the reopen: %v, %d bytes", got.ErrorCode, len(got.Records))
	}
}

// A scrub turn on a log the supervisor has closed to reopen it (heal.go closes the stopped log,
// recovers a new one, then swaps it in) skips nothing: the segments it came to while the log
// was closed are scrubbed in the new log, and the bad batch in them is found and marked there.
func TestScrubAcrossLogReopen(t *testing.T) {
	p := scrubPartition(t, "a", 1<<20)
	b := &Broker{logger: testConfig(t, t.TempDir()).Logger}
	s := newScrubber(b, 1<<40, func() []*partition { return []*partition{p} }, "")
	ctx := context.Background()
	old := p.log()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	for range 20 { // turns while the supervisor recovers the new log
		s.step(ctx)
	}
	l, err := segment.Open(old.Dir(), segment.Options{SegmentBytes: 256 << 10, Logger: b.logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	p.current.Store(l)
	for i := 0; ; i++ {
		if _, more := s.step(ctx); !more {
			break
		}
		if i > 100 {
			t.Fatal("the pass does not end")
		}
	}
	if !p.corrupt() {
		t.Fatal("the pass over the reopened log did not find the bad batch")
	}
}
