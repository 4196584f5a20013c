package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/internal/coordinator"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
)

// otherBroker is a second broker id registered (and unfenced) in a test broker's metadata: its
// endpoint is never dialled, only named in hints and Metadata.
var otherBroker = cluster.BrokerInfo{ID: 2, Host: "127.0.0.1", Port: 19092}

// twoBrokers starts broker 1 (cfg) with broker 2 registered beside it, and topic "t" with one
// partition on both, broker 1 leading.
func twoBrokers(t *testing.T, cfg Config) (*Broker, *client.Conn) {
	t.Helper()
	cfg.NodeID, cfg.NodeIDSet = 1, true // these tests name brokers 1 (this one) and 2
	b := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	epoch, err := b.Controller().RegisterBroker(ctx, otherBroker)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Controller().UnfenceBroker(ctx, otherBroker.ID, epoch); err != nil { // as its first heartbeat would
		t.Fatal(err)
	}
	c := dial(t, b.Addr().String())
	var resp wire.CreateTopicsResponse
	call(t, c, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{
		{Topic: "t", NumPartitions: -1, ReplicationFactor: -1, Assignments: []wire.CreateTopicsAssignment{{Partition: 0, Replicas: []int32{1, 2}}}},
	}}, &resp)
	if code := resp.Topics[0].ErrorCode; code != wire.NoError {
		t.Fatalf("create t: %v %s", code, deref(resp.Topics[0].ErrorMessage))
	}
	return b, c
}

// moveLeader makes leader the leader of topic-partition and waits until broker b has applied it.
func moveLeader(t *testing.T, b *Broker, topic string, partition, leader int32) (epoch int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tm, _ := b.Controller().Metadata().Topic(topic)
	pm, _ := tm.Partition(partition)
	pm, err := b.Controller().SetPartitionLeader(ctx, cluster.LeaderChange{Topic: topic, Partition: partition, Leader: leader, LeaderEpoch: pm.LeaderEpoch})
	if err != nil {
		t.Fatal(err)
	}
	if p := b.partition(topic, partition); p != nil {
		waitUntil(t, "the leader change applied", func() bool {
			l, e := p.leadership()
			return l == leader && e == pm.LeaderEpoch
		})
	}
	return pm.LeaderEpoch
}

func fetchAt(t *testing.T, c *client.Conn, topic string, epoch int32) wire.FetchResponsePartition {
	t.Helper()
	var resp wire.FetchResponse
	call(t, c, &wire.FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, Topics: []wire.FetchRequestTopic{
		{Topic: topic, Partitions: []wire.FetchRequestPartition{{Partition: 0, CurrentLeaderEpoch: epoch, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}},
	}}, &resp)
	return resp.Topics[0].Partitions[0]
}

func listLatest(t *testing.T, c *client.Conn, topic string) wire.ListOffsetsResponsePartition {
	t.Helper()
	var resp wire.ListOffsetsResponse
	call(t, c, &wire.ListOffsetsRequest{ReplicaID: -1, Topics: []wire.ListOffsetsRequestTopic{
		{Topic: topic, Partitions: []wire.ListOffsetsRequestPartition{{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: wire.LatestTimestamp}}},
	}}, &resp)
	return resp.Topics[0].Partitions[0]
}

// A replica that is not the leader refuses produce, fetch and ListOffsets with
// NOT_LEADER_OR_FOLLOWER and names the leader (id, epoch, endpoint); a partition with no leader
// answers LEADER_NOT_AVAILABLE; a partition not hosted here at all is refused the same way as
// one hosted as a follower; and a broker that gains the leadership back serves its log again.
func TestNotLeaderRefusesAndNamesTheLeader(t *testing.T) {
	b, c := twoBrokers(t, testConfig(t, t.TempDir()))
	if p := produceRaw(t, c, "t", 0, wire.AcksLeader, records(t, "as leader")); p.ErrorCode != wire.NoError {
		t.Fatalf("produce as leader: %v", p.ErrorCode)
	}

	epoch := moveLeader(t, b, "t", 0, 2)
	if p := produceRaw(t, c, "t", 0, wire.AcksLeader, records(t, "as follower")); p.ErrorCode != wire.ErrNotLeaderOrFollower || p.BaseOffset != -1 {
		t.Fatalf("produce to a follower: %v at %d, want NOT_LEADER_OR_FOLLOWER at -1", p.ErrorCode, p.BaseOffset)
	}
	if f := fetchAt(t, c, "t", -1); f.ErrorCode != wire.ErrNotLeaderOrFollower || len(f.Records) != 0 {
		t.Fatalf("fetch from a follower: %v with %d bytes, want NOT_LEADER_OR_FOLLOWER and none", f.ErrorCode, len(f.Records))
	}
	if lo := listLatest(t, c, "t"); lo.ErrorCode != wire.ErrNotLeaderOrFollower {
		t.Fatalf("ListOffsets at a follower: %v, want NOT_LEADER_OR_FOLLOWER", lo.ErrorCode)
	}
	hint, err := b.refuse("t", 0, b.partition("t", 0), -1)
	if !errors.Is(err, ErrNotLeaderOrFollower) || hint != (leaderHint{set: true, id: 2, epoch: epoch}) {
		t.Fatalf("refusal: %+v %v, want broker 2 at epoch %d", hint, err, epoch)
	}
	if eps := b.endpoints(nil, []int32{2}); len(eps) != 1 || eps[0].NodeID != 2 || fmt.Sprintf("%s:%d", eps[0].Host, eps[0].Port) != "127.0.0.1:19092" {
		t.Fatalf("hinted endpoints %+v, want broker 2 at 127.0.0.1:19092", eps)
	}
	checkWireHints(t, c, "t", otherBroker, epoch)

	// A partition this broker is no replica of: the same refusal, from the metadata.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.createTopic(cluster.TopicSpec{Name: "elsewhere", Assignment: [][]int32{{2}}}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if p := produceRaw(t, c, "elsewhere", 0, wire.AcksLeader, records(t, "x")); p.ErrorCode != wire.ErrNotLeaderOrFollower {
		t.Fatalf("produce to a partition not hosted here: %v, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}
	if hint, _ := b.refuse("elsewhere", 0, nil, -1); hint != (leaderHint{set: true, id: 2, epoch: 0}) {
		t.Fatalf("refusal of a partition not hosted here names %+v, want broker 2 at epoch 0", hint)
	}

	// No leader at all.
	moveLeader(t, b, "t", 0, cluster.NoLeader)
	if p := produceRaw(t, c, "t", 0, wire.AcksLeader, records(t, "nobody")); p.ErrorCode != wire.ErrLeaderNotAvailable {
		t.Fatalf("produce with no leader: %v, want LEADER_NOT_AVAILABLE", p.ErrorCode)
	}
	var md wire.MetadataResponse
	call(t, c, &wire.MetadataRequest{Topics: []string{"t"}}, &md)
	if mp := md.Topics[0].Partitions[0]; mp.ErrorCode != wire.ErrLeaderNotAvailable || mp.Leader != cluster.NoLeader {
		t.Fatalf("metadata of a partition with no leader: %v leader %d", mp.ErrorCode, mp.Leader)
	}
	if _, err := b.Controller().SetPartitionLeader(ctx, cluster.LeaderChange{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: epoch + 1}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "leadership back", func() bool { return b.partition("t", 0).servesAt(1, epoch+2) })

	// Leader again: the log it has is served, and takes appends at the new epoch.
	p := produceRaw(t, c, "t", 0, wire.AcksLeader, records(t, "leader again"))
	if p.ErrorCode != wire.NoError || p.BaseOffset != 1 {
		t.Fatalf("produce after regaining the leadership: %v at %d, want offset 1", p.ErrorCode, p.BaseOffset)
	}
	// Committed once the follower (broker 2, in the ISR) has both records, as its fetch from
	// offset 2 says, and the leader has fsynced them.
	followerFetch(t, c, "t", 2, 2)
	awaitCommitted(t, c, "t", 0, 1)
	if f := fetchAt(t, c, "t", epoch+2); f.ErrorCode != wire.NoError || f.HighWatermark != 2 {
		t.Fatalf("fetch after regaining the leadership: %v, high watermark %d, want 2", f.ErrorCode, f.HighWatermark)
	}
	if lo := listLatest(t, c, "t"); lo.ErrorCode != wire.NoError || lo.Offset != 2 {
		t.Fatalf("ListOffsets after regaining the leadership: %v %d", lo.ErrorCode, lo.Offset)
	}
}

// A fetch's CurrentLeaderEpoch is checked first, as Kafka does: older than the partition's is
// FENCED_LEADER_EPOCH (with the leader named), newer is UNKNOWN_LEADER_EPOCH, -1 is not checked;
// then leadership.
func TestFetchLeaderEpochRules(t *testing.T) {
	b, c := twoBrokers(t, testConfig(t, t.TempDir()))
	e1 := moveLeader(t, b, "t", 0, 2)
	e2 := moveLeader(t, b, "t", 0, 1) // led here at e2 = e1+1
	for _, tc := range []struct {
		name  string
		epoch int32
		want  wire.ErrorCode
	}{
		{"unknown epoch: not checked", -1, wire.NoError},
		{"the partition's epoch", e2, wire.NoError},
		{"older", e1, wire.ErrFencedLeaderEpoch},
		{"much older", 0, wire.ErrFencedLeaderEpoch},
		{"newer", e2 + 1, wire.ErrUnknownLeaderEpoch},
	} {
		if f := fetchAt(t, c, "t", tc.epoch); f.ErrorCode != tc.want {
			t.Errorf("led here, %s (%d): %v, want %v", tc.name, tc.epoch, f.ErrorCode, tc.want)
		}
	}
	e3 := moveLeader(t, b, "t", 0, 2)
	for _, tc := range []struct {
		name  string
		epoch int32
		want  wire.ErrorCode
	}{
		{"unknown epoch", -1, wire.ErrNotLeaderOrFollower},
		{"the partition's epoch", e3, wire.ErrNotLeaderOrFollower},
		{"older", e2, wire.ErrFencedLeaderEpoch},
		{"newer", e3 + 1, wire.ErrUnknownLeaderEpoch},
	} {
		if f := fetchAt(t, c, "t", tc.epoch); f.ErrorCode != tc.want {
			t.Errorf("led by broker 2, %s (%d): %v, want %v", tc.name, tc.epoch, f.ErrorCode, tc.want)
		}
	}
	fr := wire.FetchResponse{Version: 1}
	call(t, c, &wire.FetchRequest{Version: 1, ReplicaID: -1, MaxBytes: 1 << 20, Topics: []wire.FetchRequestTopic{
		{Topic: "t", Partitions: []wire.FetchRequestPartition{{Partition: 0, CurrentLeaderEpoch: e2, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}},
	}}, &fr)
	if f := fr.Topics[0].Partitions[0]; f.ErrorCode != wire.ErrFencedLeaderEpoch || f.CurrentLeader != (wire.LeaderHint{LeaderID: 2, LeaderEpoch: e3}) || len(fr.NodeEndpoints) != 1 {
		t.Errorf("fenced v1 fetch: %v, leader %+v, endpoints %+v; want broker 2 named at epoch %d", f.ErrorCode, f.CurrentLeader, fr.NodeEndpoints, e3)
	}
}

// A fetch parked on a partition is answered NOT_LEADER_OR_FOLLOWER as soon as the broker loses
// the partition's leadership, not at its max wait.
func TestParkedFetchReleasedOnLeadershipLoss(t *testing.T) {
	b, c := twoBrokers(t, testConfig(t, t.TempDir()))
	p := b.partition("t", 0)
	got := make(chan wire.FetchResponsePartition, 1)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // below maxWait
		defer cancel()
		var resp wire.FetchResponse
		err := c.Call(ctx, &wire.FetchRequest{ReplicaID: -1, MaxWaitMs: 600_000, MinBytes: 1, MaxBytes: 1 << 20, Topics: []wire.FetchRequestTopic{
			{Topic: "t", Partitions: []wire.FetchRequestPartition{{Partition: 0, CurrentLeaderEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20}}},
		}}, &resp)
		if err != nil {
			errc <- err
			return
		}
		got <- resp.Topics[0].Partitions[0]
	}()
	waitParked(t, p, 1)
	moveLeader(t, b, "t", 0, 2)
	select {
	case f := <-got:
		if f.ErrorCode != wire.ErrNotLeaderOrFollower {
			t.Fatalf("parked fetch answered %v, want NOT_LEADER_OR_FOLLOWER", f.ErrorCode)
		}
	case err := <-errc:
		t.Fatalf("parked fetch not released by the leadership loss: %v", err)
	}
	waitParked(t, p, 0)
}

// An acks=all produce waiting for its fsync when the broker loses the partition's leadership is
// answered NOT_LEADER_OR_FOLLOWER at once (another broker's log defines the partition now), and
// no wait is left registered.
func TestAcksAllWaitRefusedOnLeadershipLoss(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	stall := newStallingSyncs(filepath.Join(dir, "t-0"))
	cfg.logFS = &vfs.ErrorFS{FS: vfs.Default, Inject: stall.inject}
	b, c := twoBrokers(t, cfg)
	t.Cleanup(stall.Release) // before the broker's Close, which waits for its flushers
	p := b.partition("t", 0)
	got := make(chan wire.ProduceResponsePartition, 1)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var resp wire.ProduceResponse
		err := c.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksAll, TimeoutMs: 600_000, Topics: []wire.ProduceRequestTopic{
			{Topic: "t", Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: records(t, "waits")}}},
		}}, &resp)
		if err != nil {
			errc <- err
			return
		}
		got <- resp.Topics[0].Partitions[0]
	}()
	select {
	case <-stall.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync attempted")
	}
	waitUntil(t, "the acks=all wait registered", func() bool { return p.pendingAcks() == 1 })
	moveLeader(t, b, "t", 0, 2)
	select {
	case res := <-got:
		if res.ErrorCode != wire.ErrNotLeaderOrFollower {
			t.Fatalf("acks=all wait answered %v, want NOT_LEADER_OR_FOLLOWER", res.ErrorCode)
		}
	case err := <-errc:
		t.Fatalf("acks=all wait not released by the leadership loss: %v", err)
	}
	if n := p.pendingAcks(); n != 0 {
		t.Fatalf("%d acks=all waits left registered", n)
	}
}

// A wait registered after the leadership it was taken at has gone (the loss swept the waits
// between the append and the registration) is refused by addAck's re-check, never parked in a
// replica that no longer leads it.
func TestAckWaitRegisteredAfterLoss(t *testing.T) {
	b := &Broker{cfg: Config{NodeID: 1}, logger: slog.New(slog.DiscardHandler)}
	p := &partition{tp: topicPartition{"t", 0}}
	p.rep = replication.New(replication.Config{ReplicaID: 1, LagTimeMax: time.Second, MinInsync: 1}, replication.LogState{})
	p.rep.BecomeLeader(replication.LeaderUpdate{LeaderEpoch: 5, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now())
	p.rep.Ready()
	p.lead.Store(packLead(1, 5))
	w := &ackWait{p: p, epoch: 4, last: 0, out: &wire.ProduceResponsePartition{}}
	if b.addAck(w) {
		t.Fatal("addAck accepted a wait of epoch 4 on a partition at epoch 5")
	}
	w = &ackWait{p: p, epoch: 5, last: 0, out: &wire.ProduceResponsePartition{}}
	if !b.addAck(w) {
		t.Fatal("addAck refused a wait at the partition's epoch")
	}
	if n := p.pendingAcks(); n != 1 {
		t.Fatalf("%d waits parked, want 1", n)
	}
	p.lead.Store(packLead(2, 6))
	if b.addAck(&ackWait{p: p, epoch: 5}) {
		t.Fatal("addAck accepted a wait for a broker that no longer leads")
	}
}

// The consumer-offsets rules: the coordinator of a group is the leader of its
// __consumer_offsets partition (Kafka's hash); OffsetCommit, OffsetFetch and DeleteGroups for a
// group whose partition another broker leads answer NOT_COORDINATOR, ListGroups leaves it out;
// with the leadership back they are served again.
func TestOffsetsNotCoordinator(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.OffsetsTopicPartitions = 1
	cfg.OffsetsTopicReplication = 1 // broker 2 is a registration only: it would never replicate
	b, c := twoBrokers(t, cfg)
	awaitGroups(t, b)
	const group = "g"
	if part := coordinator.Partition(group, 1); part != 0 || partitionFor(group, b.groups.partitions()) != 0 {
		t.Fatalf("group's partition %d", part)
	}
	commit := func(offset int64) wire.ErrorCode {
		var resp wire.OffsetCommitResponse
		call(t, c, &wire.OffsetCommitRequest{GroupID: group, GenerationID: -1, Topics: []wire.OffsetCommitRequestTopic{
			{Topic: "t", Partitions: []wire.OffsetCommitRequestPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}},
		}}, &resp)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	fetch := func() (wire.ErrorCode, wire.OffsetFetchResponsePartition) {
		var resp wire.OffsetFetchResponse
		call(t, c, &wire.OffsetFetchRequest{GroupID: group, Topics: []wire.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}}, &resp)
		return resp.ErrorCode, resp.Topics[0].Partitions[0]
	}
	listed := func() int {
		var resp wire.ListGroupsResponse
		call(t, c, &wire.ListGroupsRequest{}, &resp)
		return len(resp.Groups)
	}
	if code := commit(7); code != wire.NoError {
		t.Fatalf("commit at the coordinator: %v", code)
	}
	// The offsets topic was made at the first start, on the one broker there was, and nothing
	// moves replicas yet: the leadership moves as the reconciler applies a metadata naming
	// broker 2 the leader.
	b.reconcileMu.Lock()
	b.setLeadership(b.partition(OffsetsTopic, 0), cluster.PartitionMeta{Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 1})
	b.reconcileMu.Unlock()
	if code := commit(8); code != wire.ErrNotCoordinator {
		t.Fatalf("commit elsewhere: %v, want NOT_COORDINATOR", code)
	}
	if top, part := fetch(); top != wire.ErrNotCoordinator || part.ErrorCode != wire.ErrNotCoordinator || part.Offset != -1 {
		t.Fatalf("offset fetch elsewhere: %v / %+v, want NOT_COORDINATOR", top, part)
	}
	if n := listed(); n != 0 {
		t.Fatalf("ListGroups elsewhere lists %d groups", n)
	}
	var dg wire.DeleteGroupsResponse
	call(t, c, &wire.DeleteGroupsRequest{Groups: []string{group}}, &dg)
	if code := dg.Results[0].ErrorCode; code != wire.ErrNotCoordinator {
		t.Fatalf("DeleteGroups elsewhere: %v, want NOT_COORDINATOR", code)
	}
	moveLeader(t, b, OffsetsTopic, 0, cluster.NoLeader)
	if code := commit(8); code != wire.ErrCoordinatorNotAvailable {
		t.Fatalf("commit with no coordinator: %v, want COORDINATOR_NOT_AVAILABLE", code)
	}
	moveLeader(t, b, OffsetsTopic, 0, 1)
	waitFor(t, 10*time.Second, "the coordinator to load again", func() bool {
		top, _ := fetch()
		return top != wire.ErrCoordinatorLoadInProgress
	})
	if top, part := fetch(); top != wire.NoError || part.Offset != 7 {
		t.Fatalf("offset fetch at the coordinator again: %v / %+v, want offset 7", top, part)
	}
	if code := commit(9); code != wire.NoError {
		t.Fatalf("commit at the coordinator again: %v", code)
	}
	if n := listed(); n != 1 {
		t.Fatalf("ListGroups at the coordinator lists %d groups, want 1", n)
	}
}
