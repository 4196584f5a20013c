// Package retry holds what the partition logs' flushers and the broker's log supervisor share
// when they try again an operation that failed for a reason that passes (a process out of file
// descriptors, a full disk): a capped doubling backoff, and an episode that logs a run of
// failures twice, when it starts and when it ends, instead of once per attempt.
//
// Neither type has a goroutine, a clock or a lock: the caller passes the time and guards them.
package retry

import (
	"log/slog"
	"time"
)

// Backoff is a delay that doubles from Min at each Next up to Max, until Reset. The zero value
// waits Min = Max = 0 (retry at once); set both.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the delay before the next attempt and doubles the one after.
func (b *Backoff) Next() time.Duration {
	if b.next <= 0 {
		b.next = b.Min
	}
	d := min(b.next, b.Max)
	b.next = min(2*b.next, b.Max)
	return max(d, 0)
}

// Reset makes the next delay Min again (the operation succeeded).
func (b *Backoff) Reset() { b.next = 0 }

// Episode is a run of failures of one operation: Fail logs the first (a warning with the
// error), counts the others without logging, and Succeed ends the run with one line that says
// how many attempts failed over how long. What names the operation in both lines.
type Episode struct {
	Logger *slog.Logger
	What   string

	failures int
	since    time.Time
	lastErr  error
}

// Fail records a failed attempt at now; it logs only the first of a run (attrs are added to
// that line) and reports whether it did.
func (e *Episode) Fail(now time.Time, err error, attrs ...any) bool {
	e.lastErr = err
	e.failures++
	if e.failures > 1 {
		return false
	}
	e.since = now
	e.Logger.Warn(e.What+" failed; retrying", append([]any{"err", err}, attrs...)...)
	return true
}

// Succeed ends a run of failures, if one is going on, with a line saying it is over (attrs are
// added to it), and reports whether there was one.
func (e *Episode) Succeed(now time.Time, attrs ...any) bool {
	if e.failures == 0 {
		return false
	}
	e.Logger.Info(e.What+" succeeded again",
		append([]any{"failed_attempts", e.failures, "after", now.Sub(e.since).Round(time.Millisecond), "last_err", e.lastErr}, attrs...)...)
	e.failures, e.lastErr = 0, nil
	return true
}

// Failing reports whether a run of failures is going on, and how many attempts it counts.
func (e *Episode) Failing() (bool, int) { return e.failures > 0, e.failures }
