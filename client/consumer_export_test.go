package client

import "context"

// Hooks for the consumer's external tests (package client_test).

// CrashForTest abandons the consumer as a crashed process would: no final commit, queued
// commits dropped, goroutines stopped, connections closed.
func (c *Consumer) CrashForTest() {
	c.closeOnce.Do(func() { c.closeErr = c.shutdown(context.Background(), false) })
}

// QueuedForTest is the number of fetched responses waiting for Poll, and the number of
// partitions that have one buffered.
func (c *Consumer) QueuedForTest() (responses, buffered int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.mu.parts {
		if ps.buffered {
			buffered++
		}
	}
	return len(c.mu.queue), buffered
}
