package client

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// Hooks for the consumer's external tests (package client_test).

// CrashForTest abandons the consumer as a crashed process would: no final commit, queued
// commits dropped, goroutines stopped, connections closed.
func (c *Consumer) CrashForTest() {
	c.closeOnce.Do(func() { c.closeErr = c.shutdown(context.Background(), false) })
}

// QueuedForTest is the number of fetched responses waiting for Poll, and the most any one
// partition has buffered.
func (c *Consumer) QueuedForTest() (responses, maxBuffered int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.mu.parts {
		maxBuffered = max(maxBuffered, ps.buffered)
	}
	return len(c.mu.queue), maxBuffered
}

// ResponsesAhead is responsesAhead, for tests.
const ResponsesAhead = responsesAhead

// FetchFailureLogger returns a logger that counts the consumer's "fetch failed" warnings in n
// and drops everything else.
func FetchFailureLogger(n *atomic.Int64) *slog.Logger {
	return slog.New(fetchFailureCounter{slog.NewTextHandler(io.Discard, nil), n})
}

type fetchFailureCounter struct {
	slog.Handler
	n *atomic.Int64
}

func (h fetchFailureCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "fetch failed") {
		h.n.Add(1)
	}
	return nil
}

// SetDefaultCloseTimeout sets the bound of a Close without a deadline until the test ends.
func SetDefaultCloseTimeout(t testing.TB, d time.Duration) {
	old := defaultCloseTimeout
	defaultCloseTimeout = d
	t.Cleanup(func() { defaultCloseTimeout = old })
}

// OpenSpanForTest is openSpan.
func OpenSpanForTest(sp *wire.FileSpan) (*os.File, error) { return openSpan(sp, nil) }

// RejoiningForTest reports whether a join and sync of the consumer's group is in flight.
func (c *Consumer) RejoiningForTest() bool {
	g := c.groupOf()
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.joining != nil
}
