package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// Group membership against the broker's coordinator: every test runs its members' Poll loops
// on goroutines (a join completes only once every member rejoins) and waits for conditions
// with deadlines.

// groupSession is the members' session timeout: the test broker accepts it as it lowers
// group.min.session.timeout.ms (Kafka's 6 s), and it starts rebalances with no
// group.initial.rebalance.delay.ms.
const groupSession = 2 * time.Second

// newGroupFixture is newConsumerFixture with a broker whose group timeouts suit tests.
func newGroupFixture(t testing.TB) *consumerFixture {
	t.Helper()
	cfg := brokertest.Config(t.TempDir(), "127.0.0.1:0")
	cfg.GroupMinSessionTimeout = 500 * time.Millisecond
	cfg.GroupInitialRebalanceDelay = -1
	b := brokertest.Open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	conn, err := client.Dial(ctx, b.Addr().String(), "group-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &consumerFixture{t: t, b: b, conn: conn, ctx: ctx}
}

// member is one group consumer with its Poll loop and what it saw.
type member struct {
	name string
	c    *client.Consumer
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	recs    map[client.TopicPartition][]int64
	events  []string // "revoked t-1", "assigned t-2", "lost t-0"
	revoked []client.TopicPartition
	pollErr error
	polls   []time.Time // when Poll returned records
}

func (m *member) log(kind string, tps []client.TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tp := range tps {
		m.events = append(m.events, kind+" "+tp.String())
		if kind == "revoked" {
			m.revoked = append(m.revoked, tp)
		}
	}
}

// newMember starts a consumer of group subscribed to topic, with cfg's membership settings,
// polling until stopped (close) or the test ends.
func (f *consumerFixture) newMember(name, group, topic string, cfg client.ConsumerConfig) *member {
	f.t.Helper()
	m := &member{name: name, recs: map[client.TopicPartition][]int64{}, done: make(chan struct{})}
	cfg.GroupID = group
	cfg.AutoOffsetReset = client.OffsetResetEarliest
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = groupSession
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 100 * time.Millisecond
	}
	cfg.RetryBackoff, cfg.RetryBackoffMax = 10*time.Millisecond, 100*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	// A listener in cfg is told after the log; one with bind learns the consumer before it polls.
	user := cfg.RebalanceListener
	if user == nil {
		user = client.RebalanceFuncs{Lost: func(context.Context, []client.TopicPartition) {}}
	}
	cfg.RebalanceListener = client.RebalanceFuncs{
		Revoked: func(ctx context.Context, tps []client.TopicPartition) {
			m.log("revoked", tps)
			user.OnPartitionsRevoked(ctx, tps)
		},
		Assigned: func(ctx context.Context, tps []client.TopicPartition) {
			m.log("assigned", tps)
			user.OnPartitionsAssigned(ctx, tps)
		},
		Lost: func(ctx context.Context, tps []client.TopicPartition) {
			m.log("lost", tps)
			user.OnPartitionsLost(ctx, tps)
		},
	}
	m.c = f.consumer(cfg)
	if b, ok := user.(interface{ bind(*client.Consumer) }); ok {
		b.bind(m.c)
	}
	if err := m.c.Subscribe(topic); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	m.stop = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			recs, err := m.c.Poll(ctx)
			m.mu.Lock()
			if len(recs) > 0 {
				m.polls = append(m.polls, time.Now())
			}
			for _, r := range recs {
				tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
				m.recs[tp] = append(m.recs[tp], r.Offset)
			}
			if err != nil && ctx.Err() == nil && !errors.Is(err, client.ErrConsumerClosed) {
				m.pollErr = err
			}
			m.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				return // closed, or an error the test reports (describe)
			}
		}
	}()
	f.t.Cleanup(func() { m.halt() })
	return m
}

// halt stops the Poll loop (the consumer stays open, so it still heartbeats).
func (m *member) halt() {
	m.stop()
	<-m.done
}

// close stops the Poll loop and closes the consumer (a dynamic member leaves the group).
func (m *member) close(t testing.TB) {
	t.Helper()
	m.halt()
	if err := m.c.Close(context.Background()); err != nil {
		t.Fatalf("%s: close: %v", m.name, err)
	}
}

func (m *member) snapshot() (events []string, revoked []client.TopicPartition, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events), slices.Clone(m.revoked), m.pollErr
}

// waitFor polls cond every 20 ms until it holds, failing the test after d with what.
func waitFor(t testing.TB, d time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what())
		}
		<-tick.C
	}
}

// split reports whether the members' assignments are disjoint, cover topic's n partitions,
// and have sizes from sizes (any order).
func split(ms []*member, topic string, n int, sizes ...int) bool {
	seen := map[int32]bool{}
	var got []int
	for _, m := range ms {
		a := m.c.Assignment()
		got = append(got, len(a))
		for _, tp := range a {
			if tp.Topic != topic || seen[tp.Partition] {
				return false
			}
			seen[tp.Partition] = true
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(sizes))
	return len(seen) == n && slices.Equal(got, want)
}

func describe(ms []*member) string {
	s := ""
	for _, m := range ms {
		ev, _, err := m.snapshot()
		s += fmt.Sprintf("\n%s: %v gen %d err %v events %v", m.name, m.c.Assignment(), m.c.GroupMetadata().Generation, err, ev)
	}
	return s
}

// TestGroupSplitsAndMovesPartitions: three members of one group split six partitions with no
// overlap and every record produced is consumed once, by its partition's owner; when one
// closes (leaves the group), its partitions move to the other two, which consume what is
// produced next.
func TestGroupSplitsAndMovesPartitions(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("g6", 6)
	ms := []*member{
		f.newMember("a", "split", "g6", client.ConsumerConfig{}),
		f.newMember("b", "split", "g6", client.ConsumerConfig{}),
		f.newMember("c", "split", "g6", client.ConsumerConfig{}),
	}
	waitFor(t, 30*time.Second, func() string { return "no 2/2/2 split:" + describe(ms) }, func() bool { return split(ms, "g6", 6, 2, 2, 2) })
	produceAll := func(round string) {
		for p := range int32(6) {
			f.produceValues("g6", p, consumerValues(5, round)...)
		}
	}
	produceAll("r1")
	consumedOnce := func(ms []*member, upTo int64) bool {
		for p := range int32(6) {
			tp := client.TopicPartition{Topic: "g6", Partition: p}
			var all []int64
			for _, m := range ms {
				m.mu.Lock()
				all = append(all, m.recs[tp]...)
				m.mu.Unlock()
			}
			slices.Sort(all)
			if !slices.Equal(all, consumerOffsetRange(0, upTo)) {
				return false
			}
		}
		return true
	}
	waitFor(t, 20*time.Second, func() string { return "records not consumed exactly once:" + describe(ms) }, func() bool { return consumedOnce(ms, 5) })
	for _, m := range ms {
		for tp := range m.recs {
			if !slices.Contains(m.c.Assignment(), tp) {
				t.Errorf("%s consumed %s, not its partition (%v)", m.name, tp, m.c.Assignment())
			}
		}
	}

	ms[2].close(t)
	rest := ms[:2]
	waitFor(t, 30*time.Second, func() string { return "no 3/3 split after c left:" + describe(rest) }, func() bool { return split(rest, "g6", 6, 3, 3) })
	produceAll("r2")
	// Auto-commit on revocation and close: nothing consumed before is consumed again.
	waitFor(t, 20*time.Second, func() string { return "records not consumed after c left:" + describe(rest) }, func() bool {
		for p := range int32(6) {
			tp := client.TopicPartition{Topic: "g6", Partition: p}
			n := 0
			for _, m := range rest {
				m.mu.Lock()
				n += len(slices.DeleteFunc(slices.Clone(m.recs[tp]), func(o int64) bool { return o < 5 }))
				m.mu.Unlock()
			}
			if n != 5 {
				return false
			}
		}
		return true
	})
}

// TestGroupCooperativeMovesOnlyWhatItMust: with cooperative-sticky, a third member joining two
// that own three partitions each takes one from each; neither is told of a revocation of a
// partition it keeps, and the newcomer gets its two in the second rebalance.
func TestGroupCooperativeMovesOnlyWhatItMust(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("coop", 6)
	cfg := client.ConsumerConfig{Assignors: []string{"cooperative-sticky"}}
	ms := []*member{f.newMember("a", "coop", "coop", cfg), f.newMember("b", "coop", "coop", cfg)}
	waitFor(t, 30*time.Second, func() string { return "no 3/3 split:" + describe(ms) }, func() bool { return split(ms, "coop", 6, 3, 3) })
	before := map[string][]client.TopicPartition{"a": ms[0].c.Assignment(), "b": ms[1].c.Assignment()}
	revokedBefore := map[string]int{}
	for _, m := range ms {
		_, rev, _ := m.snapshot()
		revokedBefore[m.name] = len(rev) // the first member gave the second its three
	}
	ms = append(ms, f.newMember("c", "coop", "coop", cfg))
	waitFor(t, 30*time.Second, func() string { return "no 2/2/2 split:" + describe(ms) }, func() bool { return split(ms, "coop", 6, 2, 2, 2) })
	for _, m := range ms[:2] {
		after := m.c.Assignment()
		_, rev, _ := m.snapshot()
		rev = rev[revokedBefore[m.name]:]
		for _, tp := range after {
			if !slices.Contains(before[m.name], tp) {
				t.Errorf("%s gained %s", m.name, tp)
			}
			if slices.Contains(rev, tp) {
				t.Errorf("%s was told %s was revoked, and kept it", m.name, tp)
			}
		}
		if len(rev) != 1 {
			t.Errorf("%s revoked %v, want the one partition that moved", m.name, rev)
		}
	}
}

// TestGroupCooperativeKeepsConsumingDuringRebalance: with cooperative-sticky, a member whose
// rejoin is in flight (the group waits for a member that is busy and does not Poll) goes on
// returning the records of the partitions it owns; when the busy member's max.poll.interval.ms
// passes it leaves, and the rebalance completes without the first member giving anything up.
func TestGroupCooperativeKeepsConsumingDuringRebalance(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("keep", 4)
	cfg := client.ConsumerConfig{Assignors: []string{"cooperative-sticky"}}
	a := f.newMember("a", "keep", "keep", cfg)
	busy := cfg
	busy.MaxPollInterval = 4 * time.Second
	b := f.newMember("b", "keep", "keep", busy)
	ms := []*member{a, b}
	waitFor(t, 30*time.Second, func() string { return "no 2/2 split:" + describe(ms) }, func() bool { return split(ms, "keep", 4, 2, 2) })
	owned := a.c.Assignment()
	_, revokedBefore, _ := a.snapshot()
	b.halt() // busy: it heartbeats, but does not Poll, so it does not rejoin
	c := f.newMember("c", "keep", "keep", cfg)
	waitFor(t, 10*time.Second, func() string { return "a never rejoined:" + describe(ms) }, a.c.RejoiningForTest)
	for _, tp := range owned {
		f.produceValues(tp.Topic, tp.Partition, "during-1", "during-2")
	}
	consumedAll := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, tp := range owned {
			if len(a.recs[tp]) < 2 {
				return false
			}
		}
		return true
	}
	waitFor(t, 10*time.Second, func() string { return "a stopped consuming during the rebalance:" + describe(ms) }, consumedAll)
	if !a.c.RejoiningForTest() {
		t.Fatalf("the rebalance ended before the check (b left too early?):%s", describe(ms))
	}
	if n := len(c.c.Assignment()); n != 0 {
		t.Fatalf("c owns %d partitions before the rebalance completed", n)
	}
	waitFor(t, 20*time.Second, func() string { return "no 2/2 split after b left:" + describe([]*member{a, c}) }, func() bool {
		return split([]*member{a, c}, "keep", 4, 2, 2)
	})
	if got := a.c.Assignment(); !slices.Equal(got, owned) {
		t.Errorf("a owns %v after the rebalance, want %v (cooperative: nothing of a's moves)", got, owned)
	}
	if _, rev, _ := a.snapshot(); len(rev) != len(revokedBefore) {
		t.Errorf("a was told of revocations %v", rev[len(revokedBefore):])
	}
}

// TestGroupStaticMemberRestart: a static member that closes (no LeaveGroup) and restarts with
// the same group.instance.id within the session timeout gets the same partitions back, with
// no rebalance: the generation is unchanged and the other member sees no revocation.
func TestGroupStaticMemberRestart(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("static", 4)
	a := f.newMember("a", "static", "static", client.ConsumerConfig{GroupInstanceID: "a"})
	b := f.newMember("b", "static", "static", client.ConsumerConfig{GroupInstanceID: "b"})
	ms := []*member{a, b}
	waitFor(t, 30*time.Second, func() string { return "no 2/2 split:" + describe(ms) }, func() bool { return split(ms, "static", 4, 2, 2) })
	gen, owned := a.c.GroupMetadata().Generation, a.c.Assignment()
	bEvents, _, _ := b.snapshot()
	a.close(t)
	a2 := f.newMember("a2", "static", "static", client.ConsumerConfig{GroupInstanceID: "a"})
	waitFor(t, groupSession/2, func() string { return "restarted member not back:" + describe([]*member{a2, b}) }, func() bool {
		return slices.Equal(a2.c.Assignment(), owned)
	})
	if g := a2.c.GroupMetadata().Generation; g != gen {
		t.Errorf("generation %d after the restart, want %d (no rebalance)", g, gen)
	}
	if g := b.c.GroupMetadata().Generation; g != gen {
		t.Errorf("b's generation %d after a's restart, want %d", g, gen)
	}
	if ev, _, _ := b.snapshot(); !slices.Equal(ev, bEvents) {
		t.Errorf("b's listener saw %v during a's restart", ev[len(bEvents):])
	}
}

// TestGroupCommitFencedAfterKickOut: a static member whose instance id is taken by a new
// consumer is out of the group: its commit fails with ErrCommitFailed wrapping
// FENCED_INSTANCE_ID, and the group's offsets stay the new member's.
func TestGroupCommitFencedAfterKickOut(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("fence", 1)
	f.produceValues("fence", 0, consumerValues(10, "v")...)
	off := new(bool)
	old := f.newMember("old", "fence", "fence", client.ConsumerConfig{GroupInstanceID: "x", EnableAutoCommit: off})
	tp := client.TopicPartition{Topic: "fence"}
	waitFor(t, 30*time.Second, func() string { return "old consumed nothing:" + describe([]*member{old}) }, func() bool {
		old.mu.Lock()
		defer old.mu.Unlock()
		return len(old.recs[tp]) == 10
	})
	old.halt()
	newer := f.newMember("new", "fence", "fence", client.ConsumerConfig{GroupInstanceID: "x", EnableAutoCommit: off})
	waitFor(t, 30*time.Second, func() string { return "new member not assigned:" + describe([]*member{newer}) }, func() bool {
		return len(newer.c.Assignment()) == 1 && newer.c.GroupMetadata().MemberID != old.c.GroupMetadata().MemberID
	})
	err := old.c.CommitSync(context.Background())
	if !errors.Is(err, client.ErrCommitFailed) || !errors.Is(err, wire.ErrFencedInstanceID) {
		t.Fatalf("fenced member's commit: %v, want ErrCommitFailed and FENCED_INSTANCE_ID", err)
	}
	if got := f.committed("fence", tp); got != -1 {
		t.Errorf("committed %d after the fenced commit, want none", got)
	}
}

// TestSubscribeAndAssignExclude: a consumer either subscribes or assigns.
func TestSubscribeAndAssignExclude(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("mix", 1)
	c := f.consumer(client.ConsumerConfig{GroupID: "mix"})
	if err := c.Subscribe("mix"); err != nil {
		t.Fatal(err)
	}
	if err := c.Assign([]client.TopicPartition{{Topic: "mix"}}); !errors.Is(err, client.ErrSubscribed) {
		t.Errorf("Assign after Subscribe: %v, want ErrSubscribed", err)
	}
	d := f.consumer(client.ConsumerConfig{GroupID: "mix"}, client.TopicPartition{Topic: "mix"})
	if err := d.Subscribe("mix"); !errors.Is(err, client.ErrManualAssignment) {
		t.Errorf("Subscribe after Assign: %v, want ErrManualAssignment", err)
	}
	e := f.consumer(client.ConsumerConfig{})
	if err := e.Subscribe("mix"); !errors.Is(err, client.ErrNoGroup) {
		t.Errorf("Subscribe without a group: %v, want ErrNoGroup", err)
	}
	for _, bad := range []client.ConsumerConfig{
		{GroupID: "g", Assignors: []string{"sticky-ish"}},
		{GroupID: "g", SessionTimeout: time.Second, HeartbeatInterval: 2 * time.Second},
		{GroupID: "g", MaxPollInterval: -1},
	} {
		bad.Brokers = []string{f.tcp()}
		if _, err := client.NewConsumer(f.ctx, bad); !errors.Is(err, client.ErrConsumerConfig) {
			t.Errorf("NewConsumer(%+v): %v, want ErrConsumerConfig", bad, err)
		}
	}
}

// TestGroupMaxPollIntervalLeavesAndRejoins: a member that does not Poll within
// max.poll.interval.ms leaves the group and its partitions move; its commit then fails with
// ErrCommitFailed, and its next Poll tells the listener the partitions were lost and rejoins.
func TestGroupMaxPollIntervalLeavesAndRejoins(t *testing.T) {
	f := newGroupFixture(t)
	f.createTopic("slow", 2)
	for p := range int32(2) {
		f.produceValues("slow", p, consumerValues(3, "v")...)
	}
	off := new(bool)
	a := f.newMember("a", "slow", "slow", client.ConsumerConfig{MaxPollInterval: time.Second, EnableAutoCommit: off})
	b := f.newMember("b", "slow", "slow", client.ConsumerConfig{EnableAutoCommit: off})
	ms := []*member{a, b}
	waitFor(t, 30*time.Second, func() string { return "no 1/1 split with records:" + describe(ms) }, func() bool {
		if !split(ms, "slow", 2, 1, 1) {
			return false
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.recs[a.c.Assignment()[0]]) >= 3
	})
	owned := a.c.Assignment()
	a.halt()
	waitFor(t, 30*time.Second, func() string { return "b did not take a's partition:" + describe(ms) }, func() bool { return len(b.c.Assignment()) == 2 })
	if err := a.c.CommitSync(context.Background()); !errors.Is(err, client.ErrCommitFailed) {
		t.Fatalf("commit after leaving: %v, want ErrCommitFailed", err)
	}
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	waitFor(t, 20*time.Second, func() string { return "a did not rejoin:" + describe(ms) }, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _ = a.c.Poll(pctx)
		pcancel()
		return split(ms, "slow", 2, 1, 1)
	})
	ev, _, _ := a.snapshot()
	if !slices.Contains(ev, "lost "+owned[0].String()) {
		t.Errorf("a's listener saw %v, want %s lost", ev, owned[0])
	}
}
