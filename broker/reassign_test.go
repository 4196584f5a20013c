package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
)

// Moving replicas (issue #27) in the three-node in-process cluster: moves under load, with
// the controller's and a target's node killed in the middle, the throttle, refusals, the
// leadership and partition counts. Moves go through the Admin client and the wire.

// createPlaced creates topic with the given replicas per partition and min.insync.replicas=2
// where every partition has two replicas or more, and waits until each is led and hosted.
func (c *rcluster) createPlaced(topic string, assignment [][]int32, configs map[string]string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.broker(c.live()[0]).Controller().CreateTopic(ctx, cluster.TopicSpec{Name: topic, Assignment: assignment, Configs: configs}); err != nil {
		c.t.Fatal(err)
	}
	waitFor(c.t, 20*time.Second, "topic "+topic+" led and hosted", func() bool {
		for _, i := range c.live() {
			tm, ok := c.broker(i).Controller().Metadata().Topic(topic)
			if !ok || len(tm.Partitions) != len(assignment) {
				return false
			}
			for _, pm := range tm.Partitions {
				if pm.Leader == cluster.NoLeader || len(pm.ISR) != len(pm.Replicas) {
					return false
				}
				if slices.Contains(pm.Replicas, int32(i)) && c.broker(i).partition(topic, pm.Partition) == nil {
					return false
				}
			}
		}
		return true
	})
}

// admin is an Admin client through the side door.
func (c *rcluster) admin() *client.Admin {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: c.bootstrap(), Dial: c.net.Dialer(sideNode),
		RequestTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = a.Close() })
	return a
}

// awaitMoved waits until every live node's metadata has topic's partitions at want (by
// partition) with no move in progress, and every node hosts exactly its replicas.
func (c *rcluster) awaitMoved(topic string, want map[int32][]int32, d time.Duration) {
	c.t.Helper()
	waitFor(c.t, d, fmt.Sprintf("%s moved to %v", topic, want), func() bool {
		for _, i := range c.live() {
			tm, ok := c.broker(i).Controller().Metadata().Topic(topic)
			if !ok {
				return false
			}
			for part, replicas := range want {
				pm := tm.Partitions[part]
				if pm.Reassigning() || !slices.Equal(pm.Replicas, replicas) || !slices.Equal(slices.Sorted(slices.Values(pm.ISR)), slices.Sorted(slices.Values(replicas))) {
					return false
				}
				hosted := c.broker(i).partition(topic, part) != nil
				if hosted != slices.Contains(replicas, int32(i)) {
					return false
				}
			}
		}
		return true
	})
}

// partitionDir is node i's directory of topic-part.
func (c *rcluster) partitionDir(i int, topic string, part int32) string {
	return filepath.Join(c.cfgs[i].DataDir, topic+"-"+strconv.Itoa(int(part)))
}

// tailConsumer reads topic's partitions from the start until stopped, keeping every value
// and every error Poll returned.
type tailConsumer struct {
	mu     sync.Mutex
	seen   map[string]bool
	errs   []error
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *rcluster) startConsumer(topic string, partitions int32) *tailConsumer {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	cons, err := client.NewConsumer(ctx, client.ConsumerConfig{
		Config: client.Config{Brokers: c.bootstrap(), Dial: c.net.Dialer(producerNode), RequestTimeout: 2 * time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MetadataMaxAge: time.Second},
		AutoOffsetReset: client.OffsetResetEarliest, FetchMaxWait: 100 * time.Millisecond,
	})
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	var tps []client.TopicPartition
	for p := range partitions {
		tps = append(tps, client.TopicPartition{Topic: topic, Partition: p})
	}
	if err := cons.Assign(tps); err != nil {
		cancel()
		c.t.Fatal(err)
	}
	tc := &tailConsumer{seen: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tc.done)
		defer cons.Close(context.Background())
		for ctx.Err() == nil {
			recs, err := cons.Poll(ctx)
			tc.mu.Lock()
			for _, r := range recs {
				tc.seen[string(r.Value)] = true
			}
			if err != nil && ctx.Err() == nil {
				tc.errs = append(tc.errs, err)
			}
			tc.mu.Unlock()
		}
	}()
	c.t.Cleanup(tc.stop)
	return tc
}

func (tc *tailConsumer) stop() {
	tc.cancel()
	<-tc.done
}

// missing is how many of acked the consumer has not read.
func (tc *tailConsumer) missing(acked map[string]ack) int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	n := 0
	for v := range acked {
		if !tc.seen[v] {
			n++
		}
	}
	return n
}

// TestReassignUnderLoad: with an acks=all producer and a consumer running, three partitions
// move at once: one to other brokers (its leader leaves), one from two replicas to three, one
// swapping a replica; then the grown one goes from three to two. Every move completes, the replicas are byte-identical, nothing
// acknowledged is lost, the consumer reads every acknowledged record with no error, and the
// removed replicas' directories are gone.
func TestReassignUnderLoad(t *testing.T) {
	c := newRCluster(t, nil)
	c.createPlaced("mv", [][]int32{{0, 1}, {1, 2}, {2, 0}}, map[string]string{"min.insync.replicas": "2", "segment.bytes": "65536"})
	p := c.startProducer("mv", 3, "a")
	cons := c.startConsumer("mv", 3)
	c.waitAcks(p, 300, 20*time.Second, "before the moves")
	a := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	move := func(want map[int32][]int32) {
		t.Helper()
		var rs []client.Reassignment
		for part, replicas := range want {
			rs = append(rs, client.Reassignment{Topic: "mv", Partition: part, Replicas: replicas})
		}
		if err := a.AlterPartitionReassignments(ctx, rs); err != nil {
			t.Fatal(err)
		}
		c.awaitMoved("mv", want, 30*time.Second)
	}
	// mv-0 leaves its leader's broker, mv-1 grows from two replicas to three, mv-2 swaps one.
	move(map[int32][]int32{0: {1, 2}, 1: {2, 0, 1}, 2: {0, 1}})
	c.waitAcks(p, 200, 20*time.Second, "between the moves")
	// mv-1 shrinks from three to two.
	move(map[int32][]int32{1: {0, 1}})
	if moving, err := a.ListPartitionReassignments(ctx, nil); err != nil || len(moving) != 0 {
		t.Fatalf("moves listed after they completed: %v %v", moving, err)
	}
	if got := c.leaderOf("mv", 0); got == 0 {
		t.Errorf("mv-0's leader is 0, which the move removed")
	}
	c.waitAcks(p, 300, 20*time.Second, "after the moves")
	p.finish()
	c.verify("mv", 3, p.l, nil)
	acked := p.l.snapshot()
	waitFor(t, 20*time.Second, "the consumer to read every acknowledged record", func() bool { return cons.missing(acked) == 0 })
	cons.stop()
	if len(cons.errs) > 0 {
		t.Errorf("the consumer's Poll returned %d errors, the first %v", len(cons.errs), cons.errs[0])
	}
	for _, gone := range []struct {
		node int
		part int32
	}{{0, 0}, {2, 2}, {2, 1}} {
		if _, err := os.Stat(c.partitionDir(gone.node, "mv", gone.part)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("node %d's replica of mv-%d, which the move removed, is still on disk (%v)", gone.node, gone.part, err)
		}
	}
}

// fill appends about n bytes to topic-part with acks=all through the side door, in 16 KiB
// records, and returns how many it appended.
func (c *rcluster) fill(topic string, part int32, n int) int {
	c.t.Helper()
	leader := c.leaderOf(topic, part)
	conn := c.sideConn(int(leader))
	value := make([]byte, 16<<10)
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	total := 0
	for i := 0; total < n; i++ {
		bl.Reset(batch.DefaultBuilderOptions())
		for range 8 {
			bl.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Value: value})
		}
		recs, err := bl.Build()
		if err != nil {
			c.t.Fatal(err)
		}
		if got := produce(c.t, conn, topic, part, wire.AcksAll, append([]byte(nil), recs...)); got.ErrorCode != wire.NoError {
			c.t.Fatalf("fill %s-%d: %v", topic, part, got.ErrorCode)
		}
		total += 8 * len(value)
	}
	return total
}

// TestReassignSurvivesKills: a move slowed by a throttle outlives a kill of the controller's
// node and, on another partition, a kill of the broker the move adds: the controller that takes
// over resumes the first from the metadata, the restarted target catches up and joins the ISR,
// and both complete with nothing acknowledged lost.
func TestReassignSurvivesKills(t *testing.T) {
	c := newRCluster(t, nil)
	c.createPlaced("k", [][]int32{{0, 1}, {0, 1}}, map[string]string{"min.insync.replicas": "1"})
	for part := range int32(2) {
		c.fill("k", part, 2<<20)
	}
	p := c.startProducer("k", 2, "k")
	c.waitAcks(p, 100, 20*time.Second, "before the moves")
	a := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// 512 KiB/s into broker 2: each 2 MiB partition takes seconds to catch up.
	if err := a.AlterBrokerConfigs(ctx, "2", map[string]string{client.FollowerThrottledRate: strconv.Itoa(512 << 10)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: "k", Partition: 0, Replicas: []int32{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	moving := func(part int32) bool { return c.meta(c.live()[0], "k", part).Reassigning() }
	if !moving(0) {
		t.Fatal("k-0 is not moving right after the request")
	}
	// The controller's node goes down mid-move (it may be the partition's leader too).
	ctrl := c.broker(c.live()[0]).Controller().ControllerID()
	c.kill(int(ctrl))
	c.restart(int(ctrl))
	c.awaitMoved("k", map[int32][]int32{0: {1, 2}}, 60*time.Second)

	// The target goes down mid-move, and comes back. (A new Admin: the first one's connection
	// may have been to the node killed.)
	a = c.admin()
	if err := a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: "k", Partition: 1, Replicas: []int32{2, 0}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "broker 2 to start fetching k-1", func() bool {
		b := c.broker(2)
		pp := b.partition("k", 1)
		return pp != nil && pp.log().EndOffset() > 0
	})
	if !moving(1) {
		t.Fatal("k-1 finished moving before the kill: the throttle did not hold it")
	}
	c.kill(2)
	c.restart(2)
	c.awaitMoved("k", map[int32][]int32{1: {2, 0}}, 60*time.Second)
	c.waitAcks(p, 100, 20*time.Second, "after the moves")
	p.finish()
	c.verify("k", 2, p.l, nil)
}

// TestThrottledMoveTakesSizeOverRate: a move of a partition holding S bytes onto a broker
// whose follower throttle is R bytes/s takes about S/R (the bucket starts with one second's
// worth, so at least (S-R)/R), and without the throttle it takes a fraction of that.
func TestThrottledMoveTakesSizeOverRate(t *testing.T) {
	c := newRCluster(t, nil)
	c.createPlaced("th", [][]int32{{0}, {0}}, nil)
	size := c.fill("th", 0, 3<<20)
	c.fill("th", 1, 3<<20)
	a := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const rate = 1 << 20
	if err := a.AlterBrokerConfigs(ctx, "1", map[string]string{client.FollowerThrottledRate: strconv.Itoa(rate)}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "broker 1 to apply the throttle", func() bool { return c.broker(1).followerQuota.limit() == rate })
	start := time.Now()
	if err := a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: "th", Partition: 0, Replicas: []int32{0, 1}}}); err != nil {
		t.Fatal(err)
	}
	c.awaitMoved("th", map[int32][]int32{0: {0, 1}}, 60*time.Second)
	throttled := time.Since(start)
	expect := time.Duration(float64(size) / rate * float64(time.Second))
	t.Logf("%d bytes at %d B/s: %v (S/R = %v)", size, rate, throttled, expect)
	if floor := time.Duration(float64(size-rate) / rate * 0.9 * float64(time.Second)); throttled < floor {
		t.Errorf("the throttled move took %v, less than the throttle allows (%v)", throttled, floor)
	}
	if err := a.AlterBrokerConfigs(ctx, "1", nil, []string{client.FollowerThrottledRate}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "broker 1 to drop the throttle", func() bool { return c.broker(1).followerQuota.limit() == 0 })
	start = time.Now()
	if err := a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: "th", Partition: 1, Replicas: []int32{0, 1}}}); err != nil {
		t.Fatal(err)
	}
	c.awaitMoved("th", map[int32][]int32{1: {0, 1}}, 60*time.Second)
	free := time.Since(start)
	t.Logf("unthrottled: %v", free)
	if free > throttled/2 {
		t.Errorf("the unthrottled move took %v, the throttled one %v: the throttle made no difference", free, throttled)
	}
}

// TestReassignRefusedAsAWhole: a request with several problems is refused with every problem
// listed and each partition's own, and nothing starts, not even its good entries.
func TestReassignRefusedAsAWhole(t *testing.T) {
	c := newRCluster(t, nil)
	c.createPlaced("bad", [][]int32{{0, 1}, {1, 2}}, nil)
	a := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := a.AlterPartitionReassignments(ctx, []client.Reassignment{
		{Topic: "bad", Partition: 0, Replicas: []int32{1, 2}}, // fine on its own
		{Topic: "bad", Partition: 1, Replicas: []int32{2, 2}},
		{Topic: "bad", Partition: 7, Replicas: []int32{0}},
		{Topic: "nope", Partition: 0, Replicas: []int32{0}},
		{Topic: "bad", Partition: 1, Replicas: []int32{9}},
	})
	var re *client.ReassignmentError
	if !errors.As(err, &re) || !errors.Is(err, wire.ErrInvalidReplicaAssignment) {
		t.Fatalf("refusal: %v, want a ReassignmentError with INVALID_REPLICA_ASSIGNMENT", err)
	}
	for _, s := range []string{"bad-1", "bad-7", "nope-0"} {
		if !strings.Contains(re.Message, s) {
			t.Errorf("the refusal does not name %s: %s", s, re.Message)
		}
	}
	for _, tp := range []client.TopicPartition{{Topic: "bad", Partition: 1}, {Topic: "bad", Partition: 7}, {Topic: "nope", Partition: 0}} {
		if re.Problems[tp] == nil {
			t.Errorf("no problem given for %v: %v", tp, re.Problems)
		}
	}
	if re.Problems[client.TopicPartition{Topic: "bad", Partition: 0}] != nil {
		t.Errorf("bad-0 had no problem, but got %v", re.Problems[client.TopicPartition{Topic: "bad", Partition: 0}])
	}
	if pm := c.meta(0, "bad", 0); pm.Reassigning() || !slices.Equal(pm.Replicas, []int32{0, 1}) {
		t.Fatalf("bad-0 changed by a refused request: %+v", pm)
	}
	// A cancel of a partition that is not moving is refused too.
	err = a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: "bad", Partition: 0}})
	if !errors.Is(err, wire.ErrNoReassignmentInProgress) {
		t.Fatalf("cancel of nothing: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
}

// TestReassignCancel: a move cancelled before it completes goes back to its replicas before
// the move, and the replica it was adding is dropped with its data.
func TestReassignCancel(t *testing.T) {
	c := newRCluster(t, nil)
	c.createPlaced("cx", [][]int32{{0, 1}}, nil)
	c.fill("cx", 0, 2<<20)
	a := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.AlterBrokerConfigs(ctx, "2", map[string]string{client.FollowerThrottledRate: strconv.Itoa(256 << 10)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: "cx", Partition: 0, Replicas: []int32{0, 2}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "broker 2 to host cx-0", func() bool { return c.broker(2).partition("cx", 0) != nil })
	moving, err := a.ListPartitionReassignments(ctx, nil)
	if err != nil || len(moving) != 1 || !slices.Equal(moving[0].Adding, []int32{2}) || !slices.Equal(moving[0].Removing, []int32{1}) {
		t.Fatalf("listed moves: %+v, %v; want cx-0 adding 2, removing 1", moving, err)
	}
	if err := a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: "cx", Partition: 0}}); err != nil {
		t.Fatal(err)
	}
	c.awaitMoved("cx", map[int32][]int32{0: {0, 1}}, 20*time.Second)
	waitFor(t, 10*time.Second, "broker 2's replica of cx-0 deleted", func() bool {
		_, err := os.Stat(c.partitionDir(2, "cx", 0))
		return errors.Is(err, os.ErrNotExist)
	})
}

// TestPreferredLeaderElection: a partition led by its second replica gets its first back on a
// preferred election; a second election is not needed; an unknown partition is named so.
func TestPreferredLeaderElection(t *testing.T) {
	c := newRCluster(t, nil)
	c.createPlaced("pe", [][]int32{{0, 1, 2}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pm := c.meta(0, "pe", 0)
	if _, err := c.broker(0).Controller().SetPartitionLeader(ctx, cluster.LeaderChange{Topic: "pe", Partition: 0, Leader: 1, LeaderEpoch: pm.LeaderEpoch}); err != nil {
		t.Fatal(err)
	}
	a := c.admin()
	tp := client.TopicPartition{Topic: "pe", Partition: 0}
	unknown := client.TopicPartition{Topic: "pe", Partition: 5}
	res, err := a.ElectLeaders(ctx, client.ElectPreferred, []client.TopicPartition{tp, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if res[tp] != nil {
		t.Fatalf("preferred election of pe-0: %v", res[tp])
	}
	if !errors.Is(res[unknown], wire.ErrUnknownTopicOrPartition) {
		t.Errorf("election of pe-5: %v, want UNKNOWN_TOPIC_OR_PARTITION", res[unknown])
	}
	waitFor(t, 10*time.Second, "pe-0 led by broker 0 everywhere", func() bool {
		for _, i := range c.live() {
			if c.meta(i, "pe", 0).Leader != 0 {
				return false
			}
		}
		return true
	})
	res, err = a.ElectLeaders(ctx, client.ElectPreferred, []client.TopicPartition{tp})
	if err != nil || !errors.Is(res[tp], wire.ErrElectionNotNeeded) {
		t.Fatalf("second election: %v %v, want ELECTION_NOT_NEEDED", res, err)
	}
}

// TestCreatePartitions: a topic grows, its new partitions led and hosted; a count not above
// the current one and the offsets topic are refused.
func TestCreatePartitions(t *testing.T) {
	c := newRCluster(t, nil)
	c.createTopic("grow", 2, nil)
	a := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.CreatePartitions(ctx, "grow", 5, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every node to apply the growth", func() bool {
		for _, i := range c.live() {
			if tm, _ := c.broker(i).Controller().Metadata().Topic("grow"); len(tm.Partitions) != 5 {
				return false
			}
		}
		return true
	})
	for _, i := range c.live() {
		tm, _ := c.broker(i).Controller().Metadata().Topic("grow")
		for _, pm := range tm.Partitions[2:] {
			if len(pm.Replicas) != 3 || pm.Leader == cluster.NoLeader {
				t.Errorf("node %d: new partition %+v", i, pm)
			}
		}
	}
	if err := a.CreatePartitions(ctx, "grow", 5, nil); !errors.Is(err, wire.ErrInvalidPartitions) {
		t.Errorf("grow to the same count: %v, want INVALID_PARTITIONS", err)
	}
	if err := a.CreatePartitions(ctx, "grow", 3, nil); !errors.Is(err, wire.ErrInvalidPartitions) {
		t.Errorf("shrink: %v, want INVALID_PARTITIONS", err)
	}
	if err := a.CreatePartitions(ctx, "grow", 6, [][]int32{{0, 0, 1}}); !errors.Is(err, wire.ErrInvalidReplicaAssignment) {
		t.Errorf("assignment with a broker twice: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}
}

// TestAutoLeaderRebalance: with auto.leader.rebalance.enable (the default) a leadership moved
// off its preferred replica comes back by itself at the next check; with it off, it stays.
func TestAutoLeaderRebalance(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		t.Run(fmt.Sprintf("enabled=%v", enabled), func(t *testing.T) {
			c := newRCluster(t, func(cfg *Config) {
				cfg.LeaderImbalanceCheckInterval = 200 * time.Millisecond
				cfg.DisableAutoLeaderRebalance = !enabled
			})
			c.createPlaced("bal", [][]int32{{0, 1, 2}}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			pm := c.meta(0, "bal", 0)
			if _, err := c.broker(0).Controller().SetPartitionLeader(ctx, cluster.LeaderChange{Topic: "bal", Partition: 0, Leader: 2, LeaderEpoch: pm.LeaderEpoch}); err != nil {
				t.Fatal(err)
			}
			if !enabled {
				// Several check intervals pass; the leader stays where it was put. (Polling
				// the metadata for a second: the condition is that nothing happens.)
				deadline := time.Now().Add(time.Second)
				for time.Now().Before(deadline) {
					if l := c.meta(0, "bal", 0).Leader; l != 2 {
						t.Fatalf("leader moved to %d with auto.leader.rebalance.enable=false", l)
					}
					time.Sleep(50 * time.Millisecond) // polling, bounded by the deadline
				}
				return
			}
			waitFor(t, 10*time.Second, "bal-0 back on its preferred leader 0", func() bool {
				for _, i := range c.live() {
					if c.meta(i, "bal", 0).Leader != 0 {
						return false
					}
				}
				return true
			})
		})
	}
}
