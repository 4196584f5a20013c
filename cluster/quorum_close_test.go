package cluster

import "testing"

// Closing every node of a three-voter cluster leaves no raft, bbolt or controller goroutine:
// raft's transport neither closes the connections it accepted nor stops the goroutines reading
// them when it shuts down, so the mux does.
func TestQuorumCloseLeavesNoGoroutines(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	tc.start(lns)
	registerAll(t, tc.node(tc.follower()), tc.voters)
	createTopic(t, tc.node(tc.follower()), "t", 3)
	tc.converge()
	for _, id := range tc.running() {
		tc.kill(id)
	}
	if leaked := leakedGoroutines(); leaked != "" {
		t.Fatalf("goroutines left after every node closed:\n%.4000s", leaked)
	}
}
