package cluster

import (
	"bytes"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
)

// testdata/compat holds a snapshot and the raft log entries (hex, one a
// line) that built it, written by the code before brokers had a lifecycle
// (main at 62588f8): three brokers, a topic placed by the old rule (start
// from a hash of the name), an internal topic, a leaderless partition, a
// re-registration. A data directory of that time must keep working.

func TestOldSnapshotDecodes(t *testing.T) {
	b, err := os.ReadFile("testdata/compat/v1-snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	md, err := decodeSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if md.Version() != 7 || md.ClusterID() != "" || len(md.LiveBrokers()) != 3 {
		t.Fatalf("version %d, cluster id %q, live %v", md.Version(), md.ClusterID(), md.LiveBrokers())
	}
	for _, br := range md.Brokers() {
		if br.State() != BrokerAlive || br.Epoch != 0 {
			t.Errorf("broker %d from an old snapshot: %+v", br.ID, br)
		}
	}
	tp, _ := md.Topic("orders")
	if p := tp.Partitions[1]; p.Leader != NoLeader || p.LeaderEpoch != 1 || p.PartitionEpoch != 0 {
		t.Errorf("orders-1: %+v", p)
	}
	checkAppliedState(t, md)
	// The brokers of an old snapshot are at epoch 0: their commands work.
	next, res := (&fenceBrokerCmd{brokerEpochCmd{ID: 2, Epoch: 0}}).apply(md, 8)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	checkAppliedState(t, next)
}

// TestOldLogReplays: replaying the old entries gives the state the old code
// snapshotted, placement included, every broker alive.
func TestOldLogReplays(t *testing.T) {
	b, err := os.ReadFile("testdata/compat/v1-log.hex")
	if err != nil {
		t.Fatal(err)
	}
	md := emptyMetadata()
	for i, line := range strings.Fields(string(b)) {
		entry, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		c, err := decodeCommand(entry)
		if err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
		var res applyResult
		md, res = c.apply(md, uint64(i+1))
		if res.Err != nil {
			t.Fatalf("entry %d: %v", i+1, res.Err)
		}
	}
	want, err := os.ReadFile("testdata/compat/v1-snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	old, err := decodeSnapshot(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	checkSameState(t, md, old)
	// And the snapshot written now reads back the same (with the new fields).
	back, err := decodeSnapshot(bytes.NewReader(snapshotBytes(t, md)))
	if err != nil {
		t.Fatal(err)
	}
	checkSameState(t, back, md)
}

// TestSnapshotNewFields: the lifecycle, the epochs and the cluster id
// survive a snapshot round trip.
func TestSnapshotNewFields(t *testing.T) {
	s := &scenarioState{t: t, md: emptyMetadata(), incarnations: map[int32]int{}}
	for _, cmd := range []string{
		"register 0 1 2", "unfence 0 1", "create t assignment=0:1:2", "alter-partition t 0 leader=0 isr=0",
		"shutdown 1", "init-cluster c1",
	} {
		s.run(cmd)
	}
	back, err := decodeSnapshot(bytes.NewReader(snapshotBytes(t, s.md)))
	if err != nil {
		t.Fatal(err)
	}
	checkSameState(t, back, s.md)
	b0, _ := back.Broker(0)
	b1, _ := back.Broker(1)
	b2, _ := back.Broker(2)
	tp, _ := back.Topic("t")
	if b0.Incarnation != "inc-0-1" || b0.Epoch != 1 || b1.State() != BrokerShuttingDown || b2.State() != BrokerFenced ||
		back.ClusterID() != "c1" || tp.Partitions[0].PartitionEpoch != 1 {
		t.Fatalf("after the round trip: %+v %+v %+v %q %+v", b0, b1, b2, back.ClusterID(), tp.Partitions[0])
	}
}

// TestSnapshotMoveInProgress: a partition being moved (its adding and
// removing replicas) survives a snapshot round trip, and the move completes
// after the restore as it would have before; a snapshot whose move layout is
// broken is refused.
func TestSnapshotMoveInProgress(t *testing.T) {
	s := &scenarioState{t: t, md: emptyMetadata(), incarnations: map[int32]int{}}
	for _, cmd := range []string{
		"register 0 1 2 3", "unfence 0 1 2 3", "create t assignment=0:1,1:2", "reassign t:0=2,3 t:1=1,2,3",
		"alter-partition t 0 leader=0 isr=0,1,2",
	} {
		s.run(cmd)
	}
	b := snapshotBytes(t, s.md)
	back, err := decodeSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	checkSameState(t, back, s.md)
	tp, _ := back.Topic("t")
	p0, p1 := tp.Partitions[0], tp.Partitions[1]
	if !p0.Reassigning() || !slices.Equal(p0.TargetReplicas(), []int32{2, 3}) || !slices.Equal(p0.OriginalReplicas(), []int32{0, 1}) ||
		!slices.Equal(p1.AddingReplicas, []int32{3}) || p1.RemovingReplicas != nil {
		t.Fatalf("after the round trip: %+v %+v", p0, p1)
	}
	s.md = back
	s.run("alter-partition t 0 leader=0 isr=0,1,2,3")
	tp, _ = s.md.Topic("t")
	if p := tp.Partitions[0]; p.Reassigning() || p.Leader != 2 || !slices.Equal(p.Replicas, []int32{2, 3}) {
		t.Fatalf("the move after a restore: %+v", p)
	}

	for _, swap := range [][2]string{
		{`"removing_replicas":[0,1]`, `"removing_replicas":[2,3]`}, // not the tail of the replicas
		{`"adding_replicas":[3]`, `"adding_replicas":[7]`},         // not a replica
	} {
		bad := bytes.Replace(b, []byte(swap[0]), []byte(swap[1]), 1)
		if bytes.Equal(bad, b) {
			t.Fatalf("test setup: %s not in the snapshot", swap[0])
		}
		if _, err := decodeSnapshot(bytes.NewReader(bad)); err == nil {
			t.Errorf("a snapshot with %s was accepted", swap[1])
		}
	}
}
