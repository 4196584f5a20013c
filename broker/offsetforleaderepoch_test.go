package broker

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// TestOffsetForLeaderEpochAnswers: the leader answers each epoch asked with the largest epoch
// at or below it that its log holds and where that epoch ends (the next one's start, the log
// end for the latest; an epoch below every entry gets itself and the first entry's start, as
// Kafka's cache answers); a CurrentLeaderEpoch older than the partition's is fenced, a newer
// one unknown, -1 is not checked; a partition led elsewhere, or whose replica has not taken
// the leadership yet, is NOT_LEADER_OR_FOLLOWER; a leaderless one LEADER_NOT_AVAILABLE; an
// unknown one UNKNOWN_TOPIC_OR_PARTITION.
func TestOffsetForLeaderEpochAnswers(t *testing.T) {
	b := startBroker(t, testConfig(t, t.TempDir()))
	self := b.cfg.NodeID
	add := func(name string, leader, epoch int32, rep *replication.Replica) {
		l, err := segment.Open(t.TempDir(), segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := &partition{tp: topicPartition{name, 0}, rep: rep}
		p.current.Store(l)
		p.cfg.Store(&cluster.TopicConfig{})
		p.lead.Store(packLead(leader, epoch))
		b.mu.Lock()
		b.mu.partitions[p.tp] = p
		b.mu.Unlock()
	}
	// Epochs 1 at 0 and 3 at 10; leader at epoch 5 from 20; log end 30.
	led := replication.New(replication.Config{ReplicaID: self, LagTimeMax: time.Minute, MinInsync: 1},
		replication.LogState{EndOffset: 20, DurableOffset: 20, HighWatermark: 20,
			Epochs: []replication.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 10}}})
	led.BecomeLeader(replication.LeaderUpdate{LeaderEpoch: 5, Replicas: []int32{self}, ISR: []int32{self}}, time.Now())
	led.Appended(30, nil, time.Now())
	led.Ready()
	add("led", self, 5, led)
	add("elsewhere", self+1, 5, replication.New(replication.Config{ReplicaID: self}, replication.LogState{}))
	add("leaderless", cluster.NoLeader, 5, replication.New(replication.Config{ReplicaID: self}, replication.LogState{}))
	add("not-yet", self, 5, replication.New(replication.Config{ReplicaID: self}, replication.LogState{})) // rep still offline

	for _, tc := range []struct {
		topic          string
		current, asked int32
		code           wire.ErrorCode
		epoch          int32
		end            int64
	}{
		{"led", 5, 5, wire.NoError, 5, 30},
		{"led", 5, 6, wire.NoError, -1, -1}, // above the latest: undefined
		{"led", 5, 4, wire.NoError, 3, 20},
		{"led", 5, 3, wire.NoError, 3, 20},
		{"led", 5, 2, wire.NoError, 1, 10},
		{"led", 5, 1, wire.NoError, 1, 10},
		{"led", 5, 0, wire.NoError, 0, 0},
		{"led", -1, 3, wire.NoError, 3, 20},
		{"led", 4, 3, wire.ErrFencedLeaderEpoch, -1, -1},
		{"led", 6, 3, wire.ErrUnknownLeaderEpoch, -1, -1},
		{"elsewhere", 5, 3, wire.ErrNotLeaderOrFollower, -1, -1},
		{"leaderless", 5, 3, wire.ErrLeaderNotAvailable, -1, -1},
		{"not-yet", 5, 3, wire.ErrNotLeaderOrFollower, -1, -1},
		{"unknown", 5, 3, wire.ErrUnknownTopicOrPartition, -1, -1},
	} {
		req := wire.OffsetForLeaderEpochRequest{ReplicaID: 7, Topics: []wire.OffsetForLeaderEpochTopic{{Topic: tc.topic,
			Partitions: []wire.OffsetForLeaderEpochPartition{{Partition: 0, CurrentLeaderEpoch: tc.current, LeaderEpoch: tc.asked}}}}}
		var resp wire.OffsetForLeaderEpochResponse
		b.offsetsForLeaderEpoch(&req, &resp)
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != tc.topic || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("%+v: answer %+v", tc, resp)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != tc.code || got.LeaderEpoch != tc.epoch || got.EndOffset != tc.end {
			t.Errorf("%s current %d asked %d: %v epoch %d end %d, want %v %d %d", tc.topic, tc.current, tc.asked,
				got.ErrorCode, got.LeaderEpoch, got.EndOffset, tc.code, tc.epoch, tc.end)
		}
	}
}
