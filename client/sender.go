package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// brokerSender serves the partitions one broker leads. Its sender goroutine (run) takes an
// in-flight slot, drains the batches ready to go from each partition into a Produce request
// and writes it; its receiver goroutine (receive) takes the answers in request order, completes or
// requeues the batches and frees the slot, and fails the batches in flight whose
// delivery.timeout.ms passes first. The limbo sender (id -1) holds partitions without a
// known leader; the housekeeper drains it without sending.
type brokerSender struct {
	p  *Producer
	id int32 // broker id; -1 for the limbo

	wake     chan struct{}        // coalesced wake-ups: a new or full batch, a requeued one, metadata
	slots    chan struct{}        // one token per outstanding request (max.in.flight)
	inflight chan *produceRequest // sender -> receiver, in request order
	// expiryPoke wakes the receiver when a request goes out whose first delivery deadline is
	// before the wake-up the receiver has set (receiverWake, Unix ns; math.MinInt64 while it
	// waits for a request anyway). Without it the receiver would have to take every request
	// as it is sent to learn its deadline: a wake-up per request, which cost up to 7 % of a
	// 100-byte produce's throughput on a 2-vCPU machine.
	expiryPoke   chan struct{}
	receiverWake atomic.Int64

	mu struct {
		sync.Mutex
		active map[*accPartition]struct{} // partitions this sender owns (see accPartition.owner)
	}

	// Owned by the goroutine that drains (run, or the housekeeper for the limbo).
	conn     *Conn     // the broker connection, looked up again when closed or metadata changed
	connMeta *metadata // the metadata conn was looked up with
	scratch  []*accPartition
	expired  []*accBatch
	lastMeta *metadata
	rotate   int
}

func newBrokerSender(p *Producer, id int32) *brokerSender {
	s := &brokerSender{
		p:        p,
		id:       id,
		wake:     make(chan struct{}, 1),
		slots:    make(chan struct{}, p.cfg.MaxInFlight),
		inflight: make(chan *produceRequest, p.cfg.MaxInFlight),

		expiryPoke: make(chan struct{}, 1),
	}
	s.receiverWake.Store(math.MinInt64)
	s.mu.active = map[*accPartition]struct{}{}
	return s
}

func (s *brokerSender) signal() {
	if s == nil {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *brokerSender) add(ap *accPartition) {
	s.mu.Lock()
	s.mu.active[ap] = struct{}{}
	s.mu.Unlock()
}

func (s *brokerSender) activeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.active)
}

// route returns the sender for the partition's leader in md, or the limbo.
func (p *Producer) route(md *metadata, ap *accPartition) *brokerSender {
	tm, ok := md.topics[ap.topic.name]
	if !ok || int(ap.partition) >= len(tm.Partitions) {
		return p.limbo
	}
	leader := tm.Partitions[ap.partition].Leader
	if leader < 0 {
		return p.limbo
	}
	if _, ok := md.brokers[leader]; !ok {
		return p.limbo
	}
	return p.senderFor(leader)
}

// senderFor returns broker id's sender, starting it on first use.
func (p *Producer) senderFor(id int32) *brokerSender {
	if s := (*p.senders.Load())[id]; s != nil {
		return s
	}
	p.sendersMu.Lock()
	defer p.sendersMu.Unlock()
	old := *p.senders.Load()
	if s := old[id]; s != nil {
		return s
	}
	if p.stopping() {
		return p.limbo // swept by Close
	}
	s := newBrokerSender(p, id)
	m := make(map[int32]*brokerSender, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[id] = s
	p.senders.Store(&m)
	p.wg.Add(2)
	go s.run()
	go s.receive()
	return s
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// run is the sender goroutine.
func (s *brokerSender) run() {
	defer s.p.wg.Done()
	defer close(s.inflight)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		// Take the slot before draining: with max.in.flight = 1 a failed batch is back at the
		// head of its partition before the next batch can be drained.
		if !s.takeSlot(timer) {
			return
		}
		req, next := s.drain(time.Now(), true)
		s.failExpired()
		if req != nil {
			s.dispatch(req)
			continue
		}
		<-s.slots
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-s.wake:
		case <-timer.C:
		case <-s.p.stop:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// takeSlot takes an in-flight slot for the sender goroutine, and reports false if the
// producer stops first. While every slot is held by a request in flight, which a broker that
// stopped answering (paused, a hung disk) holds until request.timeout.ms, it goes on expiring
// the batches waiting to go at delivery.timeout.ms (drain without sending): their callbacks
// must not wait for the requests ahead of them. timer is run's, stopped on return.
func (s *brokerSender) takeSlot(timer *time.Timer) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	case <-s.p.stop:
		return false
	default:
	}
	var next time.Time // when the oldest batch waiting to go expires; zero: none waits
	for look := true; ; {
		if look {
			_, next = s.drain(time.Now(), false)
			s.failExpired()
			if !next.IsZero() {
				timer.Reset(time.Until(next))
			}
		}
		select {
		case s.slots <- struct{}{}:
			timer.Stop()
			return true
		case <-s.wake:
			// A batch was opened or filled, or the metadata changed. A batch opened since
			// the last look expires after the ones it found, so the timer stands; a look is
			// needed only if it found none. (This runs per batch while a producer outruns
			// its window: no pass over the partitions, and no lock, for each.) A retried
			// batch is requeued as its request's slot frees, which ends the wait; older
			// batches of a partition moved here (its leader changed) expire at the next
			// look at the latest.
			look = next.IsZero()
		case <-timer.C:
			look = true
		case <-s.p.stop:
			timer.Stop()
			return false
		}
	}
}

// drain visits the sender's partitions: it moves those whose leader changed, expires batches
// past delivery.timeout.ms, and (if send) takes from each partition the batches at its head
// that may go, in order, into a request bounded by max.request.size (a partition's batches
// are consecutive in req.batches). It returns the request (nil if none) and when to look
// again.
func (s *brokerSender) drain(now time.Time, send bool) (req *produceRequest, next time.Time) {
	p := s.p
	s.mu.Lock()
	s.scratch = s.scratch[:0]
	for ap := range s.mu.active {
		s.scratch = append(s.scratch, ap)
	}
	s.mu.Unlock()
	md := p.client.meta.Load()
	reroute := md != s.lastMeta
	s.lastMeta = md
	n := len(s.scratch)
	if n == 0 {
		return nil, time.Time{}
	}
	start := s.rotate % n // fairness when max.request.size cuts a request short
	s.rotate++
	size := 0
	for i := range n {
		ap := s.scratch[(start+i)%n]
		ap.mu.Lock()
		if ap.owner.Load() != s {
			ap.mu.Unlock()
			continue
		}
		if reroute {
			if t := p.route(md, ap); t != s {
				ap.owner.Store(t)
				t.add(ap)
				ap.mu.Unlock()
				t.signal()
				continue
			}
		}
		s.expireLocked(ap, now)
		// Every batch of the partition that may go now goes into this request, while it fits:
		// behind a full in-flight window batches pile up, and one request carrying several of
		// them is one write, one broker append and one response instead of several.
		for taken := 0; ; taken++ {
			b, open := ap.headLocked()
			if b == nil {
				break
			}
			if taken == 0 {
				next = earliest(next, b.created.Add(p.cfg.DeliveryTimeout))
			}
			switch {
			case !send:
			case b.retryAt.After(now) && !b.leaderMoved(md):
				next = earliest(next, b.retryAt)
			case taken > 0 && b.alone:
				// Its own request (the next one: run loops while drain returns one).
			case taken == 0 && ap.mu.inflight > 0 && (p.cfg.MaxInFlight == 1 || ap.mu.inflightOn != s):
				// Wait for the partition's batches in flight (their completion signals us):
				// with max.in.flight 1 always; otherwise while they are in flight to another
				// broker (the leader moved), so that a batch failed there and requeued goes
				// before the ones behind it, not after them on the new leader.
			case open && !ap.lingerDoneLocked(b, now):
				next = earliest(next, b.created.Add(p.cfg.Linger))
			case req != nil && size+b.builder.EstimatedSize() > p.cfg.MaxRequestSize:
				// Next request: run loops while drain returns one.
			case p.idem && !p.idemReadyLocked(ap, b, taken):
				// Idempotence holds it (idempotence.go): no producer id yet, the partition has
				// its window of requests out (5, from the one that carried its first
				// unacknowledged batch), a retry waits to be the first unacknowledged batch, or
				// the partition waits to start its sequences over.
				// Completions and a new id signal the sender.
			default:
				if open {
					ap.detachOpenLocked()
				} else {
					ap.popReadyLocked()
				}
				if p.idem {
					if !b.sequenced {
						ap.mu.idem.sequenceLocked(b, taken > 0)
					}
					b.sent = true
				}
				ap.mu.inflight++
				ap.mu.inflightOn = s
				if req == nil {
					req = p.requests.Get().(*produceRequest)
				}
				req.batches = append(req.batches, b)
				size += b.builder.EstimatedSize()
				if !b.alone {
					continue
				}
			}
			break
		}
		if ap.mu.open == nil && len(ap.mu.ready) == 0 && ap.mu.inflight == 0 {
			ap.owner.Store(nil)
		}
		ap.mu.Unlock()
	}
	s.mu.Lock()
	for _, ap := range s.scratch {
		if ap.owner.Load() != s {
			delete(s.mu.active, ap)
		}
	}
	s.mu.Unlock()
	clear(s.scratch)
	return req, next
}

// expireLocked takes out the partition's batches (not in flight) older than
// delivery.timeout.ms; failExpired completes them once no lock is held.
func (s *brokerSender) expireLocked(ap *accPartition, now time.Time) {
	dt := s.p.cfg.DeliveryTimeout
	if len(ap.mu.ready) > 0 && !now.Before(ap.mu.ready[0].created.Add(dt)) {
		keep := ap.mu.ready[:0]
		for _, b := range ap.mu.ready {
			if !now.Before(b.created.Add(dt)) {
				s.expired = append(s.expired, b)
			} else {
				keep = append(keep, b)
			}
		}
		clear(ap.mu.ready[len(keep):])
		ap.mu.ready = keep
	}
	if b := ap.mu.open; b != nil && !now.Before(b.created.Add(dt)) {
		s.expired = append(s.expired, ap.detachOpenLocked())
	}
}

func (s *brokerSender) failExpired() {
	for i, b := range s.expired {
		s.p.complete(b, -1, -1, s.p.deliveryTimeoutErr(b), false)
		s.expired[i] = nil
	}
	s.expired = s.expired[:0]
}

// produceRequest is one Produce request and what it carries; pooled.
type produceRequest struct {
	wire    wire.ProduceRequest
	resp    wire.ProduceResponse
	batches []*accBatch
	pos     []reqPos // where batches[i] sits in wire.Topics
	ch      chan []byte
	conn    *Conn
	sentAt  time.Time
	// expireAt is the earliest delivery deadline (created + delivery.timeout.ms) of its
	// batches not expired yet (accBatch.expired), zero when none is left: the receiver's timer
	// for expireInFlight.
	expireAt time.Time
}

type reqPos struct{ topic, part int32 }

// encode fills the wire request from the batches, reusing its slices.
func (r *produceRequest) encode(acks int16, timeout time.Duration) {
	r.wire.TransactionalID = nil
	r.wire.Acks = acks
	r.wire.TimeoutMs = int32(min(timeout.Milliseconds(), math.MaxInt32))
	topics := r.wire.Topics[:0]
	r.pos = r.pos[:0]
	for i, b := range r.batches {
		name := b.part.topic.name
		ti := -1
		for i := range topics {
			if topics[i].Topic == name {
				ti = i
				break
			}
		}
		if ti < 0 {
			ti = len(topics)
			if ti < cap(topics) {
				topics = topics[:ti+1]
				topics[ti].Topic = name
				topics[ti].Partitions = topics[ti].Partitions[:0]
			} else {
				topics = append(topics, wire.ProduceRequestTopic{Topic: name})
			}
		}
		t := &topics[ti]
		if i > 0 && r.batches[i-1].part == b.part {
			// The partition's next batch (drain takes a partition's batches together): the
			// same entry carries both, back to back.
			last := &t.Partitions[len(t.Partitions)-1]
			if len(last.Batches) == 0 {
				last.Batches = append(last.Batches, last.Records)
				last.Records = nil
			}
			last.Batches = append(last.Batches, b.built)
			r.pos = append(r.pos, r.pos[i-1])
			continue
		}
		if n := len(t.Partitions); n < cap(t.Partitions) {
			// Reuse the entry's Batches array (recycleRequest emptied it).
			t.Partitions = t.Partitions[:n+1]
			t.Partitions[n].Partition, t.Partitions[n].Records = b.part.partition, b.built
			t.Partitions[n].Batches = t.Partitions[n].Batches[:0]
		} else {
			t.Partitions = append(t.Partitions, wire.ProduceRequestPartition{Partition: b.part.partition, Records: b.built})
		}
		r.pos = append(r.pos, reqPos{int32(ti), int32(len(t.Partitions) - 1)})
	}
	r.wire.Topics = topics
}

// result finds batch i's result in the response: where it was in the request, else anywhere.
func (r *produceRequest) result(i int) *wire.ProduceResponsePartition {
	name, part := r.batches[i].part.topic.name, r.batches[i].part.partition
	if pos := r.pos[i]; int(pos.topic) < len(r.resp.Topics) {
		t := &r.resp.Topics[pos.topic]
		if t.Topic == name && int(pos.part) < len(t.Partitions) && t.Partitions[pos.part].Partition == part {
			return &t.Partitions[pos.part]
		}
	}
	for ti := range r.resp.Topics {
		t := &r.resp.Topics[ti]
		if t.Topic != name {
			continue
		}
		for pi := range t.Partitions {
			if t.Partitions[pi].Partition == part {
				return &t.Partitions[pi]
			}
		}
	}
	return nil
}

func (p *Producer) recycleRequest(r *produceRequest) {
	clear(r.batches)
	r.batches = r.batches[:0]
	for i := range r.wire.Topics {
		ps := r.wire.Topics[i].Partitions
		ps = ps[:cap(ps)]
		for j := range ps { // drop references to batch bytes, keep the arrays
			ps[j].Records = nil
			clear(ps[j].Batches)
			ps[j].Batches = ps[j].Batches[:0]
		}
	}
	r.conn = nil // r.ch is kept: it is empty, open and no longer known to any connection
	p.requests.Put(r)
}

// dispatch compresses the request's batches (once: a retry reuses the bytes) and writes the
// request. With acks=0 the batches complete as soon as it is written; otherwise the receiver
// takes it from here. dispatch owns one slot, which it frees unless the receiver will.
func (s *brokerSender) dispatch(req *produceRequest) {
	p := s.p
	kept := req.batches[:0]
	req.expireAt = time.Time{}
	for _, b := range req.batches {
		bt, err := b.builder.Build()
		if err != nil {
			p.complete(b, -1, -1, fmt.Errorf("client: build batch for %s-%d: %w", b.part.topic.name, b.part.partition, err), true)
			continue
		}
		b.built = bt
		kept = append(kept, b)
		req.expireAt = earliest(req.expireAt, b.created.Add(p.cfg.DeliveryTimeout))
	}
	clear(req.batches[len(kept):])
	req.batches = kept
	if len(kept) == 0 {
		p.recycleRequest(req)
		<-s.slots
		return
	}
	req.encode(p.acks, p.cfg.RequestTimeout)
	conn, err := s.brokerConn()
	shared := false
	if err == nil {
		// v1 where the broker speaks it: the answer carries leader hints (KIP-951).
		req.wire.Version = conn.Version(wire.Produce)
		req.resp.Version = req.wire.Version
		if p.acks == wire.AcksNone {
			err = conn.Send(&req.wire)
		} else {
			if req.ch == nil {
				req.ch = make(chan []byte, 1)
			}
			shared, err = conn.send(&req.wire, req.ch)
		}
	}
	if err != nil {
		req.ch = nil // a failed connection closes it
	}
	if err == nil {
		n := 0
		for _, b := range req.batches {
			n += len(b.built)
		}
		p.sentRequests.Add(1)
		if shared {
			p.sentShared.Add(1)
		}
		p.sentBatches.Add(int64(len(req.batches)))
		p.sentBytes.Add(int64(n))
	}
	if err != nil {
		s.failRequest(req, &connError{fmt.Errorf("broker %d: %w", s.id, err)})
		p.recycleRequest(req)
		<-s.slots
		return
	}
	if p.acks == wire.AcksNone {
		for _, b := range req.batches {
			p.complete(b, -1, -1, nil, true)
		}
		p.recycleRequest(req)
		<-s.slots
		return
	}
	req.conn, req.sentAt = conn, time.Now()
	expireAt := req.expireAt // req is the receiver's once sent
	s.inflight <- req        // never blocks: a slot is held
	if !expireAt.IsZero() && expireAt.UnixNano() < s.receiverWake.Load() {
		select {
		case s.expiryPoke <- struct{}{}:
		default:
		}
	}
}

// brokerConn returns the connection to the sender's broker, dialling if needed.
func (s *brokerSender) brokerConn() (*Conn, error) {
	if s.conn != nil && !s.conn.isClosed() && s.connMeta == s.lastMeta {
		return s.conn, nil
	}
	ctx, cancel := context.WithTimeout(s.p.ctx, s.p.cfg.RequestTimeout)
	defer cancel()
	conn, err := s.p.client.BrokerConn(ctx, s.id)
	s.conn, s.connMeta = conn, s.lastMeta
	return conn, err
}

// receive is the receiver goroutine: it awaits each request's response in request order, and
// fails the batches in flight whose delivery.timeout.ms passes before their response
// (expireInFlight), as Kafka's producer does: a broker that is up but does not answer (paused,
// a hung disk) would otherwise hold their callbacks, and Flush, until request.timeout.ms. It
// takes the requests off s.inflight as soon as they are sent (not only when the one before
// has been answered), so that it holds every request in flight and knows their deadlines;
// being the requests' only owner, it decides alone whether a batch's response or its
// deadline comes first, with no lock or atomic per batch.
func (s *brokerSender) receive() {
	p := s.p
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var armed time.Time // what timer is set for; zero: stopped or fired
	in := s.inflight    // nil once the sender has closed it
	// queue holds the requests in flight that the receiver has taken, in request order:
	// queue[0] is answered first. Later ones wait in s.inflight until the head is answered,
	// the timer fires or a poke comes (take), so that sending a request wakes nobody.
	queue := make([]*produceRequest, 0, p.cfg.MaxInFlight)
	take := func() (took bool) { // whether it took a request
		for in != nil {
			select {
			case next, ok := <-in:
				if !ok {
					in = nil
					return took
				}
				queue, took = append(queue, next), true
			default:
				return took
			}
		}
		return took
	}
	for {
		if len(queue) == 0 {
			if in == nil {
				timer.Stop()
				return
			}
			s.receiverWake.Store(math.MinInt64) // the next request wakes it anyway
			req, ok := <-in
			if !ok {
				timer.Stop()
				return
			}
			queue = append(queue, req)
		}
		take()
		req := queue[0]
		requestDeadline := req.sentAt.Add(p.cfg.RequestTimeout)
		wakeAt := requestDeadline
		for _, r := range queue {
			if !r.expireAt.IsZero() {
				wakeAt = earliest(wakeAt, r.expireAt)
			}
		}
		if !wakeAt.Equal(armed) {
			timer.Reset(time.Until(wakeAt))
			armed = wakeAt
		}
		s.receiverWake.Store(wakeAt.UnixNano())
		// A request sent between take and the store was not poked for: look again. (The
		// store comes before the channel's lock here, and the sender's send before its load
		// of receiverWake: one of the two sees the other.)
		if take() {
			continue
		}
		var err error
		select {
		case <-s.expiryPoke:
			continue // take() learns the new request's deadlines
		case frame, ok := <-req.ch:
			if !ok {
				req.ch = nil
				err = &connError{fmt.Errorf("broker %d: %w", s.id, req.conn.closedErr())}
			} else if rerr := req.resp.ReadFrom(frame); rerr != nil {
				err = &connError{fmt.Errorf("broker %d: bad produce response: %w", s.id, rerr)}
				_ = req.conn.Close()
			}
		case <-timer.C:
			armed = time.Time{}
			if now := time.Now(); now.Before(requestDeadline) {
				s.expireInFlight(queue, now)
				continue
			}
			// As Kafka: a request that timed out closes its connection, which fails (and so
			// retries) whatever else is in flight on it.
			err = &connError{fmt.Errorf("broker %d: no produce response within request.timeout.ms %v: %w", s.id, p.cfg.RequestTimeout, context.DeadlineExceeded)}
			_ = req.conn.Close()
			req.ch = nil // a late response may sit in it
		}
		if err != nil {
			s.failRequest(req, err)
		} else {
			s.handleResponse(req)
		}
		n := copy(queue, queue[1:])
		queue[n] = nil
		queue = queue[:n]
		if n == 0 {
			timer.Stop() // no stale tick while waiting for the next request
			armed = time.Time{}
		}
		p.recycleRequest(req)
		<-s.slots
		s.signal()
	}
}

// expireInFlight fails (Producer.expireInFlight) the batches of the requests in flight whose
// delivery deadline is not after now, and moves each request's expireAt to its next batch's.
func (s *brokerSender) expireInFlight(queue []*produceRequest, now time.Time) {
	p := s.p
	for _, req := range queue {
		if req.expireAt.IsZero() || now.Before(req.expireAt) {
			continue
		}
		req.expireAt = time.Time{}
		for _, b := range req.batches {
			if b.expired {
				continue
			}
			if deadline := b.created.Add(p.cfg.DeliveryTimeout); now.Before(deadline) {
				req.expireAt = earliest(req.expireAt, deadline)
				continue
			}
			p.expireInFlight(b, p.inFlightTimeoutErr(b, s.id, req.sentAt, now))
		}
	}
}

func (s *brokerSender) handleResponse(req *produceRequest) {
	p := s.p
	now, jitter := time.Now(), rand.Float64()
	var base int64 // offset of batch i's first record, when it shares its partition's result
	for i, b := range req.batches {
		res := req.result(i)
		shared := (i > 0 && req.pos[i] == req.pos[i-1]) || (i+1 < len(req.batches) && req.pos[i+1] == req.pos[i])
		var at int64
		if res != nil && res.ErrorCode == wire.NoError {
			// A partition's batches were appended together, in order: the result's base
			// offset is the first one's, and each next one starts where the last ended
			// (an expired batch's records too).
			if i == 0 || req.pos[i] != req.pos[i-1] || res.BaseOffset < 0 {
				base = res.BaseOffset
			}
			count := int64(b.built.LastOffsetDelta()) + 1 // b is recycled by complete
			at = base
			if base > math.MaxInt64-count {
				at, base = -1, -1 // offsets past the largest (a broken broker): unknown, not wrapped
			} else if base >= 0 {
				base += count
			}
		}
		switch {
		case b.expired:
			// Its callbacks ran at its delivery deadline: the answer came too late for it.
			p.endExpired(b)
		case res == nil:
			p.retryOrFail(b, &connError{fmt.Errorf("broker %d: no result for %s-%d in the produce response", s.id, b.part.topic.name, b.part.partition)}, s.id, now, jitter)
		case res.ErrorCode == wire.NoError:
			p.complete(b, at, res.LogAppendTimeMs, nil, true)
		case p.idem && !shared && res.ErrorCode == wire.ErrDuplicateSequenceNumber:
			// The broker has the batch but no longer its offset (Kafka's producer takes it
			// as success too).
			p.complete(b, -1, -1, nil, true)
		case shared && perBatchError(res.ErrorCode):
			// The log appends a partition's batches all or none, so one batch too large or
			// corrupt fails the others too. Each goes again on its own, at once and without
			// counting an attempt, to get its own verdict.
			p.requeueAlone(b)
		case res.ErrorCode == wire.ErrMessageTooLarge && b.built.NumRecords() > 1 && p.splitAndRequeue(b):
			// Too large on its own, with several records (the topic's max.message.bytes is
			// below what batch.size let it grow to): split in two and sent again, as Kafka's
			// producer does.
		default:
			if hintCarrying(res.ErrorCode) {
				// KIP-951: the broker named the leader; the retry goes there at once (its
				// backoff ends: leaderMoved), and the refresh retryOrFail asks for confirms.
				p.client.applyLeaderHint(b.part.topic.name, b.part.partition, res.CurrentLeader, req.resp.NodeEndpoints)
			}
			err := fmt.Errorf("produce %s-%d: %w", b.part.topic.name, b.part.partition, codeErr(res.ErrorCode, res.ErrorMessage))
			p.retryOrFail(b, err, s.id, now, jitter)
		}
	}
}

// perBatchError reports whether a partition's append may have failed with code because of one
// of its batches rather than the partition: any error a retry would not cure, and a corrupt
// batch (retriable, since the bytes may have been damaged on the way, but a batch the
// producer built wrong would fail its neighbours until their delivery timeout).
func perBatchError(code wire.ErrorCode) bool {
	return !code.Retriable() || code == wire.ErrCorruptMessage
}

// failRequest retries or fails the batches of a request that got no response. If they went as
// pointers into the shared-memory region, the broker may still read them (a request it read
// before the connection closed is still served): a retry sends the same bytes, and a buffer
// reused for other records first changes its guard word, which makes such a broker refuse the
// old request (SharedRegion.renew).
// A batch that expired in flight (accBatch.expired) is let go instead.
func (s *brokerSender) failRequest(req *produceRequest, err error) {
	now, jitter := time.Now(), rand.Float64()
	for _, b := range req.batches {
		if b.expired {
			s.p.endExpired(b)
			continue
		}
		s.p.retryOrFail(b, err, s.id, now, jitter)
	}
}

// connError marks a failure of a connection or of a whole request: retriable.
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// retriable reports whether a batch that failed with err may be sent again.
func retriable(err error) bool {
	var ce *connError
	if errors.As(err, &ce) {
		return !errors.Is(err, ErrClientClosed)
	}
	var code wire.ErrorCode
	return errors.As(err, &code) && code.Retriable()
}

// staleMetadata reports whether err means the client's view of leaders may be wrong.
func staleMetadata(err error) bool {
	var ce *connError
	if errors.As(err, &ce) {
		return true
	}
	var code wire.ErrorCode
	if !errors.As(err, &code) {
		return false
	}
	return code == wire.ErrNotLeaderOrFollower || code == wire.ErrUnknownTopicOrPartition ||
		code == wire.ErrLeaderNotAvailable || code == wire.ErrFencedLeaderEpoch || code == wire.ErrUnknownLeaderEpoch
}

// splitAndRequeue replaces an in-flight batch of several records that the broker refused as
// too large by two batches of half its records each, sent again at once, alone, without
// counting an attempt; a half still too large is split again, and a single record too large
// fails. The halves keep the batch's creation time (delivery.timeout.ms), its callbacks and its
// place in the partition's order, and share its memory reservation and its seq (so that Flush
// waits for both). It reports false, changing nothing, if the records cannot be read back
// (a batch the broker calls too large was built here, so that would be a bug).
func (p *Producer) splitAndRequeue(b *accBatch) bool {
	ap := b.part
	n := int(b.built.NumRecords())
	cut := (n + 1) / 2
	halves := [2]*accBatch{
		p.newBatch(ap, b.reserved/2),
		p.newBatch(ap, b.reserved-b.reserved/2),
	}
	// Each record goes into its half as it is decoded: Append copies it, and the iterator
	// reuses the record's header array from one record to the next.
	it := b.built.Iter(batch.IterOptions{MaxDecompressed: math.MaxInt32})
	var r batch.Record
	i := 0
	for ; it.Next(&r); i++ {
		h := halves[0]
		if i >= cut {
			h = halves[1]
		}
		var cb func(RecordMetadata, error)
		ts := time.UnixMilli(r.Timestamp)
		if k := i - b.recsFrom; k >= 0 && k < len(b.recs) {
			cb, ts = b.recs[k].cb, b.recs[k].ts
		}
		h.append(&r, ts, cb)
	}
	if it.Err() != nil || i != n {
		for _, h := range halves {
			h.reserved = 0 // b keeps its reservation
			p.discardBatch(h)
		}
		return false
	}
	for _, h := range halves {
		h.part, h.seq, h.created, h.attempts, h.lastErr, h.alone = ap, b.seq, b.created, b.attempts, b.lastErr, true
	}
	if b.sequenced {
		// As Kafka: the refused batch's sequences go to its halves, in order (the broker
		// appended none of them), so the batches after it keep theirs.
		start := b.seqStart
		for _, h := range halves {
			h.sequenced, h.stamp, h.seqStart = true, b.stamp, start
			h.seqEnd = start + int64(h.builder.NumRecords())
			h.builder.SetProducerState(b.stamp.id, b.stamp.epoch, wireSequence(start))
			start = h.seqEnd
		}
	}
	p.splits.Add(1)
	ap.mu.Lock()
	if b.sequenced {
		ps := &ap.mu.idem
		if i := slices.Index(ps.unacked, b); i >= 0 {
			// The halves count as two in the broker's window: the batches after them move up.
			halves[0].ordinal, halves[1].ordinal = b.ordinal, b.ordinal+1
			for _, u := range ps.unacked[i+1:] {
				u.ordinal++
			}
			ps.batches++
			ps.unacked = slices.Replace(ps.unacked, i, i+1, halves[0], halves[1])
		}
	}
	ap.mu.inflight--
	// Both halves count until they complete: one more entry for b's seq, next to its own
	// (the list is in seq order).
	at, _ := slices.BinarySearch(ap.mu.incomplete, b.seq)
	ap.mu.incomplete = slices.Insert(ap.mu.incomplete, at, b.seq)
	ap.requeueLocked(halves[0])
	ap.requeueLocked(halves[1]) // same seq: lands right after the first half
	owner := ap.owner.Load()
	ap.mu.Unlock()
	b.reserved = 0 // now the halves'
	p.recycleBatch(b)
	owner.signal()
	return true
}

// requeueAlone puts an in-flight batch back at once, to be sent as its partition's only batch
// in a request (accBatch.alone). It is not an attempt: it may not have been this batch's fault.
func (p *Producer) requeueAlone(b *accBatch) {
	ap := b.part
	ap.mu.Lock()
	ap.mu.inflight--
	b.alone = true
	ap.requeueLocked(b)
	owner := ap.owner.Load()
	ap.mu.Unlock()
	owner.signal()
}

// retryOrFail handles an in-flight batch that failed at now on broker from: back to its
// partition's ready queue after its backoff, or completed with the error (or a delivery
// timeout). The backoff grows with the batch's failed attempts (ProducerConfig.retryDelay): a
// fixed one made a producer whose broker kept refusing (a full disk: KAFKA_STORAGE_ERROR,
// retriable) retry ten times a second per partition until delivery.timeout.ms, about 1,200
// times. It holds only while the partition's leader stays the one the batch failed on
// (accBatch.leaderMoved). Batches that failed together get the same now and jitter, so that
// those with as many attempts behind them are sent again together.
func (p *Producer) retryOrFail(b *accBatch, err error, from int32, now time.Time, jitter float64) {
	b.attempts++
	b.lastErr = err
	if staleMetadata(err) {
		p.client.InvalidateMetadata()
		p.requestMetadata()
	}
	retry := retriable(err)
	if p.idem && sequenceRefused(err) {
		// Retried: behind a batch that failed, or, for the first unacknowledged batch, once
		// its partition started over (a new epoch, sequences from 0).
		retry = true
		b.part.mu.Lock()
		if b.part.mu.idem.firstUnacked(b) {
			b.part.mu.idem.reset = true
		}
		b.part.mu.Unlock()
	}
	deadline := b.created.Add(p.cfg.DeliveryTimeout)
	if retry && b.attempts <= p.cfg.Retries && now.Before(deadline) && !p.stopping() {
		b.failedLeader, b.failedEpoch = from, -1 // -1: the epoch it failed at is unknown
		if pm, ok := p.client.meta.Load().partition(b.part.topic.name, b.part.partition); ok && pm.Leader == from {
			b.failedEpoch = pm.LeaderEpoch
		}
		p.logRetry(b, err, from, now)
		ap := b.part
		ap.mu.Lock()
		ap.mu.inflight--
		b.retryAt = now.Add(p.cfg.retryDelay(b.attempts, jitter))
		ap.requeueLocked(b)
		owner := ap.owner.Load()
		ap.mu.Unlock()
		owner.signal()
		return
	}
	switch {
	case !now.Before(deadline):
		err = p.deliveryTimeoutErr(b)
	case p.stopping():
		err = fmt.Errorf("%w before delivery: %w", ErrProducerClosed, err)
	}
	p.complete(b, -1, -1, err, true)
}

// leaderMoved reports whether md names a newer leader for the batch's partition than the one
// it last failed on: a newer leader epoch, or, where either epoch is unknown, another broker.
// Its backoff is then over, as in Kafka's producer since 3.7 (KIP-951): the wait was for the
// old leader to recover, and a backoff grown to retry.backoff.max.ms would otherwise be added
// to every failover, after the refresh that found the new leader. Epochs, not broker ids,
// where known: brokers whose metadata disagree (each naming the other leader, at one epoch)
// must not make a batch bounce between them without a backoff. Called with the partition's
// lock held (which orders it after retryOrFail's writes).
func (b *accBatch) leaderMoved(md *metadata) bool {
	pm, ok := md.partition(b.part.topic.name, b.part.partition)
	switch {
	case !ok || pm.Leader < 0:
		return false
	case b.failedEpoch >= 0 && pm.LeaderEpoch >= 0:
		return pm.LeaderEpoch > b.failedEpoch
	default:
		return pm.Leader != b.failedLeader
	}
}

// retryWarnEvery is the least time between two of the producer's retry warnings.
const retryWarnEvery = 10 * time.Second

// logRetry logs a failed batch that will be retried: a warning at most every retryWarnEvery
// for the whole producer (a broker that went away fails every partition's batches at once,
// and again at each retry), debug otherwise.
func (p *Producer) logRetry(b *accBatch, err error, from int32, now time.Time) {
	level := slog.LevelDebug
	if last := p.lastRetryWarn.Load(); now.UnixNano()-last >= int64(retryWarnEvery) && p.lastRetryWarn.CompareAndSwap(last, now.UnixNano()) {
		level = slog.LevelWarn
	}
	p.cfg.Logger.Log(p.ctx, level, "sluice producer: produce failed, retrying", "broker", from,
		"topic", b.part.topic.name, "partition", b.part.partition, "attempt", b.attempts, "err", err)
}

// requestMetadata asks the housekeeper for a refresh (at most one per retry.backoff.ms, or
// more apart while refreshes bring nothing new: refreshSchedule).
func (p *Producer) requestMetadata() {
	select {
	case p.metaWake <- struct{}{}:
	default:
	}
}

// housekeep is the housekeeper goroutine: metadata refreshes (on request, every
// metadata.max.age.ms, and while some partition has no leader), spaced by a refreshSchedule,
// and the limbo's partitions (moved to their sender once a leader is known, expired
// otherwise).
func (p *Producer) housekeep() {
	defer p.wg.Done()
	s := p.limbo
	maxAge := time.NewTicker(p.cfg.MetadataMaxAge)
	defer maxAge.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	sched := newRefreshSchedule(&p.cfg, time.Now()) // NewClient has just loaded the metadata
	seen := p.client.meta.Load()                    // the metadata as of the last refresh here
	want := false
	for {
		now := time.Now()
		if want && !now.Before(sched.next()) {
			var news bool
			news, seen = p.refreshMetadata(seen)
			end := time.Now()
			sched.refreshed(now, end, news, rand.Float64())
			want, now = false, end
		}
		_, next := s.drain(now, false)
		s.failExpired()
		if s.activeCount() > 0 {
			want = true // keep looking for their leaders
		}
		if want {
			next = earliest(next, sched.next())
		}
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-p.metaWake:
			want = true
		case <-maxAge.C:
			want = true
		case <-s.wake:
		case <-timer.C:
		case <-p.stop:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// refreshSchedule spaces the housekeeper's metadata refreshes; it is pure (the caller gives
// the times and the jitter), and owned by the housekeeper.
//
// Refreshes back off as batch retries do (KIP-580; Kafka's producer spaces its metadata
// requests the same way): at least retry.backoff.ms apart, and after each refresh in a row
// that failed or brought nothing new (no partition the producer writes to changed leader or
// leader epoch: the leader is still unknown, or still the broker that is down) the next one
// waits twice as long, up to retry.backoff.max.ms, ±20 %. With a fixed wait, a partition
// without a leader cost ten Metadata requests a second until its batches expired. A refresh
// that finds a leader moved starts the run over, and so does the first after a quiet spell
// (none for twice retry.backoff.max.ms, longer than any wait of a run: the trouble that made
// the last run is over).
type refreshSchedule struct {
	base, ceiling time.Duration // retry.backoff.ms, retry.backoff.max.ms
	last          time.Time     // when the last refresh ended
	gap           time.Duration // from last to the next refresh
	stale         int           // refreshes in a row that brought nothing new
}

// newRefreshSchedule starts a schedule whose last refresh ended at now.
func newRefreshSchedule(cfg *ProducerConfig, now time.Time) refreshSchedule {
	return refreshSchedule{base: cfg.RetryBackoff, ceiling: cfg.RetryBackoffMax, last: now, gap: cfg.RetryBackoff}
}

// next is the earliest time the next refresh may start.
func (r *refreshSchedule) next() time.Time { return r.last.Add(r.gap) }

// refreshed records a refresh that started at start and ended at end, and whether it brought
// news (refreshMetadata); jitter in [0, 1) places the next gap within its ±20 %.
func (r *refreshSchedule) refreshed(start, end time.Time, news bool, jitter float64) {
	if start.Sub(r.last)/2 >= r.ceiling {
		r.stale = 0 // after a quiet spell: a new run
	}
	if news {
		r.stale = 0
	} else {
		r.stale++
	}
	r.gap = retryBackoff(r.base, r.ceiling, max(r.stale, 1), jitter)
	r.last = end
}

// refreshMetadata reloads the metadata and has the senders route their partitions by it. It
// reports whether the refresh brought news since seen, the metadata of the caller's previous
// refresh: a partition of a topic the producer writes to has another leader or leader epoch
// (or the topic changed its partitions, or came or went); and it returns the metadata to pass
// as seen next time. A failed refresh brings none. Against seen rather than the metadata this
// refresh replaced: another path (Send's lookup of a topic, the consumer of a shared Client)
// may have stored the moved leaders in between, and the run of refreshes that found nothing
// would go on growing its gaps.
func (p *Producer) refreshMetadata(seen *metadata) (news bool, now *metadata) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
	err := p.client.RefreshMetadata(ctx)
	cancel()
	if err != nil {
		p.cfg.Logger.Debug("producer: metadata refresh failed", "err", err)
		return false, seen
	}
	p.syncTopics()
	for _, s := range *p.senders.Load() {
		s.signal() // re-route on the new metadata
	}
	now = p.client.meta.Load()
	return p.leadersMoved(seen, now), now
}

// leadersMoved reports whether a topic the producer writes to is known in one of old and md
// and not the other, or has another partition count, or a partition with another leader or
// leader epoch.
func (p *Producer) leadersMoved(old, md *metadata) bool {
	if old == nil || md == nil {
		return old != md
	}
	for name := range *p.topics.Load() {
		was, okWas := old.topics[name]
		is, okIs := md.topics[name]
		if okWas != okIs || len(was.Partitions) != len(is.Partitions) {
			return true
		}
		for i := range is.Partitions {
			if was.Partitions[i].Leader != is.Partitions[i].Leader || was.Partitions[i].LeaderEpoch != is.Partitions[i].LeaderEpoch {
				return true
			}
		}
	}
	return false
}
