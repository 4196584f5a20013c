package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// The min-ISR filters compare the ISR with the topic's min.insync.replicas, and a partition
// matching any filter that is set is shown.
func TestDescribeMinISRFilters(t *testing.T) {
	live := map[int32]bool{0: true, 1: true, 2: true}
	p := func(isr ...int32) wire.MetadataPartition {
		return wire.MetadataPartition{Leader: 0, Replicas: []int32{0, 1, 2}, ISR: isr}
	}
	for _, tc := range []struct {
		name   string
		f      describeFilters
		p      wire.MetadataPartition
		minISR int
		want   bool
	}{
		{"under min isr", describeFilters{underMinISR: true}, p(0), 2, true},
		{"at min isr is not under", describeFilters{underMinISR: true}, p(0, 1), 2, false},
		{"at min isr", describeFilters{atMinISR: true}, p(0, 1), 2, true},
		{"under is not at", describeFilters{atMinISR: true}, p(0), 2, false},
		{"above min isr", describeFilters{underMinISR: true, atMinISR: true}, p(0, 1, 2), 2, false},
		{"any filter that matches", describeFilters{underReplicated: true, atMinISR: true}, p(0, 1), 1, true},
		{"none set", describeFilters{}, p(0), 2, false},
	} {
		if got := tc.f.keep(tc.p, live, tc.minISR); got != tc.want {
			t.Errorf("%s: keep = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// --verbose writes a partition's offsets at its leader and a line per follower with its lag in
// offsets and milliseconds, "-" and "never" where the leader knows nothing, and says why when
// the leader did not describe the partition.
func TestDescribeVerboseLines(t *testing.T) {
	tp := client.TopicPartition{Topic: "t", Partition: 0}
	reps := map[client.TopicPartition]wire.DescribeReplicasPartition{
		tp: {Partition: 0, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 7, HighWatermark: 90, LogStartOffset: 10, LogEndOffset: 100, DurableOffset: 95,
			ISR: []int32{1, 2}, PendingISR: []int32{1}, Replicas: []wire.DescribeReplicasReplica{
				{ReplicaID: 1, LogEndOffset: 100, DurableOffset: 95, InISR: true},
				{ReplicaID: 2, LogEndOffset: 97, DurableOffset: 96, Lag: 3, SinceCaughtUpMs: 1200, InISR: true},
				{ReplicaID: 0, LogEndOffset: -1, DurableOffset: -1, Lag: -1, SinceCaughtUpMs: -1},
			}},
		{Topic: "t", Partition: 1}: {Partition: 1, ErrorCode: wire.ErrNotLeaderOrFollower},
	}
	var b bytes.Buffer
	writeReplicationLines(&b, reps, tp)
	want := "\t\tHighWatermark: 90\tLogEndOffset: 100\tLogStartOffset: 10\tDurableOffset: 95\tPartitionEpoch: 7\tPendingIsr: 1\n" +
		"\t\tReplica: 2\tLogEndOffset: 97\tLag: 3\tCaughtUpMsAgo: 1200\tInIsr: true\n" +
		"\t\tReplica: 0\tLogEndOffset: -\tLag: -\tCaughtUpMsAgo: never\tInIsr: false\n"
	if b.String() != want {
		t.Errorf("verbose lines:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	writeReplicationLines(&b, reps, client.TopicPartition{Topic: "t", Partition: 1})
	writeReplicationLines(&b, reps, client.TopicPartition{Topic: "t", Partition: 2})
	if want := "\t\tReplication: unknown (NOT_LEADER_OR_FOLLOWER)\n\t\tReplication: unknown (its leader did not answer)\n"; b.String() != want {
		t.Errorf("unanswered partitions:\n%q\nwant\n%q", b.String(), want)
	}
}

// Against a broker: with RF 1 and min.insync.replicas 1 every partition is at its minimum ISR
// and none under it, and --verbose adds each partition's offsets from its leader (the broker),
// with no follower lines.
func TestTopicDescribeMinISRAndVerbose(t *testing.T) {
	e := newConsumeEnv(t)
	id := e.nodeID()
	e.topic("v", 2)
	e.produce("v", 1, 1, "a", "b", "c")
	run := func(args ...string) (string, string, error) { return e.runCmd(topicCmd(), args...) }
	out, _, err := run("describe", "v", "--at-min-isr-partitions")
	if err != nil || strings.Count(out, "\tTopic: v\tPartition: ") != 2 || strings.Contains(out, "Configs:") {
		t.Errorf("--at-min-isr-partitions: %v\n%s", err, out)
	}
	if out, _, err := run("describe", "--under-min-isr-partitions"); err != nil || out != "" {
		t.Errorf("--under-min-isr-partitions on a healthy broker: %q, %v; want nothing", out, err)
	}
	out, _, err = run("describe", "v", "--verbose")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("\tTopic: v\tPartition: 1\tLeader: %d\tReplicas: %d\tIsr: %d\t", id, id, id),
		"\t\tHighWatermark: 3\tLogEndOffset: 3\tLogStartOffset: 0\t",
		"\t\tHighWatermark: 0\tLogEndOffset: 0\tLogStartOffset: 0\t",
		"Configs:\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe --verbose lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Replica: ") || strings.Contains(out, "unknown") {
		t.Errorf("describe --verbose of an RF 1 topic:\n%s", out)
	}
	if i, j := strings.Index(out, "Partition: 1"), strings.Index(out, "HighWatermark: 3"); i < 0 || j < i {
		t.Errorf("partition 1's offsets are not under its line:\n%s", out)
	}
}
