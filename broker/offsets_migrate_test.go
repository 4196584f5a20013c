package broker

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// fnvPartition is the coordinator rule of before (FNV-1a of the group id), under which data
// directories of earlier versions hold their groups' commits.
func fnvPartition(group string, partitions int32) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	return int32(h.Sum32() % uint32(partitions))
}

// A data directory written under the FNV rule opens with every group's latest offsets: a
// group's records in its partition by Kafka's rule are newer than any in its FNV partition, and
// win at replay, whichever partition is read first; a deletion there is not undone by an older
// commit in the FNV partition.
func TestOffsetsReplayAcrossCoordinatorRules(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.OffsetsTopicPartitions = 4
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)

	// Groups whose two partitions differ, the FNV one read first (even) and last (odd), six:
	// each kind below in both orders.
	var groups []string
	for i := 0; len(groups) < 6 && i < 10_000; i++ {
		g := fmt.Sprintf("group-%d", i)
		old, home := fnvPartition(g, 4), b.offsets.partitionFor(g)
		if (len(groups)%2 == 0 && old < home) || (len(groups)%2 == 1 && old > home) {
			groups = append(groups, g)
		}
	}
	if len(groups) < 6 {
		t.Fatal("not enough groups found for both partition orders")
	}
	write := func(part int32, group string, offset int64, deleted bool) {
		t.Helper()
		gp := groupPartition{group, topicPartition{"t", 0}}
		rec := &batch.Record{Timestamp: time.Now().UnixMilli(), Key: encodeOffsetKey(gp)}
		if !deleted {
			rec.Value = encodeOffsetValue(committed{offset: offset, leaderEpoch: -1}, 0)
		}
		bl := batch.NewBuilder(batch.DefaultBuilderOptions())
		bl.Append(rec)
		bt, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		p := b.partition(OffsetsTopic, part)
		if _, err := p.log().Append(bt, p.leaderEpoch()); err != nil {
			t.Fatal(err)
		}
		reportAppends(t, b, p)
	}
	// Kinds by i%3: committed again since the upgrade (9), deleted since (none), not committed
	// since (the old 5).
	want := []int64{9, -1, 5}
	for i, g := range groups {
		write(fnvPartition(g, 4), g, 5, false) // written by the old version
		switch i % 3 {
		case 0:
			write(b.offsets.partitionFor(g), g, 9, false)
		case 1:
			write(b.offsets.partitionFor(g), g, 0, true)
		}
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, cfg)
	c = dial(t, b.Addr().String())
	for i, g := range groups {
		var resp wire.OffsetFetchResponse
		call(t, c, &wire.OffsetFetchRequest{GroupID: g, Topics: []wire.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}}, &resp)
		if got := resp.Topics[0].Partitions[0].Offset; got != want[i%3] {
			t.Errorf("group %s (FNV partition %d, own %d): offset %d after restart, want %d", g, fnvPartition(g, 4), b.offsets.partitionFor(g), got, want[i%3])
		}
	}
}
