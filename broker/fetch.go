package broker

// Behavior: Fetch.
//
// Each partition is read from its fetch offset up to the high watermark (the log end on a single
// node), at most partitionMaxBytes, and the response at most maxBytes in all; as Kafka (KIP-74)
// the first batch of the first partition with data is returned whole even when it is larger, so
// a consumer always makes progress. A read may end in a partial batch, which clients drop. The
// records are not copied: the response is the encoded prefixes with each partition's bytes sent
// from its segment file by sendfile, and the segments stay referenced until the response is
// written. If fewer than minBytes are available (and nothing failed), the fetch parks until an
// append to one of its partitions wakes it, maxWait passes, the connection closes or the broker
// shuts down, and then answers with whatever is there. No partition lock is held across any of
// this: a slow fetch never blocks a produce.

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// defaultFetchMaxBytes is Kafka's fetch.max.bytes, used when a request says 0 or less.
const defaultFetchMaxBytes = 50 << 20

type fetch struct {
	b      *Broker
	h      wire.RequestHeader
	req    *wire.FetchRequest
	pend   *server.Pending
	resp   wire.FetchResponse
	slices []segment.Slice
	lens   []int32
	cuts   []int
}

func (b *Broker) handleFetch(ctx context.Context, c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	req := new(wire.FetchRequest)
	if err := req.ReadFrom(body); err != nil {
		return b.malformed(c, h, err)
	}
	f := &fetch{b: b, h: h, req: req, pend: c.NewPending()}
	if f.try(req.MaxWaitMs <= 0) {
		return f.pend
	}
	wake := make(chan struct{}, 1)
	var parked []*partition
	for _, t := range req.Topics {
		for _, rp := range t.Partitions {
			if p := b.partition(t.Topic, rp.Partition); p != nil {
				p.park(wake)
				parked = append(parked, p)
			}
		}
	}
	// Re-check after parking: an append between the first try and park would not wake us.
	if f.try(false) {
		for _, p := range parked {
			p.unpark(wake)
		}
		return f.pend
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() {
			for _, p := range parked {
				p.unpark(wake)
			}
		}()
		timer := time.NewTimer(time.Duration(req.MaxWaitMs) * time.Millisecond)
		defer timer.Stop()
		for {
			select {
			case <-wake:
				if f.try(false) {
					return
				}
			case <-timer.C:
				f.try(true)
				return
			case <-ctx.Done():
				f.try(true)
				return
			case <-b.ctx.Done():
				f.try(true)
				return
			}
		}
	}()
	return f.pend
}

// try reads every partition; it answers (and reports true) when final is set, minBytes are
// available, or a partition has an error. Otherwise it releases what it read.
func (f *fetch) try(final bool) bool {
	req := f.req
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = defaultFetchMaxBytes
	}
	f.resp = wire.FetchResponse{Topics: f.resp.Topics[:0]}
	f.slices, f.lens = f.slices[:0], f.lens[:0]
	total, failed, first := 0, false, true
	for _, rt := range req.Topics {
		out := wire.FetchResponseTopic{Topic: rt.Topic, Partitions: make([]wire.FetchResponsePartition, len(rt.Partitions))}
		for j, rp := range rt.Partitions {
			res := &out.Partitions[j]
			res.Partition = rp.Partition
			res.HighWatermark, res.LastStableOffset, res.LogStartOffset = -1, -1, -1
			p := f.b.partition(rt.Topic, rp.Partition)
			if p == nil {
				res.ErrorCode, failed = wire.ErrUnknownTopicOrPartition, true
				f.addSlice(segment.Slice{}, -1)
				continue
			}
			hw := p.log.EndOffset()
			res.HighWatermark, res.LastStableOffset, res.LogStartOffset = int64(hw), int64(hw), int64(p.log.StartOffset())
			limit := min(int(rp.PartitionMaxBytes), maxBytes-total)
			if limit <= 0 && first {
				limit = 1 // KIP-74: the first batch comes back whole whatever the limits
			}
			if limit <= 0 {
				f.addSlice(segment.Slice{}, 0)
				continue
			}
			s, err := p.log.Read(batch.Offset(rp.FetchOffset), limit, hw)
			if err != nil {
				res.ErrorCode, failed = errorCode(err), true
				f.addSlice(segment.Slice{}, -1)
				continue
			}
			if s.Len > 0 {
				first = false
			}
			total += s.Len
			f.addSlice(s, int32(s.Len))
		}
		f.resp.Topics = append(f.resp.Topics, out)
	}
	if !final && !failed && total < int(max(req.MinBytes, 1)) {
		f.release()
		return false
	}
	buf, cuts, err := wire.AppendFetchResponseFrame(f.pend.Buf[:0], f.h.CorrelationID, &f.resp, f.lens, f.cuts[:0])
	if err != nil { // cannot happen: lens has one entry per partition
		f.release()
		f.b.logger.Error("encoding fetch response", "err", err)
		f.resp = wire.FetchResponse{ErrorCode: wire.ErrUnknownServerError}
		complete(f.pend, f.h, &f.resp)
		return true
	}
	f.pend.Buf, f.cuts = buf, cuts
	prev := 0
	for i, s := range f.slices {
		f.pend.AppendBytes(buf[prev:cuts[i]])
		f.pend.AppendFile(s.File, s.Pos, s.Len)
		prev = cuts[i]
	}
	f.pend.AppendBytes(buf[prev:])
	slices := f.slices
	f.pend.OnDone(func() {
		for i := range slices {
			slices[i].Release()
		}
	})
	f.pend.Complete()
	return true
}

func (f *fetch) addSlice(s segment.Slice, n int32) {
	f.slices = append(f.slices, s)
	f.lens = append(f.lens, n)
}

func (f *fetch) release() {
	for i := range f.slices {
		f.slices[i].Release()
	}
}
