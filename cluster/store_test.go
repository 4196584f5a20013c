package cluster

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A restart whose raft log cannot be written (a full disk) fails with the write's error,
// naming raft.db, not with the "not the controller leader" of the step-down raft makes after
// it. Only log appends fail here: raft panics when it cannot save its term, which is not this
// package's to change.
func TestOpenReportsRaftLogWriteFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	populate(t, c, "topic", 2)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(dir)
	// The failure is reported once the append of raft's next election has failed too, not at
	// the end of the start-up timeout (raft steps down and keeps trying elections that fail the
	// same way).
	cfg.StartupTimeout = 10 * time.Minute
	fault := withStoreFault(func(op string) error {
		if op == opStoreLogs {
			return syscall.ENOSPC
		}
		return nil
	})
	type result struct {
		c   *Controller
		err error
	}
	opened := make(chan result, 1)
	go func() {
		c2, err := Open(cfg, fault)
		opened <- result{c2, err}
	}()
	var c2 *Controller
	var err error
	select {
	case r := <-opened:
		c2, err = r.c, r.err
	case <-time.After(time.Minute):
		t.Fatal("Open with a raft log that cannot be written still waiting after a minute")
	}
	if err == nil {
		_ = c2.Close()
		t.Fatal("opened with a raft log that cannot be written")
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "raft.db") ||
		!strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Open: %v, want the raft log's write error (raft.db: no space left on device)", err)
	}
}

// A raft log append that fails once (a disk briefly full) is not a raft log that cannot be
// written: raft steps down and its next election appends again. Open waits for that instead of
// failing at the first failure.
func TestOpenSurvivesOneFailedRaftLogAppend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	populate(t, c, "topic", 2)
	want := c.Metadata()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(dir)
	cfg.StartupTimeout = time.Minute // a bound for a loaded machine; the retry takes a heartbeat timeout
	var appends atomic.Int32
	c2, err := Open(cfg, withStoreFault(func(op string) error {
		if op == opStoreLogs && appends.Add(1) == 1 {
			return syscall.ENOSPC
		}
		return nil
	}))
	if err != nil {
		t.Fatalf("Open after one failed append: %v", err)
	}
	defer c2.Close()
	if appends.Load() < 2 {
		t.Fatalf("%d appends: the failing one was not made", appends.Load())
	}
	sameState(t, c2.Metadata(), want)
}

// withStoreFault fails raft.db writes before they reach bolt: op is "store logs", "delete logs"
// or "set".
func withStoreFault(f func(op string) error) Option {
	return func(o *openOptions) { o.storeFault = f }
}
