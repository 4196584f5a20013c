package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// members registers a broker per node, each on its own controller (forwarded to the leader).
func (tc *testCluster) members() map[int32]*Member {
	tc.t.Helper()
	ms := map[int32]*Member{}
	for _, id := range tc.running() {
		m, err := tc.node(id).Register(context.Background(), MemberConfig{
			Info:              BrokerInfo{ID: id, Host: "127.0.0.1", Port: int32(9092 + id)},
			HeartbeatInterval: time.Second,
		})
		if err != nil {
			tc.t.Fatal(err)
		}
		tc.t.Cleanup(m.Close)
		ms[id] = m
	}
	return ms
}

// step advances the fake clock by one heartbeat interval and waits until every member in live
// has had a heartbeat answered since. A member between two heartbeats when the clock moved has
// not asked for its next tick yet and misses it: the clock moves on by another interval then
// (well inside the session timeout).
func (tc *testCluster) step(live map[int32]*Member) {
	tc.t.Helper()
	before := map[int32]int64{}
	for id, m := range live {
		before[id] = m.beats.Load()
	}
	for range 10 {
		tc.clock.Advance(time.Second)
		deadline := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(deadline) {
			all := true
			for id, m := range live {
				all = all && m.beats.Load() > before[id]
			}
			if all {
				return
			}
			time.Sleep(time.Millisecond) // polling, bounded by the deadline
		}
	}
	tc.t.Fatal("the brokers sent no heartbeats after the clock moved")
}

func leaderOf(md *Metadata, topic string, p int32) int32 {
	t, _ := md.Topic(topic)
	return t.Partitions[p].Leader
}

// TestFencingAfterSessionTimeout: a broker that stops heartbeating is fenced once its session
// times out on the active controller's clock, and the partitions it led get new leaders; the
// brokers that go on heartbeating stay unfenced. No test waits for the timeout in real time.
func TestFencingAfterSessionTimeout(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.tweak = func(c *Config) { c.SessionTimeout = 9 * time.Second }
	tc.start(lns)
	ctrl := tc.leader()
	ms := tc.members()
	for id, m := range ms {
		if m.Fenced() {
			t.Fatalf("broker %d still fenced after its first heartbeat", id)
		}
	}
	createTopic(t, tc.node(ctrl), "t", 3)
	md := tc.converge()
	victim := tc.follower()
	led := 0
	for p := range int32(3) {
		if leaderOf(md, "t", p) == victim {
			led++
		}
	}
	if led == 0 {
		t.Fatalf("broker %d leads nothing: %+v", victim, md.Topics())
	}
	ms[victim].Close()
	live := map[int32]*Member{}
	for id, m := range ms {
		if id != victim {
			live[id] = m
		}
	}
	moved := func() bool {
		md := tc.node(ctrl).Metadata()
		for p := range int32(3) {
			if leaderOf(md, "t", p) == victim {
				return false
			}
		}
		return true
	}
	start := tc.clock.Now()
	// A leadership change on a loaded machine restarts every session: room for two timeouts.
	for steps := 0; !moved() && steps < 40; steps++ {
		tc.step(live)
	}
	elapsed := tc.clock.Now().Sub(start)
	if !moved() {
		t.Fatalf("leadership still on broker %d after %v of fake time", victim, elapsed)
	}
	if elapsed < 8*time.Second { // its last heartbeat was up to a second before start
		t.Fatalf("broker %d fenced after %v, before its 9 s session timeout", victim, elapsed)
	}
	for id, m := range live {
		if m.Fenced() {
			t.Errorf("heartbeating broker %d was fenced", id)
		}
	}
	tc.converge()
}

// TestDuplicateRegistrationRefused: a node id whose session is live under another incarnation
// cannot be registered again; once that session has expired it can.
func TestDuplicateRegistrationRefused(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	tc.leader()
	f := tc.node(tc.follower())
	info := BrokerInfo{ID: 7, Host: "127.0.0.1", Port: 9099}
	m, err := f.Register(context.Background(), MemberConfig{Info: info, HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A second incarnation waits for the first's session (its wait is bounded by ctx here:
	// the fake clock does not move while the first heartbeats).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = f.Register(ctx, MemberConfig{Info: info, HeartbeatInterval: time.Second})
	cancel()
	if !errors.Is(err, ErrDuplicateBroker) || !strings.Contains(err.Error(), "node id 7 is registered by a live broker (incarnation "+m.incarnation+")") {
		t.Fatalf("second registration of a live node id: %v", err)
	}
	m.Close()
	tc.clock.Advance(10 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m2, err := f.Register(context.Background(), MemberConfig{Info: info, HeartbeatInterval: time.Second})
		if err == nil {
			m2.Close()
			break
		}
		if !errors.Is(err, ErrDuplicateBroker) || time.Now().After(deadline) {
			t.Fatalf("registration after the session expired: %v", err)
		}
		tc.clock.Advance(time.Second)
		time.Sleep(5 * time.Millisecond) // polling, bounded by the deadline
	}
}

// TestRestartWithinTheSessionRegisters: a broker that restarts before its crashed
// incarnation's session expired (a new incarnation, the old one silent) waits in Register
// until the session expires and then registers, rather than failing its start (found by sluice
// chaos: a kill -9 and restart within broker.session.timeout.ms made the broker exit).
func TestRestartWithinTheSessionRegisters(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	tc.leader()
	f := tc.node(tc.follower())
	info := BrokerInfo{ID: 8, Host: "127.0.0.1", Port: 9098}
	m, err := f.Register(context.Background(), MemberConfig{Info: info, HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m.Close() // the crash: no more heartbeats, the session still live
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m2, err := f.Register(ctx, MemberConfig{Info: info, HeartbeatInterval: time.Second})
		if err == nil {
			m2.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("registration of the restarted broker: %v", err)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted broker never registered")
		}
		tc.clock.Advance(500 * time.Millisecond) // the old session runs out in fake time
		time.Sleep(10 * time.Millisecond)        // polling, bounded by the deadline
	}
}

// TestControlledShutdownMovesLeadership: a broker's controlled shutdown leaves it leading no
// partition that has another in-sync replica.
func TestControlledShutdownMovesLeadership(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	ctrl := tc.leader()
	ms := tc.members()
	createTopic(t, tc.node(ctrl), "t", 3)
	victim := tc.follower()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ms[victim].ControlledShutdown(ctx); err != nil {
		t.Fatal(err)
	}
	md := tc.node(victim).Metadata()
	if n := leadsWithOthersInSync(md, victim); n != 0 {
		t.Fatalf("broker %d still leads %d partitions", victim, n)
	}
	tc.converge()
}

// TestRegisterAfterRestart: a lone node's broker registers again, unchanged, after a restart
// (the registration changes nothing, and the commit index is the new term's no-op): it must
// not wait for an index its state machine never applies.
func TestRegisterAfterRestart(t *testing.T) {
	dir := t.TempDir()
	info := MemberConfig{Info: BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9092}, HeartbeatInterval: time.Second}
	for range 2 {
		c, err := Open(testConfig(dir))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := c.Register(ctx, info)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if m.Fenced() {
			t.Errorf("a caught-up lone broker is fenced after its first heartbeat (%v)", m.lastErr)
		}
		m.Close()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
