package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
)

// sideConn dials node i through the Net as the side door.
func (c *rcluster) sideConn(i int) *client.Conn {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.DialWith(ctx, c.net.Dialer(sideNode), c.cfgs[i].Listen, "gtest")
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// coordinatorOf asks a live node for group's coordinator until one is named.
func (c *rcluster) coordinatorOf(group string, not int32) int32 {
	c.t.Helper()
	var id int32 = -1
	waitFor(c.t, 30*time.Second, "a coordinator of "+group, func() bool {
		for _, i := range c.live() {
			var resp wire.FindCoordinatorResponse
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.sideConn(i).Call(ctx, &wire.FindCoordinatorRequest{CoordinatorKey: group}, &resp)
			cancel()
			if err == nil && resp.ErrorCode == wire.NoError && resp.NodeID != not && c.broker(int(resp.NodeID)) != nil {
				id = resp.NodeID
				return true
			}
		}
		return false
	})
	return id
}

// The coordinator dies in the middle of a rebalance and of a stream of commits: the leader of
// __consumer_offsets' partition moves, the new coordinator replays it, every commit that was
// acknowledged is there (the committed offset never goes backwards), the group's snapshot is
// back (its member's generation still current), and the group reforms there with the member
// whose join was parked on the dead coordinator.
func TestGroupCoordinatorFailover(t *testing.T) {
	rc := newRCluster(t, func(c *Config) {
		c.OffsetsTopicPartitions = 1
		c.GroupInitialRebalanceDelay = -1
		c.GroupMinSessionTimeout = 100 * time.Millisecond
	})
	rc.createTopic("t", 1, nil)
	const g = "g-failover"
	k := rc.coordinatorOf(g, -1)
	ck := rc.sideConn(int(k))
	awaitCoordinator(t, ck, g)
	if tm, _ := rc.broker(int(k)).Controller().Metadata().Topic(OffsetsTopic); len(tm.Partitions[0].Replicas) != 3 {
		t.Fatalf("%s replicas %v, want 3 (offsets.topic.replication.factor with 3 live brokers)", OffsetsTopic, tm.Partitions[0].Replicas)
	}
	const session = 20 * time.Second // outlives the failover: the restored member stays
	m1, j1 := joinNew(t, ck, g, session)
	if r := recv(t, j1, "join"); r.ErrorCode != wire.NoError || r.GenerationID != 1 {
		t.Fatalf("join: %+v", r)
	}
	var s1 wire.SyncGroupResponse
	call(t, ck, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 1,
		Assignments: []wire.SyncGroupAssignment{{MemberID: m1, Assignment: assignment("t", 0)}}}, &s1)
	if s1.ErrorCode != wire.NoError {
		t.Fatalf("sync: %v", s1.ErrorCode)
	}

	// Commits, one after the other, each of a higher offset; acked is the highest answered OK.
	var acked atomic.Int64
	acked.Store(-1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	cc := rc.sideConn(int(k))
	go func() {
		defer wg.Done()
		for off := int64(1); ; off++ {
			select {
			case <-stop:
				return
			default:
			}
			var resp wire.OffsetCommitResponse
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := cc.Call(ctx, &wire.OffsetCommitRequest{GroupID: g, MemberID: m1, GenerationID: 1, Topics: []wire.OffsetCommitRequestTopic{
				{Topic: "t", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: off, LeaderEpoch: -1}}},
			}}, &resp)
			cancel()
			if err != nil {
				return // the coordinator is gone
			}
			if resp.Topics[0].Partitions[0].ErrorCode == wire.NoError {
				acked.Store(off)
			}
		}
	}()
	waitFor(t, 20*time.Second, "commits acknowledged", func() bool { return acked.Load() >= 20 })

	// A second member's join parks on the coordinator (a rebalance in progress); then it dies.
	m2, j2 := joinNew(t, rc.sideConn(int(k)), g, session)
	waitFor(t, 10*time.Second, "the rebalance to start", func() bool {
		return heartbeat(t, ck, g, m1, 1) == wire.ErrRebalanceInProgress
	})
	epoch := rc.meta(int(k), OffsetsTopic, 0).LeaderEpoch
	rc.kill(int(k))
	close(stop)
	wg.Wait()
	if r := recv(t, j2, "the parked join"); r.ErrorCode == wire.NoError {
		t.Fatalf("a join parked on a dead coordinator succeeded: %+v", r)
	}
	last := acked.Load()

	k2 := rc.waitNewLeader(OffsetsTopic, 0, k, epoch, 30*time.Second)
	if k2 == cluster.NoLeader {
		t.Fatal("no new leader")
	}
	c2 := rc.sideConn(int(k2))
	awaitCoordinator(t, c2, g)
	if code, off := fetchCommitted(t, c2, g); code != wire.NoError || off < last {
		t.Fatalf("after failover the committed offset is %d (%v); %d was acknowledged", off, code, last)
	}
	d := describeGroup(t, c2, g)
	if d.GroupState != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != m1 {
		t.Fatalf("the restored group: %+v", d)
	}
	// m2's id lived only in the dead coordinator's memory: it joins again from scratch, the
	// group rebalances to generation 2 with both.
	if code := heartbeat(t, c2, g, m1, 1); code != wire.NoError {
		t.Fatalf("the restored member's heartbeat: %v", code)
	}
	c3 := rc.sideConn(int(k2))
	var rj wire.JoinGroupResponse
	call(t, c3, joinReq(g, m2, session), &rj)
	if rj.ErrorCode != wire.ErrUnknownMemberID {
		t.Fatalf("the forgotten member's join: %v, want UNKNOWN_MEMBER_ID", rj.ErrorCode)
	}
	m2, j2 = joinNew(t, c3, g, session)
	r1 := recv(t, joinAsync(t, c2, joinReq(g, m1, session)), "the leader's rejoin")
	r2 := recv(t, j2, "the new member's join")
	if r1.ErrorCode != wire.NoError || r2.ErrorCode != wire.NoError || r1.GenerationID != 2 || len(r1.Members) != 2 {
		t.Fatalf("rejoin at the new coordinator: %+v / %+v", r1, r2)
	}
	follower := syncAsync(t, c3, &wire.SyncGroupRequest{GroupID: g, MemberID: m2, GenerationID: 2})
	call(t, c2, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 2, Assignments: []wire.SyncGroupAssignment{
		{MemberID: m1, Assignment: assignment("t", 0)}, {MemberID: m2, Assignment: assignment("t")},
	}}, &s1)
	if s2 := recv(t, follower, "the follower's sync"); s1.ErrorCode != wire.NoError || s2.ErrorCode != wire.NoError {
		t.Fatalf("syncs: %v %v", s1.ErrorCode, s2.ErrorCode)
	}
	if code := commitAs(t, c2, g, m1, 1, last+1); code != wire.ErrIllegalGeneration {
		t.Fatalf("a commit of the old generation: %v", code)
	}
	if code := commitAs(t, c2, g, m1, 2, last+1); code != wire.NoError {
		t.Fatalf("a commit of the new generation: %v", code)
	}
}
