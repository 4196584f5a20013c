package broker

// Behavior: DescribeReplicas.
//
// A leader's view of replication, for `sluice topic describe --verbose`: per partition this
// broker leads, its epochs, high watermark, log start, log end and durable end offsets, the
// committed ISR and a pending proposal's, and each replica's progress (the leader's own row
// first, then the assignment's order). Only the leader answers: a named topic's partitions led
// elsewhere (or by no one) get NOT_LEADER_OR_FOLLOWER naming the leader the metadata knows; a
// topic the metadata does not know gets UNKNOWN_TOPIC_OR_PARTITION. An empty request describes
// every partition this broker leads. Read-only: it takes each partition's repMu for one
// Status call and changes nothing.
//
// Until the partition's replication state machine has taken the leadership the metadata gave
// this broker (a moment after the change), its Status is not a leader's: the partition is
// then described from its log (the log's own offsets, the metadata's ISR) with the followers'
// progress unknown (-1).

import (
	"slices"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
)

func (b *Broker) handleDescribeReplicas(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	req := wire.DescribeReplicasRequest{Version: h.APIVersion}
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := b.describeReplicas(req.Topics, time.Now())
	resp.Version = req.Version
	return respond(c, h, resp)
}

// describeReplicas answers for topics (none: every partition this broker leads) at now.
func (b *Broker) describeReplicas(topics []string, now time.Time) *wire.DescribeReplicasResponse {
	md := b.ctrl.Metadata()
	resp := &wire.DescribeReplicasResponse{}
	if len(topics) == 0 {
		for _, tm := range md.Topics() {
			var out []wire.DescribeReplicasPartition
			for _, pm := range tm.Partitions {
				if p := b.ledHere(tm.Name, pm.Partition); p != nil {
					out = append(out, b.describeLed(p, pm, now))
				}
			}
			if len(out) > 0 {
				resp.Topics = append(resp.Topics, wire.DescribeReplicasTopic{Topic: tm.Name, Partitions: out})
			}
		}
		return resp
	}
	names := slices.Clone(topics)
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		tm, ok := md.Topic(name)
		if !ok {
			resp.Topics = append(resp.Topics, wire.DescribeReplicasTopic{Topic: name, ErrorCode: wire.ErrUnknownTopicOrPartition})
			continue
		}
		out := wire.DescribeReplicasTopic{Topic: name, Partitions: make([]wire.DescribeReplicasPartition, 0, len(tm.Partitions))}
		for _, pm := range tm.Partitions {
			if p := b.ledHere(name, pm.Partition); p != nil {
				out.Partitions = append(out.Partitions, b.describeLed(p, pm, now))
			} else {
				out.Partitions = append(out.Partitions, notLedHere(pm))
			}
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

// ledHere is the hosted partition if this broker leads it (as the request path sees it), else nil.
func (b *Broker) ledHere(topic string, part int32) *partition {
	p := b.partition(topic, part)
	if p == nil {
		return nil
	}
	if leader, _ := p.leadership(); leader != b.cfg.NodeID {
		return nil
	}
	return p
}

// notLedHere is the refusal of a partition this broker does not lead.
func notLedHere(pm cluster.PartitionMeta) wire.DescribeReplicasPartition {
	return wire.DescribeReplicasPartition{
		Partition: pm.Partition, ErrorCode: wire.ErrNotLeaderOrFollower, Leader: pm.Leader,
		LeaderEpoch: -1, PartitionEpoch: -1, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1, DurableOffset: -1,
	}
}

// describeLed describes a partition this broker leads, from its replication status.
func (b *Broker) describeLed(p *partition, pm cluster.PartitionMeta, now time.Time) wire.DescribeReplicasPartition {
	p.repMu.Lock()
	var st replication.Status
	if p.rep != nil {
		st = p.rep.Status(now)
		b.applyReady(p, p.rep.Ready())
	}
	p.repMu.Unlock()
	self := b.cfg.NodeID
	if st.Role != replication.Leader {
		st = logStatus(p, pm, self)
	}
	out := wire.DescribeReplicasPartition{
		Partition: pm.Partition, Leader: self, LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch,
		HighWatermark: int64(st.HighWatermark), LogStartOffset: int64(st.LogStartOffset),
		LogEndOffset: int64(st.LogEndOffset), DurableOffset: int64(st.DurableOffset),
		ISR: slices.Clone(st.ISR), PendingISR: slices.Clone(st.PendingISR),
	}
	out.Replicas = append(out.Replicas, wire.DescribeReplicasReplica{
		ReplicaID: self, LogEndOffset: out.LogEndOffset, DurableOffset: out.DurableOffset,
		InISR: slices.Contains(st.ISR, self), LagBytes: 0,
	})
	// The assignment's order, then any follower the status knows that the metadata we read
	// does not assign (a reassignment between the two reads).
	ids := make([]int32, 0, len(pm.Replicas)+len(st.Followers))
	for _, id := range pm.Replicas {
		if id != self {
			ids = append(ids, id)
		}
	}
	for _, f := range st.Followers {
		if f.ReplicaID != self && !slices.Contains(ids, f.ReplicaID) {
			ids = append(ids, f.ReplicaID)
		}
	}
	l := p.log()
	for _, id := range ids {
		row := followerRow(st, id, now)
		if row.LogEndOffset >= 0 {
			if n, err := l.BytesFrom(batch.Offset(row.LogEndOffset)); err == nil {
				row.LagBytes = n
			}
		}
		out.Replicas = append(out.Replicas, row)
	}
	return out
}

// followerRow is replica id's progress in st; -1 where the leader knows nothing of it.
func followerRow(st replication.Status, id int32, now time.Time) wire.DescribeReplicasReplica {
	row := wire.DescribeReplicasReplica{ReplicaID: id, LogEndOffset: -1, DurableOffset: -1, Lag: -1, SinceCaughtUpMs: -1,
		InISR: slices.Contains(st.ISR, id), LagBytes: -1}
	i := slices.IndexFunc(st.Followers, func(f replication.FollowerStatus) bool { return f.ReplicaID == id })
	if i < 0 {
		return row
	}
	f := st.Followers[i]
	row.LogEndOffset, row.DurableOffset = int64(f.LogEndOffset), int64(f.DurableOffset)
	if f.LogEndOffset >= 0 {
		row.Lag = max(int64(st.LogEndOffset-f.LogEndOffset), 0)
	}
	if !f.LastCaughtUp.IsZero() {
		row.SinceCaughtUpMs = max(now.Sub(f.LastCaughtUp).Milliseconds(), 0)
	}
	return row
}

// logStatus is the status of a partition described from its log and the metadata, for when its
// replication state is not (yet) a leader's.
func logStatus(p *partition, pm cluster.PartitionMeta, self int32) replication.Status {
	l := p.log()
	_, epoch := p.leadership()
	return replication.Status{
		Role: replication.Leader, Leader: self, LeaderEpoch: epoch, PartitionEpoch: pm.PartitionEpoch,
		HighWatermark: p.highWatermark(), LogStartOffset: l.StartOffset(), LogEndOffset: l.EndOffset(),
		DurableOffset: l.SyncedOffset(), ISR: pm.ISR,
	}
}
