package client

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/net/wire"
)

// Moving replicas and leaders (Kafka's kafka-reassign-partitions and kafka-leader-election):
// reassignments, elections, new partitions, and the replication throttle, all decided by the
// controller, which any broker forwards them to.

// Reassignment is one partition's move: Replicas is its target replica list, preferred leader
// first; nil cancels the partition's move in progress.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// ReassignmentError is a reassignment request the controller refused as a whole: nothing
// started. Problems has each partition's problem; Message lists them all. It matches the
// response's error code with errors.Is (wire.ErrInvalidReplicaAssignment, or
// wire.ErrNoReassignmentInProgress when every problem is a cancel of nothing).
type ReassignmentError struct {
	Code     wire.ErrorCode
	Message  string
	Problems map[TopicPartition]error
}

func (e *ReassignmentError) Error() string {
	if e.Message != "" {
		// The broker's message says "nothing started" itself.
		return "client: reassignment refused, nothing started: " + strings.TrimPrefix(e.Message, "nothing started: ")
	}
	return fmt.Sprintf("client: reassignment refused, nothing started: %v", e.Code)
}

func (e *ReassignmentError) Unwrap() error { return e.Code }

// AlterPartitionReassignments starts (or, with nil Replicas, cancels) the moves of rs. It returns
// once the controller has recorded them: a move then goes on by itself until every target
// replica is in the ISR (ListPartitionReassignments shows it meanwhile). A refusal is a
// *ReassignmentError.
func (a *Admin) AlterPartitionReassignments(ctx context.Context, rs []Reassignment) error {
	req := &wire.AlterPartitionReassignmentsRequest{TimeoutMs: a.timeoutMs()}
	for _, r := range rs {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != r.Topic {
			req.Topics = append(req.Topics, wire.ReassignTopic{Topic: r.Topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, wire.ReassignPartition{Partition: r.Partition, Replicas: r.Replicas})
	}
	var resp wire.AlterPartitionReassignmentsResponse
	if err := a.call(ctx, req, &resp); err != nil {
		return fmt.Errorf("client: alter partition reassignments: %w", err)
	}
	problems := map[TopicPartition]error{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != wire.NoError {
				problems[TopicPartition{t.Topic, p.Partition}] = codeErr(p.ErrorCode, p.ErrorMessage)
			}
		}
	}
	if resp.ErrorCode == wire.NoError && len(problems) == 0 {
		return nil
	}
	e := &ReassignmentError{Code: resp.ErrorCode, Problems: problems}
	if resp.ErrorMessage != nil {
		e.Message = *resp.ErrorMessage
	}
	if e.Code == wire.NoError {
		e.Code = wire.ErrInvalidReplicaAssignment
	}
	return e
}

// PartitionReassignment is a move in progress: Replicas is the partition's whole replica set
// now (the target, then the replicas being removed).
type PartitionReassignment struct {
	TopicPartition
	Replicas, Adding, Removing []int32
}

// Target is the replica list the move ends with.
func (r PartitionReassignment) Target() []int32 {
	return slices.DeleteFunc(slices.Clone(r.Replicas), func(id int32) bool { return slices.Contains(r.Removing, id) })
}

// ListPartitionReassignments returns the moves in progress among tps (nil: every partition),
// sorted by topic and partition.
func (a *Admin) ListPartitionReassignments(ctx context.Context, tps []TopicPartition) ([]PartitionReassignment, error) {
	req := &wire.ListPartitionReassignmentsRequest{TimeoutMs: a.timeoutMs()}
	if tps != nil {
		req.Topics = []wire.ListReassignTopic{}
		for _, t := range groupByTopic(tps) {
			req.Topics = append(req.Topics, wire.ListReassignTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	var resp wire.ListPartitionReassignmentsResponse
	if err := a.call(ctx, req, &resp); err != nil {
		return nil, fmt.Errorf("client: list partition reassignments: %w", err)
	}
	if err := resultErr("client: list partition reassignments", resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var out []PartitionReassignment
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, PartitionReassignment{TopicPartition: TopicPartition{t.Topic, p.Partition},
				Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas})
		}
	}
	return out, nil
}

// ElectionType is ElectLeaders' kind of election (Kafka's numbers).
type ElectionType int8

const (
	// ElectPreferred makes each partition's first replica its leader, if it is in the ISR.
	ElectPreferred ElectionType = ElectionType(wire.ElectionPreferred)
	// ElectUnclean gives a partition with no leader one from any live replica, in the ISR or
	// not: records acknowledged only by the ISR may be lost.
	ElectUnclean ElectionType = ElectionType(wire.ElectionUnclean)
)

// ElectLeaders runs elections for tps (nil: every partition) and returns each partition's
// outcome: nil for a new leader, else an error wrapping wire.ErrElectionNotNeeded,
// wire.ErrPreferredLeaderNotAvailable, wire.ErrEligibleLeadersNotAvailable or
// wire.ErrUnknownTopicOrPartition. With tps nil only the partitions an election was tried for
// are in the map.
func (a *Admin) ElectLeaders(ctx context.Context, typ ElectionType, tps []TopicPartition) (map[TopicPartition]error, error) {
	req := &wire.ElectLeadersRequest{ElectionType: int8(typ), TimeoutMs: a.timeoutMs()}
	if tps != nil {
		req.Topics = []wire.ElectLeadersTopic{}
		for _, t := range groupByTopic(tps) {
			req.Topics = append(req.Topics, wire.ElectLeadersTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	var resp wire.ElectLeadersResponse
	if err := a.call(ctx, req, &resp); err != nil {
		return nil, fmt.Errorf("client: elect leaders: %w", err)
	}
	if err := resultErr("client: elect leaders", resp.ErrorCode, nil); err != nil {
		return nil, err
	}
	out := map[TopicPartition]error{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = codeErr(p.ErrorCode, p.ErrorMessage)
		}
	}
	return out, nil
}

// CreatePartitions grows topic to count partitions (never fewer than it has: an error wrapping
// wire.ErrInvalidPartitions). assignment, if not nil, places the new partitions (one replica
// list each, preferred leader first); nil places them as topic creation does.
func (a *Admin) CreatePartitions(ctx context.Context, topic string, count int32, assignment [][]int32) error {
	op := topicOp("create partitions of topic", topic)
	t := wire.CreatePartitionsTopic{Topic: topic, Count: count}
	if assignment != nil {
		t.Assignments = make([]wire.CreatePartitionsAssignment, len(assignment))
		for i, r := range assignment {
			t.Assignments[i].BrokerIDs = r
		}
	}
	var resp wire.CreatePartitionsResponse
	if err := a.call(ctx, &wire.CreatePartitionsRequest{Topics: []wire.CreatePartitionsTopic{t}, TimeoutMs: a.timeoutMs()}, &resp); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(resp.Results) != 1 {
		return fmt.Errorf("%s: %d results for 1 topic", op, len(resp.Results))
	}
	return resultErr(op, resp.Results[0].ErrorCode, resp.Results[0].ErrorMessage)
}

// Dynamic broker configs: the replication throttle rates, for one broker ("3") or as the
// cluster-wide default ("").
const (
	// LeaderThrottledRate caps the bytes per second a leader sends to the replicas a move is
	// adding (Kafka's leader.replication.throttled.rate); 0 or unset: no cap.
	LeaderThrottledRate = "leader.replication.throttled.rate"
	// FollowerThrottledRate caps the bytes per second a broker fetches for the replicas a move
	// is adding to it (follower.replication.throttled.rate).
	FollowerThrottledRate = "follower.replication.throttled.rate"
)

// DescribeBrokerConfigs returns the dynamic configs set at broker's level: broker "3"'s own,
// or ("") the cluster-wide defaults.
func (a *Admin) DescribeBrokerConfigs(ctx context.Context, broker string) (map[string]string, error) {
	op := "describe configs of " + brokerResource(broker)
	var dc wire.DescribeConfigsResponse
	if err := a.call(ctx, &wire.DescribeConfigsRequest{Resources: []wire.DescribeConfigsResource{{ResourceType: wire.ResourceBroker, ResourceName: broker}}}, &dc); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(dc.Resources) != 1 {
		return nil, fmt.Errorf("%s: %d results", op, len(dc.Resources))
	}
	r := dc.Resources[0]
	if err := resultErr(op, r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	level := wire.ConfigSourceDynamicBroker
	if broker == "" {
		level = wire.ConfigSourceDynamicDefaultBroker
	}
	out := map[string]string{}
	for _, e := range r.Configs {
		if e.Value != nil && e.Source == level {
			out[e.Name] = *e.Value
		}
	}
	return out, nil
}

// AlterBrokerConfigs sets the configs in set and removes those in del for broker ("" the
// cluster default), keeping the others (it merges with the current set, as AlterTopicConfigs).
func (a *Admin) AlterBrokerConfigs(ctx context.Context, broker string, set map[string]string, del []string) error {
	op := "alter configs of " + brokerResource(broker)
	merged, err := a.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		return err
	}
	for _, k := range del {
		delete(merged, k)
	}
	for k, v := range set {
		merged[k] = v
	}
	var resp wire.AlterConfigsResponse
	req := &wire.AlterConfigsRequest{Resources: []wire.AlterConfigsResource{{ResourceType: wire.ResourceBroker, ResourceName: broker, Configs: entries(merged)}}}
	if err := a.call(ctx, req, &resp); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("%s: %d results", op, len(resp.Resources))
	}
	return resultErr(op, resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage)
}

func brokerResource(broker string) string {
	if strings.TrimSpace(broker) == "" {
		return "the cluster's brokers (default)"
	}
	return "broker " + broker
}

// groupByTopic is tps sorted and grouped by topic (toTopicPartitions over a sorted copy).
func groupByTopic(tps []TopicPartition) []wire.ConsumerTopicPartitions {
	sorted := slices.Clone(tps)
	sortTPs(sorted)
	return toTopicPartitions(sorted)
}
