package broker

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
)

// TestReplicaFetchersInCluster: three brokers, a topic of replication factor 3; records
// produced with acks=all to each partition's leader are copied by the two followers' fetchers,
// and every replica's log ends byte-identical to its leader's, with the leader's high
// watermark at the log end (the followers counted). The followers' fetchers multiplex: each
// follower runs one fetcher per leader it follows (num.replica.fetchers 1).
func TestReplicaFetchersInCluster(t *testing.T) {
	brokers, _ := threeBrokers(t, func(c *Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.SessionTimeout = 2 * time.Second
		c.ReplicaFetchWait = 100 * time.Millisecond
		c.ReplicaFetchBackoff = 50 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const parts = 3
	if _, err := brokers[0].Controller().CreateTopic(ctx, cluster.TopicSpec{Name: "r", NumPartitions: parts, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		waitFor(t, 10*time.Second, "topic r's partitions open everywhere", func() bool {
			for i := range int32(parts) {
				if b.partition("r", i) == nil {
					return false
				}
			}
			return true
		})
	}
	tm, _ := brokers[0].Controller().Metadata().Topic("r")
	for i := range int32(parts) {
		leader := brokers[tm.Partitions[i].Leader]
		c := dial(t, leader.Addr().String())
		for j := range 5 {
			waitFor(t, 10*time.Second, "an acks=all produce to succeed", func() bool {
				res := produce(t, c, "r", i, -1, records(t, fmt.Sprintf("v%d-%d", i, j)))
				return res.ErrorCode == 0
			})
		}
	}
	for i := range int32(parts) {
		leader := brokers[tm.Partitions[i].Leader].partition("r", i)
		for _, b := range brokers {
			p := b.partition("r", i)
			waitFor(t, 10*time.Second, "every replica byte-identical to the leader", func() bool {
				return p.log().EndOffset() == leader.log().EndOffset() && bytes.Equal(logBytes(t, p.log()), logBytes(t, leader.log()))
			})
		}
		if hw, end := leader.highWatermark(), leader.log().EndOffset(); hw != end {
			t.Errorf("partition %d: leader's high watermark %d, log end %d", i, hw, end)
		}
	}
	followed := 0
	for _, b := range brokers {
		n, f := b.fetchers.fetching()
		followed += n
		if f > 2 {
			t.Errorf("broker %d runs %d fetchers, want at most one per other broker", b.cfg.NodeID, f)
		}
	}
	if followed != 2*parts {
		t.Errorf("%d partitions followed in all, want %d (two followers each)", followed, 2*parts)
	}
}
