package broker

// Behavior: Produce.
//
// Only the partition's leader takes its batches (leadership.go): a replica that is not the leader
// answers NOT_LEADER_OR_FOLLOWER naming the leader, its epoch and endpoint (KIP-951), and a
// partition without a leader LEADER_NOT_AVAILABLE; nothing is appended. The check is one atomic
// load per partition. Each partition's batches are checked against max.message.bytes (per batch, as
// Kafka), then validated and appended by the partition's log with one write (segment.Log.Append:
// CRC, magic, lastOffsetDelta consistent with the record count; nothing is appended if any batch is
// bad). Appends happen in request order, one request at a time per connection (on its reader
// goroutine, or for a request of 64 KiB or more on its overlap goroutine while the reader reads the
// next: server.Config.OverlapBytes), so a pipelined producer's batches land in the order sent.
// acks=0 gets no response; acks=1 is answered after the leader's append. acks=-1 is refused with
// NOT_ENOUGH_REPLICAS (nothing appended) while the partition's committed ISR is smaller than
// min.insync.replicas (one atomic load: the replica's AcceptsAcksAll, published by applyReady);
// otherwise it parks in the partition's replica (the delayed-produce purgatory) until the high
// watermark passes the batch, woken by follower fetches and the leader's own fsync, and is
// answered then, or with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrinks below the minimum
// first, NOT_LEADER_OR_FOLLOWER if this broker stops leading the partition, KAFKA_STORAGE_ERROR if
// the log stops, or REQUEST_TIMED_OUT at the request's timeout. Every append is reported to the
// replica (its new log end), and on a write.caching=false topic every append (whatever its acks)
// asks the group-commit flusher for the fsync that lets the leader's own offset count toward the
// high watermark: consumers see a record once it is fsynced on every ISR member. With
// write.caching=true the log ends count, as Kafka with its page cache. A topic with message.timestamp.type=LogAppendTime gets the broker's
// clock stamped on each batch; on a CreateTime topic a batch whose max timestamp is more than
// message.timestamp.after.max.ms ahead of the broker's clock, or whose first timestamp is more than
// message.timestamp.before.max.ms behind it, gets INVALID_TIMESTAMP (Kafka checks every record; the
// header's two timestamps are what the broker indexes and retains by, and need no decompression).
//
// Idempotence: the log checks each idempotent batch against its producer state as it appends
// (segment.Log.Append, producerstate). A retry of a batch it has is answered with the offset it
// got the first time, and with acks=-1 waits, as the first copy did, for the high watermark to
// pass it: a retry never returns before the original would have. Refusals map to Kafka's codes
// (errors.go): OUT_OF_ORDER_SEQUENCE_NUMBER, DUPLICATE_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
// UNKNOWN_PRODUCER_ID, INVALID_RECORD; nothing is appended.

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

var produceRequests = sync.Pool{New: func() any { return new(wire.ProduceRequest) }}

// produceResponses holds responses, with their topic and partition arrays, for produce
// requests answered at once (acks=1, acks=0): encoded before handleProduce returns, they are
// free again right after. An acks=all response waits for fsyncs and is not reused.
var produceResponses = sync.Pool{New: func() any { return new(wire.ProduceResponse) }}

func (b *Broker) handleProduce(c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	req := produceRequests.Get().(*wire.ProduceRequest)
	defer produceRequests.Put(req)
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	resp := produceResponses.Get().(*wire.ProduceResponse)
	resp.Version, resp.ThrottleMs, resp.NodeEndpoints = h.APIVersion, 0, resp.NodeEndpoints[:0]
	resp.Topics = slices.Grow(resp.Topics[:0], len(req.Topics))[:len(req.Topics)]
	validAcks := req.Acks == wire.AcksNone || req.Acks == wire.AcksLeader || req.Acks == wire.AcksAll
	// An acks=all partition's wait for durability is on the log that took the append: should
	// that log stop and another be swapped in (heal.go), the wait fails with the stopped log
	// instead of being counted against the new one, whose offsets past its recovered end are
	// other records.
	var waits []ackWait
	self := b.cfg.NodeID
	var hinted []int32 // the leaders named in refusals, for the response's endpoints
	for i := range req.Topics {
		rt := &req.Topics[i]
		out := &resp.Topics[i]
		out.Topic = rt.Topic
		out.Partitions = slices.Grow(out.Partitions[:0], len(rt.Partitions))[:len(rt.Partitions)]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			res := &out.Partitions[j]
			*res = wire.ProduceResponsePartition{Partition: rp.Partition, BaseOffset: -1, LogAppendTimeMs: -1, LogStartOffset: -1, CurrentLeader: wire.NoLeaderHint}
			if !validAcks {
				res.ErrorCode = wire.ErrInvalidRequiredAcks
				continue
			}
			p := b.partition(rt.Topic, rp.Partition)
			if p == nil || !p.servesAt(self, -1) {
				hint, err := b.refuse(rt.Topic, rp.Partition, p, -1)
				res.ErrorCode = errorCode(err)
				hinted = setProduceHint(res, hint, hinted)
				continue
			}
			epoch := p.leaderEpoch() // what the append stamps, and the leadership its wait is for
			if req.Acks == wire.AcksAll && !p.acksAll.Load() {
				// Kafka's rule, checked before the append: nothing is written that acks=all
				// could not promise (min.insync.replicas above a topic's replica count, or an
				// ISR that shrank).
				res.ErrorCode = wire.ErrNotEnoughReplicas
				res.LogStartOffset = int64(p.log().StartOffset())
				continue
			}
			l := p.log()
			if err := b.disk.admit(); err != nil { // the disk is full: retriable, resumes by itself
				res.ErrorCode = errorCode(err)
				msg := err.Error()
				res.ErrorMessage = &msg
				res.LogStartOffset = int64(l.StartOffset())
				continue
			}
			info, appendTime, err := b.appendRecords(p, l, rp.Records, epoch)
			res.LogStartOffset = int64(l.StartOffset())
			b.disk.appended(int64(len(rp.Records)))
			if err != nil {
				res.ErrorCode = errorCode(err)
				msg := err.Error()
				res.ErrorMessage = &msg
				continue
			}
			res.BaseOffset, res.LogAppendTimeMs = int64(info.FirstOffset), appendTime
			if info.Duplicate {
				// A retry of a batch the log has (producerstate): the offset it got the first
				// time, and for acks=all the same wait its first copy had, for the high
				// watermark to pass it; nothing was appended, nothing to report or sync.
				res.LogAppendTimeMs = -1
			} else {
				b.replicaAppended(p, l)
				if !p.cfg.Load().WriteCaching {
					l.OnSynced(info.LastOffset, p.syncedFn) // the leader's offset counts once fsynced
				}
			}
			if req.Acks == wire.AcksAll {
				waits = append(waits, ackWait{p: p, log: l, last: info.LastOffset, epoch: epoch, out: res})
			}
		}
	}
	b.setProduceEndpoints(resp, hinted)
	if req.Acks == wire.AcksNone {
		produceResponses.Put(resp)
		return nil
	}
	if len(waits) == 0 {
		p := respond(c, h, resp) // encodes resp
		produceResponses.Put(resp)
		return p
	}
	// acks=all: answer when the high watermark has passed every partition's batch, or refuse a
	// partition whose wait ends otherwise first. The waits are released under their partition's
	// repMu (applyReady), by follower fetches, the flusher's callbacks, the ticker and the
	// reconciler; the last wait answered completes the response.
	pend := c.NewPending()
	ar := &ackRequest{}
	ar.left.Store(int32(len(waits)))
	ar.finish = func() {
		ar.once.Do(func() { complete(pend, h, resp) })
	}
	for i := range waits {
		w := &waits[i]
		w.req = ar
		if !b.addAck(w) {
			w.resolve(fmt.Errorf("%w: %s: leadership changed after the append", ErrNotLeaderOrFollower, w.p.tp))
		}
	}
	// The timeout starts once every wait is parked (so that none parks after it fired), unless
	// all are answered already; resolve stops it under ar.mu.
	timeout := time.Duration(max(req.TimeoutMs, 0)) * time.Millisecond
	ar.mu.Lock()
	if ar.left.Load() > 0 {
		ar.timer = time.AfterFunc(timeout, func() {
			// Each wait still parked is withdrawn from its replica first (under its repMu,
			// never with ar.mu held: applyReady answers waits under repMu and takes ar.mu),
			// then answered.
			for i := range waits {
				w := &waits[i]
				if w.p.cancelAck(w) {
					w.resolve(fmt.Errorf("%w: %s: acks=all after %v", ErrRequestTimedOut, w.p.tp, timeout))
				}
			}
		})
	}
	ar.mu.Unlock()
	return pend
}

// appendRecords applies the topic's per-batch rules, then appends. It returns the log append
// time stamped on the batches (-1 for CreateTime topics). l is p's log, loaded once by the caller
// so that it waits for durability on the log that took the append; epoch is the leader epoch
// the caller checked leadership at, stamped on the batches.
func (b *Broker) appendRecords(p *partition, l *segment.Log, records []byte, epoch int32) (info appendInfo, appendTime int64, err error) {
	cfg := p.cfg.Load()
	appendTime = -1
	logAppendTime := cfg.TimestampType == "LogAppendTime"
	if logAppendTime {
		appendTime = time.Now().UnixMilli()
	}
	checkAfter := !logAppendTime && cfg.TimestampAfterMax != cluster.Forever
	checkBefore := !logAppendTime && cfg.TimestampBeforeMax != cluster.Forever
	var nowMs int64
	if checkAfter || checkBefore {
		nowMs = time.Now().UnixMilli()
	}
	for rest := records; len(rest) > 0; {
		bt, r, err := batch.Next(rest)
		if err != nil {
			return info, -1, fmt.Errorf("%w: %s: %w", errCorrupt, p.tp, err)
		}
		if int64(len(bt)) > cfg.MaxMessageBytes {
			return info, -1, fmt.Errorf("%w: %s: batch of %d bytes, max.message.bytes %d", ErrMessageTooLarge, p.tp, len(bt), cfg.MaxMessageBytes)
		}
		// A timestamp of -1 is none (Kafka's NO_TIMESTAMP): not checked.
		if ts := bt.MaxTimestamp(); checkAfter && ts >= 0 && ts-nowMs > cfg.TimestampAfterMax.Milliseconds() {
			return info, -1, fmt.Errorf("%w: %s: timestamp %d is %d ms ahead of the broker's clock, message.timestamp.after.max.ms %d",
				ErrInvalidTimestamp, p.tp, ts, ts-nowMs, cfg.TimestampAfterMax.Milliseconds())
		}
		if ts := bt.BaseTimestamp(); checkBefore && ts >= 0 && nowMs-ts > cfg.TimestampBeforeMax.Milliseconds() {
			return info, -1, fmt.Errorf("%w: %s: timestamp %d is %d ms behind the broker's clock, message.timestamp.before.max.ms %d",
				ErrInvalidTimestamp, p.tp, ts, nowMs-ts, cfg.TimestampBeforeMax.Milliseconds())
		}
		if logAppendTime {
			// Stamping recomputes the CRC, so the producer's CRC must be checked first.
			if err := bt.ValidateStrict(); err != nil {
				return info, -1, fmt.Errorf("%w: %s: %w", errCorrupt, p.tp, err)
			}
			bt.SetLogAppendTime(appendTime)
		}
		rest = r
	}
	info, err = l.Append(records, epoch)
	if err != nil {
		return info, -1, fmt.Errorf("append %s: %w", p.tp, err)
	}
	p.wake()
	return info, appendTime, nil
}
