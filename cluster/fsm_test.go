package cluster

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// richMachine builds a state that uses every kind of field.
func richMachine(t *testing.T) *machine {
	m := newMachine(t, 1, 2, 3)
	m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 4, Host: "h4", Port: 9094, UnixSocket: "/run/s.sock", Rack: "r2"}})
	c := create("orders", 6, 3)
	c.Configs = map[string]string{"retention.ms": "60000", "write.caching": "true"}
	m.ok(c)
	m.ok(create("events.v1", 2, 1))
	internal := create("__consumer_offsets", 3, 2)
	internal.Internal = true
	m.ok(internal)
	m.ok(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "orders", Partition: 2,
		Leader: m.md.topics["orders"].Partitions[2].Replicas[1], LeaderEpoch: 0}})
	return m
}

func encoded(t *testing.T, md *Metadata) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, md); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSnapshotEncodingRoundTrip(t *testing.T) {
	md := richMachine(t).md
	b := encoded(t, md)
	got, err := decodeSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encoded(t, got), b) {
		t.Fatal("re-encoding differs")
	}
	if !reflect.DeepEqual(got, md) {
		t.Fatalf("decoded state differs:\n got %+v\nwant %+v", got, md)
	}
}

type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

func TestFSMSnapshotRestore(t *testing.T) {
	src := richMachine(t)
	f := newFSM(func() {})
	f.state.Store(src.md)

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || !sink.closed {
		t.Fatalf("persist: %v closed=%v", err, sink.closed)
	}
	snap.Release()

	notified := 0
	g := newFSM(func() { notified++ })
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if notified != 1 {
		t.Errorf("restore notified %d times", notified)
	}
	if !reflect.DeepEqual(g.state.Load(), src.md) {
		t.Fatal("restored state differs")
	}

	// The restored machine keeps going where the original left off.
	data, _ := encodeCommand(&deleteTopicCmd{Name: "orders"})
	res := g.Apply(&raft.Log{Index: src.index + 1, Type: raft.LogCommand, Data: data}).(applyResult)
	if res.Err != nil || g.state.Load().Version() != src.index+1 {
		t.Fatalf("apply after restore: %v, version %d", res.Err, g.state.Load().Version())
	}
	res = g.Apply(&raft.Log{Index: src.index + 2, Type: raft.LogCommand, Data: []byte{200}}).(applyResult)
	if !errors.Is(res.Err, ErrUnknownCommand) {
		t.Fatalf("garbage entry: %v", res.Err)
	}
	if g.Apply(&raft.Log{Index: src.index + 3, Type: raft.LogNoop}) != nil {
		t.Fatal("non-command entry produced a result")
	}
}

func TestDecodeSnapshotRejects(t *testing.T) {
	good := string(encoded(t, richMachine(t).md))
	bad := map[string]string{
		"empty":          "",
		"format":         strings.Replace(good, `"format":1`, `"format":2`, 1),
		"truncated":      good[:len(good)/2],
		"dup broker":     strings.Replace(good, `"id":2,`, `"id":1,`, 1),
		"leader":         strings.Replace(good, `"leader":`, `"leader":77,"x":`, 1),
		"bad topic":      strings.Replace(good, `"name":"orders"`, `"name":"or ders"`, 1),
		"partition idx":  strings.Replace(good, `"partition":1,`, `"partition":5,`, 1),
		"negative epoch": strings.Replace(good, `"leader_epoch":1,`, `"leader_epoch":-1,`, 1),
		"dup replica":    strings.Replace(good, `"replicas":[1,2,3],"leader":1,"leader_epoch":0,"isr":[1,2,3]`, `"replicas":[1,1,3],"leader":1,"leader_epoch":0,"isr":[1,3]`, 1),
		"internal flag":  strings.Replace(good, `"name":"__consumer_offsets","id":"TQAAAAAAAAAAAAAAAAAACQ","internal":true,`, `"name":"__consumer_offsets","id":"TQAAAAAAAAAAAAAAAAAACQ",`, 1),
		"name clash":     strings.Replace(good, `"name":"orders"`, `"name":"events_v1"`, 1),
		"unknown broker": strings.Replace(good, `"replicas":[4],"leader":4,"leader_epoch":0,"isr":[4]`, `"replicas":[9],"leader":9,"leader_epoch":0,"isr":[9]`, 1),
		"leader not isr": strings.Replace(good, `"leader":4,"leader_epoch":1,"isr":[3,4,1]`, `"leader":4,"leader_epoch":1,"isr":[3,1]`, 1),
	}
	for name, s := range bad {
		if _, err := decodeSnapshot(strings.NewReader(s)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
