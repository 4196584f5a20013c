package cluster

import (
	"context"
	"fmt"
	"math"
)

// Producer-id blocks (Kafka's AllocateProducerIds): the metadata holds the next producer id no
// block has given yet, and command 6 hands a broker the block [next, next+ProducerIDBlockSize)
// and advances it. The counter is in every snapshot and moves only through the log, so a block
// is never given twice: not across controller failovers (the new leader has applied every
// committed allocation), not across restarts (snapshot plus the log after it). A retry of an
// allocation whose earlier try committed unseen gets a second block; the first is wasted, never
// reused.

// ProducerIDBlockSize is how many producer ids one AllocateProducerIDs hands a broker
// (Kafka's 1000).
const ProducerIDBlockSize = 1000

// ProducerIDBlock is a range of producer ids given to one broker: [First, First+Size).
type ProducerIDBlock struct {
	BrokerID int32 `json:"broker_id"`
	First    int64 `json:"first"`
	Size     int64 `json:"size"`
}

// Last is the block's last id.
func (b ProducerIDBlock) Last() int64 { return b.First + b.Size - 1 }

// allocateProducerIDsCmd asks for the next block on behalf of a broker at its registration epoch.
type allocateProducerIDsCmd struct{ brokerEpochCmd }

// apply refuses a broker that is not registered at that epoch (ErrUnknownBroker,
// ErrStaleBrokerEpoch), as AlterPartition does: a fenced broker at its current epoch (one that has
// just registered and not yet heartbeat) is served, as in Kafka, which checks only the epoch.
func (c *allocateProducerIDsCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	if _, err := c.check(m); err != nil {
		return m, applyResult{Err: fmt.Errorf("allocate producer ids for broker %d: %w", c.ID, err)}
	}
	first := m.nextProducerID
	if first > math.MaxInt64-ProducerIDBlockSize {
		return m, applyResult{Err: fmt.Errorf("allocate producer ids for broker %d: %w: next id %d", c.ID, ErrProducerIDsExhausted, first)}
	}
	next := m.clone()
	next.nextProducerID = first + ProducerIDBlockSize
	return next.finish(index), applyResult{ProducerIDs: ProducerIDBlock{BrokerID: c.ID, First: first, Size: ProducerIDBlockSize}}
}

// AllocateProducerIDs hands broker id (at its registration epoch) the next block of
// producer ids: command 6 through raft, so a block is never given twice, across
// controller failovers and restarts (the next id is in the snapshot). A broker that is
// not registered at that epoch is refused (ErrUnknownBroker, ErrStaleBrokerEpoch); called on
// any node, it is forwarded to the active controller.
func (c *Controller) AllocateProducerIDs(ctx context.Context, id int32, epoch int64) (ProducerIDBlock, error) {
	res, err := c.propose(ctx, &allocateProducerIDsCmd{brokerEpochCmd{ID: id, Epoch: epoch}})
	if err != nil {
		return ProducerIDBlock{}, err
	}
	if res.ProducerIDs.Size <= 0 {
		// An answer without a block: a controller that does not know the command.
		return ProducerIDBlock{}, fmt.Errorf("allocate producer ids for broker %d: %w: the controller answered no block", id, ErrUnknownCommand)
	}
	return res.ProducerIDs, nil
}

// NextProducerID is the first producer id no block has given yet (0 before the first).
func (m *Metadata) NextProducerID() int64 { return m.nextProducerID }
