package broker

// Behavior: OffsetForLeaderEpoch (KIP-101, KIP-279).
//
// A follower that starts following a leader asks, for each partition, where the latest leader
// epoch its own log holds ends in the leader's log, and truncates there before it fetches. Only
// the partition's leader answers, with the same checks as Fetch (leadership.go): a
// CurrentLeaderEpoch older than the partition's gets FENCED_LEADER_EPOCH, a newer one
// UNKNOWN_LEADER_EPOCH, a replica that is not the leader NOT_LEADER_OR_FOLLOWER, a partition
// without a leader LEADER_NOT_AVAILABLE, an unknown one UNKNOWN_TOPIC_OR_PARTITION. The leader
// answers from its replication state (rep.EndOffsetFor): the largest epoch at or below the one
// asked that its log holds, and the offset where that epoch ends (the start of the next, or the
// log end for the latest); an epoch below every one it holds gets -1 and -1. A replica whose
// replication state has not taken the leadership the metadata names yet answers
// NOT_LEADER_OR_FOLLOWER (retriable): its epoch cache may not hold the new epoch yet. Consumers
// (ReplicaID -1) and debugging clients (-2) are answered the same way, as Kafka does.

import (
	"fmt"

	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
)

func (b *Broker) handleOffsetForLeaderEpoch(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	req := wire.OffsetForLeaderEpochRequest{Version: h.APIVersion}
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	var resp wire.OffsetForLeaderEpochResponse
	b.offsetsForLeaderEpoch(&req, &resp)
	return respond(c, h, &resp)
}

// offsetsForLeaderEpoch answers req into resp.
func (b *Broker) offsetsForLeaderEpoch(req *wire.OffsetForLeaderEpochRequest, resp *wire.OffsetForLeaderEpochResponse) {
	*resp = wire.OffsetForLeaderEpochResponse{Version: req.Version, Topics: make([]wire.OffsetForLeaderEpochTopicResult, 0, len(req.Topics))}
	for _, rt := range req.Topics {
		out := wire.OffsetForLeaderEpochTopicResult{Topic: rt.Topic, Partitions: make([]wire.OffsetForLeaderEpochPartitionResult, 0, len(rt.Partitions))}
		for _, rp := range rt.Partitions {
			res, err := b.endOffsetFor(rt.Topic, rp)
			res.ErrorCode = errorCode(err)
			out.Partitions = append(out.Partitions, res)
		}
		resp.Topics = append(resp.Topics, out)
	}
}

// endOffsetFor is one partition's answer.
func (b *Broker) endOffsetFor(topic string, rp wire.OffsetForLeaderEpochPartition) (wire.OffsetForLeaderEpochPartitionResult, error) {
	res := wire.OffsetForLeaderEpochPartitionResult{Partition: rp.Partition, LeaderEpoch: replication.UndefinedEpoch, EndOffset: int64(replication.UndefinedOffset)}
	p := b.partition(topic, rp.Partition)
	if p == nil || !p.servesAt(b.cfg.NodeID, rp.CurrentLeaderEpoch) {
		_, err := b.refuse(topic, rp.Partition, p, rp.CurrentLeaderEpoch)
		return res, err
	}
	_, current := p.leadership()
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.rep == nil || p.rep.Role() != replication.Leader || p.rep.LeaderEpoch() != current {
		return res, fmt.Errorf("%w: %s-%d: the replica has not taken the leadership at epoch %d yet", ErrNotLeaderOrFollower, topic, rp.Partition, current)
	}
	epoch, end := p.rep.EndOffsetFor(rp.LeaderEpoch)
	if rd := p.rep.Ready(); !rd.Empty() {
		b.applyReady(p, rd)
	}
	res.LeaderEpoch, res.EndOffset = epoch, int64(end)
	return res, nil
}
