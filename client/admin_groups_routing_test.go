package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// TestAdminGroupOffsetsAtTheCoordinator: an Admin bootstrapped at broker 2 commits and reads a
// group's offsets at the leader of its __consumer_offsets partition ("my-group": 12, led by
// broker 0), the only broker that takes them; it follows that leadership when it moves; and
// against metadata that names a leader which answers NOT_COORDINATOR, it retries until its
// context ends, with an error that says both.
func TestAdminGroupOffsetsAtTheCoordinator(t *testing.T) {
	c := newTestCluster(t, 3)
	leaders := make([]int32, 50)
	for i := range leaders {
		leaders[i] = int32(i % 3)
	}
	c.addTopic(offsetsTopic, leaders...)
	c.addTopic("t", 1)
	const group = "my-group"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := NewAdmin(ctx, c.brokers[2].addr())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tp := TopicPartition{"t", 0}
	for _, tc := range []struct {
		leader int32
		offset int64
	}{{0, 7}, {1, 9}} {
		c.moveLeader(offsetsTopic, 12, tc.leader)
		if err := a.CommitGroupOffsets(ctx, group, map[TopicPartition]int64{tp: tc.offset}); err != nil {
			t.Fatalf("commit with broker %d coordinating: %v", tc.leader, err)
		}
		c.mu.Lock()
		got := c.commits[group][tp]
		c.mu.Unlock()
		if got != tc.offset {
			t.Fatalf("committed with broker %d coordinating: %d; want %d", tc.leader, got, tc.offset)
		}
		if _, err := a.ListGroupOffsets(ctx, group); err != nil {
			t.Fatalf("list offsets with broker %d coordinating: %v", tc.leader, err)
		}
	}
	c.freezeMetadata() // names broker 1
	c.moveLeader(offsetsTopic, 12, 2)
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	_, err = a.ListGroupOffsets(short, group)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, wire.ErrNotCoordinator) {
		t.Fatalf("a coordinator the metadata misnames: %v; want the deadline and NOT_COORDINATOR", err)
	}
}

// TestAdminListOffsetsAtLeaders: partitions led by three brokers are each looked up at their
// leader (the others answer NOT_LEADER_OR_FOLLOWER), from an Admin bootstrapped at one of them,
// so that group describe shows every partition's log end on a cluster; a missing topic is
// still named.
func TestAdminListOffsetsAtLeaders(t *testing.T) {
	c := newTestCluster(t, 3)
	c.addTopic("r", 2, 0, 1)
	c.mu.Lock()
	for i, p := range c.topics["r"] {
		p.next = int64(10 * (i + 1))
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := NewAdmin(ctx, c.brokers[0].addr())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	specs := map[TopicPartition]OffsetSpec{{"absent", 0}: OffsetLatest}
	for p := range int32(3) {
		specs[TopicPartition{"r", p}] = OffsetLatest
	}
	got, err := a.ListOffsets(ctx, specs)
	if len(got) != 3 || !errors.Is(err, ErrUnknownTopic) || !strings.Contains(err.Error(), "absent-0") || strings.Contains(err.Error(), "r-") {
		t.Fatalf("ListOffsets: %v, %v; want r's three partitions and absent-0 unknown", got, err)
	}
	for p := range int32(3) {
		if o := got[TopicPartition{"r", p}].Offset; o != int64(10*(p+1)) {
			t.Errorf("r-%d ends at %d, want %d", p, o, 10*(p+1))
		}
	}
}
