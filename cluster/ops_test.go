package cluster

import (
	"context"
	"errors"
	"testing"
)

// registerAlive registers b through the controller and unfences it, as a
// broker does on its first heartbeat.
func registerAlive(t *testing.T, c *Controller, b BrokerInfo) int64 {
	t.Helper()
	ctx := context.Background()
	epoch, err := c.RegisterBroker(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Metadata().Broker(b.ID); got.State() != BrokerFenced || got.Epoch != epoch || got.Incarnation == "" {
		t.Fatalf("after RegisterBroker: %+v, epoch %d", got, epoch)
	}
	if err := c.UnfenceBroker(ctx, b.ID, epoch); err != nil {
		t.Fatal(err)
	}
	return epoch
}

// TestControllerLifecycleOps drives the lifecycle commands through raft:
// each method proposes its command and returns Apply's outcome.
func TestControllerLifecycleOps(t *testing.T) {
	t.Parallel()
	c := open(t, testConfig(t.TempDir()))
	ctx := context.Background()
	// The active controller records a cluster id when it finds none (liveness.go).
	first, err := c.AwaitClusterID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InitCluster(ctx, "other"); err != nil || c.Metadata().ClusterID() != first {
		t.Fatalf("second InitCluster: %v, id %q, want %q", err, c.Metadata().ClusterID(), first)
	}
	e1 := registerAlive(t, c, BrokerInfo{ID: 1, Host: "h", Port: 9092})
	e2 := registerAlive(t, c, BrokerInfo{ID: 2, Host: "h", Port: 9093})
	tm, err := c.CreateTopic(ctx, TopicSpec{Name: "t", NumPartitions: 4, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := tm.Partitions[0]
	// Shrink the ISR to the leader.
	got, err := c.AlterPartition(ctx, AlterPartitionRequest{Topic: "t", Partition: 0, BrokerID: p.Leader,
		BrokerEpoch: map[int32]int64{1: e1, 2: e2}[p.Leader], LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{p.Leader}})
	if err != nil || len(got.ISR) != 1 || got.PartitionEpoch != p.PartitionEpoch+1 {
		t.Fatalf("AlterPartition: %+v, %v", got, err)
	}
	if err := c.ControlledShutdown(ctx, 1, e1); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Metadata().Broker(1); b.State() != BrokerShuttingDown {
		t.Fatalf("broker 1 after ControlledShutdown: %v", b.State())
	}
	if err := c.FenceBroker(ctx, 2, e2+1); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("FenceBroker at a wrong epoch: %v", err)
	}
	if err := c.FenceBroker(ctx, 2, e2); err != nil {
		t.Fatal(err)
	}
	if n := c.Metadata().PartitionsLedBy(2); n != 0 {
		t.Fatalf("fenced broker 2 leads %d partitions", n)
	}
}
