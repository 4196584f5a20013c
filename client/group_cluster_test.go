package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TestGroupInCluster: in a three-broker cluster the group's coordinator is the broker that
// leads its __consumer_offsets partition, which the test makes another broker than the one
// the members bootstrap at when it can. Three members split six partitions (RF 3) and read
// every record exactly once. Then the coordinator's broker stops: the group reforms on the new
// leader of that partition, the members split the partitions again, and every record produced
// since is read (at least once: a partition that moved while the coordinator was gone restarts
// from its last commit, which the new coordinator replayed).
func TestGroupInCluster(t *testing.T) {
	cfgs := brokertest.ClusterConfigs(t, 3)
	for i := range cfgs {
		cfgs[i].OffsetsTopicPartitions = 3
		cfgs[i].GroupInitialRebalanceDelay = -1
		cfgs[i].GroupMinSessionTimeout = 500 * time.Millisecond
	}
	bs := brokertest.OpenCluster(t, cfgs)
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.Addr().String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	a, err := client.NewAdmin(ctx, addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	p := prodNew(t, client.ProducerConfig{Config: client.Config{Brokers: addrs}, Linger: time.Millisecond})
	produce := func(round string, n int) {
		t.Helper()
		for part := range int32(6) {
			for i := range n {
				r := &client.Record{Topic: "t", Partition: part, PartitionSet: true, Value: fmt.Appendf(nil, "%s-%d-%d", round, part, i)}
				if _, err := p.SendSync(ctx, r); err != nil {
					t.Fatalf("produce %s: %v", round, err)
				}
			}
		}
	}
	const per = 10
	produce("r1", per)

	// The group whose coordinator is not broker 0, if one of these is.
	group, coord := "", int32(-1)
	for i := range 10 {
		group = fmt.Sprintf("g%d", i)
		coord = coordinatorOf(ctx, t, addrs[0], group)
		if coord != 0 {
			break
		}
	}
	t.Logf("group %s, coordinator broker %d", group, coord)

	f := &consumerFixture{t: t, b: bs[0], ctx: ctx}
	var ms []*member
	for _, name := range []string{"a", "b", "c"} {
		ms = append(ms, f.newMember(name, group, "t", client.ConsumerConfig{Config: client.Config{Brokers: addrs[:1]}}))
	}
	waitFor(t, 60*time.Second, func() string { return "no 2/2/2 split:" + describe(ms) }, func() bool { return split(ms, "t", 6, 2, 2, 2) })
	offsets := func() map[int32][]int64 {
		out := map[int32][]int64{}
		for _, m := range ms {
			m.mu.Lock()
			for tp, offs := range m.recs {
				out[tp.Partition] = append(out[tp.Partition], offs...)
			}
			m.mu.Unlock()
		}
		for p := range out {
			slices.Sort(out[p])
		}
		return out
	}
	waitFor(t, 30*time.Second, func() string { return "the first records not read once:" + describe(ms) }, func() bool {
		got := offsets()
		for p := range int32(6) {
			if !slices.Equal(got[p], consumerOffsetRange(0, per)) {
				return false
			}
		}
		return true
	})

	if err := bs[coord].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	produce("r2", per)
	waitFor(t, 60*time.Second, func() string {
		return fmt.Sprintf("the records after the coordinator stopped not all read: %v%s", offsets(), describe(ms))
	}, func() bool {
		got := offsets()
		for p := range int32(6) {
			if !slices.Equal(slices.Compact(slices.Clone(got[p])), consumerOffsetRange(0, 2*per)) {
				return false
			}
		}
		return true
	})
	waitFor(t, 60*time.Second, func() string { return "no 2/2/2 split after the failover:" + describe(ms) }, func() bool { return split(ms, "t", 6, 2, 2, 2) })
	if now := coordinatorOf(ctx, t, addrs[(coord+1)%3], group); now == coord || now < 0 {
		t.Errorf("coordinator after the stop: %d", now)
	}
	for _, m := range ms {
		if _, _, err := m.snapshot(); err != nil {
			t.Errorf("%s: Poll: %v", m.name, err)
		}
	}
}

// coordinatorOf asks the broker at addr for group's coordinator until it names one.
func coordinatorOf(ctx context.Context, t *testing.T, addr, group string) int32 {
	t.Helper()
	conn, err := client.Dial(ctx, addr, "find-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int32 = -1
	waitFor(t, 30*time.Second, func() string { return "no coordinator for " + group }, func() bool {
		var resp wire.FindCoordinatorResponse
		if err := conn.Call(ctx, &wire.FindCoordinatorRequest{CoordinatorKey: group}, &resp); err != nil {
			t.Fatal(err)
		}
		id = resp.NodeID
		return resp.ErrorCode == wire.NoError
	})
	return id
}
