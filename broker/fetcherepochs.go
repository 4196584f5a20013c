package broker

import (
	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// The fetcher's OffsetForLeaderEpoch round (fetcher.go): one request for every partition whose
// next request is FetchEpochQuery, and each answer handed to rep, whose truncation the fetcher
// then makes (settleLocked).

// queryEpochs asks the leader the end offset of each partition's latest local epoch. Only an
// error of the connection is returned.
func (f *replicaFetcher) queryEpochs(parts []roundPart) error {
	byTopic(parts)
	req := wire.OffsetForLeaderEpochRequest{ReplicaID: f.rf.cfg.self}
	for _, rp := range parts {
		tp := rp.fl.p.tp
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.topic {
			req.Topics = append(req.Topics, wire.OffsetForLeaderEpochTopic{Topic: tp.topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, wire.OffsetForLeaderEpochPartition{
			Partition:          tp.partition,
			CurrentLeaderEpoch: rp.plan.LeaderEpoch,
			LeaderEpoch:        rp.plan.Epoch,
		})
	}
	var resp wire.OffsetForLeaderEpochResponse
	if !f.conn.epochQueries {
		f.rf.b.logger.Warn("replica fetcher: the leader does not answer OffsetForLeaderEpoch", f.attrs("addr", f.addr)...)
		for _, rp := range parts {
			f.backoff(rp.fl)
		}
		return nil
	}
	if err := f.conn.roundTrip(&req, &resp, f.rf.cfg.timeoutMargin); err != nil {
		return err
	}
	answered := make(map[topicPartition]bool, len(parts))
	for _, t := range resp.Topics {
		for _, r := range t.Partitions {
			tp := topicPartition{t.Topic, r.Partition}
			for _, rp := range parts {
				if rp.fl.p.tp == tp && !answered[tp] {
					answered[tp] = true
					f.epochAnswered(rp, r)
				}
			}
		}
	}
	for _, rp := range parts {
		if !answered[rp.fl.p.tp] {
			f.backoff(rp.fl)
		}
	}
	return nil
}

// epochAnswered hands one partition's answer to rep (the leader's answer may be for an older
// epoch than the one asked: KIP-279, rep then asks again for the latest local epoch below it)
// and makes the truncation it leads to.
func (f *replicaFetcher) epochAnswered(rp roundPart, r wire.OffsetForLeaderEpochPartitionResult) {
	if r.ErrorCode != wire.NoError {
		f.partitionError(rp, r.ErrorCode)
		return
	}
	rp.fl.behind = 0
	p := rp.fl.p
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if !f.current(rp) {
		return
	}
	f.rf.b.logger.Debug("replica epoch answered", f.attrs("partition", p.tp.String(), "asked", rp.plan.Epoch,
		"epoch", r.LeaderEpoch, "end_offset", r.EndOffset, "local_end", p.log().EndOffset())...)
	// The answer's epoch and end, and the epoch asked (rep ignores an answer to another
	// query; one sent at another leader epoch is dropped above).
	p.rep.EpochAnswered(r.LeaderEpoch, rp.plan.Epoch, batch.Offset(r.EndOffset))
	f.settleLocked(rp.fl)
}
