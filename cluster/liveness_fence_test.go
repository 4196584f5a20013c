package cluster

import (
	"slices"
	"testing"
	"time"
)

// TestLivenessKeepsSessionWhenFenceFails: a fence that fails (here: proposed on a node whose
// raft does not lead) leaves the broker's session expired, so the next step fences again,
// rather than removing the session first and so granting the broker a fresh full one.
func TestLivenessKeepsSessionWhenFenceFails(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	clk := stillClock{tc.clock}
	tc.tweak = func(c *Config) { c.Clock, c.SessionTimeout = clk, 9*time.Second }
	tc.start(lns)
	tc.leader()
	f := tc.node(tc.follower())
	registerAlive(t, f, BrokerInfo{ID: 7, Host: "127.0.0.1", Port: 9099})
	tc.converge()

	l := newLiveness(f)
	l.leadershipChanged(true) // its fences go to a raft that does not lead, and fail
	term := l.step(0)
	clk.Advance(time.Minute)
	l.step(term)
	if b, _ := f.Metadata().Broker(7); b.Fenced {
		t.Fatal("broker 7 fenced through a node that does not lead")
	}
	l.mu.Lock()
	expired := l.sessions.Expired(clk.Now(), 9*time.Second)
	l.mu.Unlock()
	if !slices.ContainsFunc(expired, func(r BrokerRef) bool { return r.ID == 7 }) {
		t.Fatalf("after a failed fence, broker 7's session is no longer expired (expired: %v): it got a fresh session", expired)
	}
}
