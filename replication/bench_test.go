package replication

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// The replica's hot path is called under the partition's mutex for every follower fetch and
// every local append and fsync: it must not allocate in steady state (b.ReportAllocs shows 0).

func benchLeader(b *testing.B, writeCaching bool) *Replica {
	r := New(Config{ReplicaID: 1, LagTimeMax: 30 * time.Second, MinInsync: 2, WriteCaching: writeCaching}, LogState{})
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, testNow)
	r.Ready()
	return r
}

// BenchmarkFollowerFetched: two followers in the ISR fetch in turn as the leader's log grows,
// each fetch moving the high watermark.
func BenchmarkFollowerFetched(b *testing.B) {
	r := benchLeader(b, false)
	now := testNow
	var end batch.Offset
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		end++
		r.Appended(end, nil, now)
		r.Synced(end, now)
		for _, id := range []int32{2, 3} {
			r.FollowerFetched(FollowerFetch{ReplicaID: id, FetchOffset: end, DurableOffset: end}, now)
		}
		if rd := r.Ready(); rd.HighWatermark != end {
			b.Fatalf("high watermark %d, want %d", rd.HighWatermark, end)
		}
	}
}

// BenchmarkAppendedSynced: the leader's own appends and group-commit fsyncs, its followers
// caught up (write.caching=false: the sync moves the high watermark).
func BenchmarkAppendedSynced(b *testing.B) {
	r := New(Config{ReplicaID: 1, LagTimeMax: 30 * time.Second, MinInsync: 1}, LogState{})
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, testNow)
	r.Ready()
	now := testNow
	var end batch.Offset
	b.ReportAllocs()
	for b.Loop() {
		end += 10
		r.Appended(end, nil, now)
		r.Synced(end, now)
		if rd := r.Ready(); rd.HighWatermark != end {
			b.Fatalf("high watermark %d, want %d", rd.HighWatermark, end)
		}
	}
}

// BenchmarkAwaitReleased: an acks=all wait parked per append and released by the follower's
// fetch. Ready.Released is handed to the driver, so each Ready with releases allocates it.
func BenchmarkAwaitReleased(b *testing.B) {
	r := New(Config{ReplicaID: 1, LagTimeMax: 30 * time.Second, MinInsync: 2, WriteCaching: true}, LogState{})
	r.BecomeLeader(LeaderUpdate{LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, testNow)
	r.Ready()
	now := testNow
	var end batch.Offset
	var id WaitID
	b.ReportAllocs()
	for b.Loop() {
		end++
		id++
		r.Appended(end, nil, now)
		r.Await(id, end-1)
		r.FollowerFetched(FollowerFetch{ReplicaID: 2, FetchOffset: end, DurableOffset: end}, now)
		if rd := r.Ready(); len(rd.Released) != 1 {
			b.Fatalf("released %v", rd.Released)
		}
	}
}
