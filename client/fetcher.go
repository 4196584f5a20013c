package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// chunk is one partition's share of a fetch response, queued for Poll undecoded. A chunk with
// reset set or with err and no records carries a partition error instead, queued so that Poll
// meets it after the records fetched before it.
type chunk struct {
	tp          TopicPartition
	epoch       uint64 // the partition's epoch when the fetch was sent
	fetchOffset int64  // records below it are skipped; Poll moves it past each record it returns
	nextOffset  int64  // the offset after the whole batches (the largest batch end)
	count       int    // records the batches claim (for sizing Poll's slice)
	records     []byte // whole batches, aliasing the response frame
	err         error  // after the records: a corrupt batch; alone: the partition failed
	reset       bool   // OFFSET_OUT_OF_RANGE: apply auto.offset.reset when Poll gets here
	// validated is how many bytes at the start of records lie in batches already checked with
	// batch.Validate, by the goroutine that read them from a file (readSpan, when Poll was
	// behind): Poll does not check them again.
	validated int
	// With reset: the log's range as the broker answered, for the error of auto.offset.reset none.
	logStart, highWatermark int64
	// buf is the reused response buffer records aliases (ReuseRecordBuffers), else nil.
	buf *fetchBuf

	// Decoding state, owned by Poll.
	rest       []byte
	it         batch.RecordIter
	inBatch    bool
	batchEpoch int32
	dec        *batch.Decompressor // the current batch's (ReuseRecordBuffers), else nil
}

// fetchPart is one partition in a fetcher's outstanding request.
type fetchPart struct {
	tp          TopicPartition
	epoch       uint64
	offset      int64
	leaderEpoch int32 // partState.currentLeaderEpoch when sent
}

// fetcher keeps one Fetch in flight to one broker for the partitions it leads.
type fetcher struct {
	c      *Consumer
	broker int32
	wake   chan struct{} // capacity 1: work may be available

	// cancel aborts the outstanding request (a seek made it useless): cancelRequest while a
	// request is out, else nil. Guarded by Consumer.mu.
	cancel context.CancelFunc
	// reqCtx is the context of the requests on conn, one per connection rather than one per
	// request (a context with a deadline per fetch was a third of what a consumer at the tail
	// allocated): reqCancel ends it, with a seek (cancelRequest) or with errFetchTimeout when
	// reqTimer fires, and a request it ends also ends the connection (call). Set by prepare
	// and cleared by endRequestsLocked, both under Consumer.mu; read by the fetcher goroutine
	// and, under Consumer.mu, by cancelRequest.
	reqCtx    context.Context
	reqCancel context.CancelCauseFunc
	// reqTimer bounds each request on conn (request.timeout.ms plus fetch.max.wait.ms): armed
	// before the call and stopped after it. Owned by the fetcher goroutine (and stopped by
	// endRequestsLocked).
	reqTimer *time.Timer
	// cancelRequest, bound once.
	cancelRequestFn func()
	// respCh receives the responses of ReuseRecordBuffers fetches (Conn.callInto), reused from
	// call to call and replaced after a failed one. Owned by the fetcher goroutine.
	respCh chan []byte
	// free are idle response buffers (ReuseRecordBuffers); maxParts is the most partitions a
	// request of this fetcher has carried, which sizes how many are kept (idleBufs). Guarded
	// by Consumer.mu.
	free     []*fetchBuf
	maxParts int

	// Owned by the fetcher goroutine.
	failures int   // requests in a row that failed: the retries back off by it
	conn     *Conn // dedicated to fetches; nil until dialled, or after a failure
	rot      int
	sent     []fetchPart
	index    map[TopicPartition]int
	req      wire.FetchSharedRequest  // a Fetch request is its FetchRequest alone
	resp     wire.FetchSharedResponse // a Fetch response is decoded into its FetchResponse
	buf      *fetchBuf                // the outstanding request's response buffer (ReuseRecordBuffers)

	// File reads (filereads.go). shared: whether the connection asks with FetchShared (a unix
	// socket to a broker that knows it, ConsumerConfig.FileReads), set at each dial; owned by
	// the fetcher goroutine. Atomics: fileReadsOff, this fetcher stopped asking for good (the
	// files cannot be opened, or the broker refused); pausedUntil (unix ns), it asks with Fetch
	// until then, after spans kept failing; spanFailures, spans in a row that could not be
	// opened or read.
	shared       bool
	fileReadsOff atomic.Bool
	pausedUntil  atomic.Int64
	spanFailures atomic.Int32
	// spanSeen marks, per partition of the request, that openSpans met its first entry.
	spanSeen []bool
	// spans are the partitions whose records are read from the broker's files, not fetched,
	// and spanBufs the idle buffers kept for their pieces. Guarded by Consumer.mu.
	spans    map[TopicPartition]*fileSpan
	spanBufs int
}

// ensureFetcherLocked starts the fetcher for broker id if it is not running.
func (c *Consumer) ensureFetcherLocked(id int32) *fetcher {
	if f := c.mu.fetchers[id]; f != nil || c.mu.closed {
		return f
	}
	f := &fetcher{c: c, broker: id, wake: make(chan struct{}, 1), index: map[TopicPartition]int{}, spans: map[TopicPartition]*fileSpan{}}
	f.cancelRequestFn = f.cancelRequest
	c.mu.fetchers[id] = f
	c.wg.Add(1)
	go f.run()
	return f
}

// wakeFetcherLocked tells ps's fetcher that ps may be fetchable.
func (c *Consumer) wakeFetcherLocked(ps *partState) {
	if ps.leader < 0 {
		return
	}
	if f := c.mu.fetchers[ps.leader]; f != nil {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// cancelFetchLocked aborts the request ps is in (closing the fetcher's connection), so that
// the fetcher resends at once instead of waiting out a long poll at the old position.
func (c *Consumer) cancelFetchLocked(ps *partState) {
	if !ps.inflight || ps.spanRead || ps.leader < 0 {
		return // a file read in progress is dropped when it ends (readSpan)
	}
	if f := c.mu.fetchers[ps.leader]; f != nil && f.cancel != nil {
		f.cancel()
	}
}

func (f *fetcher) run() {
	c := f.c
	defer c.wg.Done()
	defer func() {
		if f.conn != nil {
			_ = f.conn.Close()
		}
		f.closeSpans()
	}()
	for {
		if f.readSpan(false) {
			continue
		}
		reqCtx, n := f.prepare()
		if n == 0 {
			select {
			case <-f.wake:
				continue
			case <-c.ctx.Done():
				return
			}
		}
		err := f.timedCall(reqCtx)
		switch {
		case c.ctx.Err() != nil:
			f.release(false)
			return
		case err == nil:
			c.fetches.Add(1)
			if retry := f.handle(); !retry {
				f.failures = 0
				break
			}
			f.failures++ // a partition lost its leader: back off as for a failed request
			if f.sleep() != nil {
				return
			}
		case errors.Is(err, context.Canceled):
			f.release(false) // a seek cancelled it: refetch at once
		default:
			// The first failure of a run is a warning; its repeats, while the broker stays
			// away, are debug (with RetryBackoff's exponential growth, a few a second at most).
			level := slog.LevelWarn
			if f.failures > 0 {
				level = slog.LevelDebug
			}
			f.failures++
			c.cfg.Logger.Log(c.ctx, level, "sluice consumer: fetch failed", "broker", f.broker, "err", err, "failures_in_a_row", f.failures)
			f.release(true)
			c.cl.InvalidateMetadata()
			c.signal()
			if f.sleep() != nil {
				return
			}
		}
	}
}

// sleep waits before the next request after f.failures failures in a row.
func (f *fetcher) sleep() error {
	t := time.NewTimer(f.c.cfg.retryDelay(f.failures))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-f.c.ctx.Done():
		return f.c.ctx.Err()
	}
}

// responsesAhead is how many fetched responses of a partition may wait for Poll before the
// partition is fetched no further. One is Kafka's consumer's prefetch; with two the fetcher
// stays a response ahead of Poll's pace as it varies (sluice bench consume, 1 KiB records over
// the unix socket, ten alternated pairs: 2.8-2.9 -> 3.3 GB/s in the median, ahead in all ten;
// over TCP no difference) for one more response of memory per partition.
const responsesAhead = 2

// fetchable reports whether ps may go into a fetch to broker: this broker leads it, its
// position is known, fewer than responsesAhead of its responses wait for Poll and none that
// ends in an error or a reset (stopAhead), and it has not failed. c.mu must be held.
func (ps *partState) fetchable(broker int32) bool {
	limit := responsesAhead
	if ps.spanAhead > 0 {
		limit = ps.spanAhead
	}
	ahead := ps.buffered < limit && !ps.stopAhead
	return ps.leader == broker && ps.hasPos && !ps.needReset && !ps.needCommitted && !ps.inflight && ahead && ps.err == nil
}

// errFetchTimeout is the cause a request's context ends with when its timer fires.
var errFetchTimeout = errors.New("client: fetch timed out")

// timedCall is call bounded by the request timer. It reports a timeout as
// context.DeadlineExceeded (a failure), and a seek's cancellation as context.Canceled.
func (f *fetcher) timedCall(ctx context.Context) error {
	c := f.c
	d := c.cfg.RequestTimeout + c.cfg.FetchMaxWait
	if f.reqTimer == nil {
		cancel := f.reqCancel // this connection's: a late fire must not end the next one's
		f.reqTimer = time.AfterFunc(d, func() { cancel(errFetchTimeout) })
	} else {
		f.reqTimer.Reset(d)
	}
	err := f.call(ctx)
	if !f.reqTimer.Stop() && err == nil {
		// The timer fired as the response arrived: the context is (or is about to be)
		// cancelled, so the next request needs a new one. The connection owes nothing and
		// stays.
		c.mu.Lock()
		f.endRequestsLocked()
		c.mu.Unlock()
	}
	if err != nil && errors.Is(context.Cause(ctx), errFetchTimeout) {
		// The call's own error is context.Canceled: kept as text only, or run would take the
		// timeout for a seek's cancellation and skip the failure handling.
		err = fmt.Errorf("%w after %v (%w; the call: %v)", errFetchTimeout, d, context.DeadlineExceeded, err)
	}
	return err
}

// cancelRequest aborts the request in flight (and its connection). Called with Consumer.mu
// held.
func (f *fetcher) cancelRequest() {
	if f.reqCancel != nil {
		f.reqCancel(context.Canceled)
	}
}

// endRequestsLocked retires the connection's request context and timer: after a failed or
// cancelled request (whose connection call closed), or a timer that fired. c.mu must be held.
func (f *fetcher) endRequestsLocked() {
	if f.reqCancel != nil {
		f.reqCancel(context.Canceled) // frees the context
	}
	if f.reqTimer != nil {
		f.reqTimer.Stop()
	}
	f.reqCtx, f.reqCancel, f.reqTimer = nil, nil, nil
}

// prepare picks the partitions to fetch (fetchable), marks them in flight and builds the
// request.
func (f *fetcher) prepare() (context.Context, int) {
	c := f.c
	c.mu.Lock()
	f.sent = f.sent[:0]
	for _, ps := range c.mu.parts {
		if !ps.fetchable(f.broker) {
			continue
		}
		if sp := f.spans[ps.tp]; sp != nil {
			if f.spanCurrent(sp, ps) {
				continue // read from the broker's file (readSpan)
			}
			f.dropSpan(ps.tp)
		}
		f.sent = append(f.sent, fetchPart{ps.tp, ps.epoch, ps.fetchOffset, ps.currentLeaderEpoch})
	}
	if len(f.sent) == 0 {
		c.mu.Unlock()
		return nil, 0
	}
	for _, p := range f.sent {
		c.mu.parts[p.tp].inflight = true
	}
	if c.bufs != nil {
		f.maxParts = max(f.maxParts, len(f.sent))
		f.buf = f.takeBufLocked(c.responseBufBytes(len(f.sent)))
	}
	// A new context with each new connection, and after a seek cancelled the last request
	// just as its response arrived (the connection is still good then).
	if f.reqCtx == nil || f.conn == nil || f.reqCtx.Err() != nil {
		f.endRequestsLocked()
		f.reqCtx, f.reqCancel = context.WithCancelCause(c.ctx)
	}
	reqCtx := f.reqCtx
	f.cancel = f.cancelRequestFn
	c.mu.Unlock()

	// Sorted, then rotated, so that every partition is sometimes first: the broker returns the
	// first partition's first batch whole whatever the byte limits.
	slices.SortFunc(f.sent, func(a, b fetchPart) int {
		if a.tp.Topic != b.tp.Topic {
			if a.tp.Topic < b.tp.Topic {
				return -1
			}
			return 1
		}
		return int(a.tp.Partition) - int(b.tp.Partition)
	})
	r := f.rot % len(f.sent)
	f.rot++
	rotated := append(f.sent[r:len(f.sent):len(f.sent)], f.sent[:r]...)
	f.sent = append(f.sent[:0], rotated...)

	clear(f.index)
	f.req.FetchRequest = wire.FetchRequest{
		ReplicaID: wire.ConsumerReplicaID,
		MaxWaitMs: int32(c.cfg.FetchMaxWait / time.Millisecond),
		MinBytes:  int32(c.cfg.FetchMinBytes),
		MaxBytes:  int32(c.cfg.FetchMaxBytes),
		Topics:    f.req.Topics[:0],
		// Every fetch is a full one outside any session (Fetch v2, KIP-227): the consumer keeps
		// no session, and epoch 0 would ask the broker to open one.
		SessionEpoch: wire.FinalSessionEpoch,
	}
	// The request long-polls even while other partitions have pieces waiting in the broker's
	// files: Poll reads those itself when nothing is queued (readFiles), and a request that did
	// not wait made a partition at the log's tail beside one catching up wait for the fetcher
	// instead (p50 0.3 s against 0.09 with Fetch).
	f.req.SpanMaxBytes = fileSpanMaxBytes
	for i, p := range f.sent {
		f.index[p.tp] = i
		// A topic split by the rotation is sent as two entries; the broker answers both.
		if n := len(f.req.Topics); n == 0 || f.req.Topics[n-1].Topic != p.tp.Topic {
			if n < cap(f.req.Topics) {
				f.req.Topics = f.req.Topics[:n+1] // reuse the entry and its partitions array
			} else {
				f.req.Topics = append(f.req.Topics, wire.FetchRequestTopic{})
			}
			f.req.Topics[n].Topic = p.tp.Topic
			f.req.Topics[n].Partitions = f.req.Topics[n].Partitions[:0]
		}
		t := &f.req.Topics[len(f.req.Topics)-1]
		t.Partitions = append(t.Partitions, wire.FetchRequestPartition{
			Partition: p.tp.Partition, CurrentLeaderEpoch: p.leaderEpoch, FetchOffset: p.offset,
			LogStartOffset: -1, PartitionMaxBytes: int32(c.cfg.MaxPartitionFetchBytes), DurableOffset: -1,
		})
	}
	return reqCtx, len(f.sent)
}

// call sends the request on the fetcher's own connection. Fetches do not share the client's
// pooled connection: the broker answers a connection's requests in order, so a parked long
// poll would hold up commits and offset lookups queued behind it (Kafka's consumer uses a
// separate coordinator connection for the same reason), and the only way to abort a parked
// fetch after a seek is to close its connection.
func (f *fetcher) call(ctx context.Context) error {
	if f.conn == nil {
		md := f.c.cl.meta.Load()
		b, ok := md.brokers[f.broker]
		if !ok {
			return fmt.Errorf("%w: %d", errUnknownBrokerID, f.broker)
		}
		// A dial gets a deadline of its own: the request context has none (its timer cancels
		// it), and without one the dialer would not share the time among a host's addresses.
		conn, err := dialBounded(ctx, f.c.cl.cfg.Dial, f.c.cl.brokerAddr(b), f.c.cl.cfg.ClientID, f.c.cfg.RequestTimeout)
		if err != nil {
			return err
		}
		f.shared = f.canReadFiles(conn)
		f.conn = conn
	}
	f.resp.FetchResponse = wire.FetchResponse{Topics: f.resp.Topics[:0], NodeEndpoints: f.resp.NodeEndpoints[:0]}
	f.resp.Spans = f.resp.Spans[:0]
	var req wire.Request = &f.req.FetchRequest
	var resp wire.Response = &f.resp.FetchResponse
	key := wire.Fetch
	if f.shared && f.fileReadsOn() {
		req, resp, key = &f.req, &f.resp, wire.FetchShared
	}
	// v1 where the broker speaks it: the answer says who leads a partition this broker does
	// not (KIP-951), and the request and the answer must be in one version.
	f.req.Version = f.conn.Version(key)
	f.resp.Version = f.req.Version
	var err error
	if f.buf != nil {
		// callInto has let go of the buffer when it returns, even on an error. Its channel is
		// reused until a call fails (the connection may still send on or close it then).
		if f.respCh == nil {
			f.respCh = make(chan []byte, 1)
		}
		f.buf.b, err = f.conn.callInto(ctx, req, resp, f.buf.b, f.respCh)
		if err != nil {
			f.respCh = nil
		}
	} else {
		err = f.conn.Call(ctx, req, resp)
	}
	if err == nil && req == wire.Request(&f.req) && f.resp.ErrorCode == wire.ErrInvalidRequest {
		f.stopFileReads("the broker refused FetchShared")
	}
	if err != nil {
		// Cancelled, timed out or broken: a response may still be owed on this connection,
		// and would delay the next one.
		_ = f.conn.Close()
		f.conn = nil
	}
	return err
}

// release clears the in-flight marks of the request's partitions; lost also sends them back
// to a leader lookup (the connection failed or the request timed out).
func (f *fetcher) release(lost bool) {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	f.cancel = nil
	f.endRequestsLocked()
	f.releaseBufLocked()
	for _, p := range f.sent {
		if ps := c.mu.parts[p.tp]; ps != nil && ps.inflight && ps.leader == f.broker {
			ps.inflight = false
			if lost {
				ps.leader = -1
			}
		}
	}
}

// releaseBufLocked gives the outstanding request's buffer back unless chunks alias it.
func (f *fetcher) releaseBufLocked() {
	if fb := f.buf; fb != nil {
		f.buf = nil
		if fb.refs == 0 {
			f.putBufLocked(fb)
		}
	}
}

// handle files the response's partitions: records and partition errors are queued for Poll;
// retriable errors send the partition back to a leader lookup. It reports whether to back off
// before the next request.
func (f *fetcher) handle() (retry bool) {
	c := f.c
	resp := &f.resp.FetchResponse
	files := f.openSpans()
	defer closeUnused(files)
	c.mu.Lock()
	defer c.mu.Unlock()
	f.cancel = nil
	queued, lost := false, false
	part, nextSpan := -1, 0 // the partition's index in the response, and the next span's
	spanned := false
	if resp.ErrorCode != wire.NoError {
		lost = true
		c.cfg.Logger.Warn("sluice consumer: fetch failed", "broker", f.broker, "err", resp.ErrorCode)
	}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			tp := TopicPartition{t.Topic, p.Partition}
			part++
			var file *os.File
			span := nextSpan < len(f.resp.Spans) && f.resp.Spans[nextSpan].Index == int32(part)
			if span {
				file = files[nextSpan]
				nextSpan++
			}
			i, ok := f.index[tp]
			if !ok {
				continue
			}
			sent := f.sent[i]
			ps := c.mu.parts[tp]
			if ps == nil || ps.epoch != sent.epoch || !ps.inflight {
				continue // unassigned or moved while the fetch was out; release clears the mark
			}
			ps.inflight = false
			if span && p.ErrorCode == wire.NoError {
				if file != nil {
					// Its records are read from the file (readSpan), not fetched.
					sp := &f.resp.Spans[nextSpan-1]
					f.dropSpan(tp) // none is expected: prepare dropped it or left tp out
					f.spans[tp] = &fileSpan{file: file, src: wire.FileSpan{Path: sp.Path, Dev: sp.Dev, Ino: sp.Ino}, pos: sp.Pos, end: sp.Pos + int64(sp.Len), epoch: sent.epoch, offset: sent.offset}
					files[nextSpan-1] = nil
					ps.spanAhead = f.spanAheadLocked()
					spanned = true
				}
				continue // a file that could not be opened: fetched again
			}
			ch := c.newChunkLocked()
			ch.tp, ch.epoch, ch.fetchOffset = tp, sent.epoch, sent.offset
			switch code := p.ErrorCode; {
			case code == wire.NoError:
				whole, next, count, err := wholeBatches(p.Records)
				if err == nil && len(whole) == 0 {
					c.freeChunkLocked(ch)
					continue // nothing new (long poll expired) or only a partial batch
				}
				// Whole batches that all lie below the fetch offset go to Poll too: a broker
				// does not send them, and one whose header says so may be damaged, which only
				// Poll's check can tell (a sound one is skipped there).
				if err != nil {
					err = fmt.Errorf("client: fetch %s: %w", tp, err)
				}
				ch.records, ch.rest, ch.nextOffset, ch.count, ch.err = whole, whole, next, count, err
				if f.buf != nil && len(whole) > 0 {
					ch.buf = f.buf
					f.buf.refs++
				}
				if next > ps.fetchOffset {
					ps.fetchOffset = next
				}
			case code == wire.ErrOffsetOutOfRange:
				ch.reset, ch.logStart, ch.highWatermark = true, p.LogStartOffset, p.HighWatermark
				c.cfg.Logger.Info("sluice consumer: offset out of range", "partition", tp.String(), "offset", sent.offset,
					"log_start", p.LogStartOffset, "high_watermark", p.HighWatermark, "auto.offset.reset", c.cfg.AutoOffsetReset)
			case code == wire.ErrCorruptMessage:
				// The broker refuses to serve a batch it found bad on its disk (its scrub):
				// asking again, here or elsewhere, finds the same bytes. As Kafka's consumer,
				// the partition fails at that offset.
				ch.err = fmt.Errorf("client: fetch %s at offset %d: %w", tp, sent.offset, code)
			case code.Retriable():
				c.freeChunkLocked(ch)
				c.cfg.Logger.Debug("sluice consumer: fetch partition", "partition", tp.String(), "err", code)
				if hintCarrying(code) && f.followHintLocked(ps, sent, p.CurrentLeader, resp.NodeEndpoints) {
					continue // fetched from the new leader at once
				}
				ps.leader = -1
				lost = true
				continue
			default:
				ch.err = fmt.Errorf("client: fetch %s at offset %d: %w", tp, sent.offset, code)
			}
			ps.buffered++
			if ch.err != nil || ch.reset {
				ps.stopAhead = true // what follows depends on what Poll makes of it
			}
			c.mu.queue = append(c.mu.queue, ch)
			queued = true
		}
	}
	// Partitions the response left out are fetched again.
	for _, p := range f.sent {
		if ps := c.mu.parts[p.tp]; ps != nil && ps.inflight && ps.leader == f.broker {
			ps.inflight = false
			if resp.ErrorCode != wire.NoError {
				ps.leader = -1
			}
		}
	}
	f.releaseBufLocked()
	if lost {
		c.cl.InvalidateMetadata()
	}
	if queued || lost {
		c.signal()
	}
	if spanned {
		c.signal() // Poll may read the new spans itself
	}
	return lost
}

// followHintLocked moves ps to the leader a broker named in its answer (KIP-951), if that is
// newer than the leader epoch the fetch was sent with and another broker the client can
// reach; it reports whether it did. The metadata learns the hint too (applyLeaderHint), and the
// fetcher's caller invalidates it only when some partition found no leader this way. c.mu must
// be held.
func (f *fetcher) followHintLocked(ps *partState, sent fetchPart, hint wire.LeaderHint, endpoints []wire.MetadataBroker) bool {
	c := f.c
	c.cl.applyLeaderHint(ps.tp.Topic, ps.tp.Partition, hint, endpoints)
	md := c.cl.meta.Load()
	pm, ok := md.partition(ps.tp.Topic, ps.tp.Partition)
	if !ok || pm.Leader < 0 || pm.Leader == f.broker || (sent.leaderEpoch >= 0 && pm.LeaderEpoch <= sent.leaderEpoch) {
		return false
	}
	if _, known := md.brokers[pm.Leader]; !known {
		return false
	}
	ps.leader, ps.currentLeaderEpoch = pm.Leader, pm.LeaderEpoch
	c.ensureFetcherLocked(pm.Leader)
	c.wakeFetcherLocked(ps)
	return true
}

// wholeBatches returns the prefix of records made of whole batches (a fetch response may end
// with a partial one, which is dropped), the largest offset after one of them, and the number of
// records they hold. A batch whose length or magic is wrong ends the prefix with an error.
func wholeBatches(records []byte) (whole []byte, next int64, count int, err error) {
	rest := records
	for len(rest) > 0 {
		b, r, e := batch.Next(rest)
		if e != nil {
			if !errors.Is(e, batch.ErrShort) {
				err = e
			}
			break
		}
		next = max(next, int64(b.NextOffset())) // batches that go back do not move it back
		count += int(b.NumRecords())
		rest = r
	}
	return records[:len(records)-len(rest)], next, count, err
}
