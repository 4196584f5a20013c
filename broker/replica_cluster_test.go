package broker

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// Three brokers, RF 3, min.insync.replicas=2: acks=all produces to the leader are answered as
// the followers' replica fetchers commit them, and every replica's log ends up byte-identical
// to the leader's up to the high watermark, which covers every acknowledged record.
func TestReplicatedAcksAllThreeBrokers(t *testing.T) {
	brokers, _ := threeBrokers(t, func(c *Config) { c.ReplicaFetchWait = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := brokers[0].Controller().CreateTopic(ctx, cluster.TopicSpec{Name: "r", NumPartitions: 1, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	var leader *Broker
	waitFor(t, 10*time.Second, "r-0 led and open", func() bool {
		tm, ok := brokers[0].Controller().Metadata().Topic("r")
		if !ok || tm.Partitions[0].Leader < 0 {
			return false
		}
		leader = brokers[tm.Partitions[0].Leader]
		p := leader.partition("r", 0)
		return p != nil && p.acksAll.Load()
	})
	c := dial(t, leader.Addr().String())
	const n = 20
	for i := range n {
		var resp wire.ProduceResponse
		call(t, c, &wire.ProduceRequest{Acks: wire.AcksAll, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
			{Topic: "r", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, fmt.Sprint("v", i))}}},
		}}, &resp)
		if res := resp.Topics[0].Partitions[0]; res.ErrorCode != wire.NoError || res.BaseOffset != int64(i) {
			t.Fatalf("acks=all produce %d: %v at %d", i, res.ErrorCode, res.BaseOffset)
		}
	}
	lp := leader.partition("r", 0)
	if hw := lp.highWatermark(); hw != n {
		t.Fatalf("leader's high watermark %d after %d acknowledged records", hw, n)
	}
	want := readAll(t, lp.log(), n)
	for _, b := range brokers {
		if b == leader {
			continue
		}
		p := b.partition("r", 0)
		waitFor(t, 10*time.Second, "the follower's log to reach the leader's end", func() bool { return p.log().EndOffset() == n })
		if got := readAll(t, p.log(), n); !bytes.Equal(got, want) {
			t.Fatalf("broker %d's log differs from the leader's below the high watermark", b.cfg.NodeID)
		}
	}
}

// readAll is l's bytes below upTo.
func readAll(t *testing.T, l *segment.Log, upTo batch.Offset) []byte {
	t.Helper()
	s, err := l.Read(0, 1<<30, upTo)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	out, err := s.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
