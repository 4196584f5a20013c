package cluster

import (
	"flag"
	"fmt"
	"github.com/sluicemq/sluice/internal/scenario"
	"strconv"
	"strings"
	"testing"
)

// Scenario scripts (testdata/scenarios/*.txt) drive the state machine step
// by step and compare what each step prints with what the script expects,
// as cockroachdb's datadriven does (not in the module proxy here). A script
// is a sequence of blocks, each one command line, a line "----", and the
// expected output up to a blank line; lines starting with '#' between
// blocks are comments. `go test -run TestScenarios ./cluster/ -rewrite`
// writes the actual output back into the scripts, to be reviewed in the diff.
//
// Commands (ids are broker ids; every command applies at the next raft index):
//
//	register ID...                         new registrations (fenced), a fresh incarnation each
//	unfence ID... | fence ID... | shutdown ID...   at the broker's current epoch,
//	                                       or at epoch=N for one broker
//	create T partitions=N rf=N start=N shift=N [unclean] [retry]
//	create T assignment=0:1,1:0 [unclean]  partitions separated by ',', replicas by ':'
//	alter-partition T P leader=ID isr=1,2 [epoch=N] [partition-epoch=N] [broker-epoch=N]
//	set-leader T P leader=ID [unclean]     at the current leader epoch
//	init-cluster ID
//	allocate-producer-ids ID [epoch=N]     a producer-id block, at the broker's current epoch
//	reassign T:P=1,2,3 T:P=cancel ...      one AlterPartitionReassignments (a target, or a cancel)
//	elect preferred|unclean [T:P ...]      ElectLeaders; no partitions: every partition
//	create-partitions T count=N [assignment=0:1,1:2] [start=N] [shift=N]
//	describe [T]                           Kafka's describe lines, with the epochs
//	brokers                                every broker and its state
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/scenarios with the actual output")

func TestScenarios(t *testing.T) {
	scenario.Run(t, "testdata/scenarios/*.txt", *rewrite, func(t *testing.T, file string) func(string) []string {
		s := &scenarioState{t: t, md: emptyMetadata(), incarnations: map[int32]int{}}
		return s.run
	})
}

// scenario is the state a script drives.
type scenarioState struct {
	t            *testing.T
	md           *Metadata
	index        uint64
	incarnations map[int32]int
	topicIDs     byte
}

// apply runs c at the next index through the log encoding, as raft would,
// and checks what Apply promises whatever the command.
func (s *scenarioState) apply(c command) applyResult {
	b, err := encodeCommand(c)
	if err != nil {
		s.t.Fatal(err)
	}
	dc, err := decodeCommand(b)
	if err != nil {
		s.t.Fatal(err)
	}
	s.index++
	next, res := dc.apply(s.md, s.index)
	if res.Err != nil && next != s.md {
		s.t.Fatalf("rejected %T changed the state", c)
	}
	if next != s.md {
		checkAppliedState(s.t, next)
		// What one command may change: the replicas only by a move, each epoch by one.
		checkTransition(s.t, s.md, next, dc)
		checkPartitionEpochs(s.t, s.md, next)
	}
	s.md = next
	return res
}

// outcome prints a command's elections, then "ok" or its error.
func outcome(res applyResult) []string {
	var out []string
	for _, e := range res.Elections {
		out = append(out, formatElection(e))
	}
	if res.Err != nil {
		return append(out, "error: "+res.Err.Error())
	}
	return out
}

func formatElection(e Election) string {
	kind := "elected"
	if e.Unclean {
		kind = "unclean election"
	}
	return fmt.Sprintf("%s %s-%d: %s -> %s (leader epoch %d, partition epoch %d)",
		kind, e.Topic, e.Partition, leaderString(e.From), leaderString(e.To), e.LeaderEpoch, e.PartitionEpoch)
}

func leaderString(id int32) string {
	if id == NoLeader {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func idsOrNone(ids []int32) string {
	if len(ids) == 0 {
		return "none"
	}
	return joinIDs(ids)
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// describe prints Kafka's kafka-topics --describe line per partition, with
// the two epochs after it.
func describeTopic(t TopicMeta) []string {
	var out []string
	for _, p := range t.Partitions {
		line := fmt.Sprintf("Topic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\tLeaderEpoch: %d\tPartitionEpoch: %d",
			t.Name, p.Partition, leaderString(p.Leader), joinIDs(p.Replicas), joinIDs(p.ISR), p.LeaderEpoch, p.PartitionEpoch)
		if p.Reassigning() {
			line += fmt.Sprintf("\tAdding Replicas: %s\tRemoving Replicas: %s", idsOrNone(p.AddingReplicas), idsOrNone(p.RemovingReplicas))
		}
		out = append(out, line)
	}
	return out
}

func describeBroker(b BrokerInfo) string {
	return fmt.Sprintf("Broker: %d\tState: %s\tEpoch: %d", b.ID, b.State(), b.Epoch)
}

func (s *scenarioState) run(line string) []string {
	f := strings.Fields(line)
	args, opts := scenarioArgs(f[1:])
	switch f[0] {
	case "register":
		var out []string
		for _, a := range args {
			id := s.int32(a)
			s.incarnations[id]++
			res := s.apply(&registerBrokerCmd{Broker: BrokerInfo{ID: id, Host: "h" + a, Port: 9092 + id,
				Incarnation: fmt.Sprintf("inc-%d-%d", id, s.incarnations[id])}})
			out = append(out, outcome(res)...)
			if b, ok := s.md.Broker(id); ok && res.Err == nil {
				out = append(out, describeBroker(b))
			}
		}
		return out
	case "fence", "unfence", "shutdown":
		var out []string
		for _, a := range args {
			id := s.int32(a)
			b, _ := s.md.Broker(id)
			ref := brokerEpochCmd{ID: id, Epoch: b.Epoch}
			if e, ok := opts["epoch"]; ok {
				ref.Epoch = int64(s.int32(e))
			}
			var c command
			switch f[0] {
			case "fence":
				c = &fenceBrokerCmd{ref}
			case "unfence":
				c = &unfenceBrokerCmd{ref}
			default:
				c = &controlledShutdownCmd{ref}
			}
			res := s.apply(c)
			out = append(out, outcome(res)...)
			if res.Err == nil {
				b, _ = s.md.Broker(id)
				out = append(out, describeBroker(b))
			}
		}
		return out
	case "create":
		c := &createTopicCmd{TopicSpec: TopicSpec{Name: args[0]}}
		if old, ok := s.md.Topic(args[0]); ok && has(opts, "retry") {
			c.ID = old.ID
		} else {
			s.topicIDs++
			c.ID = idOf(s.topicIDs)
		}
		if a, ok := opts["assignment"]; ok {
			for _, part := range strings.Split(a, ",") {
				var replicas []int32
				for _, r := range strings.Split(part, ":") {
					replicas = append(replicas, s.int32(r))
				}
				c.Assignment = append(c.Assignment, replicas)
			}
		} else {
			c.NumPartitions = s.int32(opts["partitions"])
			c.ReplicationFactor = int16(s.int32(opts["rf"]))
			c.Placement = &PlacementSeed{Start: s.int32(opts["start"]), Shift: s.int32(opts["shift"])}
		}
		if has(opts, "unclean") {
			c.Configs = map[string]string{"unclean.leader.election.enable": "true"}
		}
		res := s.apply(c)
		if res.Err != nil {
			return outcome(res)
		}
		return describeTopic(res.Topic)
	case "alter-partition":
		tp, _ := s.md.Topic(args[0])
		p, _ := tp.Partition(s.int32(args[1]))
		req := AlterPartitionRequest{Topic: args[0], Partition: s.int32(args[1]), BrokerID: s.int32(opts["leader"]),
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch}
		b, _ := s.md.Broker(req.BrokerID)
		req.BrokerEpoch = b.Epoch
		for _, r := range strings.Split(opts["isr"], ",") {
			req.ISR = append(req.ISR, s.int32(r))
		}
		if e, ok := opts["epoch"]; ok {
			req.LeaderEpoch = s.int32(e)
		}
		if e, ok := opts["partition-epoch"]; ok {
			req.PartitionEpoch = s.int32(e)
		}
		if e, ok := opts["broker-epoch"]; ok {
			req.BrokerEpoch = int64(s.int32(e))
		}
		res := s.apply(&alterPartitionCmd{req})
		if res.Err != nil {
			return outcome(res)
		}
		tp, _ = s.md.Topic(args[0])
		return describeTopic(TopicMeta{Name: tp.Name, Partitions: tp.Partitions[req.Partition : req.Partition+1]})
	case "set-leader":
		tp, _ := s.md.Topic(args[0])
		p, _ := tp.Partition(s.int32(args[1]))
		res := s.apply(&setPartitionLeaderCmd{LeaderChange: LeaderChange{Topic: args[0], Partition: p.Partition,
			Leader: s.int32(opts["leader"]), LeaderEpoch: p.LeaderEpoch, Unclean: has(opts, "unclean")}, PartitionEpochs: true})
		return outcome(res)
	case "allocate-producer-ids":
		id := s.int32(args[0])
		b, _ := s.md.Broker(id)
		ref := brokerEpochCmd{ID: id, Epoch: b.Epoch}
		if e, ok := opts["epoch"]; ok {
			ref.Epoch = int64(s.int32(e))
		}
		res := s.apply(&allocateProducerIDsCmd{ref})
		if res.Err != nil {
			return append(outcome(res), fmt.Sprintf("NextProducerId: %d", s.md.NextProducerID()))
		}
		return []string{fmt.Sprintf("Block: broker %d ids %d-%d", res.ProducerIDs.BrokerID, res.ProducerIDs.First, res.ProducerIDs.Last()),
			fmt.Sprintf("NextProducerId: %d", s.md.NextProducerID())}
	case "reassign":
		var rs []Reassignment
		for _, a := range f[1:] { // T:P=replicas, not key=value options
			tp, target, _ := strings.Cut(a, "=")
			r := Reassignment{}
			r.Topic, r.Partition = s.partitionRef(tp)
			if target != "cancel" {
				r.Replicas = []int32{}
				for _, id := range strings.Split(target, ",") {
					if id != "" {
						r.Replicas = append(r.Replicas, s.int32(id))
					}
				}
			}
			rs = append(rs, r)
		}
		res := s.apply(&alterReassignmentsCmd{Reassignments: rs})
		if res.Err != nil {
			return outcome(res)
		}
		out := outcome(res)
		for _, tp := range s.md.Topics() {
			out = append(out, describeTopic(tp)...)
		}
		return out
	case "elect":
		c := &electLeadersCmd{All: len(f) == 2}
		if f[1] == "unclean" {
			c.Type = ElectionUnclean
		}
		for _, a := range f[2:] {
			t, p := s.partitionRef(a)
			c.Partitions = append(c.Partitions, PartitionRef{t, p})
		}
		res := s.apply(c)
		out := outcome(res)
		for _, r := range res.ElectionResults {
			status := "elected"
			if r.Err != nil {
				status = r.Err.Error()
			}
			out = append(out, fmt.Sprintf("%s-%d: %s", r.Topic, r.Partition, status))
		}
		return out
	case "create-partitions":
		c := &createPartitionsCmd{Topic: args[0], Count: s.int32(opts["count"]),
			Placement: &PlacementSeed{Start: s.optInt32(opts, "start"), Shift: s.optInt32(opts, "shift")}}
		if a, ok := opts["assignment"]; ok {
			c.Assignment = [][]int32{}
			for _, part := range strings.Split(a, ",") {
				replicas := []int32{}
				for _, r := range strings.Split(part, ":") {
					if r != "" {
						replicas = append(replicas, s.int32(r))
					}
				}
				c.Assignment = append(c.Assignment, replicas)
			}
		}
		res := s.apply(c)
		if res.Err != nil {
			return outcome(res)
		}
		return describeTopic(res.Topic)
	case "init-cluster":
		res := s.apply(&initClusterCmd{ClusterID: args[0]})
		return append(outcome(res), "ClusterId: "+s.md.ClusterID())
	case "describe":
		var out []string
		for _, tp := range s.md.Topics() {
			if len(args) == 0 || tp.Name == args[0] {
				out = append(out, describeTopic(tp)...)
			}
		}
		return out
	case "brokers":
		var out []string
		for _, b := range s.md.Brokers() {
			out = append(out, describeBroker(b))
		}
		return out
	}
	s.t.Fatalf("unknown scenario command %q", line)
	return nil
}

// scenarioArgs splits fields into positional arguments and key=value (or
// bare flag) options; a bare word after the first positional ones that
// names a flag (unclean, retry) is an option.
func scenarioArgs(fields []string) (args []string, opts map[string]string) {
	opts = map[string]string{}
	for _, f := range fields {
		switch k, v, ok := strings.Cut(f, "="); {
		case ok:
			opts[k] = v
		case f == "unclean" || f == "retry":
			opts[f] = ""
		default:
			args = append(args, f)
		}
	}
	return args, opts
}

// partitionRef parses "T:P".
func (s *scenarioState) partitionRef(a string) (string, int32) {
	t, p, ok := strings.Cut(a, ":")
	if !ok {
		s.t.Fatalf("scenario: %q is not topic:partition", a)
	}
	return t, s.int32(p)
}

func has(opts map[string]string, k string) bool { _, ok := opts[k]; return ok }

// optInt32 is option k as a number, 0 when it is not given.
func (s *scenarioState) optInt32(opts map[string]string, k string) int32 {
	if v, ok := opts[k]; ok {
		return s.int32(v)
	}
	return 0
}

func (s *scenarioState) int32(v string) int32 {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		s.t.Fatalf("scenario: %q is not a number", v)
	}
	return int32(n)
}
