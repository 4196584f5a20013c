package client

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/client/internal/assign"
	"github.com/sluicemq/sluice/net/wire"
)

// Errors of group membership.
var (
	// ErrSubscribed: Assign on a consumer that has subscribed (Subscribe), and
	// ErrManualAssignment: Subscribe on one that has assigned partitions (Assign). A consumer
	// is either a group member or assigns its own partitions.
	ErrSubscribed       = errors.New("client: consumer is subscribed to topics (group membership): no Assign")
	ErrManualAssignment = errors.New("client: consumer assigns its partitions (Assign): no Subscribe")
	// ErrCommitFailed: the coordinator refused a member's commit because the member is no
	// longer in the group's current generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
	// FENCED_INSTANCE_ID; Kafka's CommitFailedException), or because a rebalance is in
	// progress (REBALANCE_IN_PROGRESS: retry after the next Poll). The error wraps the code;
	// the next Poll rejoins the group.
	ErrCommitFailed = errors.New("client: commit failed: the member is not in the group's current generation")
	// ErrCommitOutcomeUnknown comes with ErrCommitFailed when an earlier attempt of the same
	// commit lost its answer (a connection dropped, the coordinator moving) before the refusal:
	// that attempt may have been committed, so the group's offset is either the one before or
	// the one refused.
	ErrCommitOutcomeUnknown = errors.New("an earlier attempt's outcome is unknown: the offset may be committed")
)

// Subscribe makes the consumer a member of its group (GroupID) consuming topics: the group's
// members share the topics' partitions, as the coordinator and the chosen assignor decide, and
// the assignment follows members joining and leaving (see group.go and CONSUMER.md). The
// membership starts with the next Poll, and Assignment reports the group's current assignment
// to this member. Subscribing again replaces the topics (and rebalances).
func (c *Consumer) Subscribe(topics ...string) error {
	if c.cfg.GroupID == "" {
		return ErrNoGroup
	}
	if len(topics) == 0 {
		return fmt.Errorf("client: subscribe: no topics")
	}
	for _, t := range topics {
		if err := wire.CheckTopicName(t); err != nil {
			return fmt.Errorf("client: subscribe %.300q: %w: %w", t, wire.ErrInvalidTopicException, err)
		}
	}
	topics = slices.Compact(slices.Sorted(slices.Values(topics)))
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.mu.closed:
		return ErrConsumerClosed
	case c.mu.manual:
		return ErrManualAssignment
	case c.mu.group != nil:
		c.mu.group.setTopics(topics)
	default:
		c.mu.group = newGroupMember(c, topics)
		c.wg.Add(1)
		go c.mu.group.heartbeatLoop()
	}
	c.signal()
	return nil
}

// groupOf returns the consumer's group membership, nil without Subscribe.
func (c *Consumer) groupOf() *groupMember {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.group
}

// fencedCommit reports the commit errors that say the member must rejoin.
func fencedCommit(code wire.ErrorCode) bool {
	switch code {
	case wire.ErrIllegalGeneration, wire.ErrUnknownMemberID, wire.ErrFencedInstanceID, wire.ErrRebalanceInProgress:
		return true
	}
	return false
}

// commitFenced makes the next Poll rejoin after a commit was refused with code.
func (c *Consumer) commitFenced(code wire.ErrorCode) {
	if g := c.groupOf(); g != nil {
		g.fenced(code)
	}
}

// groupDefaults checks and defaults the membership settings.
func (c *ConsumerConfig) groupDefaults() error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"session.timeout.ms", c.SessionTimeout}, {"heartbeat.interval.ms", c.HeartbeatInterval}, {"max.poll.interval.ms", c.MaxPollInterval}} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is negative (zero takes the default)", ErrConsumerConfig, f.name)
		}
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 3 * time.Second
	}
	if c.MaxPollInterval == 0 {
		c.MaxPollInterval = 5 * time.Minute
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		return fmt.Errorf("%w: heartbeat.interval.ms (%v) must be below session.timeout.ms (%v)", ErrConsumerConfig, c.HeartbeatInterval, c.SessionTimeout)
	}
	names := c.Assignors
	if len(names) == 0 {
		names = []string{"range", "cooperative-sticky"}
	}
	c.assignors = nil
	for _, n := range names {
		a, ok := assign.ByName(n)
		if !ok {
			return fmt.Errorf("%w: partition.assignment.strategy %q: want range, roundrobin or cooperative-sticky", ErrConsumerConfig, n)
		}
		c.assignors = append(c.assignors, a)
	}
	return nil
}

// subscriptionMetadata is a member's JoinGroup metadata for one protocol: Kafka's
// ConsumerProtocolSubscription v2, with the partitions it owns and their generation, which
// cooperative-sticky uses to keep them where they are.
func subscriptionMetadata(topics []string, owned []TopicPartition, generation int32) []byte {
	s := wire.ConsumerSubscription{Version: 2, Topics: topics, OwnedPartitions: toTopicPartitions(owned), GenerationID: generation}
	return s.AppendTo(nil)
}

// toTopicPartitions groups sorted tps by topic, for the wire.
func toTopicPartitions(tps []TopicPartition) []wire.ConsumerTopicPartitions {
	out := []wire.ConsumerTopicPartitions{}
	for _, tp := range tps {
		if n := len(out); n == 0 || out[n-1].Topic != tp.Topic {
			out = append(out, wire.ConsumerTopicPartitions{Topic: tp.Topic})
		}
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, tp.Partition)
	}
	return out
}

func fromTopicPartitions(ts []wire.ConsumerTopicPartitions) []TopicPartition {
	out := []TopicPartition{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			out = append(out, TopicPartition{t.Topic, p})
		}
	}
	sortTPs(out)
	return slices.Compact(out)
}

// GroupMetadata is a member's place in its group (Kafka's ConsumerGroupMetadata).
type GroupMetadata struct {
	GroupID         string
	Generation      int32 // -1: not in a generation (not joined yet, or out of it)
	MemberID        string
	GroupInstanceID string
}

// GroupMetadata returns the consumer's group, generation and member id.
func (c *Consumer) GroupMetadata() GroupMetadata {
	md := GroupMetadata{GroupID: c.cfg.GroupID, Generation: -1, GroupInstanceID: c.cfg.GroupInstanceID}
	if g := c.groupOf(); g != nil {
		md.Generation, md.MemberID, _ = g.identity()
	}
	return md
}
