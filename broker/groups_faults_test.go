package broker

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// The coordinator's fault paths, with the faults injected from outside through the logs' FS.

// offsetsLog reports whether path is a log file of __consumer_offsets.
func offsetsLog(path string) bool {
	return strings.Contains(filepath.Base(filepath.Dir(path)), OffsetsTopic+"-") && strings.HasSuffix(path, ".log")
}

// TestGroupSnapshotWriteFails: the leader's SyncGroup ends the rebalance with a snapshot of the
// group written to __consumer_offsets; when that append fails (ENOSPC on the log file), the
// assignment is not handed out: the leader and the follower whose sync was parked both get
// NOT_COORDINATOR (Kafka's answer for a storage error, which sends a client to find the
// coordinator again) and the group goes back to PreparingRebalance. Once the disk takes
// writes again, the members rejoin into the next generation and sync.
func TestGroupSnapshotWriteFails(t *testing.T) {
	cfg := groupTestConfig(t)
	fault := &vfs.Switch{Op: vfs.OpWrite, Match: offsetsLog, Err: vfs.ENOSPC}
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: fault.Inject}
	b := startBroker(t, cfg)
	c1, c2 := dial(t, b.Addr().String()), dial(t, b.Addr().String())
	createTopic(t, c1, "t", 2)
	const g, session = "g-persist", 10 * time.Second
	awaitCoordinator(t, c1, g)
	m1, j1 := joinNew(t, c1, g, session)
	if r := recv(t, j1, "join"); r.ErrorCode != wire.NoError || r.GenerationID != 1 {
		t.Fatalf("join: %+v", r)
	}
	var s wire.SyncGroupResponse
	call(t, c1, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 1,
		Assignments: []wire.SyncGroupAssignment{{MemberID: m1, Assignment: assignment("t", 0, 1)}}}, &s)
	if s.ErrorCode != wire.NoError {
		t.Fatalf("sync of generation 1: %v", s.ErrorCode)
	}
	m2, j2 := joinNew(t, c2, g, session)
	r1 := recv(t, joinAsync(t, c1, joinReq(g, m1, session)), "the leader's rejoin")
	if r2 := recv(t, j2, "the second member's join"); r1.ErrorCode != wire.NoError || r2.ErrorCode != wire.NoError || r2.GenerationID != 2 {
		t.Fatalf("generation 2: %+v / %+v", r1, r2)
	}
	parked := syncAsync(t, c2, &wire.SyncGroupRequest{GroupID: g, MemberID: m2, GenerationID: 2})
	waitFor(t, 5*time.Second, "the follower's sync to park", func() bool {
		select {
		case r := <-parked:
			t.Fatalf("the follower's sync answered before the leader's: %+v", r)
		default:
		}
		return describeGroup(t, c1, g).GroupState == "CompletingRebalance"
	})

	fault.Set(true)
	call(t, c1, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 2, Assignments: []wire.SyncGroupAssignment{
		{MemberID: m1, Assignment: assignment("t", 0)}, {MemberID: m2, Assignment: assignment("t", 1)}}}, &s)
	if s.ErrorCode != wire.ErrNotCoordinator {
		t.Errorf("the leader's sync whose snapshot failed: %v, want NOT_COORDINATOR", s.ErrorCode)
	}
	if r := recv(t, parked, "the follower's parked sync"); r.ErrorCode != wire.ErrNotCoordinator {
		t.Errorf("the follower's parked sync: %v, want NOT_COORDINATOR", r.ErrorCode)
	}
	if fault.Hits() == 0 {
		t.Fatal("no write to __consumer_offsets failed")
	}
	if d := describeGroup(t, c1, g); d.GroupState != "PreparingRebalance" {
		t.Errorf("after the failed snapshot the group is %s, want PreparingRebalance", d.GroupState)
	}
	if code := heartbeat(t, c1, g, m1, 2); code != wire.ErrRebalanceInProgress {
		t.Errorf("heartbeat after the failed snapshot: %v, want REBALANCE_IN_PROGRESS", code)
	}

	fault.Set(false)
	j1 = joinAsync(t, c1, joinReq(g, m1, session))
	j2 = joinAsync(t, c2, joinReq(g, m2, session))
	r1, r2 := recv(t, j1, "the leader's join after the fault"), recv(t, j2, "the follower's join after the fault")
	if r1.ErrorCode != wire.NoError || r2.ErrorCode != wire.NoError || r1.GenerationID != 3 || r2.GenerationID != 3 {
		t.Fatalf("the rejoins after the fault: %+v / %+v", r1, r2)
	}
	parked = syncAsync(t, c2, &wire.SyncGroupRequest{GroupID: g, MemberID: m2, GenerationID: 3})
	call(t, c1, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 3, Assignments: []wire.SyncGroupAssignment{
		{MemberID: m1, Assignment: assignment("t", 0)}, {MemberID: m2, Assignment: assignment("t", 1)}}}, &s)
	if r := recv(t, parked, "the follower's sync"); s.ErrorCode != wire.NoError || r.ErrorCode != wire.NoError {
		t.Fatalf("syncs of generation 3: %v / %v", s.ErrorCode, r.ErrorCode)
	}
	if d := describeGroup(t, c1, g); d.GroupState != "Stable" || len(d.Members) != 2 {
		t.Fatalf("after the fault cleared: %+v", d)
	}
}

// stalledReplay holds the coordinator's replay of __consumer_offsets: once armed, a read of an
// offsets log file made by groupCoordinator.replay waits for release.
type stalledReplay struct {
	mu      sync.Mutex
	armed   bool
	stalled chan struct{} // closed at the first held read
	release chan struct{}
	first   sync.Once
	once    sync.Once
}

func (s *stalledReplay) inject(op vfs.Op, path string) error {
	s.mu.Lock()
	armed := s.armed
	s.mu.Unlock()
	if !armed || op != vfs.OpRead || !offsetsLog(path) {
		return nil
	}
	buf := make([]byte, 64<<10)
	if !strings.Contains(string(buf[:runtime.Stack(buf, false)]), "(*groupCoordinator).replay") {
		return nil
	}
	s.first.Do(func() { close(s.stalled) })
	<-s.release
	return nil
}

func (s *stalledReplay) Release() { s.once.Do(func() { close(s.release) }) }

// TestGroupCoordinatorLoadInProgress: while a coordinator replays its __consumer_offsets
// partition (here a restart's replay, held at its first read), every request for a group of
// that partition answers COORDINATOR_LOAD_IN_PROGRESS (retriable) and touches nothing, as
// Kafka's, and so does ListGroups (its list is not complete); FindCoordinator still names the
// broker. Once the replay finishes, the offset
// committed before the restart is there and the group's requests are served.
func TestGroupCoordinatorLoadInProgress(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.GroupInitialRebalanceDelay = -1
	cfg.GroupMinSessionTimeout = 100 * time.Millisecond
	stall := &stalledReplay{stalled: make(chan struct{}), release: make(chan struct{})}
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: stall.inject}
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	const g = "g-loading"
	awaitCoordinator(t, c, g)
	if code := commitAs(t, c, g, "", -1, 7); code != wire.NoError {
		t.Fatalf("commit: %v", code)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	stall.mu.Lock()
	stall.armed = true
	stall.mu.Unlock()
	b = startBroker(t, cfg)
	t.Cleanup(stall.Release) // before the broker's Close, which waits for the replay
	select {
	case <-stall.stalled:
	case <-time.After(20 * time.Second):
		t.Fatal("the replay never read the offsets log")
	}
	c = dial(t, b.Addr().String())
	const loading = wire.ErrCoordinatorLoadInProgress
	var fr wire.OffsetFetchResponse
	call(t, c, &wire.OffsetFetchRequest{GroupID: g, Topics: []wire.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}}, &fr)
	if fr.ErrorCode != loading {
		t.Errorf("OffsetFetch while loading: %v, want %v", fr.ErrorCode, loading)
	}
	if code := commitAs(t, c, g, "", -1, 9); code != loading {
		t.Errorf("OffsetCommit while loading: %v, want %v", code, loading)
	}
	var jr wire.JoinGroupResponse
	call(t, c, joinReq(g, "", 10*time.Second), &jr)
	if jr.ErrorCode != loading {
		t.Errorf("JoinGroup while loading: %v, want %v", jr.ErrorCode, loading)
	}
	if code := heartbeat(t, c, g, "m", 1); code != loading {
		t.Errorf("Heartbeat while loading: %v, want %v", code, loading)
	}
	var sr wire.SyncGroupResponse
	call(t, c, &wire.SyncGroupRequest{GroupID: g, MemberID: "m", GenerationID: 1}, &sr)
	if sr.ErrorCode != loading {
		t.Errorf("SyncGroup while loading: %v, want %v", sr.ErrorCode, loading)
	}
	var dr wire.DescribeGroupsResponse
	call(t, c, &wire.DescribeGroupsRequest{Groups: []string{g}}, &dr)
	if len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != loading {
		t.Errorf("DescribeGroups while loading: %+v, want %v", dr.Groups, loading)
	}
	var lr wire.ListGroupsResponse
	call(t, c, &wire.ListGroupsRequest{}, &lr)
	if lr.ErrorCode != loading {
		t.Errorf("ListGroups while loading: %v, want %v (the list is not complete)", lr.ErrorCode, loading)
	}
	var fc wire.FindCoordinatorResponse
	call(t, c, &wire.FindCoordinatorRequest{CoordinatorKey: g}, &fc)
	if fc.ErrorCode != wire.NoError || fc.NodeID != b.cfg.NodeID {
		t.Errorf("FindCoordinator while loading: %v node %d, want this broker (%d)", fc.ErrorCode, fc.NodeID, b.cfg.NodeID)
	}

	stall.Release()
	awaitCoordinator(t, c, g)
	if code, off := fetchCommitted(t, c, g); code != wire.NoError || off != 7 {
		t.Fatalf("after the load: committed %d (%v), want 7: a request during the load changed it", off, code)
	}
}

// TestGroupOffsetDeleteSubscribed: OffsetDelete of a group with members deletes the committed
// offsets of the topics no member subscribes to and refuses, per partition, those of a topic a
// member does (GROUP_SUBSCRIBED_TO_TOPIC), keeping them; after a restart the deleted offset
// stays deleted (its tombstone was written) and the kept one is there. Once the members have
// left (the group Empty), the subscribed topic's offsets may go too.
func TestGroupOffsetDeleteSubscribed(t *testing.T) {
	cfg := groupTestConfig(t)
	b := startBroker(t, cfg)
	c := dial(t, b.Addr().String())
	createTopic(t, c, "t", 1)
	createTopic(t, c, "u", 1)
	const g = "g-offdel"
	awaitCoordinator(t, c, g)
	m1, j1 := joinNew(t, c, g, 10*time.Second)
	if r := recv(t, j1, "join"); r.ErrorCode != wire.NoError {
		t.Fatalf("join: %+v", r)
	}
	var s wire.SyncGroupResponse
	call(t, c, &wire.SyncGroupRequest{GroupID: g, MemberID: m1, GenerationID: 1,
		Assignments: []wire.SyncGroupAssignment{{MemberID: m1, Assignment: assignment("t", 0)}}}, &s)
	var cr wire.OffsetCommitResponse
	call(t, c, &wire.OffsetCommitRequest{GroupID: g, MemberID: m1, GenerationID: 1, Topics: []wire.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}},
		{Topic: "u", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: 4, LeaderEpoch: -1}}},
	}}, &cr)
	if s.ErrorCode != wire.NoError || cr.Topics[0].Partitions[0].ErrorCode != wire.NoError || cr.Topics[1].Partitions[0].ErrorCode != wire.NoError {
		t.Fatalf("sync %v, commits %+v", s.ErrorCode, cr.Topics)
	}
	committed := func() map[string]int64 {
		var resp wire.OffsetFetchResponse
		call(t, c, &wire.OffsetFetchRequest{GroupID: g, Topics: []wire.OffsetFetchRequestTopic{
			{Topic: "t", Partitions: []int32{0}}, {Topic: "u", Partitions: []int32{0}}}}, &resp)
		if resp.ErrorCode != wire.NoError {
			t.Fatalf("offset fetch: %v", resp.ErrorCode)
		}
		out := map[string]int64{}
		for _, tp := range resp.Topics {
			out[tp.Topic] = tp.Partitions[0].Offset
		}
		return out
	}
	del := func(topics ...string) map[string]wire.ErrorCode {
		req := &wire.OffsetDeleteRequest{GroupID: g}
		for _, tp := range topics {
			req.Topics = append(req.Topics, wire.OffsetDeleteRequestTopic{Topic: tp, Partitions: []int32{0}})
		}
		var resp wire.OffsetDeleteResponse
		call(t, c, req, &resp)
		if resp.ErrorCode != wire.NoError {
			t.Fatalf("offset delete of %v: %v", topics, resp.ErrorCode)
		}
		out := map[string]wire.ErrorCode{}
		for _, tp := range resp.Topics {
			out[tp.Topic] = tp.Partitions[0].ErrorCode
		}
		return out
	}
	if got := del("t", "u"); got["t"] != wire.ErrGroupSubscribedToTopic || got["u"] != wire.NoError {
		t.Fatalf("offset delete of t (subscribed) and u: %v, want t GROUP_SUBSCRIBED_TO_TOPIC, u ok", got)
	}
	if got := committed(); got["t"] != 3 || got["u"] != -1 {
		t.Fatalf("committed after the delete: %v, want t 3 and u none", got)
	}

	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = startBroker(t, cfg)
	c = dial(t, b.Addr().String())
	awaitCoordinator(t, c, g)
	if got := committed(); got["t"] != 3 || got["u"] != -1 {
		t.Fatalf("committed after a restart: %v, want t 3 and u none", got)
	}
	var lr wire.LeaveGroupResponse
	call(t, c, &wire.LeaveGroupRequest{GroupID: g, Members: []wire.LeaveGroupMember{{MemberID: m1}}}, &lr)
	if lr.ErrorCode != wire.NoError {
		t.Fatalf("leave: %v", lr.ErrorCode)
	}
	if got := del("t"); got["t"] != wire.NoError {
		t.Fatalf("offset delete of t once the group is empty: %v", got)
	}
	if got := committed(); got["t"] != -1 {
		t.Fatalf("committed after deleting t: %v, want none", got)
	}
}
