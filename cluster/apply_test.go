package cluster

import (
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

// machine drives the pure state machine the way raft would: one command per
// index, starting from the empty state.
type machine struct {
	t     *testing.T
	md    *Metadata
	index uint64
}

func newMachine(t *testing.T, brokers ...int32) *machine {
	m := &machine{t: t, md: emptyMetadata()}
	for _, id := range brokers {
		m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: id, Host: "localhost", Port: 9090 + id}})
	}
	return m
}

func (m *machine) apply(c command) applyResult {
	m.t.Helper()
	// Every command goes through the log encoding, as it would in raft.
	b, err := encodeCommand(c)
	if err != nil {
		m.t.Fatal(err)
	}
	dc, err := decodeCommand(b)
	if err != nil {
		m.t.Fatal(err)
	}
	m.index++
	prev := m.md
	next, res := dc.apply(prev, m.index)
	if res.Err != nil && next != prev {
		m.t.Fatalf("rejected command %T changed the state", c)
	}
	m.md = next
	return res
}

func (m *machine) ok(c command) applyResult {
	m.t.Helper()
	res := m.apply(c)
	if res.Err != nil {
		m.t.Fatalf("%T: %v", c, res.Err)
	}
	return res
}

func (m *machine) fails(c command, want error) {
	m.t.Helper()
	if res := m.apply(c); !errors.Is(res.Err, want) {
		m.t.Fatalf("%T: got %v, want %v", c, res.Err, want)
	}
}

func idOf(b byte) TopicID { return TopicID{0: b, 15: 9} }

func create(name string, partitions int32, rf int16) *createTopicCmd {
	return &createTopicCmd{TopicSpec: TopicSpec{Name: name, NumPartitions: partitions, ReplicationFactor: rf},
		ID: idOf(byte(len(name)) ^ name[0])}
}

func TestTopicNames(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"Orders.v2_final-1", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"a b", false},
		{"a/b", false},
		{"a:b", false},
		{"é", false},
		{"a\x00", false},
	}
	for _, tt := range tests {
		err := ValidateTopicName(tt.name)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidTopic)) {
			t.Errorf("ValidateTopicName(%.20q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		m := newMachine(t, 1)
		res := m.apply(&createTopicCmd{TopicSpec: TopicSpec{Name: tt.name, NumPartitions: 1, ReplicationFactor: 1}, ID: idOf(1)})
		if (res.Err == nil) != tt.ok {
			t.Errorf("create %.20q: %v, want ok=%v", tt.name, res.Err, tt.ok)
		}
	}
}

func TestCreateTopicRejects(t *testing.T) {
	spec := func(f func(*createTopicCmd)) *createTopicCmd {
		c := create("t", 3, 2)
		f(c)
		return c
	}
	tests := []struct {
		name string
		cmd  *createTopicCmd
		want error
	}{
		{"zero partitions", spec(func(c *createTopicCmd) { c.NumPartitions = 0 }), ErrInvalidPartitions},
		{"-1 partitions", spec(func(c *createTopicCmd) { c.NumPartitions = -1 }), ErrInvalidPartitions},
		{"too many partitions", spec(func(c *createTopicCmd) { c.NumPartitions = maxPartitions + 1 }), ErrInvalidPartitions},
		{"rf 0", spec(func(c *createTopicCmd) { c.ReplicationFactor = 0 }), ErrInvalidReplicationFactor},
		{"rf > brokers", spec(func(c *createTopicCmd) { c.ReplicationFactor = 4 }), ErrInvalidReplicationFactor},
		{"ragged assignment", spec(func(c *createTopicCmd) {
			c.NumPartitions, c.ReplicationFactor, c.Assignment = -1, -1, [][]int32{{1, 2}, {2}}
		}), ErrInvalidReplicaAssignment},
		{"duplicate replica", spec(func(c *createTopicCmd) {
			c.NumPartitions, c.ReplicationFactor, c.Assignment = -1, -1, [][]int32{{1, 1}}
		}), ErrInvalidReplicaAssignment},
		{"unknown broker", spec(func(c *createTopicCmd) {
			c.NumPartitions, c.ReplicationFactor, c.Assignment = -1, -1, [][]int32{{1, 7}}
		}), ErrInvalidReplicaAssignment},
		{"empty replicas", spec(func(c *createTopicCmd) {
			c.NumPartitions, c.ReplicationFactor, c.Assignment = -1, -1, [][]int32{{}}
		}), ErrInvalidReplicaAssignment},
		{"assignment vs partitions", spec(func(c *createTopicCmd) { c.ReplicationFactor, c.Assignment = -1, [][]int32{{1}} }), ErrInvalidReplicaAssignment},
		{"assignment vs rf", spec(func(c *createTopicCmd) { c.NumPartitions, c.Assignment = -1, [][]int32{{1}} }), ErrInvalidReplicaAssignment},
		{"unknown config", spec(func(c *createTopicCmd) { c.Configs = map[string]string{"nope": "1"} }), ErrInvalidConfig},
		{"bad config value", spec(func(c *createTopicCmd) { c.Configs = map[string]string{"retention.ms": "x"} }), ErrInvalidConfig},
		{"compaction", spec(func(c *createTopicCmd) { c.Configs = map[string]string{"cleanup.policy": "compact"} }), ErrInvalidConfig},
		{"compaction lags crossed", spec(func(c *createTopicCmd) {
			c.Configs = map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}
		}), ErrInvalidConfig},
		{"zero id", spec(func(c *createTopicCmd) { c.ID = TopicID{} }), ErrInvalidTopic},
		{"internal name by a user", spec(func(c *createTopicCmd) { c.Name = "__consumer_offsets" }), ErrInvalidTopic},
		{"internal flag on a user name", spec(func(c *createTopicCmd) { c.Internal = true }), ErrInvalidTopic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newMachine(t, 1, 2, 3).fails(tt.cmd, tt.want)
		})
	}

	t.Run("no brokers", func(t *testing.T) { newMachine(t).fails(create("t", 1, 1), ErrInvalidReplicationFactor) })
	t.Run("exists", func(t *testing.T) {
		m := newMachine(t, 1)
		m.ok(create("t", 1, 1))
		c := create("t", 1, 1)
		c.ID = idOf(99)
		m.fails(c, ErrTopicExists)
	})
	t.Run("id in use", func(t *testing.T) {
		m := newMachine(t, 1)
		m.ok(create("t", 1, 1))
		c := create("u", 1, 1)
		c.ID = m.md.topics["t"].ID
		m.fails(c, ErrInvalidTopic)
	})
	for _, pair := range [][2]string{{"a.b", "a_b"}, {"a_b", "a.b"}, {"x.y_z", "x_y.z"}} {
		t.Run("collision "+pair[0]+" "+pair[1], func(t *testing.T) {
			m := newMachine(t, 1)
			m.ok(create(pair[0], 1, 1))
			c := create(pair[1], 1, 1)
			c.ID = idOf(77)
			m.fails(c, ErrInvalidTopic)
		})
	}
	t.Run("internal by the broker", func(t *testing.T) {
		m := newMachine(t, 1)
		c := create("__consumer_offsets", 50, 1)
		c.Internal = true
		res := m.ok(c)
		if !res.Topic.Internal {
			t.Error("not marked internal")
		}
		m.fails(&deleteTopicCmd{Name: "__consumer_offsets"}, ErrInvalidTopic)
		m.ok(&deleteTopicCmd{Name: "__consumer_offsets", Internal: true})
	})
}

func TestCreateTopicAssignment(t *testing.T) {
	m := newMachine(t, 3, 1, 2) // registration order must not matter
	res := m.ok(create("orders", 7, 2))
	tp := res.Topic
	if len(tp.Partitions) != 7 {
		t.Fatalf("%d partitions", len(tp.Partitions))
	}
	leaders := map[int32]int{}
	for i, p := range tp.Partitions {
		if p.Partition != int32(i) || len(p.Replicas) != 2 || p.Replicas[0] == p.Replicas[1] {
			t.Errorf("partition %d: %+v", i, p)
		}
		if p.Leader != p.Replicas[0] || p.LeaderEpoch != 0 || !slices.Equal(p.ISR, p.Replicas) {
			t.Errorf("partition %d: leader/epoch/ISR %+v", i, p)
		}
		leaders[p.Leader]++
	}
	for b, n := range leaders {
		if n < 2 || n > 3 {
			t.Errorf("broker %d leads %d of 7 partitions: not round-robin", b, n)
		}
	}
	again, err := create("orders", 7, 2).place(m.md)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range tp.Partitions {
		if !slices.Equal(p.Replicas, again[i]) {
			t.Fatal("assignment is not deterministic")
		}
	}
	// Follower sets vary across rounds, as with Kafka's shifting.
	if slices.Equal(tp.Partitions[0].Replicas, tp.Partitions[3].Replicas) {
		t.Errorf("partitions 0 and 3 have the same replicas %v", tp.Partitions[0].Replicas)
	}

	explicit := &createTopicCmd{TopicSpec: TopicSpec{Name: "pinned", NumPartitions: -1, ReplicationFactor: -1,
		Assignment: [][]int32{{2, 3}, {3, 1}}}, ID: idOf(50)}
	res = m.ok(explicit)
	if got := res.Topic.Partitions[1]; !slices.Equal(got.Replicas, []int32{3, 1}) || got.Leader != 3 {
		t.Errorf("explicit assignment not kept: %+v", got)
	}
	if m.md.Version() != m.index {
		t.Errorf("version %d, want the last index %d", m.md.Version(), m.index)
	}
}

func TestDeleteAndRecreate(t *testing.T) {
	m := newMachine(t, 1)
	first := m.ok(create("t", 2, 1)).Topic
	m.fails(&deleteTopicCmd{Name: "t", ID: idOf(42)}, ErrUnknownTopic) // a delete aimed at another incarnation
	m.ok(&deleteTopicCmd{Name: "t", ID: first.ID})
	m.fails(&deleteTopicCmd{Name: "t"}, ErrUnknownTopic)
	if _, ok := m.md.Topic("t"); ok {
		t.Fatal("deleted topic still there")
	}
	if _, ok := m.md.TopicByID(first.ID); ok {
		t.Fatal("deleted topic id still resolves")
	}
	c := create("t", 1, 1)
	c.ID = NewTopicID()
	second := m.ok(c).Topic
	if second.ID == first.ID {
		t.Fatal("re-created topic kept its id")
	}
	if got, ok := m.md.TopicByID(second.ID); !ok || got.Name != "t" {
		t.Fatal("TopicByID")
	}
}

func TestAlterTopicConfigs(t *testing.T) {
	m := newMachine(t, 1)
	c := create("t", 1, 1)
	c.Configs = map[string]string{"retention.ms": "1000", "segment.bytes": "1048576"}
	m.ok(c)
	before := m.md

	m.ok(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"retention.ms": "2000", "write.caching": "true"}, Delete: []string{"segment.bytes"}})
	got, _ := m.md.Topic("t")
	if want := map[string]string{"retention.ms": "2000", "write.caching": "true"}; !maps.Equal(got.Configs, want) {
		t.Errorf("configs %v, want %v", got.Configs, want)
	}
	if old, _ := before.Topic("t"); old.Configs["retention.ms"] != "1000" {
		t.Error("an older Metadata changed: copy-on-write broken")
	}

	v := m.md.Version()
	m.ok(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"retention.ms": "2000"}})
	if m.md.Version() != v {
		t.Error("a no-op alter bumped the version")
	}
	m.fails(&alterTopicConfigsCmd{Name: "nope", Set: map[string]string{"retention.ms": "1"}}, ErrUnknownTopic)
	m.fails(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"retention.ms": "-5"}}, ErrInvalidConfig)
	m.fails(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"bogus": "1"}}, ErrInvalidConfig)
	m.fails(&alterTopicConfigsCmd{Name: "t", Delete: []string{"bogus"}}, ErrInvalidConfig)
	m.fails(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"retention.ms": "1"}, Delete: []string{"retention.ms"}}, ErrInvalidConfig)
	m.fails(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"cleanup.policy": "compact"}}, ErrInvalidConfig)
	// A rule that ties two keys holds for the merged overrides: no broker could open the
	// topic with min.compaction.lag.ms over max.compaction.lag.ms (found by FuzzApplyCommand).
	m.ok(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"min.compaction.lag.ms": "1000"}})
	m.fails(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"max.compaction.lag.ms": "5"}}, ErrInvalidConfig)
	m.ok(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"max.compaction.lag.ms": "5000"}})
	m.fails(&alterTopicConfigsCmd{Name: "t", Set: map[string]string{"min.compaction.lag.ms": "6000"}}, ErrInvalidConfig)
	m.ok(&alterTopicConfigsCmd{Name: "t", Delete: []string{"min.compaction.lag.ms", "max.compaction.lag.ms"}})

	m.ok(&alterTopicConfigsCmd{Name: "t", Delete: []string{"retention.ms", "write.caching", "flush.ms"}})
	if got, _ := m.md.Topic("t"); got.Configs != nil {
		t.Errorf("configs %v, want none", got.Configs)
	}
}

func TestSetPartitionLeader(t *testing.T) {
	m := newMachine(t, 1, 2, 3)
	m.ok(&createTopicCmd{TopicSpec: TopicSpec{Name: "t", Assignment: [][]int32{{1, 2, 3}, {2, 3, 1}}}, ID: idOf(1)})
	part := func(p int32) PartitionMeta { tp, _ := m.md.Topic("t"); return tp.Partitions[p] }

	res := m.ok(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 0}})
	if res.Partition.Leader != 2 || res.Partition.LeaderEpoch != 1 || part(0).LeaderEpoch != 1 {
		t.Fatalf("after election: %+v", res.Partition)
	}
	if part(1).LeaderEpoch != 0 {
		t.Error("another partition's epoch moved")
	}
	// The same decision arriving twice (a retry, or a second controller
	// acting on old state) is fenced by the epoch.
	m.fails(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 0}}, ErrStaleLeaderEpoch)
	m.fails(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Partition: 0, Leader: 9, LeaderEpoch: 1}}, ErrIneligibleReplica)
	m.fails(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Partition: 5, Leader: 1, LeaderEpoch: 0}}, ErrUnknownPartition)
	m.fails(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "x", Partition: 0, Leader: 1, LeaderEpoch: 0}}, ErrUnknownTopic)

	m.ok(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Partition: 0, Leader: NoLeader, LeaderEpoch: 1}})
	if p := part(0); p.Leader != NoLeader || p.LeaderEpoch != 2 || len(p.ISR) != 3 {
		t.Fatalf("offline partition: %+v", p)
	}

	// Outside the ISR only when unclean election is allowed; the ISR is then
	// just the new leader.
	narrow := m.md.clone()
	tp := *narrow.topics["t"]
	tp.Partitions = slices.Clone(tp.Partitions)
	tp.Partitions[0].ISR = []int32{1}
	narrow.topics["t"] = &tp
	m.md = narrow.finish(m.index)
	m.fails(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Partition: 0, Leader: 3, LeaderEpoch: 2}}, ErrIneligibleReplica)
	m.ok(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Partition: 0, Leader: 3, LeaderEpoch: 2, Unclean: true}})
	if p := part(0); p.Leader != 3 || !slices.Equal(p.ISR, []int32{3}) || p.LeaderEpoch != 3 {
		t.Fatalf("unclean election: %+v", p)
	}

	// An epoch that can grow no more refuses the change rather than wrap: replicas refuse
	// a leader whose epoch is not above theirs, so a wrapped one would be refused by all.
	last := m.md.clone()
	tp = *last.topics["t"]
	tp.Partitions = slices.Clone(tp.Partitions)
	tp.Partitions[1].LeaderEpoch = math.MaxInt32
	last.topics["t"] = &tp
	m.md = last.finish(m.index)
	m.fails(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "t", Partition: 1, Leader: NoLeader, LeaderEpoch: math.MaxInt32}}, ErrStaleLeaderEpoch)
}

func TestRegisterBroker(t *testing.T) {
	m := newMachine(t)
	bad := []BrokerInfo{
		{ID: -1, Host: "h", Port: 1},
		{ID: 1, Host: "h", Port: 70000},
		{ID: 1, Host: "h"},
		{ID: 1, Port: 9092},
		{ID: 1},
	}
	for _, b := range bad {
		m.fails(&registerBrokerCmd{Broker: b}, ErrInvalidBroker)
	}
	m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 2, UnixSocket: "/tmp/s.sock"}})
	m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 1, Host: "a", Port: 9092, Rack: "r1"}})
	v := m.md.Version()
	m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 1, Host: "a", Port: 9092, Rack: "r1"}})
	if m.md.Version() != v {
		t.Error("identical re-registration bumped the version")
	}
	m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 1, Host: "b", Port: 9093}})
	if b, _ := m.md.Broker(1); b.Host != "b" || b.Rack != "" {
		t.Errorf("re-registration not applied: %+v", b)
	}
	if ids := m.md.Brokers(); len(ids) != 2 || ids[0].ID != 1 || ids[1].ID != 2 {
		t.Errorf("Brokers() = %+v", ids)
	}
}

func TestDecodeCommandRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {0}, {99, '{', '}'}, {byte(cmdCreateTopic), '{'}, {byte(cmdCreateTopic), '[', ']'}} {
		if _, err := decodeCommand(b); !errors.Is(err, ErrUnknownCommand) {
			t.Errorf("decode %q: %v", b, err)
		}
	}
}
