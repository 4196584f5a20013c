package replication

import (
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
