package cluster

import "time"

// Clock is the time broker sessions run on (liveness.go, lifecycle.go), injectable so that a
// test advances it instead of sleeping for a session timeout.
type Clock interface {
	Now() time.Time
	// After is time.After: a channel that receives once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
