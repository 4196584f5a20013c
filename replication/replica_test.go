package replication

import (
	"slices"
	"testing"
	"time"
)

var testNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestFollowerFetchedRefuses: a fetch from a broker that is not a replica, from the leader
// itself, or on a replica that does not lead changes nothing and reports false.
func TestFollowerFetchedRefuses(t *testing.T) {
	r := New(Config{ReplicaID: 1, MinInsync: 1, LagTimeMax: 30 * time.Second}, LogState{EndOffset: 10, DurableOffset: 10})
	if r.FollowerFetched(FollowerFetch{ReplicaID: 2, FetchOffset: 10}, testNow) {
		t.Fatal("an Offline replica took a follower fetch")
	}
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, testNow)
	r.Ready()
	for _, id := range []int32{1, 3} {
		if r.FollowerFetched(FollowerFetch{ReplicaID: id, FetchOffset: 10, DurableOffset: 10}, testNow) {
			t.Errorf("fetch from %d taken", id)
		}
	}
	if rd := r.Ready(); !rd.Empty() {
		t.Fatalf("refused fetches made %+v", rd)
	}
	if !r.FollowerFetched(FollowerFetch{ReplicaID: 2, FetchOffset: 10, DurableOffset: 10}, testNow) {
		t.Fatal("fetch from replica 2 refused")
	}
	if rd := r.Ready(); rd.HighWatermark != 10 {
		t.Fatalf("high watermark %d, want 10", rd.HighWatermark)
	}
}

// TestCancel: a cancelled wait is never released; the others are.
func TestCancel(t *testing.T) {
	r := New(Config{ReplicaID: 1, MinInsync: 1}, LogState{})
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, testNow)
	r.Appended(3, nil, testNow)
	r.Await(1, 0)
	r.Await(2, 1)
	r.Await(3, 2)
	r.Cancel(2)
	r.Synced(3, testNow)
	rd := r.Ready()
	if len(rd.Released) != 2 || rd.Released[0] != (Released{1, WaitDone}) || rd.Released[1] != (Released{3, WaitDone}) {
		t.Fatalf("released %v, want waits 1 and 3 done", rd.Released)
	}
	// A wait the high watermark already passed is released at once.
	r.Await(4, 1)
	if rd := r.Ready(); len(rd.Released) != 1 || rd.Released[0] != (Released{4, WaitDone}) {
		t.Fatalf("released %v, want wait 4 done", rd.Released)
	}
}

// TestLogStartMoved: the leader's high watermark is lifted to a log start above it and the
// epoch cache drops what is below.
func TestLogStartMoved(t *testing.T) {
	r := New(Config{ReplicaID: 1, MinInsync: 1}, LogState{EndOffset: 20, DurableOffset: 20, HighWatermark: 5, Epochs: entries(0, 0, 1, 10)})
	r.LogStartMoved(12)
	rd := r.Ready()
	if rd.HighWatermark != 12 || !rd.HighWatermarkChanged {
		t.Fatalf("high watermark %d, want 12", rd.HighWatermark)
	}
	if !rd.EpochsChanged || len(rd.Epochs) != 1 || rd.Epochs[0] != (EpochEntry{1, 12}) {
		t.Fatalf("epochs %v, want 1@12", rd.Epochs)
	}
	if st := r.Status(testNow); st.LogStartOffset != 12 {
		t.Fatalf("log start %d", st.LogStartOffset)
	}
}

// TestLateTruncation: a truncation asked for at one leader epoch and reported after the
// replica moved on to the next leaves the log as reported and restarts the epoch query from
// what the cache still holds.
func TestLateTruncation(t *testing.T) {
	r := New(Config{ReplicaID: 2}, LogState{EndOffset: 30, DurableOffset: 30, Epochs: entries(1, 0, 3, 10, 5, 20)})
	r.BecomeFollower(FollowerUpdate{Leader: 1, LeaderEpoch: 6, Replicas: []int32{1, 2, 3}}, testNow)
	r.EpochAnswered(3, 5, 15) // truncate to min(15, local end of 3 = 20)
	if rd := r.Ready(); rd.Truncate == nil || rd.Truncate.To != 15 {
		t.Fatalf("truncation %+v, want to 15", rd.Truncate)
	}
	r.BecomeFollower(FollowerUpdate{Leader: 3, LeaderEpoch: 7, Replicas: []int32{1, 2, 3}}, testNow)
	if p := r.NextFetch(); p.Kind != FetchEpochQuery || p.Epoch != 5 || p.Leader != 3 {
		t.Fatalf("plan %+v, want a query to 3 for epoch 5", p)
	}
	r.Truncated(0, 15)
	if rd := r.Ready(); !rd.EpochsChanged || len(rd.Epochs) != 2 || rd.Epochs[1] != (EpochEntry{3, 10}) {
		t.Fatalf("epochs %v after the late truncation, want 1@0 3@10", rd.Epochs)
	}
	if p := r.NextFetch(); p.Kind != FetchEpochQuery || p.Epoch != 3 {
		t.Fatalf("plan %+v, want a query for epoch 3", p)
	}
}

// TestRoleUpdates: stale and repeated updates change nothing; an Offline replica plans no
// fetch and refuses acks=all.
func TestRoleUpdates(t *testing.T) {
	r := New(Config{ReplicaID: 1, MinInsync: 1}, LogState{EndOffset: 5, DurableOffset: 5, Epochs: entries(2, 0)})
	r.BecomeFollower(FollowerUpdate{Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2}}, testNow)
	r.Ready()
	r.BecomeFollower(FollowerUpdate{Leader: 2, LeaderEpoch: 3, PartitionEpoch: 4, Replicas: []int32{1, 2}}, testNow)
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1}}, testNow)
	if rd := r.Ready(); !rd.Empty() || r.Role() != Follower || r.LeaderEpoch() != 3 {
		t.Fatalf("stale or repeated updates made %+v, role %v epoch %d", rd, r.Role(), r.LeaderEpoch())
	}
	r.BecomeFollower(FollowerUpdate{Leader: NoLeader, LeaderEpoch: 4, Replicas: []int32{1, 2}}, testNow)
	if p := r.NextFetch(); p.Kind != FetchNone || r.Role() != Offline || r.AcceptsAcksAll() {
		t.Fatalf("offline: plan %+v, role %v, acks=all %v", p, r.Role(), r.AcceptsAcksAll())
	}
	r.Await(9, 0)
	if rd := r.Ready(); len(rd.Released) != 1 || rd.Released[0] != (Released{9, WaitNotLeader}) {
		t.Fatalf("released %v, want wait 9 not leader", rd.Released)
	}
}

// TestSetConfig: raising min.insync.replicas above the committed ISR releases the parked
// waits NOT_ENOUGH_REPLICAS_AFTER_APPEND; switching write.caching on counts log ends at once.
func TestSetConfig(t *testing.T) {
	r := New(Config{ReplicaID: 1, MinInsync: 1}, LogState{})
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, testNow)
	r.Appended(4, nil, testNow)
	r.FollowerFetched(FollowerFetch{ReplicaID: 2, FetchOffset: 4, DurableOffset: 2}, testNow)
	r.Await(1, 3)
	r.Ready()
	r.SetConfig(Config{ReplicaID: 99, MinInsync: 1, WriteCaching: true})
	rd := r.Ready()
	if rd.HighWatermark != 4 || len(rd.Released) != 1 || rd.Released[0] != (Released{1, WaitDone}) {
		t.Fatalf("write caching on: %+v, want the high watermark at 4 and wait 1 done", rd)
	}
	r.Appended(6, nil, testNow)
	r.Await(2, 5)
	r.SetConfig(Config{MinInsync: 3, WriteCaching: true})
	if rd := r.Ready(); len(rd.Released) != 1 || rd.Released[0] != (Released{2, WaitNotEnoughISR}) {
		t.Fatalf("released %v, want wait 2 not enough replicas", rd.Released)
	}
	if r.AcceptsAcksAll() {
		t.Fatal("acks=all accepted with 2 in sync and min.insync.replicas 3")
	}
}

// TestJoinISRNeedsDurableHW: without write caching, a follower joins the ISR only once it has
// fsynced up to the high watermark, not once its log end reaches it: every ISR member must hold
// every acknowledged record on disk, or electing it after a power loss loses them.
func TestJoinISRNeedsDurableHW(t *testing.T) {
	r := New(Config{ReplicaID: 1, MinInsync: 1, LagTimeMax: 30 * time.Second}, LogState{})
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, testNow)
	r.Appended(10, nil, testNow)
	r.Synced(10, testNow)
	if rd := r.Ready(); rd.HighWatermark != 10 {
		t.Fatalf("high watermark %d, want 10", rd.HighWatermark)
	}
	r.FollowerFetched(FollowerFetch{ReplicaID: 2, FetchOffset: 10, DurableOffset: 4}, testNow)
	r.Tick(testNow)
	if rd := r.Ready(); rd.Propose != nil {
		t.Fatalf("proposed %v for a follower durable to 4 below the high watermark 10", rd.Propose)
	}
	r.FollowerFetched(FollowerFetch{ReplicaID: 2, FetchOffset: 10, DurableOffset: 10}, testNow)
	if rd := r.Ready(); rd.Propose == nil || !slices.Equal(rd.Propose.ISR, []int32{1, 2}) {
		t.Fatalf("proposal %v, want ISR 1,2", rd.Propose)
	}

	// With write caching the log end is what counts, as Kafka.
	r = New(Config{ReplicaID: 1, MinInsync: 1, WriteCaching: true}, LogState{})
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, testNow)
	r.Appended(10, nil, testNow)
	r.Ready()
	r.FollowerFetched(FollowerFetch{ReplicaID: 2, FetchOffset: 10, DurableOffset: 4}, testNow)
	if rd := r.Ready(); rd.Propose == nil {
		t.Fatal("no proposal for a follower at the log end with write caching")
	}
}
