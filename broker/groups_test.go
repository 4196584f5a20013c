package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// groupTestConfig is testConfig with the group timers of the tests: no initial rebalance delay
// and sessions from 100 ms.
func groupTestConfig(t *testing.T) Config {
	cfg := testConfig(t, t.TempDir())
	cfg.GroupInitialRebalanceDelay = -1
	cfg.GroupMinSessionTimeout = 100 * time.Millisecond
	return cfg
}

// awaitCoordinator polls until c's broker coordinates group: the first group request creates
// __consumer_offsets and the shard loads, both answered with retriable errors meanwhile.
func awaitCoordinator(t *testing.T, c *client.Conn, group string) {
	t.Helper()
	waitFor(t, 20*time.Second, "the coordinator of "+group, func() bool {
		var resp wire.OffsetFetchResponse
		call(t, c, &wire.OffsetFetchRequest{GroupID: group, Topics: []wire.OffsetFetchRequestTopic{}}, &resp)
		return resp.ErrorCode == wire.NoError
	})
}

func subscription(topics ...string) []byte {
	s := wire.ConsumerSubscription{Version: 1, Topics: topics}
	return s.AppendTo(nil)
}

func assignment(topic string, parts ...int32) []byte {
	a := wire.ConsumerAssignment{Version: 1, Partitions: []wire.ConsumerTopicPartitions{{Topic: topic, Partitions: parts}}}
	return a.AppendTo(nil)
}

// joinReq is a JoinGroup of the consumer protocol with the range assignor, subscribed to "t".
func joinReq(group, member string, session time.Duration) *wire.JoinGroupRequest {
	return &wire.JoinGroupRequest{
		GroupID: group, MemberID: member, SessionTimeoutMs: int32(session / time.Millisecond), RebalanceTimeoutMs: 5000,
		ProtocolType: wire.ConsumerProtocolType, Protocols: []wire.JoinGroupProtocol{{Name: "range", Metadata: subscription("t")}},
	}
}

// joinAsync sends a JoinGroup that may park and delivers its answer on the channel.
func joinAsync(t *testing.T, c *client.Conn, req *wire.JoinGroupRequest) <-chan wire.JoinGroupResponse {
	ch := make(chan wire.JoinGroupResponse, 1)
	go func() {
		var resp wire.JoinGroupResponse
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Call(ctx, req, &resp); err != nil {
			resp.ErrorCode = wire.ErrNetworkException
		}
		ch <- resp
	}()
	return ch
}

func syncAsync(t *testing.T, c *client.Conn, req *wire.SyncGroupRequest) <-chan wire.SyncGroupResponse {
	ch := make(chan wire.SyncGroupResponse, 1)
	go func() {
		var resp wire.SyncGroupResponse
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Call(ctx, req, &resp); err != nil {
			resp.ErrorCode = wire.ErrNetworkException
		}
		ch <- resp
	}()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("no answer to %s", what)
		panic("unreachable")
	}
}

// joinNew joins a new dynamic member: MEMBER_ID_REQUIRED first, then the join with the id
// given, whose (possibly parked) answer the channel delivers.
func joinNew(t *testing.T, c *client.Conn, group string, session time.Duration) (string, <-chan wire.JoinGroupResponse) {
	t.Helper()
	var first wire.JoinGroupResponse
	call(t, c, joinReq(group, "", session), &first)
	if first.ErrorCode != wire.ErrMemberIDRequired || first.MemberID == "" {
		t.Fatalf("a new member's first join: %v, member id %q; want MEMBER_ID_REQUIRED with an id", first.ErrorCode, first.MemberID)
	}
	return first.MemberID, joinAsync(t, c, joinReq(group, first.MemberID, session))
}

func heartbeat(t *testing.T, c *client.Conn, group, member string, gen int32) wire.ErrorCode {
	t.Helper()
	var resp wire.HeartbeatResponse
	call(t, c, &wire.HeartbeatRequest{GroupID: group, MemberID: member, GenerationID: gen}, &resp)
	return resp.ErrorCode
}

func commitAs(t *testing.T, c *client.Conn, group, member string, gen int32, offset int64) wire.ErrorCode {
	t.Helper()
	var resp wire.OffsetCommitResponse
	call(t, c, &wire.OffsetCommitRequest{GroupID: group, MemberID: member, GenerationID: gen, Topics: []wire.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}},
	}}, &resp)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func fetchCommitted(t *testing.T, c *client.Conn, group string) (wire.ErrorCode, int64) {
	t.Helper()
	var resp wire.OffsetFetchResponse
	call(t, c, &wire.OffsetFetchRequest{GroupID: group, Topics: []wire.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}}, &resp)
	if resp.ErrorCode != wire.NoError {
		return resp.ErrorCode, -1
	}
	return resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[0].Partitions[0].Offset
}

func describeGroup(t *testing.T, c *client.Conn, group string) wire.DescribedGroup {
	t.Helper()
	var resp wire.DescribeGroupsResponse
	call(t, c, &wire.DescribeGroupsRequest{Groups: []string{group}}, &resp)
	if len(resp.Groups) != 1 {
		t.Fatalf("DescribeGroups answered %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

// A group's life at its coordinator over the wire: a member joins (MEMBER_ID_REQUIRED, then
// generation 1 as leader), syncs its assignment, heartbeats and commits fenced by generation;
// a second member's join parks until the first rejoins, the leader's sync answers the parked
// follower, DescribeGroups and ListGroups show the members and the state, and a leave starts
// the next rebalance. The group and its offsets survive a restart of the broker.
func TestGroupLifecycle(t *testing.T) {
	cfg := groupTestConfig(t)
	b := startBroker(t, cfg)
	c1, c2 := dial(t, b.Addr().String()), dial(t, b.Addr().String())
	createTopic(t, c1, "t", 2)
	const g = "g"
	awaitCoordinator(t, c1, g)
	const session = 10 * time.Second

	m1, j1 := joinNew(t, c1, g, session)
	r1 := recv(t, j1, "the first member's join")
	if r1.ErrorCode != wire.NoError || r1.GenerationID != 1 || r1.Leader != m1 || len(r1.Members) != 1 {
		t.Fatalf("first join: %+v", r1)
	}
	var s1 wire.SyncGroupResponse
	call(t, c1, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 1,
		Assignments: []wire.SyncGroupAssignment{{MemberID: m1, Assignment: assignment("t", 0, 1)}}}, &s1)
	if s1.ErrorCode != wire.NoError || string(s1.Assignment) != string(assignment("t", 0, 1)) {
		t.Fatalf("leader's sync: %+v", s1)
	}
	if code := heartbeat(t, c1, g, m1, 1); code != wire.NoError {
		t.Fatalf("heartbeat in Stable: %v", code)
	}
	for _, tc := range []struct {
		member string
		gen    int32
		want   wire.ErrorCode
	}{
		{m1, 1, wire.NoError},
		{m1, 0, wire.ErrIllegalGeneration},
		{"stranger", 1, wire.ErrUnknownMemberID},
		{"", -1, wire.ErrUnknownMemberID}, // a simple commit to a group with members
	} {
		if code := commitAs(t, c1, g, tc.member, tc.gen, 5); code != tc.want {
			t.Fatalf("commit as %q generation %d: %v, want %v", tc.member, tc.gen, code, tc.want)
		}
	}

	// A second member: its join parks; the first member's heartbeat says a rebalance is on,
	// its commit at the current generation is still taken (Kafka's rule), and its rejoin
	// completes the join for both.
	m2, j2 := joinNew(t, c2, g, session)
	waitFor(t, 5*time.Second, "the rebalance to start", func() bool {
		return heartbeat(t, c1, g, m1, 1) == wire.ErrRebalanceInProgress
	})
	if code := commitAs(t, c1, g, m1, 1, 7); code != wire.NoError {
		t.Fatalf("commit at the current generation during PreparingRebalance: %v", code)
	}
	r1 = recv(t, joinAsync(t, c1, joinReq(g, m1, session)), "the leader's rejoin")
	r2 := recv(t, j2, "the second member's join")
	if r1.ErrorCode != wire.NoError || r2.ErrorCode != wire.NoError || r1.GenerationID != 2 || r2.GenerationID != 2 {
		t.Fatalf("rejoin: leader %+v, follower %+v", r1, r2)
	}
	if r1.Leader != m1 || len(r1.Members) != 2 || len(r2.Members) != 0 {
		t.Fatalf("the leader must stay and alone see the members: %+v / %+v", r1, r2)
	}
	if code := commitAs(t, c1, g, m1, 2, 8); code != wire.ErrRebalanceInProgress {
		t.Fatalf("commit while the group awaits the leader's sync: %v, want REBALANCE_IN_PROGRESS", code)
	}
	follower := syncAsync(t, c2, &wire.SyncGroupRequest{GroupID: g, MemberID: m2, GenerationID: 2,
		// A non-leader's assignments are ignored.
		Assignments: []wire.SyncGroupAssignment{{MemberID: m2, Assignment: assignment("t", 0, 1)}}})
	// The leader's assignment naming a partition that does not exist is refused, the group
	// unchanged: the follower stays parked and the leader may sync again.
	call(t, c1, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 2,
		Assignments: []wire.SyncGroupAssignment{{MemberID: m1, Assignment: assignment("t", 0, 9)}}}, &s1)
	if s1.ErrorCode != wire.ErrUnknownTopicOrPartition {
		t.Fatalf("an assignment of a missing partition: %v", s1.ErrorCode)
	}
	call(t, c1, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 2, Assignments: []wire.SyncGroupAssignment{
		{MemberID: m1, Assignment: assignment("t", 0)}, {MemberID: m2, Assignment: assignment("t", 1)},
	}}, &s1)
	s2 := recv(t, follower, "the follower's sync")
	if s1.ErrorCode != wire.NoError || s2.ErrorCode != wire.NoError ||
		string(s1.Assignment) != string(assignment("t", 0)) || string(s2.Assignment) != string(assignment("t", 1)) {
		t.Fatalf("syncs: leader %+v, follower %+v", s1, s2)
	}
	d := describeGroup(t, c1, g)
	if d.ErrorCode != wire.NoError || d.GroupState != "Stable" || d.ProtocolType != wire.ConsumerProtocolType || d.ProtocolData != "range" || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	for _, m := range d.Members {
		if m.ClientHost != "127.0.0.1" || (m.MemberID != m1 && m.MemberID != m2) {
			t.Fatalf("described member %+v", m)
		}
	}
	lg := wire.ListGroupsResponse{Version: 1}
	call(t, c1, &wire.ListGroupsRequest{Version: 1}, &lg)
	if len(lg.Groups) != 1 || lg.Groups[0].GroupID != g || lg.Groups[0].GroupState != "Stable" {
		t.Fatalf("list groups: %+v", lg.Groups)
	}

	// The follower leaves: the leader is told to rejoin.
	var lr wire.LeaveGroupResponse
	call(t, c2, &wire.LeaveGroupRequest{GroupID: g, Members: []wire.LeaveGroupMember{{MemberID: m2}}}, &lr)
	if lr.ErrorCode != wire.NoError {
		t.Fatalf("leave: %+v", lr)
	}
	if code := heartbeat(t, c1, g, m1, 2); code != wire.ErrRebalanceInProgress {
		t.Fatalf("heartbeat after a leave: %v", code)
	}
	r1 = recv(t, joinAsync(t, c1, joinReq(g, m1, session)), "the rejoin after the leave")
	if r1.ErrorCode != wire.NoError || r1.GenerationID != 3 || len(r1.Members) != 1 {
		t.Fatalf("rejoin after leave: %+v", r1)
	}
	call(t, c1, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 3,
		Assignments: []wire.SyncGroupAssignment{{MemberID: m1, Assignment: assignment("t", 0, 1)}}}, &s1)
	if code := commitAs(t, c1, g, m1, 3, 11); s1.ErrorCode != wire.NoError || code != wire.NoError {
		t.Fatalf("sync %v, commit %v", s1.ErrorCode, code)
	}

	// A restart: the new coordinator (the same broker) replays the group's snapshot and offsets.
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, cfg)
	c1 = dial(t, b.Addr().String())
	awaitCoordinator(t, c1, g)
	if code, off := fetchCommitted(t, c1, g); code != wire.NoError || off != 11 {
		t.Fatalf("committed offset after restart: %v %d, want 11", code, off)
	}
	d = describeGroup(t, c1, g)
	if d.GroupState != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != m1 {
		t.Fatalf("group after restart: %+v", d)
	}
	if code := heartbeat(t, c1, g, m1, 3); code != wire.NoError {
		t.Fatalf("the restored member's heartbeat: %v", code)
	}
}

// A member whose session runs out is removed and the others rebalance without it; the
// timeouts run on the coordinator's ticker.
func TestGroupSessionTimeout(t *testing.T) {
	b := startBroker(t, groupTestConfig(t))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	const g = "g-timeout"
	awaitCoordinator(t, c, g)
	m1, j1 := joinNew(t, c, g, 300*time.Millisecond)
	if r := recv(t, j1, "join"); r.ErrorCode != wire.NoError || r.GenerationID != 1 {
		t.Fatalf("join: %+v", r)
	}
	waitFor(t, 10*time.Second, "the silent member to be removed", func() bool {
		d := describeGroup(t, c, g)
		return d.GroupState == "Empty" && len(d.Members) == 0
	})
	if code := heartbeat(t, c, g, m1, 1); code != wire.ErrUnknownMemberID {
		t.Fatalf("heartbeat of an expired member: %v", code)
	}
}

// Bad input is refused with Kafka's codes and leaves the group and other groups as they were.
func TestGroupBadInput(t *testing.T) {
	b := startBroker(t, groupTestConfig(t))
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	const g = "g-bad"
	awaitCoordinator(t, c, g)
	awaitCoordinator(t, c, "other")
	m1, j1 := joinNew(t, c, g, 10*time.Second)
	if r := recv(t, j1, "join"); r.ErrorCode != wire.NoError {
		t.Fatalf("join: %+v", r)
	}
	before := describeGroup(t, c, g)
	join := func(mut func(*wire.JoinGroupRequest)) wire.ErrorCode {
		req := joinReq(g, m1, 10*time.Second)
		mut(req)
		var resp wire.JoinGroupResponse
		call(t, c, req, &resp)
		return resp.ErrorCode
	}
	for _, tc := range []struct {
		name string
		mut  func(*wire.JoinGroupRequest)
		want wire.ErrorCode
	}{
		{"other protocol type", func(r *wire.JoinGroupRequest) { r.ProtocolType = "connect" }, wire.ErrInconsistentGroupProtocol},
		{"no common protocol", func(r *wire.JoinGroupRequest) { r.Protocols[0].Name = "sticky-other" }, wire.ErrInconsistentGroupProtocol},
		{"unknown member", func(r *wire.JoinGroupRequest) { r.MemberID = "nobody" }, wire.ErrUnknownMemberID},
		{"oversized member id", func(r *wire.JoinGroupRequest) { r.MemberID = string(make([]byte, 4000)) }, wire.ErrUnknownMemberID},
		{"session too short", func(r *wire.JoinGroupRequest) { r.SessionTimeoutMs = 1 }, wire.ErrInvalidSessionTimeout},
		{"empty group id", func(r *wire.JoinGroupRequest) { r.GroupID = "" }, wire.ErrInvalidGroupID},
	} {
		if got := join(tc.mut); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	after := describeGroup(t, c, g)
	if after.GroupState != before.GroupState || len(after.Members) != len(before.Members) {
		t.Fatalf("bad joins changed the group: %+v -> %+v", before, after)
	}
	if d := describeGroup(t, c, "other"); d.GroupState != "Dead" || len(d.Members) != 0 {
		t.Fatalf("another group: %+v", d)
	}
	if code := commitAs(t, c, "other", "", -1, 1); code != wire.NoError {
		t.Fatalf("a simple commit to another group: %v", code)
	}
	var resp wire.OffsetCommitResponse
	call(t, c, &wire.OffsetCommitRequest{GroupID: "other", GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 5, Offset: 1, LeaderEpoch: -1}}},
	}}, &resp)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != wire.ErrUnknownTopicOrPartition {
		t.Fatalf("a commit to a partition that does not exist: %v", code)
	}
	// OffsetDelete: refused for a topic the members subscribe to, done for another.
	createTopic(t, c, "u", 1)
	var dr wire.OffsetDeleteResponse
	call(t, c, &wire.OffsetDeleteRequest{GroupID: g, Topics: []wire.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []int32{0}}}}, &dr)
	if dr.ErrorCode != wire.NoError || dr.Topics[0].Partitions[0].ErrorCode != wire.ErrGroupSubscribedToTopic {
		t.Fatalf("offset delete of a subscribed topic: %+v", dr)
	}
}

// awaitGroups makes b, a single broker, ready to coordinate every group: it creates
// __consumer_offsets (as the first group request would) and waits for every shard to load.
func awaitGroups(t *testing.T, b *Broker) {
	t.Helper()
	waitFor(t, 20*time.Second, "every group coordinator shard loaded", func() bool {
		n := b.groups.partitions()
		if n == 0 {
			b.groups.createTopic()
			return false
		}
		for part := range n {
			b.groups.mu.Lock()
			sh := b.groups.shards[part]
			b.groups.mu.Unlock()
			if sh == nil || !sh.lock() {
				return false
			}
			sh.mu.Unlock()
		}
		return true
	})
}

// A member whose join is parked and who joins again (its client timed out the first request)
// has the first answered REBALANCE_IN_PROGRESS and the second answered with the generation.
func TestGroupSecondParkedJoin(t *testing.T) {
	b := startBroker(t, groupTestConfig(t))
	c1, c2 := dial(t, b.Addr().String()), dial(t, b.Addr().String())
	createTopic(t, c1, "t", 1)
	const g = "g-twice"
	awaitCoordinator(t, c1, g)
	m1, j1 := joinNew(t, c1, g, 10*time.Second)
	if r := recv(t, j1, "join"); r.ErrorCode != wire.NoError {
		t.Fatalf("join: %+v", r)
	}
	var s wire.SyncGroupResponse
	call(t, c1, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 1}, &s)
	m2, first := joinNew(t, c2, g, 10*time.Second) // parked: m1 has not rejoined
	waitFor(t, 5*time.Second, "the rebalance to start", func() bool { return heartbeat(t, c1, g, m1, 1) == wire.ErrRebalanceInProgress })
	second := joinAsync(t, dial(t, b.Addr().String()), joinReq(g, m2, 10*time.Second))
	if r := recv(t, first, "the first parked join"); r.ErrorCode != wire.ErrRebalanceInProgress {
		t.Fatalf("the replaced join: %+v, want REBALANCE_IN_PROGRESS", r)
	}
	r1 := recv(t, joinAsync(t, c1, joinReq(g, m1, 10*time.Second)), "the leader's rejoin")
	r2 := recv(t, second, "the second join")
	if r1.ErrorCode != wire.NoError || r2.ErrorCode != wire.NoError || r2.GenerationID != 2 || r2.MemberID != m2 {
		t.Fatalf("rejoin %+v, second join %+v", r1, r2)
	}
}
