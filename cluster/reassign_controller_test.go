package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMovesThroughRaftSurviveRestart: AlterPartitionReassignments,
// ElectLeaders, CreatePartitions and AlterBrokerConfigs are raft commands: a
// controller reopened on the same data directory (log replay, and then from a
// snapshot) has the move in progress, the elected leader, the new partitions
// and the throttles, and the move completes after the restart.
func TestMovesThroughRaftSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	ctx := context.Background()
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		epochs[id] = registerAlive(t, c, BrokerInfo{ID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]int32{{1, 2}, {2, 1}}}); err != nil {
		t.Fatal(err)
	}
	// Bad input first: refused as a whole, every problem named, nothing started.
	err := c.AlterPartitionReassignments(ctx, []Reassignment{
		{Topic: "t", Partition: 0, Replicas: []int32{3, 2}}, {Topic: "t", Partition: 7, Replicas: []int32{1}},
		{Topic: "t", Partition: 1, Replicas: []int32{1, 9}},
	})
	if !errors.Is(err, ErrInvalidReassignment) || !containsAll(err.Error(), "t-7: no such partition", "t-1: broker 9 is not registered") {
		t.Fatalf("bad reassignment: %v", err)
	}
	if tp, _ := c.Metadata().Topic("t"); tp.Partitions[0].Reassigning() {
		t.Fatal("a refused request started a move")
	}
	if err := c.AlterPartitionReassignments(ctx, []Reassignment{{Topic: "t", Partition: 1}}); !errors.Is(err, ErrNoReassignmentInProgress) {
		t.Fatalf("cancel of a partition not moving: %v", err)
	}

	if err := c.AlterPartitionReassignments(ctx, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{3, 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitionLeader(ctx, LeaderChange{Topic: "t", Partition: 1, Leader: 1}); err != nil {
		t.Fatal(err)
	}
	results, err := c.ElectLeaders(ctx, ElectionPreferred, []PartitionRef{{"t", 1}, {"t", 0}, {"nope", 0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 || results[0].Err != nil || !errors.Is(results[1].Err, ErrPreferredLeaderNotAvailable) ||
		!errors.Is(results[2].Err, ErrUnknownTopic) {
		t.Fatalf("elect leaders: %+v", results)
	}
	if all, err := c.ElectLeaders(ctx, ElectionPreferred, nil); err != nil || len(all) != 1 || all[0].Partition != 0 {
		t.Fatalf("elect every partition: %+v, %v", all, err) // t-1 needs none: left out
	}
	if _, err := c.CreatePartitions(ctx, "t", 2, nil); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("create partitions to the same count: %v", err)
	}
	grown, err := c.CreatePartitions(ctx, "t", 4, [][]int32{{3, 1}, {1, 3}})
	if err != nil || len(grown.Partitions) != 4 || !slices.Equal(grown.Partitions[2].Replicas, []int32{3, 1}) {
		t.Fatalf("create partitions: %+v, %v", grown, err)
	}
	if placed, err := c.CreatePartitions(ctx, "t", 6, nil); err != nil || len(placed.Partitions) != 6 || len(placed.Partitions[5].Replicas) != 2 {
		t.Fatalf("create placed partitions: %+v, %v", placed, err)
	}
	if err := c.AlterBrokerConfigs(ctx, "", map[string]string{LeaderReplicationThrottledRate: "4096"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterBrokerConfigs(ctx, "1", map[string]string{"bogus": "1"}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad broker config: %v", err)
	}
	want := c.Metadata()
	check := func(c *Controller) {
		t.Helper()
		sameState(t, c.Metadata(), want)
		md := c.Metadata()
		tp, _ := md.Topic("t")
		if p := tp.Partitions[0]; !p.Reassigning() || !slices.Equal(p.TargetReplicas(), []int32{3, 2}) {
			t.Fatalf("after the restart t-0 is %+v", p)
		}
		if tp.Partitions[1].Leader != 2 || len(tp.Partitions) != 6 || md.ThrottleRate(3, LeaderReplicationThrottledRate) != 4096 {
			t.Fatalf("after the restart: %+v, throttle %d", tp.Partitions, md.ThrottleRate(3, LeaderReplicationThrottledRate))
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, testConfig(dir))
	check(c) // the log replayed
	if err := c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(dir)
	c = open(t, cfg)
	check(c) // from the snapshot

	// The move resumes: broker 3 catches up, the leader 1 adds it to the ISR, and the move
	// completes with leadership off the removed broker 1.
	tp, _ := c.Metadata().Topic("t")
	p := tp.Partitions[0]
	b1, _ := c.Metadata().Broker(1)
	done, err := c.AlterPartition(ctx, AlterPartitionRequest{Topic: "t", Partition: 0, BrokerID: 1, BrokerEpoch: b1.Epoch,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if done.Reassigning() || !slices.Equal(done.Replicas, []int32{3, 2}) || done.Leader != 3 || done.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("the move after a restart: %+v", done)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestMovesForwardedFromFollower: the new commands sent to a controller that
// does not lead are forwarded to the one that does, and their outcomes come
// back whole: ElectLeaders' per-partition errors (as their sentinels), a
// reassignment's refusal listing every problem, the grown topic.
func TestMovesForwardedFromFollower(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	f := tc.node(tc.follower())
	registerAll(t, f, tc.voters)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := f.CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]int32{{0, 1}, {1, 2}}}); err != nil {
		t.Fatal(err)
	}
	err := f.AlterPartitionReassignments(ctx, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{}}, {Topic: "t", Partition: 1}})
	if !errors.Is(err, ErrNoReassignmentInProgress) || !errors.Is(err, ErrInvalidReassignment) ||
		!containsAll(err.Error(), "t-0: empty replica list", "t-1: no reassignment in progress") {
		t.Fatalf("forwarded bad reassignment: %v", err)
	}
	if err := f.AlterPartitionReassignments(ctx, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{2, 0}}}); err != nil {
		t.Fatal(err)
	}
	if tp, _ := f.Metadata().Topic("t"); !tp.Partitions[0].Reassigning() {
		t.Fatalf("the follower does not see its own write: %+v", tp.Partitions[0])
	}
	results, err := f.ElectLeaders(ctx, ElectionPreferred, []PartitionRef{{"t", 1}, {"t", 0}, {"t", 5}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 || !errors.Is(results[0].Err, ErrElectionNotNeeded) || !errors.Is(results[1].Err, ErrPreferredLeaderNotAvailable) ||
		!errors.Is(results[2].Err, ErrUnknownPartition) {
		t.Fatalf("forwarded elect leaders: %+v", results)
	}
	grown, err := f.CreatePartitions(ctx, "t", 3, nil)
	if err != nil || len(grown.Partitions) != 3 {
		t.Fatalf("forwarded create partitions: %+v, %v", grown, err)
	}
	tc.converge()
}
