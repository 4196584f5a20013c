package client

// Fuzz tests of the client's handling of decoded Metadata, OffsetFetch, ListOffsets and
// Produce responses. These responses come back to code that holds a connection (the metadata
// cache, the consumer's position maintenance, the producer's receiver), so the fuzzer answers
// through a minimal fake broker over a unix socket: it decodes each request with the wire
// codec and answers with a response built from the fuzzer's bytes for exactly that request
// (partitions left out, duplicated, not asked for, any error code, offsets anywhere). Every
// iteration has its own broker and client, is bounded by a watchdog, and must leave no
// goroutine behind.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/net/wire"
)

// fakeBroker answers requests on a unix socket with what its handler returns.
type fakeBroker struct {
	t    testing.TB
	path string
	ln   net.Listener

	// handler returns the response body to req, or nil to leave it unanswered (a parked
	// long poll). Calls are serialised.
	handler func(h wire.RequestHeader, req wire.Request) []byte
	// connHandler, if set, is called instead of handler, with the request's connection, on
	// which it may reply later (fakeConn.reply).
	connHandler func(c *fakeConn, h wire.RequestHeader, req wire.Request) []byte
	hmu         sync.Mutex
	// ownsInitProducerID: the handler answers InitProducerId (set before the first
	// request); otherwise serve gives each request a new producer id, at epoch 0.
	ownsInitProducerID bool

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

var fakeBrokerSeq atomic.Int64

// fakeProducerIDs hands out the fake brokers' producer ids.
var fakeProducerIDs atomic.Int64

func startFakeBroker(t testing.TB, dir string, handler func(wire.RequestHeader, wire.Request) []byte) *fakeBroker {
	path := filepath.Join(dir, fmt.Sprintf("fb%d.sock", fakeBrokerSeq.Add(1)))
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{t: t, path: path, ln: ln, handler: handler}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, nc)
			b.mu.Unlock()
			b.wg.Add(1)
			go b.serve(nc)
		}
	}()
	return b
}

// startFakeBrokerConn is startFakeBroker with a handler that is given the request's
// connection, so that it can leave a request unanswered and answer it later.
func startFakeBrokerConn(t testing.TB, dir string, handler func(c *fakeConn, h wire.RequestHeader, req wire.Request) []byte) *fakeBroker {
	b := startFakeBroker(t, dir, nil)
	b.hmu.Lock()
	b.connHandler = handler
	b.hmu.Unlock()
	return b
}

func (b *fakeBroker) addr() string { return "unix://" + b.path }

// fakeConn is one connection to a fakeBroker; its responses go out whole, one at a time.
type fakeConn struct {
	nc net.Conn
	mu sync.Mutex
}

// reply writes a response with body resp to the request with correlation id id.
func (c *fakeConn) reply(id int32, resp []byte) error {
	out := binary.BigEndian.AppendUint32(nil, uint32(wire.ResponseHeaderLen+len(resp)))
	out = binary.BigEndian.AppendUint32(out, uint32(id))
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.nc.Write(append(out, resp...))
	return err
}

// locked runs f under the handler's lock: the test's own use of what the handler uses (the
// fuzzer's bytes, what it served) must not race with it.
func (b *fakeBroker) locked(f func()) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	f()
}

func (b *fakeBroker) serve(nc net.Conn) {
	defer b.wg.Done()
	defer nc.Close()
	fc := &fakeConn{nc: nc}
	for {
		h, req, err := readFakeRequest(nc)
		if errors.Is(err, errUndecodable) {
			b.t.Errorf("fake broker: undecodable %v request", h.APIKey)
		}
		if err != nil {
			return
		}
		var resp []byte
		if h.APIKey == wire.APIVersions {
			// A broker that knows the apis but not FetchShared (a consumer's fetcher asks over a
			// unix socket): the handlers see Fetch, as from a broker over TCP.
			var keys []wire.APIVersionRange
			// Its handlers answer in v0's layouts: it speaks Produce and Fetch v0 only (a
			// broker from before leader hints).
			for _, k := range wire.SupportedAPIs() {
				if k.APIKey == wire.Produce || k.APIKey == wire.Fetch || k.APIKey == wire.ProduceShared {
					k.MaxVersion = 0
				}
				if k.APIKey != wire.FetchShared {
					keys = append(keys, k)
				}
			}
			resp = (&wire.APIVersionsResponse{APIKeys: keys}).AppendTo(nil)
		} else if h.APIKey == wire.InitProducerID && !b.ownsInitProducerID {
			// A producer id for the idempotent producer (the default), unless the test's
			// handler answers InitProducerId itself.
			resp = (&wire.InitProducerIDResponse{ProducerID: fakeProducerIDs.Add(1), ProducerEpoch: 0}).AppendTo(nil)
		} else {
			b.hmu.Lock()
			if b.connHandler != nil {
				resp = b.connHandler(fc, h, req)
			} else {
				resp = b.handler(h, req)
			}
			b.hmu.Unlock()
		}
		if resp == nil {
			continue
		}
		if err := fc.reply(h.CorrelationID, resp); err != nil {
			return
		}
	}
}

// close stops the broker and waits (boundedly) for its goroutines.
func (b *fakeBroker) close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for _, nc := range b.conns {
		_ = nc.Close()
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		b.t.Fatal("fake broker: connections still served 5 s after close")
	}
}

// fzNoLeak fails unless the goroutine count drops back to before (the client's connection
// readers, fetchers, senders and committers have all exited).
func fzNoLeak(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the iteration:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// fzMetadata is a well-formed answer naming the fake broker as broker 1 and leader of every
// partition: topic t with three partitions, and __consumer_offsets with one.
func fzMetadata(path string) *wire.MetadataResponse {
	resp := &wire.MetadataResponse{ControllerID: 1,
		Brokers: []wire.MetadataBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9, UnixPath: path}}}
	for name, n := range map[string]int32{fzTopic: 3, offsetsTopic: 1} {
		mt := wire.MetadataTopic{Topic: name, IsInternal: name == offsetsTopic}
		for p := range n {
			mt.Partitions = append(mt.Partitions, wire.MetadataPartition{Partition: p, Leader: 1, LeaderEpoch: 0, Replicas: []int32{1}, ISR: []int32{1}})
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// ---- Metadata ----

// fzBuildMetadata builds a Metadata response: brokers with any ids (duplicates, negative),
// all reachable at the fake broker; topics with or without errors, duplicated, empty; their
// partitions dense or not (gaps, duplicates, negative ids, any order) with leaders that are
// brokers or not.
func fzBuildMetadata(r *fzReader, path string) *wire.MetadataResponse {
	resp := &wire.MetadataResponse{ControllerID: int32(r.intn(4)) - 1}
	for range r.pick(4) {
		resp.Brokers = append(resp.Brokers, wire.MetadataBroker{NodeID: int32(r.pick(5)) - 1, Host: "127.0.0.1", Port: 9, UnixPath: path})
	}
	names := []string{fzTopic, "u", offsetsTopic, ""}
	for range r.intn(4) {
		mt := wire.MetadataTopic{Topic: names[r.intn(len(names))]}
		if r.rare(6) {
			mt.ErrorCode = r.errorCode()
		}
		n := r.intn(5)
		for i := range n {
			p := wire.MetadataPartition{Partition: int32(i), Leader: 1, LeaderEpoch: int32(r.intn(3)), Replicas: []int32{1}, ISR: []int32{1}}
			if r.rare(6) {
				p.Partition = int32(r.intn(8)) - 1 // a gap, a duplicate or a negative id
			}
			if r.rare(4) {
				p.Leader = int32(r.intn(6)) - 1 // no leader, or a broker that may not be listed
			}
			if r.rare(8) {
				p.ErrorCode = r.errorCode()
			}
			mt.Partitions = append(mt.Partitions, p)
		}
		if r.rare(4) { // in any order
			for i := len(mt.Partitions) - 1; i > 0; i-- {
				j := r.intn(i + 1)
				mt.Partitions[i], mt.Partitions[j] = mt.Partitions[j], mt.Partitions[i]
			}
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// fzCheckMetadata checks the client's metadata cache against resp, the answer it last
// loaded: a topic is cached if and only if resp has it without an error and with partitions
// exactly 0..n-1, and then as its last such entry; a cached topic's Partitions are indexed by
// partition (as TopicMetadata documents and Leader and the producer assume); and Leader
// returns, for any partition, either an error or a leader that resp gave that partition and
// lists as a broker.
func fzCheckMetadata(t *testing.T, ctx context.Context, cl *Client, resp *wire.MetadataResponse) {
	t.Helper()
	brokers := map[int32]bool{}
	for _, b := range resp.Brokers {
		brokers[b.NodeID] = true
	}
	// The cache keeps a topic's last entry that it can use: without an error, and with
	// partitions 0..n-1 (one whose ids are not is left out as if it had an error, so an entry
	// before it stands, as one before an error does).
	last := map[string]*wire.MetadataTopic{}
	for i := range resp.Topics {
		if mt := &resp.Topics[i]; mt.ErrorCode == wire.NoError && fzDenseIDs(mt) {
			last[mt.Topic] = mt
		}
	}
	md := cl.meta.Load() // not Topic: an unknown topic would refresh the cache
	for name := range md.topics {
		if last[name] == nil {
			t.Fatalf("topic %q cached, but the response has it only with an error, or not at all", name)
		}
	}
	for name, mt := range last {
		tm, ok := md.topics[name]
		if !ok {
			t.Fatalf("topic %q (partitions %+v, no error) not cached", name, mt.Partitions)
		}
		for i, p := range tm.Partitions {
			if p.Partition != int32(i) {
				t.Fatalf("topic %q: Partitions[%d] is partition %d (response: %+v)", name, i, p.Partition, mt.Partitions)
			}
		}
		for p := int32(-1); p <= int32(len(mt.Partitions))+1; p++ {
			id, conn, err := cl.Leader(ctx, name, p)
			if err != nil {
				continue
			}
			if conn == nil || !brokers[id] {
				t.Fatalf("Leader(%q, %d) = %d, %v: not a broker of the response", name, p, id, conn)
			}
			gave := false
			for _, mp := range mt.Partitions {
				gave = gave || (mp.Partition == p && mp.Leader == id)
			}
			if !gave {
				t.Fatalf("Leader(%q, %d) = %d, which the response did not give partition %d (response: %+v)", name, p, id, p, mt.Partitions)
			}
		}
	}
}

// fzDenseIDs reports whether mt's partition ids are exactly 0..n-1, in any order.
func fzDenseIDs(mt *wire.MetadataTopic) bool {
	ids := make([]int32, 0, len(mt.Partitions))
	for _, p := range mt.Partitions {
		ids = append(ids, p.Partition)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != int32(i) {
			return false
		}
	}
	return true
}

// FuzzClientMetadataResponse loads fuzzed Metadata responses into a Client (NewClient, then a
// refresh), either built from fuzzed fields or (raw) the fuzzer's bytes as the body, and
// checks what Topic and Leader make of them (fzCheckMetadata), that nothing panics, and that
// closing the client leaves nothing running.
func FuzzClientMetadataResponse(f *testing.F) {
	dir := f.TempDir()
	f.Add(false, []byte{})
	f.Add(false, []byte{3, 0, 2, 1, 0, 0, 3, 0, 1, 0, 0, 2, 0, 0})
	f.Add(true, fzMetadata("/x").AppendTo(nil))
	f.Fuzz(func(t *testing.T, raw bool, data []byte) {
		defer fzWatchdog(10 * time.Second)()
		before := runtime.NumGoroutine()
		r := &fzReader{b: data}
		var served []*wire.MetadataResponse
		var b *fakeBroker
		b = startFakeBroker(t, dir, func(h wire.RequestHeader, req wire.Request) []byte {
			if h.APIKey != wire.Metadata {
				t.Errorf("unexpected %v request", h.APIKey)
				return nil
			}
			if raw {
				resp := &wire.MetadataResponse{}
				if resp.ReadFrom(data) == nil {
					served = append(served, resp)
				}
				return data
			}
			resp := fzBuildMetadata(r, b.path)
			served = append(served, resp)
			return resp.AppendTo(nil)
		})
		defer b.close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err := NewClient(ctx, Config{Brokers: []string{b.addr()}, RequestTimeout: 2 * time.Second, Logger: fzDiscardLogger()})
		lastServed := func() (resp *wire.MetadataResponse) {
			b.locked(func() { resp = served[len(served)-1] })
			return resp
		}
		if err == nil {
			fzCheckMetadata(t, ctx, cl, lastServed())
			cl.InvalidateMetadata()
			if err := cl.RefreshMetadata(ctx); err == nil {
				fzCheckMetadata(t, ctx, cl, lastServed())
			} else if !raw {
				t.Fatalf("refresh: %v", err)
			}
			_ = cl.Close()
		} else if !raw {
			t.Fatalf("NewClient: %v", err)
		}
		b.close()
		fzNoLeak(t, before)
	})
}

// ---- OffsetFetch and ListOffsets ----

// fzOffsetsServed is what the fake broker told the consumer of offsets: every offset it gave
// a partition without an error.
type fzOffsetsServed struct {
	mu      sync.Mutex
	allowed map[TopicPartition][]int64
}

func (s *fzOffsetsServed) add(tp TopicPartition, off int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowed[tp] = append(s.allowed[tp], off)
}

// fzOffsetFetchResponse answers an OffsetFetch: per partition asked, left out, duplicated,
// with any error code and any offset (none committed, negative, huge), and partitions and
// topics not asked for.
func fzOffsetFetchResponse(r *fzReader, req *wire.OffsetFetchRequest, s *fzOffsetsServed) *wire.OffsetFetchResponse {
	resp := &wire.OffsetFetchResponse{}
	if r.rare(10) {
		resp.ErrorCode = r.errorCode()
	}
	entry := func(tp TopicPartition) wire.OffsetFetchResponsePartition {
		p := wire.OffsetFetchResponsePartition{Partition: tp.Partition, Offset: r.offset(int64(10 * (tp.Partition + 1))), LeaderEpoch: int32(r.intn(3)) - 1}
		if r.rare(6) {
			p.Offset = -1 // nothing committed
		}
		if r.rare(5) {
			p.ErrorCode = r.errorCode()
		}
		if p.ErrorCode == wire.NoError && resp.ErrorCode == wire.NoError {
			s.add(tp, p.Offset)
		}
		return p
	}
	for _, rt := range req.Topics {
		t := wire.OffsetFetchResponseTopic{Topic: rt.Topic}
		for _, p := range rt.Partitions {
			if r.rare(8) {
				continue
			}
			t.Partitions = append(t.Partitions, entry(TopicPartition{rt.Topic, p}))
			if r.rare(8) {
				t.Partitions = append(t.Partitions, entry(TopicPartition{rt.Topic, p}))
			}
		}
		if r.rare(6) {
			t.Partitions = append(t.Partitions, entry(TopicPartition{rt.Topic, int32(r.intn(6)) - 1}))
		}
		resp.Topics = append(resp.Topics, t)
	}
	if r.rare(8) {
		resp.Topics = append(resp.Topics, wire.OffsetFetchResponseTopic{Topic: "other", Partitions: []wire.OffsetFetchResponsePartition{entry(TopicPartition{"other", 0})}})
	}
	return resp
}

// fzListOffsetsResponse answers a ListOffsets likewise.
func fzListOffsetsResponse(r *fzReader, req *wire.ListOffsetsRequest, s *fzOffsetsServed) *wire.ListOffsetsResponse {
	resp := &wire.ListOffsetsResponse{}
	entry := func(tp TopicPartition) wire.ListOffsetsResponsePartition {
		p := wire.ListOffsetsResponsePartition{Partition: tp.Partition, Timestamp: -1, Offset: r.offset(int64(100 * (tp.Partition + 1))), LeaderEpoch: int32(r.intn(3)) - 1}
		if r.rare(6) {
			p.Offset = -1 // nothing at or after the timestamp
		}
		if r.rare(5) {
			p.ErrorCode = r.errorCode()
		}
		if p.ErrorCode == wire.NoError {
			s.add(tp, p.Offset)
		}
		return p
	}
	for _, rt := range req.Topics {
		t := wire.ListOffsetsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			if r.rare(8) {
				continue
			}
			t.Partitions = append(t.Partitions, entry(TopicPartition{rt.Topic, rp.Partition}))
			if r.rare(8) {
				t.Partitions = append(t.Partitions, entry(TopicPartition{rt.Topic, rp.Partition}))
			}
		}
		if r.rare(6) {
			t.Partitions = append(t.Partitions, entry(TopicPartition{rt.Topic, int32(r.intn(6)) - 1}))
		}
		resp.Topics = append(resp.Topics, t)
	}
	if r.rare(8) {
		resp.Topics = append(resp.Topics, wire.ListOffsetsResponseTopic{Topic: "other", Partitions: []wire.ListOffsetsResponsePartition{entry(TopicPartition{"other", 0})}})
	}
	return resp
}

// FuzzConsumerOffsetResponses runs a group consumer's position maintenance (maintain: the
// committed-offset lookup, resets by ListOffsets, leader lookups) against fuzzed OffsetFetch
// and ListOffsets responses, with seeks to the beginning, the end and timestamps in between.
// After each round it checks that nothing panicked; that every partition is in a state that
// leads somewhere (a position, a pending lookup, or an error that names it); that a position
// is one the broker gave that very partition (or the test's own seek) and never negative; and
// that Position agrees. Closing must leave nothing running.
func FuzzConsumerOffsetResponses(f *testing.F) {
	dir := f.TempDir()
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240, 1, 1, 1, 1, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		defer fzWatchdog(10 * time.Second)()
		before := runtime.NumGoroutine()
		r := &fzReader{b: data}
		policy := []string{OffsetResetEarliest, OffsetResetLatest, OffsetResetNone}[r.intn(3)]
		served := &fzOffsetsServed{allowed: map[TopicPartition][]int64{}}
		var b *fakeBroker
		b = startFakeBroker(t, dir, func(h wire.RequestHeader, req wire.Request) []byte {
			switch req := req.(type) {
			case *wire.MetadataRequest:
				return fzMetadata(b.path).AppendTo(nil)
			case *wire.OffsetFetchRequest:
				return fzOffsetFetchResponse(r, req, served).AppendTo(nil)
			case *wire.ListOffsetsRequest:
				return fzListOffsetsResponse(r, req, served).AppendTo(nil)
			case *wire.FetchRequest:
				return nil // a long poll that never ends: fetching is not this test's business
			default:
				t.Errorf("unexpected %v request", h.APIKey)
				return nil
			}
		})
		defer b.close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := NewConsumer(ctx, ConsumerConfig{
			Config:           Config{Brokers: []string{b.addr()}, RequestTimeout: 2 * time.Second, Logger: fzDiscardLogger()},
			GroupID:          "g",
			EnableAutoCommit: new(false),
			AutoOffsetReset:  policy,
			RetryBackoff:     time.Millisecond,
			FetchMaxWait:     10 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		tps := []TopicPartition{{fzTopic, 0}, {fzTopic, 1}, {fzTopic, 2}}
		if err := c.Assign(tps); err != nil {
			t.Fatal(err)
		}
		for round := range 4 {
			if round > 0 {
				var tp TopicPartition
				var how int
				var ms int64
				b.locked(func() { tp, how, ms = tps[r.intn(len(tps))], r.pick(4), int64(r.intn(1000)) })
				switch how {
				case 0:
					_ = c.SeekToBeginning([]TopicPartition{tp})
				case 1:
					_ = c.SeekToEnd([]TopicPartition{tp})
				case 2:
					_ = c.SeekToTimestamp([]TopicPartition{tp}, time.UnixMilli(ms))
				}
			}
			if _, err := c.maintain(ctx); err != nil {
				t.Fatalf("round %d: maintain: %v", round, err)
			}
			c.mu.Lock()
			for tp, ps := range c.mu.parts {
				switch {
				case ps.err != nil:
					if !strings.Contains(ps.err.Error(), tp.String()) {
						t.Fatalf("round %d: %s failed with an error that does not name it: %v", round, tp, ps.err)
					}
				case ps.hasPos:
					if ps.position < 0 || ps.position > ps.fetchOffset {
						t.Fatalf("round %d: %s at %d, fetching from %d", round, tp, ps.position, ps.fetchOffset)
					}
					served.mu.Lock()
					ok := slices.Contains(served.allowed[tp], ps.position)
					served.mu.Unlock()
					if !ok {
						t.Fatalf("round %d: %s at %d, an offset the broker never gave it (it gave %v)", round, tp, ps.position, served.allowed[tp])
					}
				case !ps.needCommitted && !ps.needReset:
					t.Fatalf("round %d: %s has no position, no error and no lookup pending", round, tp)
				}
			}
			c.mu.Unlock()
		}
		for _, tp := range tps {
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Millisecond)
			pos, err := c.Position(pctx, tp)
			pcancel()
			c.mu.Lock()
			ps := c.mu.parts[tp]
			switch {
			case err == nil && (!ps.hasPos || pos != ps.position):
				t.Errorf("Position(%s) = %d; partition at %d (has %v)", tp, pos, ps.position, ps.hasPos)
			case err != nil && !errors.Is(err, context.DeadlineExceeded) && (ps.err == nil || err.Error() != ps.err.Error()):
				t.Errorf("Position(%s): %v; partition error %v", tp, err, ps.err)
			}
			c.mu.Unlock()
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		b.close()
		fzNoLeak(t, before)
	})
}

// ---- Produce ----

// fzProduceServed is what the fake broker acknowledged: per partition, the offset ranges
// [base, base+n) it gave the records of a request without an error.
type fzProduceServed struct {
	mu     sync.Mutex
	ranges map[int32][][2]int64
}

// fzProduceResponse answers a Produce request: per partition, left out, duplicated, with any
// error code (retriable, per-batch, fatal, unknown), any base offset (increasing, -1,
// negative, huge) and append time, plus partitions and topics not asked for.
func fzProduceResponse(r *fzReader, req *wire.ProduceRequest, next map[int32]int64, s *fzProduceServed) *wire.ProduceResponse {
	resp := &wire.ProduceResponse{}
	codes := []wire.ErrorCode{wire.ErrNotLeaderOrFollower, wire.ErrCorruptMessage, wire.ErrMessageTooLarge, wire.ErrRequestTimedOut}
	entry := func(topic string, part int32, records []byte) wire.ProduceResponsePartition {
		n := int64(0)
		for rest := records; len(rest) > 0; {
			b, rr, err := batch.Next(rest)
			if err != nil {
				break
			}
			n += int64(b.LastOffsetDelta()) + 1
			rest = rr
		}
		p := wire.ProduceResponsePartition{Partition: part, BaseOffset: next[part], LogAppendTimeMs: -1, LogStartOffset: 0}
		switch r.pick(8) {
		case 0:
			p.ErrorCode = codes[r.intn(len(codes))]
		case 1:
			p.ErrorCode = r.errorCode()
		}
		if p.ErrorCode != wire.NoError {
			p.BaseOffset = -1
			if r.rare(2) {
				msg := "detail"
				p.ErrorMessage = &msg
			}
		}
		if r.rare(8) {
			p.BaseOffset = r.offset(p.BaseOffset)
		}
		if r.rare(8) {
			p.LogAppendTimeMs = int64(r.u64())
		}
		if p.ErrorCode == wire.NoError && topic == fzTopic {
			next[part] = max(next[part], p.BaseOffset+n)
			s.mu.Lock()
			s.ranges[part] = append(s.ranges[part], [2]int64{p.BaseOffset, n})
			s.mu.Unlock()
		}
		return p
	}
	for _, rt := range req.Topics {
		t := wire.ProduceResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			if r.rare(10) {
				continue
			}
			t.Partitions = append(t.Partitions, entry(rt.Topic, rp.Partition, rp.Records))
			if r.rare(10) {
				t.Partitions = append(t.Partitions, entry(rt.Topic, rp.Partition, rp.Records))
			}
		}
		if r.rare(8) { // a partition that may not have been asked for (if it was: a duplicate)
			part := int32(r.intn(6)) - 1
			var records []byte
			for _, rp := range rt.Partitions {
				if rp.Partition == part {
					records = rp.Records
				}
			}
			t.Partitions = append(t.Partitions, entry(rt.Topic, part, records))
		}
		if r.rare(4) {
			slices.Reverse(t.Partitions)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if r.rare(8) {
		resp.Topics = append([]wire.ProduceResponseTopic{{Topic: "other", Partitions: []wire.ProduceResponsePartition{entry("other", 0, nil)}}}, resp.Topics...)
	}
	return resp
}

// FuzzProducerProduceResponse sends records through a Producer whose broker answers every
// Produce with a fuzzed response (fzProduceResponse), with fuzzed acks, batch size, linger,
// retries and in-flight limit, then flushes and closes. It checks that nothing panics; that
// Flush returns (delivery.timeout.ms bounds it); that every record's callback runs exactly
// once, for its own topic and partition; that a record is acknowledged only with an offset
// the broker gave its partition in a successful answer (or -1, unknown); and that closing
// leaves nothing running.
func FuzzProducerProduceResponse(f *testing.F) {
	dir := f.TempDir()
	f.Add([]byte{})
	f.Add([]byte{5, 1, 1, 2, 0, 3, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7})
	f.Add([]byte{9, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, data []byte) {
		defer fzWatchdog(10 * time.Second)()
		before := runtime.NumGoroutine()
		r := &fzReader{b: data}
		// The producer's settings and records first: the broker's answers take the rest of
		// the bytes, from its own goroutine.
		acks := []Acks{AcksAll, AcksLeader, AcksNone}[r.intn(3)]
		cfg := ProducerConfig{
			Acks:            acks,
			Linger:          []time.Duration{-1, time.Millisecond}[r.intn(2)],
			BatchSize:       100 + r.intn(400),
			Retries:         []int{-1, 1, 3}[r.intn(3)],
			RetryBackoff:    []time.Duration{-1, time.Millisecond}[r.intn(2)],
			DeliveryTimeout: 300 * time.Millisecond,
			MaxInFlight:     1 + r.intn(3),
		}
		recs := make([]*Record, 1+r.intn(24))
		for i := range recs {
			recs[i] = &Record{Topic: fzTopic, Partition: int32(r.intn(4)) - 1, PartitionSet: true, Value: make([]byte, r.intn(120))}
			if recs[i].Partition == PartitionAny && r.rare(2) {
				recs[i].Key = []byte{byte(i)}
			}
		}
		served := &fzProduceServed{ranges: map[int32][][2]int64{}}
		next := map[int32]int64{}
		var b *fakeBroker
		b = startFakeBroker(t, dir, func(h wire.RequestHeader, req wire.Request) []byte {
			switch req := req.(type) {
			case *wire.MetadataRequest:
				return fzMetadata(b.path).AppendTo(nil)
			case *wire.ProduceRequest:
				if req.Acks == wire.AcksNone {
					return nil
				}
				return fzProduceResponse(r, req, next, served).AppendTo(nil)
			default:
				t.Errorf("unexpected %v request", h.APIKey)
				return nil
			}
		})
		defer b.close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cfg.Config = Config{Brokers: []string{b.addr()}, RequestTimeout: 200 * time.Millisecond, SharedMemoryBytes: -1, Logger: fzDiscardLogger()}
		p, err := NewProducer(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			calls int
			md    RecordMetadata
			err   error
		}
		var mu sync.Mutex
		results := make([]result, len(recs))
		want := make([]int32, len(recs))
		for i, rec := range recs {
			want[i] = rec.Partition
			p.Send(ctx, rec, func(md RecordMetadata, err error) {
				mu.Lock()
				defer mu.Unlock()
				results[i].calls++
				results[i].md, results[i].err = md, err
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		served.mu.Lock()
		defer served.mu.Unlock()
		for i, res := range results {
			md := res.md
			switch {
			case res.calls != 1:
				t.Fatalf("record %d: %d callbacks", i, res.calls)
			case md.Topic != fzTopic || (want[i] != PartitionAny && md.Partition != want[i]) || md.Partition < 0 || md.Partition > 2:
				t.Fatalf("record %d to partition %d: callback for %s-%d", i, want[i], md.Topic, md.Partition)
			case res.err != nil:
				if md.Offset != -1 {
					t.Fatalf("record %d failed (%v) with offset %d", i, res.err, md.Offset)
				}
			case acks == AcksNone || md.Offset == -1:
				if md.Offset != -1 {
					t.Fatalf("record %d: acks=0, yet offset %d", i, md.Offset)
				}
			default:
				ok := false
				for _, rg := range served.ranges[md.Partition] {
					ok = ok || (rg[0] >= 0 && md.Offset >= rg[0] && md.Offset-rg[0] < rg[1])
				}
				if !ok {
					t.Fatalf("record %d acknowledged at %s-%d offset %d; the broker gave that partition %v", i, md.Topic, md.Partition, md.Offset, served.ranges[md.Partition])
				}
			}
		}
		b.close()
		fzNoLeak(t, before)
	})
}
