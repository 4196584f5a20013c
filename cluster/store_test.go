package cluster

import (
	"errors"
	"strings"
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
	// The failure is reported as soon as the first append fails, not at the end of the start-up
	// timeout (raft steps down and keeps trying elections that fail the same way).
	cfg.StartupTimeout = 10 * time.Minute
	cfg.storeFault = func(op string) error {
		if op == "store logs" {
			return syscall.ENOSPC
		}
		return nil
	}
	type result struct {
		c   *Controller
		err error
	}
	opened := make(chan result, 1)
	go func() {
		c2, err := Open(cfg)
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
