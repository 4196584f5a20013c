package broker

// Behavior: Fetch.
//
// Only the partition's leader answers (leadership.go): a CurrentLeaderEpoch older than the
// partition's gets FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, a replica that is not
// the leader NOT_LEADER_OR_FOLLOWER naming the leader (KIP-951), a partition without a leader
// LEADER_NOT_AVAILABLE; a leader change wakes the fetches parked on the partition, so that one
// that lost its leader answers at once. A fetch with a ReplicaID (≥ 0) is a follower's: from a
// broker that is not one of the partition's replicas it gets NOT_LEADER_OR_FOLLOWER and changes
// nothing; otherwise each partition's fetch offset (the follower's log end), DurableOffset (v2:
// its fsynced end) and log start are reported to the partition's replica once, as the request
// arrives, which moves the high watermark and releases acks=all produce waits (replica.go).
// Consumers read each partition from the fetch offset up to the high watermark, followers up to
// the log end; every partition's answer carries the high watermark. Each reads at most
// partitionMaxBytes, and the response at most maxBytes in all; as Kafka (KIP-74) the first batch of the first partition with data is
// returned whole even when it is larger, so a consumer always makes progress. A read may end in a
// partial batch, which clients drop. The records are not copied: the response is the encoded
// prefixes with each partition's bytes sent from its segment file by sendfile, and the segments
// stay referenced until the response is written, the same path for consumers and followers. If
// fewer than minBytes are available (and nothing failed), the fetch parks until an append or a
// high watermark advance on one of its partitions wakes it (followers wait for appends,
// consumers for the high watermark), maxWait passes, the connection closes or the broker shuts
// down, and then answers with whatever is there. No
// partition lock is held across any of this: a slow fetch never blocks a produce.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// defaultFetchMaxBytes is Kafka's fetch.max.bytes, used when a request says 0 or less.
const defaultFetchMaxBytes = 50 << 20

// A fetch is one Fetch request's state from decode to the response's write. fetches are pooled:
// at a few thousand fetches a second (a consumer or follower at the log's tail), a dozen
// allocations each were most of what the broker gave the garbage collector. A fetch is shared by
// two holders, counted in refs: the request's handling (the handler, or the parked goroutine it
// hands over to) and the response (its OnDone hook, once the response is written or dropped);
// the last to let go returns it to the pool. Outside the pool each field has one owner at a time:
// the handling until the response completes, then the hook.
type fetch struct {
	b      *Broker
	h      wire.RequestHeader
	req    wire.FetchSharedRequest // a Fetch request is its FetchRequest alone
	shared bool                    // a FetchShared request: answer with spans where it can
	spans  []wire.FileSpan
	pend   *server.Pending
	resp   wire.FetchResponse
	slices []segment.Slice
	lens   []int32
	cuts   []int
	// A parked fetch's wake-up: park registers wake with each partition in parked; an append
	// signals it. timer bounds the wait by the request's maxWait.
	wake   chan struct{}
	parked []*partition
	timer  *time.Timer
	refs   atomic.Int32
	onDone func() // f.responseDone, bound once
	// Fetch sessions (fetchsession.go): the session the fetch answers through (nil: none),
	// and whether its response lists only the partitions with news.
	session     *fetchSession
	incremental bool
}

var fetchPool = sync.Pool{New: func() any { return &fetch{wake: make(chan struct{}, 1)} }}

// maxPooledFetchPartitions bounds what a pooled fetch keeps (capacities of its request's and
// response's topic and partition slices together, and of its segment slices), so that requests
// naming thousands of partitions do not pin their decoded form in the pool; a fetch past it is
// left to the collector. A consumer's or follower's usual request is far below it.
const maxPooledFetchPartitions = 4096

// sharedSpanMin is the smallest read FetchShared answers with a span: below it the bytes go
// inline, as they cost less than the client's open, fstat, pread and close of the file.
const sharedSpanMin = 64 << 10

func (b *Broker) handleFetch(ctx context.Context, c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	f := fetchPool.Get().(*fetch)
	f.shared = h.APIKey == wire.FetchShared
	// The request's layout is its version's (Fetch v2 adds sessions and durable offsets; a
	// FetchShared request's is FetchShared's, whose v0 and v1 bodies are Fetch's).
	f.req.Version = h.APIVersion
	var err error
	if f.shared {
		err = f.req.ReadFrom(body)
	} else {
		err = f.req.FetchRequest.ReadFrom(body)
		f.req.SpanMaxBytes = 0
	}
	if err != nil {
		f.recycle()
		return b.malformed(c, h, err)
	}
	if f.shared && c.Transport() != "unix" {
		f.recycle()
		return respond(c, h, &wire.FetchSharedResponse{FetchResponse: wire.FetchResponse{Version: h.APIVersion, ErrorCode: wire.ErrInvalidRequest}})
	}
	// Fetch sessions (fetchsession.go): an incremental fetch reads its whole session.
	incremental := f.req.SessionID != 0 && f.req.SessionEpoch > 0
	if f.session, err = b.sessions.begin(&f.req.FetchRequest); err != nil {
		f.recycle()
		return respond(c, h, &wire.FetchResponse{Version: h.APIVersion, ErrorCode: errorCode(err)})
	}
	f.incremental = incremental
	if f.onDone == nil { // new from the pool (binding it in New would make an initialization cycle)
		f.onDone = f.responseDone
	}
	f.b, f.h, f.pend = b, h, c.NewPending()
	// f.req holds copies of all it needs of body: the frame, and its share of
	// queued.max.request.bytes, need not wait with a parked fetch for up to its maxWait.
	f.pend.RequestDone()
	f.refs.Store(2) // this handling and the response
	pend := f.pend  // read now: once the response is written f may be someone else's
	req := &f.req.FetchRequest
	if req.ReplicaID >= 0 {
		f.followerFetched()
	}
	if f.try(req.MaxWaitMs <= 0) {
		f.unref()
		return pend
	}
	for _, t := range req.Topics {
		for _, rp := range t.Partitions {
			if p := b.partition(t.Topic, rp.Partition); p != nil {
				p.park(f.wake)
				f.parked = append(f.parked, p)
			}
		}
	}
	// Re-check after parking: an append between the first try and park would not wake us.
	if f.try(false) {
		f.unpark()
		return pend
	}
	b.wg.Add(1)
	go f.wait(ctx) // takes over this handling's reference
	return pend
}

// wait is a parked fetch's goroutine: it answers at the first wake-up that finds minBytes, or
// when maxWait passes, the connection closes or the broker shuts down.
func (f *fetch) wait(ctx context.Context) {
	b := f.b
	defer b.wg.Done()
	defer f.unpark()
	d := time.Duration(f.req.MaxWaitMs) * time.Millisecond
	if f.timer == nil {
		f.timer = time.NewTimer(d)
	} else {
		f.timer.Reset(d) // stopped when it last served: Go 1.23 timers keep no stale value
	}
	defer f.timer.Stop()
	for {
		select {
		case <-f.wake:
			if f.try(false) {
				return
			}
		case <-f.timer.C:
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
}

// unpark withdraws the fetch from its partitions' waiters and drops the handling's reference.
// After the withdrawal no append signals wake (park, unpark and the signal share the
// partition's waitMu); a signal already sent is drained when the fetch is reused.
func (f *fetch) unpark() {
	for _, p := range f.parked {
		p.unpark(f.wake)
	}
	f.unref()
}

// responseDone is the response's OnDone hook: the segments the response read can go.
func (f *fetch) responseDone() {
	f.release()
	f.unref()
}

// unref drops one holder's reference; the last returns f to the pool.
func (f *fetch) unref() {
	if f.refs.Add(-1) == 0 {
		f.recycle()
	}
}

// recycle clears what f refers to and puts it back in the pool, unless it grew too large to
// keep. Its holders are gone.
func (f *fetch) recycle() {
	select {
	case <-f.wake:
	default:
	}
	clear(f.slices)
	clear(f.parked)
	clear(f.spans) // their paths
	f.spans = f.spans[:0]
	f.b, f.pend, f.session = nil, nil, nil
	f.slices, f.lens, f.cuts, f.parked = f.slices[:0], f.lens[:0], f.cuts[:0], f.parked[:0]
	if cap(f.slices) > maxPooledFetchPartitions || keptPartitions(f) > maxPooledFetchPartitions {
		return
	}
	fetchPool.Put(f)
}

// keptPartitions is the capacity f's request and response keep, in topics and partitions. Both
// are counted: the request's decode replaces a slice that must grow, while the response's
// resizeKeep keeps the old elements, so they can differ.
func keptPartitions(f *fetch) int {
	n := cap(f.req.Topics) + cap(f.resp.Topics) + cap(f.spans)
	for _, t := range f.req.Topics[:cap(f.req.Topics)] {
		n += cap(t.Partitions)
	}
	for _, t := range f.resp.Topics[:cap(f.resp.Topics)] {
		n += cap(t.Partitions)
	}
	return n
}

// try reads every partition; it answers (and reports true) when final is set, minBytes are
// available, or a partition has an error. Otherwise it releases what it read.
func (f *fetch) try(final bool) bool {
	req := &f.req.FetchRequest
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = defaultFetchMaxBytes
	}
	// The response's slices keep their capacity from request to request (a pooled fetch).
	f.resp = wire.FetchResponse{Version: f.h.APIVersion, Topics: resizeKeep(f.resp.Topics, len(req.Topics))}
	f.slices, f.lens, f.spans = f.slices[:0], f.lens[:0], f.spans[:0]
	total, spanned, failed, first := 0, 0, false, true
	self := f.b.cfg.NodeID
	follower := req.ReplicaID >= 0
	var hinted []int32 // the leaders named in refusals, for the response's endpoints
	for i, rt := range req.Topics {
		out := &f.resp.Topics[i]
		out.Topic, out.Partitions = rt.Topic, resizeKeep(out.Partitions, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			res := &out.Partitions[j]
			*res = wire.FetchResponsePartition{Partition: rp.Partition, CurrentLeader: wire.NoLeaderHint}
			res.HighWatermark, res.LastStableOffset, res.LogStartOffset = -1, -1, -1
			p := f.b.partition(rt.Topic, rp.Partition)
			if p == nil || !p.servesAt(self, rp.CurrentLeaderEpoch) {
				hint, err := f.b.refuse(rt.Topic, rp.Partition, p, rp.CurrentLeaderEpoch)
				res.ErrorCode, failed = errorCode(err), true
				hinted = setFetchHint(res, hint, hinted)
				f.addSlice(segment.Slice{}, -1)
				continue
			}
			if follower && !p.isReplica(req.ReplicaID, self) {
				res.ErrorCode, failed = wire.ErrNotLeaderOrFollower, true
				f.addSlice(segment.Slice{}, -1)
				continue
			}
			// One log for the partition's whole answer (the supervisor may swap a stopped one).
			// The start first: retention can move it up to the log end between the two reads,
			// and a response must never say start > high watermark.
			l := p.log()
			start := l.StartOffset()
			if hooks := f.b.hooks.Load(); hooks != nil && hooks.fetchBounds != nil {
				hooks.fetchBounds()
			}
			hw := p.highWatermark()
			res.HighWatermark, res.LastStableOffset, res.LogStartOffset = int64(hw), int64(hw), int64(start)
			upTo := hw // consumers read what is committed, followers up to the log end
			if follower {
				upTo = l.EndOffset()
			}
			limit := min(int(rp.PartitionMaxBytes), maxBytes-total)
			if limit <= 0 && first {
				limit = 1 // KIP-74: the first batch comes back whole whatever the limits
			}
			throttled := follower && throttledReplica(p, req.ReplicaID) && f.b.leaderQuota.limit() > 0
			if throttled && !f.b.leaderQuota.blockedUntil(time.Now()).IsZero() {
				limit = 0 // a replica a move is adding, and the leader quota is spent (throttle.go)
			}
			var s segment.Slice
			var err error
			if f.shared && f.req.SpanMaxBytes > 0 {
				s, err = l.Read(batch.Offset(rp.FetchOffset), int(f.req.SpanMaxBytes), upTo)
				if err == nil && s.Len >= sharedSpanMin {
					if id, ok := s.FileID(); ok {
						f.spans = append(f.spans, wire.FileSpan{Index: int32(len(f.lens)), Path: id.Path, Dev: id.Dev, Ino: id.Ino, Pos: s.Pos, Len: int32(s.Len)})
						spanned += s.Len
						first = false
						s.Release() // the client reads the file by its path
						f.addSlice(segment.Slice{}, 0)
						continue
					}
				}
				if err == nil && s.Len > limit {
					s.Release() // too much to send inline: read again within the inline limits
					s = segment.Slice{}
				}
			}
			if limit <= 0 {
				s.Release()
				f.addSlice(segment.Slice{}, 0)
				continue
			}
			if s.File == nil && err == nil {
				s, err = l.Read(batch.Offset(rp.FetchOffset), limit, upTo)
			}
			if err != nil {
				res.ErrorCode, failed = errorCode(err), true
				f.addSlice(segment.Slice{}, -1)
				continue
			}
			if s.Len > 0 {
				first = false
			}
			if throttled {
				f.b.leaderQuota.take(s.Len, time.Now())
			}
			total += s.Len
			f.addSlice(s, int32(s.Len))
		}
	}
	if !final && !failed && total+spanned < int(max(req.MinBytes, 1)) {
		f.release()
		return false
	}
	f.lens, f.slices = f.b.sessions.answer(f.session, f.incremental, &f.resp, f.lens, f.slices) // fetch sessions (fetchsession.go)
	f.b.setFetchEndpoints(&f.resp, hinted)
	var buf []byte
	var cuts []int
	var err error
	if f.shared {
		buf, cuts, err = wire.AppendFetchSharedResponseFrame(f.pend.Buf[:0], f.h.CorrelationID, &f.resp, f.lens, f.cuts[:0], f.spans)
	} else {
		buf, cuts, err = wire.AppendFetchResponseFrame(f.pend.Buf[:0], f.h.CorrelationID, &f.resp, f.lens, f.cuts[:0])
	}
	if err != nil { // cannot happen: lens has one entry per partition
		f.release()
		f.b.logger.Error("encoding fetch response", "err", err)
		f.resp = wire.FetchResponse{Version: f.h.APIVersion, ErrorCode: wire.ErrUnknownServerError}
		complete(f.pend, f.h, &f.resp)
		f.unref() // the response's reference: it has no hook
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
	f.pend.OnDone(f.onDone)
	f.pend.Complete() // from here the hook owns f.slices; the handling touches nothing of f's but its parking
	return true
}

// followerFetched reports a follower's fetch to the replicas of the partitions it names, once
// per request, as it arrives (not at each wake-up of a parked fetch): its fetch offset is its
// log end and its DurableOffset (v2; unknown before) its fsynced end, which is what moves the
// high watermark and releases acks=all waits. A partition this broker does not lead at the
// request's epoch, or of which the fetching broker is not a replica, is left alone: try refuses
// it.
func (f *fetch) followerFetched() {
	req := &f.req.FetchRequest
	self := f.b.cfg.NodeID
	now := time.Now()
	for _, t := range req.Topics {
		for _, rp := range t.Partitions {
			p := f.b.partition(t.Topic, rp.Partition)
			if p == nil || !p.servesAt(self, rp.CurrentLeaderEpoch) || !p.isReplica(req.ReplicaID, self) {
				continue
			}
			p.repMu.Lock() // DurableOffset is -1 (unknown) before v2: the decoder's
			p.rep.FollowerFetched(replication.FollowerFetch{ReplicaID: req.ReplicaID, FetchOffset: batch.Offset(rp.FetchOffset),
				DurableOffset: batch.Offset(rp.DurableOffset), LogStartOffset: batch.Offset(rp.LogStartOffset)}, now)
			f.b.applyReady(p, p.rep.Ready())
			p.repMu.Unlock()
		}
	}
}

// isReplica reports whether broker id is one of p's replicas other than this one (a fetch with
// this broker's own id is no follower's).
func (p *partition) isReplica(id, self int32) bool {
	rs := p.replicas.Load()
	return id != self && rs != nil && containsID(*rs, id)
}

// resizeKeep returns s with length n, keeping its capacity and the elements' own slices when
// it is large enough.
func resizeKeep[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return append(s[:cap(s)], make([]T, n-cap(s))...)
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
