package broker

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// The fetcher's Fetch round (fetcher.go): one long-polling request for every partition whose
// next request is FetchRecords, and each partition's answer appended and reported.

// byTopic sorts a round's partitions by topic and partition, so that each topic is one entry of
// the request.
func byTopic(parts []roundPart) {
	slices.SortFunc(parts, func(a, b roundPart) int {
		return cmp.Or(cmp.Compare(a.fl.p.tp.topic, b.fl.p.tp.topic), cmp.Compare(a.fl.p.tp.partition, b.fl.p.tp.partition))
	})
}

// fetchRecords sends one Fetch for parts and acts on each partition's answer. Only an error of
// the connection is returned.
func (f *replicaFetcher) fetchRecords(parts []roundPart) error {
	cfg := &f.rf.cfg
	byTopic(parts)
	req := &f.fetch
	*req = wire.FetchRequest{
		Version:        f.conn.fetchVersion,
		ReplicaID:      cfg.self,
		MaxWaitMs:      int32(cfg.maxWait.Milliseconds()),
		MinBytes:       cfg.minBytes,
		MaxBytes:       cfg.maxBytes,
		IsolationLevel: wire.ReadUncommitted,
		SessionID:      0,
		SessionEpoch:   -1, // no fetch session: a full fetch (v0 and v1)
		Topics:         req.Topics[:0],
		Forgotten:      req.Forgotten[:0],
	}
	sessions := req.Version >= 2
	incremental := sessions && f.sess.id != 0
	switch {
	case incremental:
		req.SessionID, req.SessionEpoch = f.sess.id, f.sess.epoch
	case sessions:
		// A full fetch that asks for a session, closing the one given up if any (Kafka's
		// close-and-create), so that the leader's cache does not keep it to the eviction.
		req.SessionID, req.SessionEpoch = f.sess.closing, 0
	}
	if f.index == nil {
		f.index = map[topicPartition]roundPart{}
	}
	clear(f.index)
	for _, rp := range parts {
		tp := rp.fl.p.tp
		f.index[tp] = rp
		entry := wire.FetchRequestPartition{
			Partition:          tp.partition,
			CurrentLeaderEpoch: rp.plan.LeaderEpoch,
			FetchOffset:        int64(rp.plan.Offset),
			LogStartOffset:     int64(rp.plan.LogStartOffset),
			PartitionMaxBytes:  cfg.partitionBytes,
			DurableOffset:      int64(rp.plan.DurableOffset),
		}
		// The atomic check first: the quota's lock is taken only for a replica a move adds.
		if f.rf.b.throttledFollower(rp.fl.p) {
			if r := f.rf.b.followerQuota.limit(); r > 0 {
				// At most a second's worth per answer, so that one answer does not overshoot
				// the rate by a whole partition's bytes (the first batch comes whole anyway,
				// KIP-74).
				entry.PartitionMaxBytes = int32(min(int64(cfg.partitionBytes), r))
			}
		}

		if incremental {
			if prev, ok := f.sess.sent[tp]; ok && prev == entry {
				continue // the leader's session has it as it is
			}
		}
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.topic {
			req.Topics = append(req.Topics, wire.FetchRequestTopic{Topic: tp.topic, Partitions: nil})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, entry)
	}
	if incremental {
		for tp := range f.sess.sent {
			if _, ok := f.index[tp]; ok {
				continue
			}
			// Not in this round (parked, backing off, moved, unfollowed): the session drops it.
			if n := len(req.Forgotten); n == 0 || req.Forgotten[n-1].Topic != tp.topic {
				req.Forgotten = append(req.Forgotten, wire.FetchForgottenTopic{Topic: tp.topic})
			}
			ft := &req.Forgotten[len(req.Forgotten)-1]
			ft.Partitions = append(ft.Partitions, tp.partition)
		}
	}
	f.resp.Version = req.Version
	if err := f.conn.roundTrip(req, &f.resp, cfg.maxWait+cfg.timeoutMargin); err != nil {
		return err
	}
	switch f.resp.ErrorCode {
	case wire.NoError:
	case wire.ErrFetchSessionIDNotFound, wire.ErrInvalidFetchSessionEpoch:
		// Evicted, or the leader restarted: the next round starts a new session.
		f.rf.b.logger.Info("replica fetch session reset", f.attrs("session", f.sess.id, "err", f.resp.ErrorCode)...)
		f.sess.reset()
		return nil
	default:
		f.rf.b.logger.Warn("replica fetch refused", f.attrs("err", f.resp.ErrorCode)...)
		f.sess.reset()
		for _, rp := range parts {
			f.backoff(rp.fl)
		}
		return nil
	}
	if sessions {
		f.sess.answered(req, f.resp.SessionID)
	}
	var outOfRange []roundPart
	for ti := range f.resp.Topics {
		t := &f.resp.Topics[ti]
		for pi := range t.Partitions {
			res := &t.Partitions[pi]
			tp := topicPartition{t.Topic, res.Partition}
			rp, ok := f.index[tp]
			if !ok {
				continue // not asked for: ignored
			}
			delete(f.index, tp)
			if res.ErrorCode == wire.ErrOffsetOutOfRange {
				// After the loop: asking the leader's bounds reads into the buffer the other
				// partitions' records are still in.
				outOfRange = append(outOfRange, rp)
				continue
			}
			f.fetched(rp, res)
		}
	}
	for _, rp := range outOfRange {
		if err := f.outOfRange(rp); err != nil {
			return err
		}
	}
	if !incremental {
		for _, rp := range f.index {
			f.backoff(rp.fl) // asked for and not answered
		}
	} // an incremental response leaves out the partitions without news
	return nil
}

// fetcherSession is a fetcher's side of its fetch session with the leader (fetchsession.go
// has the leader's): the session's id and next epoch, and each partition's fields as last
// sent, so that a round sends only what changed. Owned by the fetcher goroutine.
type fetcherSession struct {
	id      int32 // 0: none
	epoch   int32
	closing int32 // a session given up, for the next full fetch to close
	sent    map[topicPartition]wire.FetchRequestPartition
}

func (s *fetcherSession) reset() {
	if s.id != 0 {
		s.closing = s.id
	}
	s.id, s.epoch = 0, 0
	clear(s.sent)
}

// answered records a successful response to req, whose answer named session id.
func (s *fetcherSession) answered(req *wire.FetchRequest, id int32) {
	if req.SessionEpoch == 0 { // a new session (or none, if the leader's cache had no room)
		s.reset()
		s.closing = 0
		if id == 0 {
			return
		}
		s.id, s.epoch = id, 0
	}
	if s.sent == nil {
		s.sent = map[topicPartition]wire.FetchRequestPartition{}
	}
	for _, t := range req.Forgotten {
		for _, p := range t.Partitions {
			delete(s.sent, topicPartition{t.Topic, p})
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			s.sent[topicPartition{t.Topic, p.Partition}] = p
		}
	}
	if s.epoch++; s.epoch <= 0 {
		s.epoch = 1 // Kafka's epochs wrap to 1
	}
}

// fetched acts on one partition's answer (OFFSET_OUT_OF_RANGE aside: outOfRange).
func (f *replicaFetcher) fetched(rp roundPart, res *wire.FetchResponsePartition) {
	if res.ErrorCode != wire.NoError {
		f.partitionError(rp, res.ErrorCode)
		return
	}
	fl := rp.fl
	fl.behind = 0
	p := fl.p
	records := completeBatches(res.Records)
	now := time.Now()
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if !f.current(rp) {
		return
	}
	l := p.log()
	if len(records) > 0 && f.rf.b.throttledFollower(p) {
		f.rf.b.followerQuota.take(len(records), now)
	}
	if len(records) > 0 {
		if l.EndOffset() != rp.plan.Offset {
			return // the log moved since the request (a truncation): the next round asks again
		}
		info, err := l.AppendAsFollower(records)
		if err != nil {
			f.refused(rp, records, err)
			return
		}
		p.rep.Appended(info.LastOffset+1, f.newEpochs(fl, records), now)
		if c := p.cfg.Load(); c != nil && !c.WriteCaching {
			fl.syncTo, fl.syncSince = info.LastOffset+1, now
			l.OnSynced(info.LastOffset, f.kickOnSync) // bound once: no allocation per append
		}
	}
	p.rep.FetchAnswered(rp.plan.LeaderEpoch, batch.Offset(res.HighWatermark), batch.Offset(res.LogStartOffset), now)
	f.settleLocked(fl)
}

// current reports whether rp's answer still applies: the partition is still followed as it was
// when the request went, at the same leader epoch. Called with rp.fl.p.repMu held.
func (f *replicaFetcher) current(rp roundPart) bool {
	rep := rp.fl.p.rep
	return rep.Role() == replication.Follower && rep.LeaderEpoch() == rp.plan.LeaderEpoch && f.rf.registered(rp.fl)
}

// refused logs batches AppendAsFollower would not take (a bad CRC, offsets that do not follow
// the log end): nothing of them is appended, and the partition fetches again after the
// backoff.
func (f *replicaFetcher) refused(rp roundPart, records []byte, err error) {
	first, last := batch.Offset(-1), batch.Offset(-1)
	if b, _, berr := batch.Next(records); berr == nil {
		first = b.BaseOffset()
	}
	for rest := records; len(rest) > 0; {
		b, r, berr := batch.Next(rest)
		if berr != nil {
			break
		}
		last, rest = b.LastOffset(), r
	}
	f.rf.b.logger.Error("replica refused the leader's batches", f.attrs("partition", rp.fl.p.tp.String(),
		"fetch_offset", rp.plan.Offset, "first_offset", first, "last_offset", last, "bytes", len(records),
		"offsets_out_of_order", errors.Is(err, segment.ErrOffsetOrder), "err", err)...)
	f.backoff(rp.fl)
}

// completeBatches is records without a trailing partial batch (a fetch is cut at its byte
// limit). A length that is no batch's is left in, for AppendAsFollower to refuse.
func completeBatches(records []byte) []byte {
	n := 0
	for rest := records; len(rest) > 0; {
		size, err := batch.SizeOf(rest)
		switch {
		case errors.Is(err, batch.ErrShort):
			return records[:n]
		case err != nil:
			return records
		case size > len(rest):
			return records[:n]
		}
		n += size
		rest = rest[size:]
	}
	return records
}

// newEpochs lists the appended batches that start a leader epoch newer than the latest the
// local log held (rep.Appended's epochs). Called with fl.p.repMu held.
func (f *replicaFetcher) newEpochs(fl *followed, records []byte) []replication.EpochEntry {
	if fl.lastEpoch == epochUnknown {
		fl.lastEpoch = replication.UndefinedEpoch
		if es := fl.p.rep.Epochs(); len(es) > 0 {
			fl.lastEpoch = es[len(es)-1].Epoch
		}
	}
	var out []replication.EpochEntry
	for rest := records; len(rest) > 0; {
		b, r, err := batch.Next(rest)
		if err != nil {
			break
		}
		if e := b.PartitionLeaderEpoch(); e > fl.lastEpoch {
			out = append(out, replication.EpochEntry{Epoch: e, StartOffset: b.BaseOffset()})
			fl.lastEpoch = e
		}
		rest = r
	}
	return out
}

// outOfRange asks the leader for its log bounds (ListOffsets as a replica: earliest, then
// latest) and hands them to rep.OutOfRange. Only an error of the connection is returned.
func (f *replicaFetcher) outOfRange(rp roundPart) error {
	start, code, err := f.listOffset(rp, wire.EarliestTimestamp)
	if err != nil || code != wire.NoError {
		if code != wire.NoError {
			f.partitionError(rp, code)
		}
		return err
	}
	end, code, err := f.listOffset(rp, wire.LatestTimestamp)
	if err != nil || code != wire.NoError {
		if code != wire.NoError {
			f.partitionError(rp, code)
		}
		return err
	}
	p := rp.fl.p
	f.rf.b.logger.Warn("replica fetch offset out of the leader's range", f.attrs("partition", p.tp.String(),
		"fetch_offset", rp.plan.Offset, "leader_start", start, "leader_end", end)...)
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if !f.current(rp) {
		return nil
	}
	p.rep.OutOfRange(start, end)
	f.settleLocked(rp.fl)
	return nil
}

// listOffset is one ListOffsets round trip for rp's partition.
func (f *replicaFetcher) listOffset(rp roundPart, ts int64) (batch.Offset, wire.ErrorCode, error) {
	tp := rp.fl.p.tp
	req := wire.ListOffsetsRequest{ReplicaID: f.rf.cfg.self, Topics: []wire.ListOffsetsRequestTopic{{Topic: tp.topic,
		Partitions: []wire.ListOffsetsRequestPartition{{Partition: tp.partition, CurrentLeaderEpoch: rp.plan.LeaderEpoch, Timestamp: ts}}}}}
	var resp wire.ListOffsetsResponse
	if err := f.conn.roundTrip(&req, &resp, f.rf.cfg.timeoutMargin); err != nil {
		return 0, wire.NoError, err
	}
	for _, t := range resp.Topics {
		for _, r := range t.Partitions {
			if t.Topic == tp.topic && r.Partition == tp.partition {
				return batch.Offset(r.Offset), r.ErrorCode, nil
			}
		}
	}
	return 0, wire.ErrUnknownTopicOrPartition, nil
}
