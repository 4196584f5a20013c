package broker

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// What a partition does when its log meets EMFILE or ENOSPC (or EIO), site by site, and that
// it recovers by itself once the error clears, with no restart. Each scenario produces some
// acks=all records (acknowledged: fsynced), turns the injection on for the partition's files,
// drives the site with more produces, checks what the partition answers, turns the injection
// off, and checks that produce and fetch work again, that every acknowledged record is there,
// and what the log says:
//
//   - serves: produce and fetch keep working throughout (the recovery-point write is retried
//     by the flusher), and the log says when the failures started and when they ended.
//   - refuses: the produce that meets the error gets KAFKA_STORAGE_ERROR (retriable), fetch
//     keeps working, the log is not stopped; the next produces after the error clears succeed.
//   - stops: the log stops; produce and fetch get KAFKA_STORAGE_ERROR until the supervisor
//     reopens it through recovery, which it does by itself after the error clears (its
//     attempts meanwhile fail, with the backoff between them), logging "log recovered".
//
// The backoffs are 5 to 50 ms, so the scenarios take milliseconds; every wait polls with a
// deadline.
func TestPartitionUnderResourceErrors(t *testing.T) {
	const (
		serves = iota
		refuses
		stops
	)
	suffix := func(s string) func(string) bool {
		return func(path string) bool { return strings.HasSuffix(path, s) }
	}
	notFirst := func(s string) func(string) bool {
		first := strings.Repeat("0", 20) + s
		return func(path string) bool { return strings.HasSuffix(path, s) && filepath.Base(path) != first }
	}
	at := func(op vfs.Op, path func(string) bool) func(vfs.Op, string) bool {
		return func(o vfs.Op, p string) bool { return o == op && path(p) }
	}
	for _, tc := range []struct {
		name  string
		fails func(op vfs.Op, path string) bool
		errno syscall.Errno
		want  int
		// reopen, for a stopped log, is an injection that the supervisor's first attempts to
		// reopen it meet (before the error clears): an index that cannot be opened.
		reopen func(op vfs.Op, path string) bool
	}{
		{name: "checkpoint EMFILE", fails: at(vfs.OpCreate, suffix("recovery-point.tmp")), errno: syscall.EMFILE, want: serves},
		{name: "checkpoint ENOSPC", fails: at(vfs.OpWrite, suffix("recovery-point.tmp")), errno: syscall.ENOSPC, want: serves},
		{name: "index open at roll EMFILE", fails: at(vfs.OpOpen, notFirst(".index")), errno: syscall.EMFILE, want: refuses},
		{name: "index pages at roll ENOSPC", fails: at(vfs.OpPopulate, notFirst(".timeindex")), errno: syscall.ENOSPC, want: refuses},
		{name: "segment create at roll EMFILE", fails: func(op vfs.Op, path string) bool {
			// The new segment's log file: a standby made ahead (renamed and opened at the
			// roll), or the file the roll creates without one.
			return (op == vfs.OpCreate || op == vfs.OpOpen) && (notFirst(".log")(path) || strings.HasSuffix(path, ".log.tmp"))
		}, errno: syscall.EMFILE, want: refuses},
		{name: "append ENOSPC", fails: at(vfs.OpWrite, suffix(".log")), errno: syscall.ENOSPC, want: refuses},
		{name: "append EIO", fails: at(vfs.OpWrite, suffix(".log")), errno: syscall.EIO, want: stops},
		{name: "fsync ENOSPC", fails: at(vfs.OpSync, suffix(".log")), errno: syscall.ENOSPC, want: stops},
		{name: "fsync EMFILE", fails: at(vfs.OpSync, suffix(".log")), errno: syscall.EMFILE, want: stops},
		{name: "fsync EIO, then EMFILE on index open at reopen", fails: at(vfs.OpSync, suffix(".log")), errno: syscall.EIO, want: stops,
			reopen: func(op vfs.Op, path string) bool { return op == vfs.OpOpen && strings.HasSuffix(path, ".index") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			part := filepath.Join(dir, "t-0") + string(filepath.Separator)
			var on, reopening atomic.Bool
			var hits, reopenHits atomic.Int64
			cfg := testConfig(t, dir)
			cfg.LogRetryBackoff, cfg.LogRetryBackoffMax = 5*time.Millisecond, 50*time.Millisecond
			cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: func(op vfs.Op, path string) error {
				if !strings.HasPrefix(path, part) {
					return nil
				}
				if reopening.Load() && tc.reopen(op, path) {
					reopenHits.Add(1)
					return syscall.EMFILE
				}
				if on.Load() && tc.fails(op, path) {
					hits.Add(1)
					return tc.errno
				}
				return nil
			}}
			logs := captureLogs(&cfg)
			b := startBroker(t, cfg)
			c := dial(t, b.Addr().String())
			// 600-byte segments: a roll every few produces, and a recovery point written at each.
			createTopic(t, c, "t", 1, wire.ConfigEntry{Name: "segment.bytes", Value: strPtr("600")})
			var acked []string
			produceAcked := func(v string) {
				t.Helper()
				if got := produce(t, c, "t", 0, wire.AcksAll, records(t, v)); got.ErrorCode != wire.NoError {
					t.Fatalf("produce %s: %v", v, got.ErrorCode)
				}
				acked = append(acked, v)
			}
			for i := range 3 {
				produceAcked("before-" + string(rune('a'+i)))
			}

			on.Store(true)
			if tc.reopen != nil {
				reopening.Store(true)
			}
			// Drive: produce until the injected error is met (by the flusher, which may meet
			// it first, or by a produce, which must for refuses and stops).
			var code wire.ErrorCode
			for i := 0; hits.Load() == 0 || (tc.want != serves && code == wire.NoError); i++ {
				if i == 100 {
					t.Fatal("100 produces never met the injected error")
				}
				v := "drive-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
				code = produce(t, c, "t", 0, wire.AcksAll, records(t, v)).ErrorCode
				if code == wire.NoError {
					acked = append(acked, v)
				}
			}
			p := b.partition("t", 0)
			switch tc.want {
			case serves:
				if code != wire.NoError || p.log().Err() != nil {
					t.Fatalf("produce meeting the error: %v, log error %v; want it to keep serving", code, p.log().Err())
				}
				produceAcked("during")
				checkFetched(t, c, acked)
			case refuses:
				if code != wire.ErrKafkaStorageError || !code.Retriable() {
					t.Fatalf("produce meeting the error: %v, want the retriable KAFKA_STORAGE_ERROR", code)
				}
				if err := p.log().Err(); err != nil {
					t.Fatalf("the log stopped: %v", err)
				}
				checkFetched(t, c, acked)
			case stops:
				if code != wire.ErrKafkaStorageError {
					t.Fatalf("produce meeting the error: %v, want KAFKA_STORAGE_ERROR", code)
				}
				if tc.reopen != nil {
					// The supervisor's attempts meet the error too, and are spaced by the
					// backoff; meanwhile the partition answers with the retriable error.
					waitUntil(t, "two failed attempts to reopen the log", func() bool { return reopenHits.Load() >= 2 })
					if got := fetchP(t, c, "t", 0, 0, 0, 1); got.ErrorCode != wire.ErrKafkaStorageError {
						t.Fatalf("fetch from the stopped log: %v, want KAFKA_STORAGE_ERROR", got.ErrorCode)
					}
					if got := produce(t, c, "t", 0, wire.AcksLeader, records(t, "lost")); got.ErrorCode != wire.ErrKafkaStorageError {
						t.Fatalf("produce to the stopped log: %v, want KAFKA_STORAGE_ERROR", got.ErrorCode)
					}
				}
			}

			on.Store(false)
			reopening.Store(false)
			// Recovery by itself: produce works again (retried as a client would), fetch
			// returns every acknowledged record.
			waitUntil(t, "produce to work again", func() bool {
				got := produce(t, c, "t", 0, wire.AcksAll, records(t, "after"))
				// Never NOT_ENOUGH_REPLICAS: the rebuilt replica takes the leadership before
				// it publishes whether it accepts acks=all (resetReplica).
				if got.ErrorCode != wire.NoError && got.ErrorCode != wire.ErrKafkaStorageError {
					t.Fatalf("produce after the error cleared: %v", got.ErrorCode)
				}
				return got.ErrorCode == wire.NoError
			})
			acked = append(acked, "after")
			checkFetched(t, c, acked)
			switch tc.want {
			case serves:
				waitUntil(t, `"recovery point write succeeded again"`, func() bool {
					return strings.Contains(logs(), "recovery point write succeeded again")
				})
				if n := strings.Count(logs(), "recovery point write failed; retrying"); n != 1 {
					t.Fatalf("%d log lines for the failed recovery-point writes, want 1", n)
				}
			case refuses:
				waitUntil(t, `"append succeeded again"`, func() bool { return strings.Contains(logs(), "append succeeded again") })
			case stops:
				out := logs()
				if !strings.Contains(out, "partition log stopped; reopening it through recovery") ||
					!strings.Contains(out, `msg="log recovered" partition=t-0`) {
					t.Fatalf("no log lines for the stop and the recovery:\n%s", out)
				}
				if tc.reopen != nil && strings.Count(out, "reopening partition log failed; retrying") != 1 {
					t.Fatalf("want one line for the failed attempts:\n%s", out)
				}
			}
		})
	}
}

// checkFetched fetches the partition t-0 from offset 0 and checks it holds the acknowledged
// values in order; a record whose produce failed may be there too (never acknowledged, and
// kept whole by recovery), but nothing else.
func checkFetched(t *testing.T, c *client.Conn, want []string) {
	t.Helper()
	var got []string
	for off := int64(0); ; {
		res := fetchP(t, c, "t", 0, off, 0, 1)
		if res.ErrorCode != wire.NoError {
			t.Fatalf("fetch at %d: %v", off, res.ErrorCode)
		}
		vals := fetchedValues(t, res.Records)
		if len(vals) == 0 {
			break
		}
		got = append(got, vals...)
		off += int64(len(vals))
	}
	var kept []string
	for _, v := range got {
		if !strings.HasPrefix(v, "drive-") || contains(want, v) {
			kept = append(kept, v)
		}
	}
	if strings.Join(kept, ",") != strings.Join(want, ",") {
		t.Fatalf("fetched %v, want the acknowledged %v", got, want)
	}
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// partitionLogFault is a fault, off until Set, on op of the .log files in the partition
// directory dir (with its trailing separator).
func partitionLogFault(op vfs.Op, dir string, err error) *vfs.Switch {
	return &vfs.Switch{Op: op, Err: err, Match: func(path string) bool {
		return strings.HasPrefix(path, dir) && strings.HasSuffix(path, ".log")
	}}
}

// waitUntil polls cond every millisecond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A long poll parked on a log that stops answers at once with KAFKA_STORAGE_ERROR, not at its
// max wait; and Close stops the supervisor (here waiting a minute before its next attempt)
// and returns without an error: the stopped log was reported when it stopped, and the next
// start recovers it.
func TestStoppedLogReleasesLongPollsAndCloseStopsTheSupervisor(t *testing.T) {
	dir := t.TempDir()
	part := filepath.Join(dir, "t-0") + string(filepath.Separator)
	on := partitionLogFault(vfs.OpSync, part, syscall.EIO)
	cfg := testConfig(t, dir)
	cfg.LogRetryBackoff, cfg.LogRetryBackoffMax = time.Minute, time.Minute
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: on.Inject}
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) }) // after a failure below
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	if got := produce(t, c, "t", 0, wire.AcksAll, records(t, "a")); got.ErrorCode != wire.NoError {
		t.Fatal(got.ErrorCode)
	}
	polled := make(chan wire.FetchResponsePartition, 1)
	poller := dial(t, b.Addr().String())
	go func() { polled <- fetchP(t, poller, "t", 0, 1, 60000, 1<<20) }()
	p := b.partition("t", 0)
	waitUntil(t, "the fetch to park", func() bool { return p.parkedCount() > 0 })

	on.Set(true)
	if got := produce(t, c, "t", 0, wire.AcksAll, records(t, "b")); got.ErrorCode != wire.ErrKafkaStorageError {
		t.Fatalf("acks=all produce whose fsync failed: %v, want KAFKA_STORAGE_ERROR", got.ErrorCode)
	}
	select {
	case got := <-polled:
		if got.ErrorCode != wire.ErrKafkaStorageError {
			t.Fatalf("the parked fetch answered %v, want KAFKA_STORAGE_ERROR", got.ErrorCode)
		}
	case <-time.After(30 * time.Second): // a failure bound, far below the poll's 60 s
		t.Fatal("the parked fetch was not released when its log stopped")
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close(context.Background()) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close with a stopped log: %v, want a clean shutdown (the next start recovers it)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return with a stopped log waiting for its supervisor")
	}
}

// A disk that lets the log reopen but fails its next write makes it stop again at once: the
// supervisor's delays go on doubling (5, 10, 20, 40 ms here) instead of starting again at the
// minimum, so such a disk costs a reopening per backoff, not a busy loop.
func TestLogStoppingAgainAfterItsRecoveryBacksOffFurther(t *testing.T) {
	dir := t.TempDir()
	part := filepath.Join(dir, "t-0") + string(filepath.Separator)
	cfg := testConfig(t, dir)
	cfg.LogRetryBackoff, cfg.LogRetryBackoffMax = 5*time.Millisecond, 10*time.Second
	on := partitionLogFault(vfs.OpWrite, part, syscall.EIO)
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: on.Inject}
	logs := captureLogs(&cfg)
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	on.Set(true)
	for i := range 4 {
		if got := produce(t, c, "t", 0, wire.AcksLeader, records(t, "x")); got.ErrorCode != wire.ErrKafkaStorageError {
			t.Fatalf("produce %d: %v, want KAFKA_STORAGE_ERROR", i, got.ErrorCode)
		}
		waitUntil(t, "the log recovered", func() bool { return strings.Count(logs(), `msg="log recovered"`) > i })
	}
	var delays []string
	for _, line := range strings.Split(logs(), "\n") {
		if strings.Contains(line, "partition log stopped; reopening it through recovery") {
			_, rest, _ := strings.Cut(line, "retry_in=")
			delay, _, _ := strings.Cut(rest, " ")
			delays = append(delays, delay)
		}
	}
	if got := strings.Join(delays, ","); got != "5ms,10ms,20ms,40ms" {
		t.Fatalf("delays before the reopenings: %s, want 5ms,10ms,20ms,40ms", got)
	}
}

// TestResetReplicaKeepsAcksAll: a replica rebuilt over a recovered log (resetReplica) takes
// the leadership in the same critical section as it is made, so a leader with a full ISR is
// never seen refusing acks=all meanwhile (a produce then would get NOT_ENOUGH_REPLICAS).
func TestResetReplicaKeepsAcksAll(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	p := b.partition("t", 0)
	waitUntil(t, "the partition to accept acks=all", p.acksAll.Load)
	var refused, samples atomic.Int64 // samples of acksAll, and those that said no
	stop := make(chan struct{})
	done, started := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		close(started)
		for {
			select {
			case <-stop:
				return
			default:
			}
			samples.Add(1)
			if !p.acksAll.Load() {
				refused.Add(1)
			}
		}
	}()
	<-started
	for range 2000 {
		l := p.log()
		b.resetReplica(p, l, l)
	}
	close(stop)
	<-done
	if samples.Load() < 100 {
		t.Fatalf("only %d samples while the replica was rebuilt: the check saw nothing", samples.Load())
	}
	if n := refused.Load(); n > 0 {
		t.Fatalf("acks=all refused in %d of %d samples while the replica was rebuilt 2000 times", n, samples.Load())
	}
	if got := produce(t, c, "t", 0, wire.AcksAll, records(t, "after")); got.ErrorCode != wire.NoError {
		t.Fatalf("produce after the rebuilds: %v", got.ErrorCode)
	}
}
