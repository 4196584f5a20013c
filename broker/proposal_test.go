package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/replication"
)

// A refused or unanswered ISR proposal is reported to the replica only while it is the
// outstanding one: a late failure of an earlier proposal must not clear a newer one, whose added
// member already counts toward the high watermark.
func TestLateProposalFailureKeepsTheNewerProposal(t *testing.T) {
	now := time.Now()
	p := &partition{rep: replication.New(replication.Config{ReplicaID: 0, LagTimeMax: time.Second, MinInsync: 1}, replication.LogState{})}
	p.rep.BecomeLeader(replication.LeaderUpdate{LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{0, 1, 2}, ISR: []int32{0}}, now)
	// Follower 1 catches up: the replica proposes ISR 0,1 (the earlier proposal).
	p.rep.FollowerFetched(replication.FollowerFetch{ReplicaID: 1, FetchOffset: 0, DurableOffset: 0}, now)
	first := p.rep.Ready().Propose
	if first == nil {
		t.Fatal("no proposal for a caught-up follower")
	}
	early := cluster.AlterPartitionRequest{LeaderEpoch: first.LeaderEpoch, PartitionEpoch: first.PartitionEpoch, ISR: first.ISR}
	// That proposal commits (partition epoch 2); follower 2 catches up and is proposed in turn.
	p.rep.BecomeLeader(replication.LeaderUpdate{LeaderEpoch: 1, PartitionEpoch: 2, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1}}, now)
	p.rep.FollowerFetched(replication.FollowerFetch{ReplicaID: 2, FetchOffset: 0, DurableOffset: 0}, now)
	second := p.rep.Ready().Propose
	if second == nil || !slices.Equal(second.ISR, []int32{0, 1, 2}) {
		t.Fatalf("second proposal %+v, want ISR 0,1,2", second)
	}
	b := &Broker{}
	b.proposalFailed(p, early) // the first proposal's goroutine reports a (late) failure
	if st := p.rep.Status(now); !slices.Equal(st.PendingISR, second.ISR) {
		t.Fatalf("a late failure of the settled proposal cleared the outstanding one: pending %v", st.PendingISR)
	}
	b.proposalFailed(p, cluster.AlterPartitionRequest{LeaderEpoch: second.LeaderEpoch, PartitionEpoch: second.PartitionEpoch, ISR: second.ISR})
	if st := p.rep.Status(now); st.PendingISR != nil {
		t.Fatalf("the outstanding proposal's failure left it pending: %v", st.PendingISR)
	}
}
