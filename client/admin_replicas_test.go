package client

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// TestAdminDescribeReplicasAsksEachLeader: with partitions led by three brokers, the Admin
// (bootstrapped at broker 0) asks each leader once and merges the answers in partition order,
// each partition as its leader described it; a leadership that moved after the metadata was
// read comes back as the old leader's NOT_LEADER_OR_FOLLOWER, not as a stale success.
func TestAdminDescribeReplicasAsksEachLeader(t *testing.T) {
	c := newTestCluster(t, 3)
	c.addTopic("r", 2, 0, 1, 0)
	c.mu.Lock()
	for i, p := range c.topics["r"] {
		p.next = int64(10 * (i + 1))
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := NewAdmin(ctx, c.brokers[0].addr())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	got, err := a.DescribeReplicas(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Topic != "r" || len(got[0].Partitions) != 4 {
		t.Fatalf("DescribeReplicas: %+v", got)
	}
	leaders := []int32{2, 0, 1, 0}
	for i, p := range got[0].Partitions {
		if p.Partition != int32(i) || p.ErrorCode != wire.NoError || p.Leader != leaders[i] || p.HighWatermark != int64(10*(i+1)) {
			t.Errorf("partition %d: %+v", i, p)
		}
	}
	c.mu.Lock()
	if c.described[0] != 1 || c.described[1] != 1 || c.described[2] != 1 {
		t.Errorf("DescribeReplicas requests per broker: %v, want one each", c.described)
	}
	c.mu.Unlock()

	c.freezeMetadata()
	c.moveLeader("r", 1, 2)
	got, err = a.DescribeReplicas(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if p := got[0].Partitions[1]; p.ErrorCode != wire.ErrNotLeaderOrFollower || p.Leader != 2 {
		t.Errorf("partition 1 after its leader moved: %+v", p)
	}
	if p := got[0].Partitions[0]; p.ErrorCode != wire.NoError || p.Leader != 2 {
		t.Errorf("partition 0: %+v", p)
	}
}
