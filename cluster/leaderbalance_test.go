package cluster

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestLeaderBalanceCandidates: the auto leader balance picks exactly the
// partitions of the brokers whose share of partitions led elsewhere is above
// the percentage, and of those only where the preferred replica is in the ISR
// and eligible, never a partition being moved.
func TestLeaderBalanceCandidates(t *testing.T) {
	m := newMachine(t, 1, 2, 3)
	var assignment [][]int32
	for p := range 10 {
		if p < 5 {
			assignment = append(assignment, []int32{1, 2})
		} else {
			assignment = append(assignment, []int32{2, 1})
		}
	}
	assignment = append(assignment, []int32{3, 1}) // a-10: preferred 3, to be fenced below
	m.ok(&createTopicCmd{TopicSpec: TopicSpec{Name: "a", Assignment: assignment}, ID: idOf(1)})
	lead := func(p, leader int32) {
		tp, _ := m.md.Topic("a")
		m.ok(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "a", Partition: p, Leader: leader, LeaderEpoch: tp.Partitions[p].LeaderEpoch}, PartitionEpochs: true})
	}
	// Broker 1 prefers a-0..a-4: a-0, a-1 and a-2 are led by 2, a-2 without 1 in its ISR; a-4
	// is led by 2 too, but is being moved. Broker 2 prefers a-5..a-9: a-5 is led by 1.
	for _, p := range []int32{0, 1, 2, 4} {
		lead(p, 2)
	}
	lead(5, 1)
	lead(10, 1)
	tp, _ := m.md.Topic("a")
	m.ok(&alterPartitionCmd{AlterPartitionRequest{Topic: "a", Partition: 2, BrokerID: 2, LeaderEpoch: tp.Partitions[2].LeaderEpoch,
		PartitionEpoch: tp.Partitions[2].PartitionEpoch, ISR: []int32{2}}})
	m.ok(&alterReassignmentsCmd{Reassignments: []Reassignment{{Topic: "a", Partition: 4, Replicas: []int32{1, 3}}}})
	m.ok(&fenceBrokerCmd{brokerEpochCmd{ID: 3, Epoch: 0}})

	tests := []struct {
		percentage int
		want       []int32 // partitions of a
	}{
		{10, []int32{0, 1, 5}}, // broker 1 at 3/4, broker 2 at 1/5, broker 3 (fenced) at 1/1
		{20, []int32{0, 1}},    // broker 2 at exactly 20 %: not above
		{74, []int32{0, 1}},    // broker 1 at 75 %
		{75, nil},              // not above
		{0, []int32{0, 1, 5}},  // 0 % (Config's zero means its default, 10)
		{100, nil},             // nobody above 100 %
	}
	for _, tt := range tests {
		var got []int32
		for _, ref := range LeaderBalanceCandidates(m.md, tt.percentage) {
			if ref.Topic != "a" {
				t.Fatalf("candidate %+v", ref)
			}
			got = append(got, ref.Partition)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("percentage %d: candidates %v, want %v", tt.percentage, got, tt.want)
		}
	}
}

// TestAutoLeaderBalanceLoop: on the controller's clock, every check interval
// the active controller moves leaderships back to the preferred replicas of
// the imbalanced brokers; with the balance off nothing moves.
func TestAutoLeaderBalanceLoop(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{true, false} {
		clock := newFakeClock()
		cfg := testConfig(t.TempDir())
		cfg.Clock = clock
		cfg.SessionTimeout = time.Hour // the brokers send no heartbeats here
		cfg.AutoLeaderRebalance = enabled
		cfg.LeaderImbalanceCheckInterval = time.Minute
		c := open(t, cfg)
		ctx := context.Background()
		for id := int32(1); id <= 2; id++ {
			registerAlive(t, c, BrokerInfo{ID: id, Host: "127.0.0.1", Port: 9090 + id})
		}
		if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]int32{{1, 2}, {1, 2}, {2, 1}}}); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			if _, err := c.SetPartitionLeader(ctx, LeaderChange{Topic: "t", Partition: p, Leader: 2}); err != nil {
				t.Fatal(err)
			}
		}
		balanced := func() bool {
			tp, _ := c.Metadata().Topic("t")
			return tp.Partitions[0].Leader == 1 && tp.Partitions[1].Leader == 1
		}
		// The loop asks the clock for its next tick at some point after Open: advance in
		// steps until the leaders move (or, with the balance off, for a while).
		deadline := time.Now().Add(10 * time.Second)
		tick := time.NewTicker(5 * time.Millisecond)
		steps := 0
		for !balanced() && time.Now().Before(deadline) && (enabled || steps < 50) {
			clock.Advance(time.Minute)
			steps++
			<-tick.C
		}
		tick.Stop()
		if balanced() != enabled {
			tp, _ := c.Metadata().Topic("t")
			t.Fatalf("auto leader balance %v: after %d intervals %+v", enabled, steps, tp.Partitions)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
