package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
)

// The Controller methods that propose the broker lifecycle, AlterPartition
// and cluster id commands. Each goes through propose (controller.go): a dry
// run filters out what would be refused or change nothing, then the command
// is committed and its Apply result returned.

// NewIncarnation draws a broker incarnation id: a random 16-byte id in
// Kafka's URL-safe base64 form. A broker draws one per process start.
func NewIncarnation() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// RegisterBroker records a broker and its endpoints and returns its new
// broker epoch. The broker starts fenced: it leads nothing until
// UnfenceBroker. An empty Incarnation is drawn here.
func (c *Controller) RegisterBroker(ctx context.Context, b BrokerInfo) (epoch int64, err error) {
	if b.Incarnation == "" {
		b.Incarnation = NewIncarnation()
	}
	res, err := c.propose(ctx, &registerBrokerCmd{Broker: b})
	return res.BrokerEpoch, err
}

// FenceBroker fences broker id at epoch (its session expired): the
// partitions it led get new leaders, or none. ErrStaleBrokerEpoch when the
// broker registered again since.
func (c *Controller) FenceBroker(ctx context.Context, id int32, epoch int64) error {
	_, err := c.propose(ctx, &fenceBrokerCmd{brokerEpochCmd{ID: id, Epoch: epoch}})
	return err
}

// UnfenceBroker makes broker id at epoch alive again (its first heartbeat
// after registering, or one after a fence): leaderless partitions whose ISR
// holds it get it as leader.
func (c *Controller) UnfenceBroker(ctx context.Context, id int32, epoch int64) error {
	_, err := c.propose(ctx, &unfenceBrokerCmd{brokerEpochCmd{ID: id, Epoch: epoch}})
	return err
}

// ControlledShutdown marks broker id at epoch as shutting down and moves its
// leaderships to other alive ISR members. Call it again until
// Metadata().PartitionsLedBy(id) is 0 (or a deadline passes): a partition
// with no other alive ISR member stays with the broker meanwhile.
func (c *Controller) ControlledShutdown(ctx context.Context, id int32, epoch int64) error {
	_, err := c.propose(ctx, &controlledShutdownCmd{brokerEpochCmd{ID: id, Epoch: epoch}})
	return err
}

// AlterPartition proposes a new ISR for a partition on behalf of its leader
// and returns the partition as committed (unchanged when the ISR was
// already the proposed one).
func (c *Controller) AlterPartition(ctx context.Context, req AlterPartitionRequest) (PartitionMeta, error) {
	res, idx, err := c.proposeIndexed(ctx, &alterPartitionCmd{AlterPartitionRequest: req})
	if err != nil {
		// A retry after an ambiguous try is refused for the epoch that try bumped: the
		// partition at the requested ISR, one partition epoch on, is that try's commit.
		if p, ok := c.committedByEarlierTry(ctx, err, idx, req.Topic, req.Partition, func(p PartitionMeta) bool {
			return p.LeaderEpoch == req.LeaderEpoch && p.PartitionEpoch == req.PartitionEpoch+1 && slices.Equal(p.ISR, req.ISR)
		}); ok {
			return p, nil
		}
	}
	return res.Partition, err
}

// committedByEarlierTry reports, for a write refused with a stale epoch after an ambiguous try
// (errMayHaveCommitted), whether the partition, once this node has applied idx (what the
// refusing leader had applied), is as that earlier try would have left it (done).
func (c *Controller) committedByEarlierTry(ctx context.Context, err error, idx uint64, topic string, partition int32, done func(PartitionMeta) bool) (PartitionMeta, bool) {
	if !errors.Is(err, errMayHaveCommitted) || !(errors.Is(err, ErrStaleLeaderEpoch) || errors.Is(err, ErrInvalidUpdateVersion)) {
		return PartitionMeta{}, false
	}
	if c.awaitApplied(ctx, idx) != nil {
		return PartitionMeta{}, false
	}
	t, ok := c.Metadata().Topic(topic)
	if !ok {
		return PartitionMeta{}, false
	}
	p, ok := t.Partition(partition)
	if !ok || !done(p) {
		return PartitionMeta{}, false
	}
	c.log.Info("partition change committed by an earlier try", "topic", topic, "partition", partition, "err", err)
	return p, true
}

// InitCluster sets the cluster id if none is set yet; otherwise it changes
// nothing and returns nil. Read the id that won with Metadata().ClusterID().
func (c *Controller) InitCluster(ctx context.Context, id string) error {
	_, err := c.propose(ctx, &initClusterCmd{ClusterID: id})
	return err
}

// CreateTopic creates a topic and returns it as committed. The topic id and
// the placement seed are drawn here, once, so that a retry of the same
// command (same id) after a controller failover returns the topic created.
func (c *Controller) CreateTopic(ctx context.Context, spec TopicSpec) (TopicMeta, error) {
	res, err := c.propose(ctx, &createTopicCmd{TopicSpec: spec, ID: NewTopicID(), Placement: DrawPlacementSeed(), CheckMinISR: true})
	return res.Topic, err
}

// SetPartitionLeader moves a partition's leadership and bumps its leader
// and partition epochs; it returns the partition as committed.
func (c *Controller) SetPartitionLeader(ctx context.Context, ch LeaderChange) (PartitionMeta, error) {
	res, idx, err := c.proposeIndexed(ctx, &setPartitionLeaderCmd{LeaderChange: ch, PartitionEpochs: true})
	if err != nil {
		// As AlterPartition: the requested leader, one leader epoch on, is the earlier try's.
		if p, ok := c.committedByEarlierTry(ctx, err, idx, ch.Topic, ch.Partition, func(p PartitionMeta) bool {
			return p.Leader == ch.Leader && p.LeaderEpoch == ch.LeaderEpoch+1
		}); ok {
			return p, nil
		}
	}
	return res.Partition, err
}

// AlterPartitionReassignments starts and cancels partition moves (reassign.go). Every entry is
// validated first; any problem refuses the whole request, nothing started, with an error
// wrapping ErrInvalidReassignment (and ErrNoReassignmentInProgress when a cancel names a
// partition that is not moving) whose message lists every problem. A target equal to the
// current replicas is a no-op. A move whose target is in the ISR already (a replication factor
// decrease) completes at once.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, rs []Reassignment) error {
	_, idx, err := c.proposeIndexed(ctx, &alterReassignmentsCmd{Reassignments: rs})
	if err != nil && errors.Is(err, errMayHaveCommitted) && errors.Is(err, ErrInvalidReassignment) &&
		c.awaitApplied(ctx, idx) == nil && reassignmentsApplied(c.Metadata(), rs) {
		// An earlier try committed: every partition is moving to (or at) its target, and
		// every cancelled one is still.
		c.log.Info("partition reassignments committed by an earlier try", "partitions", len(rs), "err", err)
		return nil
	}
	return err
}

// reassignmentsApplied reports whether md is as rs would leave it: each target being moved to
// or reached, each cancelled partition not moving.
func reassignmentsApplied(md *Metadata, rs []Reassignment) bool {
	for _, r := range rs {
		t, ok := md.Topic(r.Topic)
		if !ok {
			return false
		}
		p, ok := t.Partition(r.Partition)
		switch {
		case !ok:
			return false
		case r.Replicas == nil:
			if p.Reassigning() {
				return false
			}
		case !slices.Equal(p.TargetReplicas(), r.Replicas):
			return false
		}
	}
	return true
}

// ElectLeaders runs preferred or unclean leader elections (electleaders.go) and returns each
// partition's outcome; parts nil means every partition (and then partitions that need no
// election are left out of the results). The error is for the request as a whole.
func (c *Controller) ElectLeaders(ctx context.Context, typ ElectionType, parts []PartitionRef) ([]ElectionResult, error) {
	res, err := c.propose(ctx, &electLeadersCmd{Type: typ, All: parts == nil, Partitions: parts})
	return res.ElectionResults, err
}

// CreatePartitions grows a topic to count partitions and returns it as committed
// (createpartitions.go). assignment, optional, gives the new partitions' replicas; without it
// they are placed as at creation, from a seed drawn here. A count that is not above the
// current one is ErrInvalidPartitions (Kafka's); a bad assignment ErrInvalidReplicaAssignment.
func (c *Controller) CreatePartitions(ctx context.Context, topic string, count int32, assignment [][]int32) (TopicMeta, error) {
	res, idx, err := c.proposeIndexed(ctx, &createPartitionsCmd{Topic: topic, Count: count, Assignment: assignment, Placement: DrawPlacementSeed()})
	if err != nil && errors.Is(err, errMayHaveCommitted) && errors.Is(err, ErrInvalidPartitions) && c.awaitApplied(ctx, idx) == nil {
		// A retry finding the count reached: the earlier try's commit.
		if t, ok := c.Metadata().Topic(topic); ok && int32(len(t.Partitions)) == count {
			c.log.Info("partitions created by an earlier try", "topic", topic, "count", count, "err", err)
			return t, nil
		}
	}
	return res.Topic, err
}

// AlterBrokerConfigs sets and deletes dynamic broker configs (brokerconfig.go) of broker
// ("" the cluster-wide default, "N" broker N) in one step. Only the two replication
// throttles are accepted; any other key is ErrInvalidConfig naming it.
func (c *Controller) AlterBrokerConfigs(ctx context.Context, broker string, set map[string]string, del []string) error {
	_, err := c.propose(ctx, &alterBrokerConfigsCmd{Broker: broker, Set: set, Delete: del})
	return err
}
