package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
)

// TestDescribeReplicasSingleBroker: a broker describes the partitions it leads with their log
// offsets and itself as the ISR's one replica, every one of them for an empty request, and
// answers UNKNOWN_TOPIC_OR_PARTITION for a topic it does not know (named once however often
// asked).
func TestDescribeReplicasSingleBroker(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "dr", 2)
	for range 3 {
		if res := produce(t, c, "dr", 1, wire.AcksLeader, records(t, "a", "b")); res.ErrorCode != wire.NoError {
			t.Fatalf("produce: %+v", res)
		}
	}
	var resp wire.DescribeReplicasResponse
	call(t, c, &wire.DescribeReplicasRequest{Topics: []string{"nope", "dr", "nope"}}, &resp)
	if len(resp.Topics) != 2 || resp.Topics[0].Topic != "dr" || resp.Topics[1].Topic != "nope" || resp.Topics[1].ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Fatalf("topics: %+v", resp.Topics)
	}
	parts := resp.Topics[0].Partitions
	if len(parts) != 2 {
		t.Fatalf("partitions: %+v", parts)
	}
	self := b.cfg.NodeID
	p1 := parts[1]
	if p1.ErrorCode != wire.NoError || p1.Partition != 1 || p1.Leader != self || p1.HighWatermark != 6 || p1.LogEndOffset != 6 || p1.LogStartOffset != 0 {
		t.Fatalf("partition 1: %+v", p1)
	}
	if !slices.Equal(p1.ISR, []int32{self}) || len(p1.Replicas) != 1 || p1.Replicas[0].ReplicaID != self || !p1.Replicas[0].InISR || p1.Replicas[0].Lag != 0 {
		t.Fatalf("partition 1 replicas: ISR %v, %+v", p1.ISR, p1.Replicas)
	}
	if parts[0].LogEndOffset != 0 || parts[0].ErrorCode != wire.NoError {
		t.Fatalf("partition 0: %+v", parts[0])
	}

	var all wire.DescribeReplicasResponse
	call(t, c, &wire.DescribeReplicasRequest{}, &all)
	i := slices.IndexFunc(all.Topics, func(t wire.DescribeReplicasTopic) bool { return t.Topic == "dr" })
	if i < 0 || len(all.Topics[i].Partitions) != 2 {
		t.Fatalf("empty request: %+v", all.Topics)
	}
}

// TestDescribeReplicasOnlyLeaders: in a three-broker cluster each broker describes the
// partitions it leads and refuses the others with NOT_LEADER_OR_FOLLOWER naming their leader;
// an empty request lists exactly the partitions it leads.
func TestDescribeReplicasOnlyLeaders(t *testing.T) {
	brokers, _ := threeBrokers(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := brokers[0].Controller().CreateTopic(ctx, cluster.TopicSpec{Name: "spread", NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		waitFor(t, 10*time.Second, "spread's leaders on every broker", func() bool {
			tm, ok := b.Controller().Metadata().Topic("spread")
			if !ok {
				return false
			}
			for _, pm := range tm.Partitions {
				if pm.Leader == b.cfg.NodeID && b.ledHere("spread", pm.Partition) == nil {
					return false
				}
			}
			return true
		})
	}
	tm, _ := brokers[0].Controller().Metadata().Topic("spread")
	for _, b := range brokers {
		resp := b.describeReplicas([]string{"spread"}, time.Now())
		led := 0
		for _, got := range resp.Topics[0].Partitions {
			pm := tm.Partitions[got.Partition]
			switch {
			case pm.Leader == b.cfg.NodeID:
				led++
				if got.ErrorCode != wire.NoError || got.Leader != b.cfg.NodeID || len(got.Replicas) != 1 {
					t.Errorf("broker %d, led partition %d: %+v", b.cfg.NodeID, got.Partition, got)
				}
			case got.ErrorCode != wire.ErrNotLeaderOrFollower || got.Leader != pm.Leader || got.HighWatermark != -1:
				t.Errorf("broker %d, partition %d led by %d: %+v", b.cfg.NodeID, got.Partition, pm.Leader, got)
			}
		}
		all := b.describeReplicas(nil, time.Now())
		n := 0
		for _, t := range all.Topics {
			if t.Topic == "spread" {
				n = len(t.Partitions)
			}
		}
		if n != led {
			t.Errorf("broker %d: an empty request lists %d of spread's partitions, it leads %d", b.cfg.NodeID, n, led)
		}
	}
}

// TestDescribeReplicasFollowerRows: a follower's row is computed from the leader's status: lag
// = leader LEO - follower LEO, milliseconds since it was last caught up, ISR membership; a
// replica the leader has no progress for is -1 throughout. LagBytes is the log's to fill in
// (describeLed), -1 here.
func TestDescribeReplicasFollowerRows(t *testing.T) {
	now := time.Unix(1000, 0)
	st := replication.Status{Role: replication.Leader, LogEndOffset: 100, ISR: []int32{1, 2},
		Followers: []replication.FollowerStatus{
			{ReplicaID: 2, LogEndOffset: 97, DurableOffset: 95, LastCaughtUp: now.Add(-1500 * time.Millisecond), InISR: true},
			{ReplicaID: 3, LogEndOffset: -1, DurableOffset: -1},
		}}
	cases := []struct {
		id   int32
		want wire.DescribeReplicasReplica
	}{
		{2, wire.DescribeReplicasReplica{ReplicaID: 2, LogEndOffset: 97, DurableOffset: 95, Lag: 3, SinceCaughtUpMs: 1500, InISR: true, LagBytes: -1}},
		{3, wire.DescribeReplicasReplica{ReplicaID: 3, LogEndOffset: -1, DurableOffset: -1, Lag: -1, SinceCaughtUpMs: -1, LagBytes: -1}},
		{4, wire.DescribeReplicasReplica{ReplicaID: 4, LogEndOffset: -1, DurableOffset: -1, Lag: -1, SinceCaughtUpMs: -1, LagBytes: -1}},
	}
	for _, c := range cases {
		if got := followerRow(st, c.id, now); got != c.want {
			t.Errorf("replica %d: %+v, want %+v", c.id, got, c.want)
		}
	}
}
