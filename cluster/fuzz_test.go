package cluster

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// The package decodes two kinds of bytes it did not necessarily write
// itself: raft log entries (decodeCommand, then applied by fsm.Apply) and
// snapshots read back from disk (decodeSnapshot, in fsm.Restore). Either can
// be damaged or come from another version, so neither path may panic. Apply
// must also keep every invariant the package documents: above all, it must
// never build a state whose snapshot a later Restore would refuse, or the
// node could not restart from its own snapshot.

// fuzzIndex is the raft index the fuzzed command is applied at. It is above
// every index used to build fuzzState, as it would be in a real log.
const fuzzIndex = 1000

// sentinels are the errors every error of this package wraps (errors.go);
// the broker maps them to Kafka error codes with errors.Is.
var sentinels = []error{
	ErrTopicExists, ErrUnknownTopic, ErrUnknownPartition, ErrInvalidTopic,
	ErrInvalidPartitions, ErrInvalidReplicationFactor, ErrInvalidReplicaAssignment,
	ErrInvalidConfig, ErrInvalidBroker, ErrIneligibleReplica, ErrStaleLeaderEpoch,
	ErrUnknownCommand, ErrNotLeader, ErrClosed,
	ErrStaleBrokerEpoch, ErrInvalidUpdateVersion, ErrUnknownBroker, ErrNotPartitionLeader,
	ErrDuplicateBroker, ErrInvalidClusterID, ErrProducerIDsExhausted,
	ErrInvalidReassignment, ErrNoReassignmentInProgress, ErrElectionNotNeeded,
	ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable,
}

// fuzzState builds a state with something for every command to act on:
// brokers with each kind of endpoint, topics with computed and explicit
// assignments, topic configs, an internal topic, a moved leader and an
// offline partition. It goes through the log encoding, as raft would.
func fuzzState(tb testing.TB) *Metadata {
	tb.Helper()
	cmds := []command{
		&registerBrokerCmd{Broker: BrokerInfo{ID: 1, Host: "b1", Port: 9091}},
		&registerBrokerCmd{Broker: BrokerInfo{ID: 2, Host: "b2", Port: 9092, Rack: "r1"}},
		&registerBrokerCmd{Broker: BrokerInfo{ID: 3, Host: "b3", Port: 9093, UnixSocket: "/run/b3.sock", Rack: "r2"}},
		&registerBrokerCmd{Broker: BrokerInfo{ID: 4, UnixSocket: "/run/b4.sock"}},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "orders", NumPartitions: 6, ReplicationFactor: 3,
			Configs: map[string]string{"retention.ms": "60000", "min.compaction.lag.ms": "1000", "write.caching": "true"}},
			ID: idOf(1)},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "events.v1", NumPartitions: 2, ReplicationFactor: 1}, ID: idOf(2)},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "pinned", Assignment: [][]int32{{2, 3}, {3, 1}, {1, 4}}}, ID: idOf(3)},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "__consumer_offsets", NumPartitions: 3, ReplicationFactor: 2,
			Internal: true}, ID: idOf(4)},
		&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "pinned", Partition: 0, Leader: 3, LeaderEpoch: 0}},
		&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "pinned", Partition: 1, Leader: NoLeader, LeaderEpoch: 0}},
		// Brokers with a lifecycle (indexes 11 to 16): 5 and 6 registered
		// and unfenced, 7 registered and left fenced; a topic over them, an
		// ISR shrink, a controlled shutdown of 6, and the cluster id.
		&registerBrokerCmd{Broker: BrokerInfo{ID: 5, Host: "b5", Port: 9095, Incarnation: "inc5"}},
		&registerBrokerCmd{Broker: BrokerInfo{ID: 6, Host: "b6", Port: 9096, Incarnation: "inc6"}},
		&registerBrokerCmd{Broker: BrokerInfo{ID: 7, Host: "b7", Port: 9097, Incarnation: "inc7"}},
		&unfenceBrokerCmd{brokerEpochCmd{ID: 5, Epoch: 11}},
		&unfenceBrokerCmd{brokerEpochCmd{ID: 6, Epoch: 12}},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "repl", Assignment: [][]int32{{5, 6, 1}, {6, 1, 5}, {7, 5, 6}}},
			ID: idOf(5)},
		&alterPartitionCmd{AlterPartitionRequest{Topic: "repl", Partition: 0, BrokerID: 5, BrokerEpoch: 11, ISR: []int32{5, 1}}},
		&controlledShutdownCmd{brokerEpochCmd{ID: 6, Epoch: 12}},
		&initClusterCmd{ClusterID: "fuzz-cluster"},
		// A move in progress (index 18): pinned-2 from [1 4] to [4 2].
		&alterReassignmentsCmd{Reassignments: []Reassignment{{Topic: "pinned", Partition: 2, Replicas: []int32{4, 2}}}},
		&alterBrokerConfigsCmd{Broker: "1", Set: map[string]string{LeaderReplicationThrottledRate: "1000"}},
	}
	md := emptyMetadata()
	for i, c := range cmds {
		b, err := encodeCommand(c)
		if err != nil {
			tb.Fatal(err)
		}
		dc, err := decodeCommand(b)
		if err != nil {
			tb.Fatal(err)
		}
		var res applyResult
		md, res = dc.apply(md, uint64(i+1))
		if res.Err != nil {
			tb.Fatalf("building the fuzz state: %T: %v", c, res.Err)
		}
	}
	return md
}

// fuzzSeedCommands are valid commands of every type against fuzzState (some
// also against the empty state), covering each field at least once.
func fuzzSeedCommands(md *Metadata) []command {
	orders0 := md.topics["orders"].Partitions[0]
	// Every known config key at its default, so each key's parser is a seed.
	allDefaults := map[string]string{}
	for _, d := range TopicConfigDefs() {
		allDefaults[d.Name] = d.Default
	}
	return []command{
		&registerBrokerCmd{Broker: BrokerInfo{ID: 5, Host: "b5", Port: 9095, Rack: "r3"}},
		&registerBrokerCmd{Broker: BrokerInfo{ID: 2, Host: "b2", Port: 9092, Rack: "r1"}}, // unchanged: a no-op
		&registerBrokerCmd{Broker: BrokerInfo{ID: 1, Host: "b1-new", Port: 19091, UnixSocket: "/run/b1.sock"}},
		&registerBrokerCmd{Broker: BrokerInfo{ID: 6, UnixSocket: "/run/b6.sock"}},

		&createTopicCmd{TopicSpec: TopicSpec{Name: "payments", NumPartitions: 4, ReplicationFactor: 2,
			Configs: map[string]string{"segment.bytes": "1048576", "cleanup.policy": "delete"}}, ID: idOf(10)},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "explicit_1", NumPartitions: 2, ReplicationFactor: 2,
			Assignment: [][]int32{{4, 1}, {2, 3}}}, ID: idOf(11)},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "__transaction_state", NumPartitions: 1, ReplicationFactor: 1,
			Internal: true}, ID: idOf(12)},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "all-defaults", NumPartitions: 1, ReplicationFactor: 1,
			Configs: allDefaults}, ID: idOf(13)},

		&deleteTopicCmd{Name: "events.v1", ID: idOf(2)},
		&deleteTopicCmd{Name: "orders"},
		&deleteTopicCmd{Name: "__consumer_offsets", ID: idOf(4), Internal: true},

		&alterTopicConfigsCmd{Name: "orders", Set: map[string]string{"retention.ms": "120000", "max.message.bytes": "2097152"},
			Delete: []string{"write.caching"}},
		&alterTopicConfigsCmd{Name: "pinned", Set: allDefaults},
		&alterTopicConfigsCmd{Name: "orders", Delete: []string{"retention.ms", "min.compaction.lag.ms", "write.caching"}},

		&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "orders", Partition: 0, Leader: orders0.Replicas[1], LeaderEpoch: 0}, PartitionEpochs: true},
		&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "pinned", Partition: 1, Leader: 3, LeaderEpoch: 1}},
		&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "pinned", Partition: 2, Leader: 4, LeaderEpoch: 0, Unclean: true}, PartitionEpochs: true},
		&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: "__consumer_offsets", Partition: 2, Leader: NoLeader, LeaderEpoch: 0}},

		&registerBrokerCmd{Broker: BrokerInfo{ID: 5, Host: "b5", Port: 9095, Incarnation: "inc5b"}}, // a restart
		&registerBrokerCmd{Broker: BrokerInfo{ID: 8, Host: "b8", Port: 9098, Incarnation: "inc8"}},
		&fenceBrokerCmd{brokerEpochCmd{ID: 5, Epoch: md.brokers[5].Epoch}},
		&fenceBrokerCmd{brokerEpochCmd{ID: 1, Epoch: md.brokers[1].Epoch}},
		&fenceBrokerCmd{brokerEpochCmd{ID: 4, Epoch: 0}}, // a broker from before the lifecycle: epoch 0
		&unfenceBrokerCmd{brokerEpochCmd{ID: 7, Epoch: md.brokers[7].Epoch}},
		&unfenceBrokerCmd{brokerEpochCmd{ID: 6, Epoch: md.brokers[6].Epoch}},
		&controlledShutdownCmd{brokerEpochCmd{ID: 5, Epoch: md.brokers[5].Epoch}},
		&alterPartitionCmd{AlterPartitionRequest{Topic: "repl", Partition: 0, BrokerID: 5, BrokerEpoch: md.brokers[5].Epoch,
			PartitionEpoch: md.topics["repl"].Partitions[0].PartitionEpoch, ISR: []int32{5}}},
		&alterPartitionCmd{AlterPartitionRequest{Topic: "orders", Partition: 0, BrokerID: orders0.Leader,
			BrokerEpoch: md.brokers[orders0.Leader].Epoch, ISR: orders0.ISR[:1]}},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "placed", NumPartitions: 5, ReplicationFactor: 3}, ID: idOf(14),
			Placement: &PlacementSeed{Start: 7, Shift: 3}},
		&createTopicCmd{TopicSpec: TopicSpec{Name: "repl", Assignment: [][]int32{{5}}}, ID: idOf(5)}, // a retry: no-op
		&initClusterCmd{ClusterID: "second"}, // a no-op: the first id stays
		&allocateProducerIDsCmd{brokerEpochCmd{ID: 5, Epoch: md.brokers[5].Epoch}},
		&allocateProducerIDsCmd{brokerEpochCmd{ID: 7, Epoch: md.brokers[7].Epoch}}, // fenced, at its epoch

		&alterReassignmentsCmd{Reassignments: []Reassignment{
			{Topic: "orders", Partition: 0, Replicas: []int32{4, 3, 2}},
			{Topic: "orders", Partition: 1, Replicas: md.topics["orders"].Partitions[1].Replicas[:2]}, // RF 3 -> 2: done at once
			{Topic: "events.v1", Partition: 0, Replicas: []int32{1, 2}},                               // RF 1 -> 2
			{Topic: "pinned", Partition: 2, Replicas: nil},                                            // cancel
		}},
		&alterReassignmentsCmd{Reassignments: []Reassignment{{Topic: "repl", Partition: 0, Replicas: []int32{1, 5}}}},
		&alterPartitionCmd{AlterPartitionRequest{Topic: "pinned", Partition: 2, BrokerID: 1, BrokerEpoch: 0,
			PartitionEpoch: md.topics["pinned"].Partitions[2].PartitionEpoch, ISR: []int32{1, 4, 2}}}, // completes the move

		&electLeadersCmd{Type: ElectionPreferred, All: true},
		&electLeadersCmd{Type: ElectionPreferred, Partitions: []PartitionRef{{"pinned", 0}, {"orders", 0}, {"nope", 0}, {"pinned", 0}}},
		&electLeadersCmd{Type: ElectionUnclean, Partitions: []PartitionRef{{"pinned", 1}, {"repl", 2}, {"pinned", 9}}},
		&electLeadersCmd{Type: ElectionUnclean, All: true},

		&createPartitionsCmd{Topic: "orders", Count: 9, Placement: &PlacementSeed{Start: 5, Shift: 11}},
		&createPartitionsCmd{Topic: "pinned", Count: 5, Assignment: [][]int32{{4, 1}, {7, 5}}},
		&createPartitionsCmd{Topic: "repl", Count: 4, Assignment: [][]int32{{5, 6, 7}}},

		&alterBrokerConfigsCmd{Broker: "", Set: map[string]string{LeaderReplicationThrottledRate: "1048576", FollowerReplicationThrottledRate: "0"}},
		&alterBrokerConfigsCmd{Broker: "5", Set: map[string]string{FollowerReplicationThrottledRate: "9223372036854775807"}},
		&alterBrokerConfigsCmd{Broker: "1", Delete: []string{LeaderReplicationThrottledRate}}, // nothing to delete: a no-op
	}
}

// fuzzStartState is a state the fuzzed command is applied to, with its
// snapshot encoding taken before, to prove Apply did not modify it.
type fuzzStartState struct {
	name    string
	md      *Metadata
	encoded []byte
}

func FuzzApplyCommand(f *testing.F) {
	populated := fuzzState(f)
	starts := []fuzzStartState{
		{"empty", emptyMetadata(), nil},
		{"populated", populated, nil},
	}
	for i := range starts {
		// The start states must themselves pass the checks, or a failure
		// below would blame the fuzzed command for them.
		checkAppliedState(f, starts[i].md)
		starts[i].encoded = snapshotBytes(f, starts[i].md)
	}

	for _, c := range fuzzSeedCommands(populated) {
		// A seed that is rejected only exercises validation; keep them valid
		// as the rules change.
		if _, res := c.apply(populated, fuzzIndex); res.Err != nil {
			f.Fatalf("seed %T %+v is rejected: %v", c, c, res.Err)
		}
		b, err := encodeCommand(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Broken entries: empty, an unknown type, a type byte alone, bad JSON,
	// JSON null, and a torn valid entry.
	valid, _ := encodeCommand(&createTopicCmd{TopicSpec: TopicSpec{Name: "t", NumPartitions: 1, ReplicationFactor: 1}, ID: idOf(20)})
	for _, b := range [][]byte{
		nil,
		{0},
		{byte(cmdRegisterBroker)},
		{byte(cmdElectLeaders), '{', '}'},
		{byte(cmdElectLeaders), '{', '"', 't', 'y', 'p', 'e', '"', ':', '7', '}'},
		{byte(cmdCreatePartitions), '{', '}'},
		{byte(cmdAlterBrokerConfigs), '{', '}'},
		{99, '{', '}'},
		{byte(cmdCreateTopic), '{'},
		{byte(cmdCreateTopic), '[', ']'},
		{byte(cmdSetPartitionLeader), 'n', 'u', 'l', 'l'},
		{byte(cmdAlterPartition), '{', '}'},
		{byte(cmdFenceBroker), '{', '}'},
		{byte(cmdInitCluster), '{', '}'},
		{byte(cmdAllocateProducerIDs), '{', '}'},
		{byte(cmdAlterReassignments), '{', '}'},
		{byte(cmdAlterReassignments), '{', '"', 'r', '"', ':', 'n', 'u', 'l', 'l', '}'},
		{byte(cmdElectLeaders), '{', '}'},
		{byte(cmdElectLeaders), '{', '"', 't', 'y', 'p', 'e', '"', ':', '7', '}'},
		{byte(cmdCreatePartitions), '{', '}'},
		{byte(cmdAlterBrokerConfigs), '{', '}'},
		{99, '{', '}'},
		valid[:len(valid)/2],
	} {
		f.Add(b)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeCommand(data)
		if err != nil {
			checkSentinel(t, err)
			return
		}
		checkCommandRoundTrip(t, c, starts)
		for _, s := range starts {
			checkApply(t, s, c)
		}
	})
}

// checkCommandRoundTrip: a proposer encodes a command and every node applies
// the decoding of those bytes, so encoding must not lose or change anything.
// Equality is by encoding, not reflect.DeepEqual: a nil and an empty map or
// slice both encode to nothing (omitempty), and apply treats them alike, so
// DeepEqual would report a difference that does not exist. Applying both to
// the same states checks that they do the same thing.
func checkCommandRoundTrip(t *testing.T, c command, starts []fuzzStartState) {
	t.Helper()
	b, err := encodeCommand(c)
	if err != nil {
		t.Fatalf("encode %T: %v", c, err)
	}
	c2, err := decodeCommand(b)
	if err != nil {
		t.Fatalf("decode of an encoded %T: %v", c, err)
	}
	if reflect.TypeOf(c2) != reflect.TypeOf(c) {
		t.Fatalf("%T decodes as %T", c, c2)
	}
	b2, err := encodeCommand(c2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("re-encoding changed the command:\n%q\n%q", b, b2)
	}
	for _, s := range starts {
		next, res := c.apply(s.md, fuzzIndex)
		next2, res2 := c2.apply(s.md, fuzzIndex)
		if errString(res.Err) != errString(res2.Err) ||
			!bytes.Equal(snapshotBytes(t, next), snapshotBytes(t, next2)) {
			t.Fatalf("%s: the command and its round trip apply differently: %v / %v", s.name, res.Err, res2.Err)
		}
	}
}

// checkApply applies c to a start state and checks the outcome.
func checkApply(t *testing.T, s fuzzStartState, c command) {
	t.Helper()
	next, res := c.apply(s.md, fuzzIndex)

	// Published Metadata is shared with readers without a lock, so Apply
	// must build a new state, never modify the old one.
	if !bytes.Equal(snapshotBytes(t, s.md), s.encoded) {
		t.Fatalf("%s: %T modified the state it was applied to", s.name, c)
	}
	checkLookups(t, s.md)

	// Every node must reach the same outcome from the same entry.
	again, res2 := c.apply(s.md, fuzzIndex)
	if errString(res.Err) != errString(res2.Err) || !bytes.Equal(snapshotBytes(t, next), snapshotBytes(t, again)) {
		t.Fatalf("%s: %T is not deterministic: %v / %v", s.name, c, res.Err, res2.Err)
	}

	if res.Err != nil {
		checkSentinel(t, res.Err)
		// fsm.Apply publishes only a different pointer: a rejection must
		// hand back the state itself.
		if next != s.md {
			t.Fatalf("%s: rejected %T (%v) returned a new state", s.name, c, res.Err)
		}
		return
	}
	if next != s.md && next.Version() != fuzzIndex {
		t.Fatalf("%s: changed state has version %d, want the index %d", s.name, next.Version(), fuzzIndex)
	}
	checkAppliedState(t, next)
	checkTransition(t, s.md, next, c)
	if sl, ok := c.(*setPartitionLeaderCmd); !ok || sl.PartitionEpochs {
		checkPartitionEpochs(t, s.md, next)
	}
	checkResult(t, s.md, next, c, res)
}

// checkAppliedState checks a state reached from the empty state by applying
// commands: the invariants decodeSnapshot enforces and those the package
// documents beyond them.
func checkAppliedState(tb testing.TB, md *Metadata) {
	tb.Helper()
	// The snapshot of the state must restore to the same state, or a node
	// that applied the command could not restart.
	back, err := decodeSnapshot(bytes.NewReader(snapshotBytes(tb, md)))
	if err != nil {
		tb.Fatalf("the snapshot of an applied state is refused: %v", err)
	}
	checkSameState(tb, back, md)
	checkLookups(tb, md)

	for _, b := range md.Brokers() {
		if b.ID < 0 || b.Port < 0 || b.Port > 65535 || (b.Host == "") != (b.Port == 0) || (b.Host == "" && b.UnixSocket == "") {
			tb.Fatalf("invalid broker registered: %+v", b)
		}
	}
	byKey := map[string]string{}
	for _, tp := range md.Topics() {
		if tp.Internal != IsInternalTopicName(tp.Name) {
			tb.Fatalf("topic %q: internal=%v, but names starting with \"__\" are exactly the internal topics", tp.Name, tp.Internal)
		}
		if other, ok := byKey[collisionKey(tp.Name)]; ok {
			tb.Fatalf("topics %q and %q collide ('.' and '_' are treated as equal)", other, tp.Name)
		}
		byKey[collisionKey(tp.Name)] = tp.Name
		if err := ValidateTopicConfigs(tp.Configs); err != nil {
			tb.Fatalf("topic %q holds invalid configs: %v", tp.Name, err)
		}
		// The broker resolves the overrides over its defaults before it opens
		// a partition (broker/partition.go); overrides the controller accepted
		// must resolve over Kafka's defaults, or no broker could host them.
		if _, err := ResolveTopicConfig(tp.Configs, DefaultTopicConfig()); err != nil {
			tb.Fatalf("topic %q: accepted configs %v do not resolve: %v", tp.Name, tp.Configs, err)
		}
		for _, p := range tp.Partitions {
			// Partitions may differ in width: a reassignment changes one partition's.
			if err := checkReassignment(p); err != nil {
				tb.Fatalf("%s-%d: %v: %+v", tp.Name, p.Partition, err, p)
			}
			if p.Reassigning() && epochsCanGrow(p) && !slices.ContainsFunc(p.TargetReplicas(), func(r int32) bool { return !slices.Contains(p.ISR, r) }) &&
				slices.Contains(p.TargetReplicas(), p.Leader) {
				tb.Fatalf("%s-%d: the ISR holds the whole target and the leader is in it, but the move did not complete: %+v", tp.Name, p.Partition, p)
			}
			for i, r := range p.Replicas {
				if slices.Contains(p.Replicas[:i], r) {
					tb.Fatalf("%s-%d: replica %d twice in %v", tp.Name, p.Partition, r, p.Replicas)
				}
				if _, ok := md.Broker(r); !ok {
					tb.Fatalf("%s-%d: replica %d is not a registered broker", tp.Name, p.Partition, r)
				}
			}
			if p.Leader != NoLeader && !slices.Contains(p.ISR, p.Leader) {
				tb.Fatalf("%s-%d: leader %d not in the ISR %v", tp.Name, p.Partition, p.Leader, p.ISR)
			}
			if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
				tb.Fatalf("%s-%d: negative epoch %+v", tp.Name, p.Partition, p)
			}
			// A fenced broker leads nothing and is in an ISR only as its
			// last member (unless the partition's epochs can grow no more,
			// when it is left as it was).
			if !epochsCanGrow(p) {
				continue
			}
			for _, r := range p.ISR {
				if b, _ := md.Broker(r); b.Fenced && (p.Leader == r || len(p.ISR) > 1) {
					tb.Fatalf("%s-%d: fenced broker %d leads or shares the ISR: %+v", tp.Name, p.Partition, r, p)
				}
			}
		}
	}
}

// checkTransition checks what a command may change in a topic that survives
// it: partitions are only added; replicas change only as a move starts
// (the original replicas become the move's original), completes (to its
// target) or is cancelled (to its original); and the leader epoch moves by
// exactly one on a leader change (replicas fence requests with it).
func checkTransition(t *testing.T, prev, next *Metadata, c command) {
	t.Helper()
	if next.Version() < prev.Version() {
		t.Fatalf("version went back from %d to %d", prev.Version(), next.Version())
	}
	for _, nt := range next.Topics() {
		pt, ok := prev.Topic(nt.Name)
		if !ok || pt.ID != nt.ID {
			continue // a new topic
		}
		if len(nt.Partitions) < len(pt.Partitions) {
			t.Fatalf("topic %q: %d partitions became %d", nt.Name, len(pt.Partitions), len(nt.Partitions))
		}
		for i, pp := range pt.Partitions {
			np := nt.Partitions[i]
			if _, reassign := c.(*alterReassignmentsCmd); !replicasMayBecome(pp, np, reassign) {
				t.Fatalf("%s-%d: replicas %v (adding %v, removing %v) became %v (adding %v, removing %v)", nt.Name, i,
					pp.Replicas, pp.AddingReplicas, pp.RemovingReplicas, np.Replicas, np.AddingReplicas, np.RemovingReplicas)
			}
			// int64, so that an epoch that wrapped around does not pass.
			switch int64(np.LeaderEpoch) {
			case int64(pp.LeaderEpoch):
				if np.Leader != pp.Leader {
					t.Fatalf("%s-%d: leader changed without a leader epoch bump: %+v -> %+v", nt.Name, i, pp, np)
				}
			case int64(pp.LeaderEpoch) + 1:
			default:
				t.Fatalf("%s-%d: leader epoch %d became %d", nt.Name, i, pp.LeaderEpoch, np.LeaderEpoch)
			}
			if int64(np.PartitionEpoch) != int64(pp.PartitionEpoch) && int64(np.PartitionEpoch) != int64(pp.PartitionEpoch)+1 {
				t.Fatalf("%s-%d: partition epoch %d became %d", nt.Name, i, pp.PartitionEpoch, np.PartitionEpoch)
			}
		}
	}
}

// replicasMayBecome reports whether one command (an AlterPartitionReassignments
// when reassign is set) may take a partition's replicas from pp to np: any
// command may complete a move (to its target), only a reassignment start one
// (from the replicas as its original), reorder or complete it at once (to any
// target), or cancel one (to its original).
func replicasMayBecome(pp, np PartitionMeta, reassign bool) bool {
	sameSet := func(a, b []int32) bool {
		return len(a) == len(b) && !slices.ContainsFunc(a, func(r int32) bool { return !slices.Contains(b, r) })
	}
	switch {
	case slices.Equal(pp.Replicas, np.Replicas) && slices.Equal(pp.AddingReplicas, np.AddingReplicas) &&
		slices.Equal(pp.RemovingReplicas, np.RemovingReplicas):
		return true
	case pp.Reassigning():
		return !np.Reassigning() && (slices.Equal(np.Replicas, pp.TargetReplicas()) ||
			reassign && slices.Equal(np.Replicas, pp.OriginalReplicas()))
	case !reassign:
		return false
	}
	return !np.Reassigning() || sameSet(np.OriginalReplicas(), pp.Replicas)
}

// checkPartitionEpochs: the partition epoch moves by one on every leader
// or ISR change (except through a SetPartitionLeader entry from before
// partition epochs, which the caller leaves out).
func checkPartitionEpochs(t *testing.T, prev, next *Metadata) {
	t.Helper()
	for _, nt := range next.Topics() {
		pt, ok := prev.Topic(nt.Name)
		if !ok || pt.ID != nt.ID {
			continue
		}
		for i, np := range nt.Partitions {
			if i >= len(pt.Partitions) {
				continue
			}
			pp := pt.Partitions[i]
			if np.PartitionEpoch == pp.PartitionEpoch && (np.Leader != pp.Leader || !slices.Equal(np.ISR, pp.ISR) || !slices.Equal(np.Replicas, pp.Replicas)) {
				t.Fatalf("%s-%d: leader or ISR changed without a partition epoch bump: %+v -> %+v", nt.Name, i, pp, np)
			}
		}
	}
}

// checkResult checks that the result handed to the proposer describes the
// state that was committed.
func checkResult(t *testing.T, prev, next *Metadata, c command, res applyResult) {
	t.Helper()
	switch c := c.(type) {
	case *registerBrokerCmd:
		b, ok := next.Broker(c.Broker.ID)
		want := c.Broker
		want.Epoch, want.Fenced, want.ShuttingDown = res.BrokerEpoch, want.Incarnation != "", false
		if !ok || b != want || (c.Broker.Incarnation != "" && b.Epoch != fuzzIndex) {
			t.Fatalf("registered %+v, state has %+v (result epoch %d)", c.Broker, b, res.BrokerEpoch)
		}
	case *fenceBrokerCmd:
		if b, _ := next.Broker(c.ID); !b.Fenced || next.PartitionsLedBy(c.ID) != 0 && allEpochsGrow(next) {
			t.Fatalf("fenced broker %d: %+v, leads %d", c.ID, b, next.PartitionsLedBy(c.ID))
		}
	case *unfenceBrokerCmd:
		if b, _ := next.Broker(c.ID); b.State() != BrokerAlive {
			t.Fatalf("unfenced broker %d: %+v", c.ID, b)
		}
	case *controlledShutdownCmd:
		if b, _ := next.Broker(c.ID); !b.ShuttingDown {
			t.Fatalf("broker %d in controlled shutdown: %+v", c.ID, b)
		}
	case *alterPartitionCmd:
		got, _ := next.Topic(c.Topic)
		pp, _ := prev.Topic(c.Topic)
		was, _ := pp.Partition(c.Partition)
		// The proposed ISR, or its part in the target when it completed a move.
		if p, _ := got.Partition(c.Partition); !reflect.DeepEqual(p, res.Partition) ||
			!slices.Equal(p.ISR, c.ISR) && !(was.Reassigning() && !p.Reassigning()) {
			t.Fatalf("alter partition %+v: result %+v, state %+v", c.AlterPartitionRequest, res.Partition, p)
		}
	case *allocateProducerIDsCmd:
		want := ProducerIDBlock{BrokerID: c.ID, First: prev.NextProducerID(), Size: ProducerIDBlockSize}
		if res.ProducerIDs != want || next.NextProducerID() != prev.NextProducerID()+ProducerIDBlockSize {
			t.Fatalf("allocate for broker %d: block %+v, next %d -> %d", c.ID, res.ProducerIDs, prev.NextProducerID(), next.NextProducerID())
		}
	case *initClusterCmd:
		if prev.ClusterID() == "" && next.ClusterID() != c.ClusterID || prev.ClusterID() != "" && next.ClusterID() != prev.ClusterID() {
			t.Fatalf("init cluster %q: id %q became %q", c.ClusterID, prev.ClusterID(), next.ClusterID())
		}
	case *createTopicCmd:
		got, ok := next.Topic(c.Name)
		for _, p := range got.Partitions {
			if next != prev && (!slices.Contains(got.Partitions[p.Partition].Replicas, p.Leader) || !next.eligible(p.Leader)) {
				t.Fatalf("created topic %q: partition %d leader %d is not an eligible replica", c.Name, p.Partition, p.Leader)
			}
		}
		if !ok || !reflect.DeepEqual(got, res.Topic) || got.ID != c.ID {
			t.Fatalf("created topic %q: result %+v, state %+v", c.Name, res.Topic, got)
		}
		if byID, ok := next.TopicByID(c.ID); !ok || byID.Name != c.Name {
			t.Fatalf("created topic %q not found by its id", c.Name)
		}
	case *alterBrokerConfigsCmd:
		got := next.BrokerConfigs(c.Broker)
		for k, v := range c.Set {
			if got[k] != v {
				t.Fatalf("broker %q: %s=%q not set: %v", c.Broker, k, v, got)
			}
		}
		for _, k := range c.Delete {
			if _, ok := got[k]; ok {
				t.Fatalf("broker %q: %s not deleted", c.Broker, k)
			}
		}
	case *createPartitionsCmd:
		got, _ := next.Topic(c.Topic)
		old, _ := prev.Topic(c.Topic)
		if int32(len(got.Partitions)) != c.Count || !reflect.DeepEqual(got, res.Topic) || !reflect.DeepEqual(got.Partitions[:len(old.Partitions)], old.Partitions) {
			t.Fatalf("create partitions %+v: result %+v, state %+v", c, res.Topic, got)
		}
	case *deleteTopicCmd:
		old, _ := prev.Topic(c.Name)
		if _, ok := next.Topic(c.Name); ok || !reflect.DeepEqual(old, res.Topic) {
			t.Fatalf("deleted topic %q: still there=%v, result %+v", c.Name, ok, res.Topic)
		}
		if _, ok := next.TopicByID(old.ID); ok {
			t.Fatalf("deleted topic %q still found by its id", c.Name)
		}
	case *alterTopicConfigsCmd:
		got, _ := next.Topic(c.Name)
		if !reflect.DeepEqual(got, res.Topic) {
			t.Fatalf("altered topic %q: result %+v, state %+v", c.Name, res.Topic, got)
		}
		for k, v := range c.Set {
			if got.Configs[k] != v {
				t.Fatalf("topic %q: %s=%q not set", c.Name, k, v)
			}
		}
		for _, k := range c.Delete {
			if _, ok := got.Configs[k]; ok {
				t.Fatalf("topic %q: %s not deleted", c.Name, k)
			}
		}
	case *setPartitionLeaderCmd:
		got, _ := next.Topic(c.Topic)
		p, ok := got.Partition(c.Partition)
		if !ok || !reflect.DeepEqual(p, res.Partition) || !reflect.DeepEqual(got, res.Topic) || p.Leader != c.Leader {
			t.Fatalf("leader change %+v: result %+v, state %+v", c.LeaderChange, res.Partition, p)
		}
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	for _, md := range []*Metadata{emptyMetadata(), fuzzState(f)} {
		b := snapshotBytes(f, md)
		f.Add(b)
		// Truncations: a torn write, and the snapshot without its final
		// newline (still a whole JSON value, so it must be accepted).
		f.Add(b[:len(b)-1])
		f.Add(b[:len(b)/2])
		f.Add(b[:1])
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := decodeSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		checkLookups(t, md)
		for _, tp := range md.Topics() {
			// What decodeSnapshot promises to have checked.
			if err := checkTopic(&tp); err != nil {
				t.Fatalf("accepted topic %q: %v", tp.Name, err)
			}
			// Snapshot configs are not validated, but the broker resolves
			// them: that may fail, not panic.
			_, _ = ResolveTopicConfig(tp.Configs, DefaultTopicConfig())
		}

		// Writing an accepted snapshot back must give one that reads back
		// the same: a node restores, later snapshots, and restores again.
		b := snapshotBytes(t, md)
		again, err := decodeSnapshot(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("re-encoded snapshot refused: %v\n%s", err, b)
		}
		checkSameState(t, again, md)
		if b2 := snapshotBytes(t, again); !bytes.Equal(b, b2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", b, b2)
		}

		// Raft keeps applying entries after a restore.
		applyAfterRestore(t, md)
	})
}

// applyAfterRestore applies a few valid commands, one after the other, to a
// restored state that passed decodeSnapshot but need not satisfy more.
func applyAfterRestore(t *testing.T, md *Metadata) {
	t.Helper()
	id := int32(0)
	for {
		if _, taken := md.Broker(id); !taken {
			break
		}
		id++
	}
	type step struct {
		c    command
		must bool // valid against any accepted snapshot, so it must be accepted
	}
	steps := []step{
		{&registerBrokerCmd{Broker: BrokerInfo{ID: id, Host: "restored", Port: 9092}}, true},
		{&alterBrokerConfigsCmd{Broker: "", Set: map[string]string{LeaderReplicationThrottledRate: "100"}}, true},
		{&electLeadersCmd{Type: ElectionPreferred, All: true}, true},
		{&createTopicCmd{TopicSpec: TopicSpec{Name: "fuzz-created", NumPartitions: 2, ReplicationFactor: 1}, ID: idOf(200)}, false},
	}
	if topics := md.Topics(); len(topics) > 0 {
		first := topics[0]
		steps = append(steps,
			// Must, unless the epoch can grow no more (the change is refused then).
			step{&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: first.Name, Partition: 0, Leader: NoLeader,
				LeaderEpoch: first.Partitions[0].LeaderEpoch}}, epochsCanGrow(first.Partitions[0])},
			step{&alterTopicConfigsCmd{Name: first.Name, Set: map[string]string{"retention.ms": "1000"},
				Delete: []string{"segment.ms"}}, false},
			step{&alterReassignmentsCmd{Reassignments: []Reassignment{{Topic: first.Name, Partition: 0, Replicas: []int32{id}}}}, false},
			step{&createPartitionsCmd{Topic: first.Name, Count: int32(len(first.Partitions)) + 1, Assignment: [][]int32{first.Partitions[0].TargetReplicas()}}, false},
			step{&deleteTopicCmd{Name: first.Name, ID: first.ID, Internal: true}, true},
		)
	}
	index := md.Version()
	encoded := snapshotBytes(t, md)
	for _, s := range steps {
		index++
		next, res := s.c.apply(md, index)
		if !bytes.Equal(snapshotBytes(t, md), encoded) {
			t.Fatalf("%T modified the state it was applied to", s.c)
		}
		if res.Err != nil {
			if s.must {
				t.Fatalf("%T %+v rejected after a restore: %v", s.c, s.c, res.Err)
			}
			if next != md {
				t.Fatalf("rejected %T returned a new state", s.c)
			}
			continue
		}
		encoded = snapshotBytes(t, next)
		back, err := decodeSnapshot(bytes.NewReader(encoded))
		if err != nil {
			t.Fatalf("after %T the snapshot is refused: %v", s.c, err)
		}
		checkSameState(t, back, next)
		checkTransition(t, md, next, s.c)
		md = next
	}
}

// checkLookups reads md through each of its accessors and checks that they
// agree with one another: the indexes are derived data, rebuilt on every
// change and on restore.
func checkLookups(tb testing.TB, md *Metadata) {
	tb.Helper()
	brokers := md.Brokers()
	for i, b := range brokers {
		if i > 0 && brokers[i-1].ID >= b.ID {
			tb.Fatalf("Brokers() not sorted by id: %d before %d", brokers[i-1].ID, b.ID)
		}
		if got, ok := md.Broker(b.ID); !ok || got != b {
			tb.Fatalf("Broker(%d) = %+v, %v; Brokers() has %+v", b.ID, got, ok, b)
		}
	}
	topics := md.Topics()
	if md.NumTopics() != len(topics) {
		tb.Fatalf("NumTopics() = %d, Topics() has %d", md.NumTopics(), len(topics))
	}
	for i, tp := range topics {
		if i > 0 && topics[i-1].Name >= tp.Name {
			tb.Fatalf("Topics() not sorted by name: %q before %q", topics[i-1].Name, tp.Name)
		}
		if got, ok := md.Topic(tp.Name); !ok || !reflect.DeepEqual(got, tp) {
			tb.Fatalf("Topic(%q) differs from Topics()", tp.Name)
		}
		if got, ok := md.TopicByID(tp.ID); !ok || got.Name != tp.Name {
			tb.Fatalf("TopicByID(%s) = %q, %v; want %q", tp.ID, got.Name, ok, tp.Name)
		}
		if c := tp.Clone(); !reflect.DeepEqual(c, tp) {
			tb.Fatalf("topic %q: Clone differs", tp.Name)
		}
		for p := range tp.Partitions {
			if got, ok := tp.Partition(int32(p)); !ok || got.Partition != int32(p) {
				tb.Fatalf("topic %q: Partition(%d) = %+v, %v", tp.Name, p, got, ok)
			}
		}
		if _, ok := tp.Partition(-1); ok {
			tb.Fatalf("topic %q: Partition(-1) found", tp.Name)
		}
		if _, ok := tp.Partition(int32(len(tp.Partitions))); ok {
			tb.Fatalf("topic %q: Partition(%d) found", tp.Name, len(tp.Partitions))
		}
	}
}

// checkSameState compares what a snapshot carries: version, brokers and
// topics.
func checkSameState(tb testing.TB, got, want *Metadata) {
	tb.Helper()
	if got.Version() != want.Version() || got.ClusterID() != want.ClusterID() || got.NextProducerID() != want.NextProducerID() {
		tb.Fatalf("version %d cluster id %q next producer id %d, want %d %q %d", got.Version(), got.ClusterID(), got.NextProducerID(),
			want.Version(), want.ClusterID(), want.NextProducerID())
	}
	if !reflect.DeepEqual(got.brokerConfigs, want.brokerConfigs) {
		tb.Fatalf("broker configs differ:\n got %v\nwant %v", got.brokerConfigs, want.brokerConfigs)
	}
	if !reflect.DeepEqual(got.Brokers(), want.Brokers()) {
		tb.Fatalf("brokers differ:\n got %+v\nwant %+v", got.Brokers(), want.Brokers())
	}
	if !reflect.DeepEqual(got.Topics(), want.Topics()) {
		tb.Fatalf("topics differ:\n got %+v\nwant %+v", got.Topics(), want.Topics())
	}
}

// checkSentinel checks that err wraps exactly one of the sentinel errors
// (and the broader ones that sentinel is a case of, as
// ErrNoReassignmentInProgress of ErrInvalidReassignment).
func checkSentinel(tb testing.TB, err error) {
	tb.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) && !slices.ContainsFunc(sentinels, func(o error) bool { return o != s && errors.Is(o, s) && errors.Is(err, o) }) {
			n++
		}
	}
	if n != 1 {
		tb.Fatalf("error %q wraps %d sentinel errors, want 1", err, n)
	}
}

// allEpochsGrow reports whether no partition's epochs are at their limit
// (a partition there keeps its state through a fence).
func allEpochsGrow(md *Metadata) bool {
	for _, t := range md.Topics() {
		for _, p := range t.Partitions {
			if !epochsCanGrow(p) {
				return false
			}
		}
	}
	return true
}

func snapshotBytes(tb testing.TB, md *Metadata) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, md); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
