package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCluster is n controllers in this process over loopback TCP, each with its own data
// directory, CONTROLLER listener and faultNet dialer, on one fake clock.
type testCluster struct {
	t      testing.TB
	net    *faultNet
	clock  *fakeClock
	voters []Voter
	dirs   map[int32]string
	mu     sync.Mutex
	nodes  map[int32]*Controller
	tweak  func(*Config)
}

func newTestCluster(t testing.TB, n int) (*testCluster, map[int32]net.Listener) {
	t.Helper()
	tc := &testCluster{t: t, net: newFaultNet(), clock: newFakeClock(), dirs: map[int32]string{}, nodes: map[int32]*Controller{}}
	lns := map[int32]net.Listener{}
	for i := range n {
		id := int32(i)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id] = ln
		a := ln.Addr().(*net.TCPAddr)
		tc.voters = append(tc.voters, Voter{ID: id, Host: "127.0.0.1", Port: a.Port})
		tc.net.register(id, ln.Addr().String())
		tc.dirs[id] = filepath.Join(t.TempDir(), "meta")
	}
	t.Cleanup(func() {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		for _, c := range tc.nodes {
			_ = c.Close()
		}
	})
	return tc, lns
}

func (tc *testCluster) config(id int32, ln net.Listener) Config {
	cfg := Config{
		NodeID: id, Dir: tc.dirs[id], Voters: tc.voters, Listener: ln, Dial: tc.net.dialer(id), Clock: tc.clock,
		Logger: slog.New(slog.DiscardHandler),
		// Faster than the defaults for a real network, so that the tests' failovers are quick.
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 200 * time.Millisecond,
		StartupTimeout: 30 * time.Second, ApplyTimeout: 10 * time.Second,
	}
	if tc.tweak != nil {
		tc.tweak(&cfg)
	}
	return cfg
}

// start opens the given nodes concurrently (a quorum's nodes wait for each other in Open).
func (tc *testCluster) start(lns map[int32]net.Listener) {
	tc.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(lns))
	for id, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Open(tc.config(id, ln))
			if err != nil {
				errs <- fmt.Errorf("node %d: %w", id, err)
				return
			}
			tc.mu.Lock()
			tc.nodes[id] = c
			tc.mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tc.t.Fatal(err)
	}
}

// listen opens node id's CONTROLLER listener again on its voter's port.
func (tc *testCluster) listen(id int32) net.Listener {
	tc.t.Helper()
	ln, err := net.Listen("tcp", tc.voters[id].Addr())
	if err != nil {
		tc.t.Fatal(err)
	}
	return ln
}

func (tc *testCluster) node(id int32) *Controller {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.nodes[id]
}

func (tc *testCluster) running() []int32 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var ids []int32
	for _, v := range tc.voters {
		if tc.nodes[v.ID] != nil {
			ids = append(ids, v.ID)
		}
	}
	return ids
}

// kill closes node id (its listener and raft with it).
func (tc *testCluster) kill(id int32) {
	tc.t.Helper()
	tc.mu.Lock()
	c := tc.nodes[id]
	delete(tc.nodes, id)
	tc.mu.Unlock()
	if err := c.Close(); err != nil {
		tc.t.Fatal(err)
	}
}

// leader waits until every running node among ids agrees on one leader that is one of them.
func (tc *testCluster) leader(ids ...int32) int32 {
	tc.t.Helper()
	if len(ids) == 0 {
		ids = tc.running()
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		l := tc.node(ids[0]).ControllerID()
		agree := l >= 0
		for _, id := range ids {
			agree = agree && tc.node(id).ControllerID() == l
		}
		if agree && containsID(ids, l) && tc.node(l).isLeader() {
			return l
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded by the deadline
	}
	tc.t.Fatalf("no leader agreed on by %v", ids)
	return -1
}

// converge waits until every running node has the same metadata, version included.
func (tc *testCluster) converge() *Metadata {
	tc.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ids := tc.running()
		first := tc.node(ids[0]).Metadata()
		want := encodedTB(tc.t, first)
		same := true
		for _, id := range ids[1:] {
			if got := encodedTB(tc.t, tc.node(id).Metadata()); !bytes.Equal(got, want) {
				same = false
				last = fmt.Sprintf("node %d: %s\nnode %d: %s", ids[0], want, id, got)
			}
		}
		if same {
			return first
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded by the deadline
	}
	tc.t.Fatalf("metadata did not converge:\n%s", last)
	return nil
}

func (tc *testCluster) follower(not ...int32) int32 {
	for _, id := range tc.running() {
		if !containsID(not, id) && !tc.node(id).isLeader() {
			return id
		}
	}
	tc.t.Fatal("no follower")
	return -1
}

func registerAll(t testing.TB, c *Controller, ids []Voter) {
	t.Helper()
	for _, v := range ids {
		epoch, err := c.RegisterBroker(context.Background(), BrokerInfo{ID: v.ID, Host: "127.0.0.1", Port: int32(9092 + v.ID)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.UnfenceBroker(context.Background(), v.ID, epoch); err != nil {
			t.Fatal(err)
		}
	}
}

func createTopic(t testing.TB, c *Controller, name string, rf int16) TopicMeta {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tm, err := c.CreateTopic(ctx, TopicSpec{Name: name, NumPartitions: 3, ReplicationFactor: rf})
	if err != nil {
		t.Fatalf("create %s on node %d: %v", name, c.cfg.NodeID, err)
	}
	if _, ok := c.Metadata().Topic(name); !ok {
		t.Fatalf("create %s on node %d returned before the node applied it", name, c.cfg.NodeID)
	}
	return tm
}

// TestQuorumOfThree: a fresh cluster bootstraps from the voters; writes from a follower are
// forwarded; the leader dies and another takes over and commits; the dead node restarts and
// every node converges on the same metadata.
func TestQuorumOfThree(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	l := tc.leader()
	f := tc.follower()
	registerAll(t, tc.node(f), tc.voters)
	createTopic(t, tc.node(f), "from-follower", 3)
	md := tc.converge()
	if md.NumTopics() != 1 || len(md.Brokers()) != 3 {
		t.Fatalf("topics %d brokers %d", md.NumTopics(), len(md.Brokers()))
	}
	if tc.node(l).ClusterID() == "" {
		t.Error("the active controller recorded no cluster id")
	}

	tc.kill(l)
	l2 := tc.leader()
	if l2 == l {
		t.Fatal("the dead node still leads")
	}
	createTopic(t, tc.node(tc.follower()), "after-failover", 2)
	tc.converge()

	tc.start(map[int32]net.Listener{l: tc.listen(l)})
	md = tc.converge()
	for _, name := range []string{"from-follower", "after-failover"} {
		if _, ok := md.Topic(name); !ok {
			t.Errorf("restarted cluster lost topic %s", name)
		}
	}
	if md.Version() == 0 {
		t.Error("version 0")
	}
}

// TestQuorumMajorityLoss: with two of three nodes down a write fails with a retriable error
// (ErrNotLeader) when its context ends; it succeeds once one node is back.
func TestQuorumMajorityLoss(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	l := tc.leader()
	registerAll(t, tc.node(l), tc.voters)
	survivor := tc.follower()
	var dead []int32
	for _, id := range tc.running() {
		if id != survivor {
			dead = append(dead, id)
			tc.kill(id)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := tc.node(survivor).CreateTopic(ctx, TopicSpec{Name: "no-quorum", NumPartitions: 1, ReplicationFactor: 1})
	cancel()
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("write without a quorum: %v, want ErrNotLeader", err)
	}
	tc.start(map[int32]net.Listener{dead[0]: tc.listen(dead[0])})
	tc.leader()
	createTopic(t, tc.node(survivor), "quorum-back", 1)
	md := tc.converge()
	if _, ok := md.Topic("no-quorum"); ok {
		// It may have been appended by the old leader before it died without committing; a
		// retried create with the same id then commits it: either is correct, but then both
		// nodes must agree, which converge checked.
		t.Log("the write proposed without a quorum committed later")
	}
}

// TestQuorumOfFivePartitions: the leader of five is isolated; the four others elect a leader
// and commit; a follower's one-way loss of the new leader's traffic does not stop writes; once
// healed every node converges.
func TestQuorumOfFivePartitions(t *testing.T) {
	tc, lns := newTestCluster(t, 5)
	tc.start(lns)
	l := tc.leader()
	all := tc.running()
	registerAll(t, tc.node(l), tc.voters)
	tc.net.isolate(l, all...)
	var rest []int32
	for _, id := range all {
		if id != l {
			rest = append(rest, id)
		}
	}
	l2 := tc.leader(rest...)
	if l2 == l {
		t.Fatal("the isolated node still leads the majority")
	}
	createTopic(t, tc.node(rest[0]), "majority-side", 3)
	// One way: l2's messages to one follower are dropped. The other three are a quorum.
	f := rest[0]
	if f == l2 {
		f = rest[1]
	}
	tc.net.heal()
	tc.net.set(l2, f, rule{drop: true})
	other := rest[len(rest)-1]
	if other == l2 || other == f {
		other = rest[len(rest)-2]
	}
	createTopic(t, tc.node(other), "one-way", 3)
	tc.net.heal()
	md := tc.converge()
	if _, ok := md.Topic("majority-side"); !ok {
		t.Error("lost majority-side")
	}
	if _, ok := md.Topic("one-way"); !ok {
		t.Error("lost one-way")
	}
}

// TestQuorumDelayedLink: a delayed link between the leader and a follower only slows
// replication to it; writes commit and the follower converges.
func TestQuorumDelayedLink(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	l := tc.leader()
	f := tc.follower()
	tc.net.set(l, f, rule{delay: 20 * time.Millisecond})
	tc.net.set(f, l, rule{delay: 20 * time.Millisecond})
	registerAll(t, tc.node(f), tc.voters)
	createTopic(t, tc.node(f), "slow", 1)
	tc.converge()
}

// TestQuorumVotersRefused: voters that disagree with the raft state, that leave out a
// controller, or that name it at another address are refused, with messages naming both.
func TestQuorumVotersRefused(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	tc.leader()
	tc.kill(0)

	ln := tc.listen(0)
	cfg := tc.config(0, ln)
	cfg.Voters = append([]Voter(nil), tc.voters...)
	cfg.Voters[2].Port++ // another address for node 2
	_, err := Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "disagrees with the voters recorded") ||
		!strings.Contains(err.Error(), FormatVoters(cfg.Voters[2:])) || !strings.Contains(err.Error(), tc.voters[2].String()) {
		t.Fatalf("disagreeing voters: %v", err)
	}

	cfg = tc.config(0, tc.listen(0))
	cfg.Voters = tc.voters[1:]
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "does not name it") {
		t.Fatalf("voters without this node: %v", err)
	}
	cfg = tc.config(0, tc.listen(0))
	cfg.Voters = append([]Voter(nil), tc.voters...)
	cfg.Voters[0].Port = tc.voters[1].Port + 1000
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "but its CONTROLLER listener is") {
		t.Fatalf("voter address not the listener's: %v", err)
	}
	cfg.Listener = tc.listen(0)
	cfg.Advertised = "127.0.0.1:1" // a proxy's address, not the voter entry's
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "and it advertises 127.0.0.1:1") {
		t.Fatalf("voter address neither the listener's nor the advertised one: %v", err)
	}
	cfg = tc.config(0, tc.listen(0))
	cfg.NonVoter = true
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "names it as a voter") {
		t.Fatalf("broker-only node named as a voter: %v", err)
	}
}

// encodedTB is a state's canonical encoding (fsm_test.go's encoded, for benchmarks too).
func encodedTB(t testing.TB, md *Metadata) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, md); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestNonVoterFollowsMetadata: a broker-only node (not in the voters) asks the active
// controller to add it as a raft non-voter and then applies the same log: it learns what was
// committed before it joined and what is committed after, and takes no part in elections.
func TestNonVoterFollowsMetadata(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	l := tc.leader()
	registerAll(t, tc.node(l), tc.voters)
	createTopic(t, tc.node(l), "before", 3)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const id = 9
	tc.net.register(id, ln.Addr().String())
	cfg := tc.config(id, ln)
	cfg.Dir = filepath.Join(t.TempDir(), "meta")
	cfg.NonVoter = true
	obs, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	if _, ok := obs.Metadata().Topic("before"); !ok {
		t.Fatal("the non-voter was ready before it applied what was committed")
	}
	createTopic(t, obs, "from-non-voter", 1) // forwarded
	createTopic(t, tc.node(l), "after", 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := obs.Metadata().Topic("after"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the non-voter did not learn a later topic")
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded by the deadline
	}
	cf := tc.node(l).raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	voters := 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == 0 { // raft.Voter
			voters++
		}
	}
	if voters != 3 || len(cf.Configuration().Servers) != 4 {
		t.Fatalf("configuration %+v: want 3 voters and the non-voter", cf.Configuration().Servers)
	}
}
