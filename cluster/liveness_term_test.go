package cluster

import (
	"testing"
	"time"
)

// stillClock is a fakeClock whose timers never fire: the controllers' own liveness loops and
// heartbeats then never tick, and a test drives a liveness of its own with step.
type stillClock struct{ *fakeClock }

func (stillClock) After(time.Duration) <-chan time.Time { return nil }

// TestLivenessRegainedLeadershipResetsSessions: a node that loses the leadership and gets it
// back before its liveness loop looks again (the loop was busy in a fence waiting out the
// failover) resets the sessions for the new term, as it does for any new term: the brokers
// beat at the other controller meanwhile, so the old sessions say nothing about them, and
// fencing by them would fence every broker of the cluster.
func TestLivenessRegainedLeadershipResetsSessions(t *testing.T) {
	clk := stillClock{newFakeClock()}
	cfg := testConfig(t.TempDir())
	cfg.Clock, cfg.SessionTimeout = clk, 9*time.Second
	c := open(t, cfg)
	registerAlive(t, c, BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9092})

	l := newLiveness(c)
	l.leadershipChanged(true)
	term := l.step(0)
	l.leadershipChanged(false)
	clk.Advance(time.Minute) // the brokers beat at another controller
	l.leadershipChanged(true)
	l.step(term)
	if b, _ := c.Metadata().Broker(1); b.Fenced {
		t.Fatal("broker 1 fenced on regaining the leadership, by a session from the previous term")
	}
	if _, live := l.sessions.Live(1, clk.Now(), cfg.SessionTimeout); !live {
		t.Fatal("no fresh session for broker 1 in the new term")
	}
}

// TestLivenessDoesNotFenceThroughNewLeader: a liveness loop that still believes this node leads
// (raft's notification not seen yet) finds sessions expired, since the brokers beat at the new
// leader; its fences go to this node's raft only, which refuses them, and are never forwarded
// to the new leader, which would fence healthy brokers.
func TestLivenessDoesNotFenceThroughNewLeader(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	clk := stillClock{tc.clock}
	tc.tweak = func(c *Config) { c.Clock, c.SessionTimeout = clk, 9*time.Second }
	tc.start(lns)
	tc.leader()
	stale := tc.node(tc.follower())
	registerAlive(t, stale, BrokerInfo{ID: 7, Host: "127.0.0.1", Port: 9099})
	tc.converge()

	l := newLiveness(stale)
	l.leadershipChanged(true) // as if raft had not told it yet that it lost the leadership
	term := l.step(0)
	clk.Advance(time.Minute)
	l.step(term)
	for _, id := range tc.running() {
		if b, _ := tc.node(id).Metadata().Broker(7); b.Fenced {
			t.Fatalf("broker 7 fenced (seen on node %d) by a node that does not lead", id)
		}
	}
}
