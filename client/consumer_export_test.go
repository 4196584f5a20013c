package client

import "context"

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
