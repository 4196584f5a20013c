package cluster

import "context"

// ProducerIDBlockSize is how many producer ids one AllocateProducerIDs hands a broker
// (Kafka's 1000).
const ProducerIDBlockSize = 1000

// ProducerIDBlock is a range of producer ids given to one broker: [First, First+Size).
type ProducerIDBlock struct {
	BrokerID int32 `json:"broker_id"`
	First    int64 `json:"first"`
	Size     int64 `json:"size"`
}

// AllocateProducerIDs hands broker id (at its registration epoch) the next block of
// producer ids: command 6 through raft, so a block is never given twice, across
// controller failovers and restarts (the next id is in the snapshot). A broker that is
// not registered at that epoch is refused (ErrStaleBrokerEpoch or the like); called on
// any node, it is forwarded to the active controller.
func (c *Controller) AllocateProducerIDs(ctx context.Context, id int32, epoch int64) (ProducerIDBlock, error) {
	panic("cluster: not built yet")
}

// NextProducerID is the first producer id no block has given yet (0 before the first).
func (m *Metadata) NextProducerID() int64 { panic("cluster: not built yet") }
