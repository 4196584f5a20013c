package cluster

import (
	"slices"
	"testing"
)

// TestCompletionWaitsForALeader: a move whose ISR holds the whole target but
// whose target has no replica that may lead (a state the commands hardly
// reach: its members ineligible yet in a shared ISR) does not complete into a
// leaderless partition; the old leader goes on serving until a target
// replica can take over.
func TestCompletionWaitsForALeader(t *testing.T) {
	p := PartitionMeta{Replicas: []int32{2, 1}, AddingReplicas: []int32{2}, RemovingReplicas: []int32{1},
		Leader: 1, ISR: []int32{1, 2}, LeaderEpoch: 4, PartitionEpoch: 7}
	ch := newPartitionChange(p)
	ch.completeReassignment(func(id int32) bool { return id != 2 })
	if ch.changed {
		t.Fatalf("completed with no target replica eligible: %+v", ch.p)
	}
	ch.completeReassignment(func(int32) bool { return true })
	np, el := ch.result("t")
	if np.Reassigning() || !slices.Equal(np.Replicas, []int32{2}) || !slices.Equal(np.ISR, []int32{2}) || np.Leader != 2 ||
		np.LeaderEpoch != 5 || np.PartitionEpoch != 8 || el == nil || el.From != 1 || el.To != 2 {
		t.Fatalf("completion: %+v, election %+v", np, el)
	}
}
