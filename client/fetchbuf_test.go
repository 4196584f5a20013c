package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// Conn.CallInto against a scripted peer: the test plays the broker, request by request, so
// that it decides when (and how much of) each response arrives.

type scriptedPeer struct {
	t  *testing.T
	nc net.Conn
}

// dialScripted returns a Conn connected to a peer the test drives.
func dialScripted(t *testing.T) (*Conn, *scriptedPeer, context.Context) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc
		}
		close(accepted)
	}()
	c, err := Dial(ctx, ln.Addr().String(), "scripted")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	nc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return c, &scriptedPeer{t: t, nc: nc}, ctx
}

// readFetch reads one request, which must be a Fetch, and returns its correlation id and
// MaxBytes (the tests use it to say how many record bytes to answer with).
func (p *scriptedPeer) readFetch() (id int32, maxBytes int) {
	p.t.Helper()
	var size [wire.FrameSizeLen]byte
	if _, err := io.ReadFull(p.nc, size[:]); err != nil {
		p.t.Fatal(err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(p.nc, frame); err != nil {
		p.t.Fatal(err)
	}
	var h wire.RequestHeader
	body, err := h.ReadFrom(frame)
	if err != nil {
		p.t.Fatal(err)
	}
	var req wire.FetchRequest
	if h.APIKey != wire.Fetch || req.ReadFrom(body) != nil {
		p.t.Fatalf("request %v is not a Fetch", h.APIKey)
	}
	return h.CorrelationID, int(req.MaxBytes)
}

// fetchFrame encodes a whole response frame to request id whose one partition holds records.
func fetchFrame(id int32, records []byte) []byte {
	resp := wire.FetchResponse{Topics: []wire.FetchResponseTopic{{Topic: "t", Partitions: []wire.FetchResponsePartition{{Records: records}}}}}
	body := resp.AppendTo((&wire.ResponseHeader{CorrelationID: id}).AppendTo(nil))
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func (p *scriptedPeer) write(b []byte) {
	p.t.Helper()
	if _, err := p.nc.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

func fetchReq(maxBytes int) *wire.FetchRequest {
	return &wire.FetchRequest{MaxBytes: int32(maxBytes)}
}

type callResult struct {
	buf  []byte
	resp *wire.FetchResponse
	err  error
}

// goCallInto runs CallInto in the background.
func goCallInto(ctx context.Context, c *Conn, maxBytes int, buf []byte) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		var resp wire.FetchResponse
		b, err := c.CallInto(ctx, fetchReq(maxBytes), &resp, buf)
		out <- callResult{b, &resp, err}
	}()
	return out
}

func sameArray(a, b []byte) bool { return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0] }

// The response is read into the caller's buffer when it fits, into a larger one when it does
// not, and a Call pipelined on the same connection gets its own buffer as before.
func TestConnCallIntoReadsIntoTheCallersBuffer(t *testing.T) {
	c, peer, ctx := dialScripted(t)
	records := func(id int32, n int) []byte { return bytes.Repeat([]byte{byte(id)}, n) }

	// Three calls in flight at once: CallInto with room, CallInto without, and Call.
	roomy := make([]byte, 0, 4096)
	first := goCallInto(ctx, c, 1000, roomy)
	id1, n1 := peer.readFetch()
	small := make([]byte, 0, 16)
	second := goCallInto(ctx, c, 2000, small)
	id2, n2 := peer.readFetch()
	third := make(chan error, 1)
	var plain wire.FetchResponse
	go func() { third <- c.Call(ctx, fetchReq(300), &plain) }()
	id3, n3 := peer.readFetch()
	peer.write(append(append(fetchFrame(id1, records(id1, n1)), fetchFrame(id2, records(id2, n2))...), fetchFrame(id3, records(id3, n3))...))

	r := <-first
	if r.err != nil || !bytes.Equal(r.resp.Topics[0].Partitions[0].Records, records(id1, 1000)) {
		t.Fatalf("first: %v", r.err)
	}
	if !sameArray(r.buf, roomy) || !sameArray(r.resp.Topics[0].Partitions[0].Records, r.buf[len(r.buf)-1000:]) {
		t.Fatal("a response that fits was not read into the caller's buffer")
	}
	r = <-second
	if r.err != nil || !bytes.Equal(r.resp.Topics[0].Partitions[0].Records, records(id2, 2000)) {
		t.Fatalf("second: %v", r.err)
	}
	if sameArray(r.buf, small) || cap(r.buf) < len(r.buf) || len(r.buf) < 2000 {
		t.Fatalf("a response too large for the buffer: got %d/%d bytes", len(r.buf), cap(r.buf))
	}
	if err := <-third; err != nil || !bytes.Equal(plain.Topics[0].Partitions[0].Records, records(id3, 300)) {
		t.Fatalf("Call pipelined with CallInto: %v", err)
	}

	// The grown buffer is reused for the next response.
	grown := r.buf
	next := goCallInto(ctx, c, 1500, grown)
	id, n := peer.readFetch()
	peer.write(fetchFrame(id, records(id, n)))
	if r := <-next; r.err != nil || !sameArray(r.buf, grown) || !bytes.Equal(r.resp.Topics[0].Partitions[0].Records, records(id, 1500)) {
		t.Fatalf("reusing the grown buffer: %v", r.err)
	}
}

// A CallInto abandoned before its response arrives leaves the buffer alone and the
// connection usable: the late response is read elsewhere and dropped.
func TestConnCallIntoCancelledBeforeTheResponse(t *testing.T) {
	c, peer, ctx := dialScripted(t)
	buf := make([]byte, 0, 4096)
	callCtx, cancel := context.WithCancel(ctx)
	res := goCallInto(callCtx, c, 1000, buf)
	id, n := peer.readFetch()
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) || !sameArray(r.buf, buf) {
		t.Fatalf("cancelled CallInto: %v", r.err)
	}
	buf = buf[:cap(buf)]
	for i := range buf {
		buf[i] = 0xEE // the caller owns buf again (the race detector checks the reader agrees)
	}
	peer.write(fetchFrame(id, bytes.Repeat([]byte{1}, n)))

	// The next call on the connection sees its own response, after the dropped one.
	other := make([]byte, 0, 4096)
	res = goCallInto(ctx, c, 10, other)
	id, n = peer.readFetch()
	peer.write(fetchFrame(id, bytes.Repeat([]byte{2}, n)))
	if r := <-res; r.err != nil || !bytes.Equal(r.resp.Topics[0].Partitions[0].Records, bytes.Repeat([]byte{2}, 10)) {
		t.Fatalf("call after an abandoned one: %v", r.err)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{0xEE}, len(buf))) {
		t.Fatal("the abandoned response was written into the caller's buffer")
	}
}

// A CallInto abandoned while its response is being read into the buffer closes the
// connection, and returns only once the reader has let go of the buffer.
func TestConnCallIntoCancelledDuringTheResponse(t *testing.T) {
	c, peer, ctx := dialScripted(t)
	buf := make([]byte, 0, 4096)
	callCtx, cancel := context.WithCancel(ctx)
	res := goCallInto(callCtx, c, 1000, buf)
	id, n := peer.readFetch()
	frame := fetchFrame(id, bytes.Repeat([]byte{1}, n))
	peer.write(frame[:len(frame)/2]) // and nothing more
	for {                            // wait for the reader to take the call
		c.mu.Lock()
		taken := len(c.pending) == 0
		c.mu.Unlock()
		if taken {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the reader did not take the call")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	r := <-res
	if !errors.Is(r.err, context.Canceled) || !sameArray(r.buf, buf) {
		t.Fatalf("cancelled CallInto: %v", r.err)
	}
	clear(buf[:cap(buf)]) // the caller owns buf again (the race detector checks the reader agrees)
	if !c.isClosed() {
		t.Fatal("the connection is still open with half a response unread")
	}
	var resp wire.FetchResponse
	if _, err := c.CallInto(ctx, fetchReq(1), &resp, buf); !errors.Is(err, ErrClosed) {
		t.Fatalf("CallInto on the closed connection: %v", err)
	}
}

// The reused buffers stay bounded over a long run: no more than fetchBufsIdle idle buffers per
// fetcher, none larger than fetch.max.bytes plus slack, a buffer much larger than what it
// keeps holding is dropped, and the decompressors are capped.
func TestFetchBufBounds(t *testing.T) {
	c := &Consumer{cfg: ConsumerConfig{FetchMaxBytes: 4 << 20}}
	f := &fetcher{c: c}
	var taken []*fetchBuf
	for range fetchBufsIdle + 2 {
		taken = append(taken, f.takeBufLocked(0))
	}
	for _, fb := range taken {
		fb.b = make([]byte, 1<<20)
		f.putBufLocked(fb)
	}
	if len(f.free) != fetchBufsIdle {
		t.Fatalf("%d idle buffers, want %d", len(f.free), fetchBufsIdle)
	}

	huge := f.takeBufLocked(0)
	huge.b = make([]byte, c.maxPooledFetchBytes()+1) // a first batch larger than every limit
	f.putBufLocked(huge)
	if fb := f.takeBufLocked(0); fb != huge || fb.b != nil {
		t.Fatalf("a %d-byte buffer was kept (limit %d)", cap(huge.b), c.maxPooledFetchBytes())
	}

	f.free = nil
	big := &fetchBuf{f: f, b: make([]byte, 4<<20)[:512<<10]} // grew once, now holds an eighth
	for i := 1; i <= fetchBufShrinkAfter; i++ {
		if big.b == nil {
			t.Fatalf("dropped after %d small responses, want %d", i-1, fetchBufShrinkAfter)
		}
		f.putBufLocked(big)
		if f.takeBufLocked(0) != big {
			t.Fatal("the idle buffer was not reused")
		}
		if big.b != nil {
			big.b = big.b[:512<<10]
		}
	}
	if big.b != nil {
		t.Fatalf("a 4 MiB buffer holding 512 KiB responses was kept after %d of them", fetchBufShrinkAfter)
	}

	// A buffer grown by one partition's full response (a catch-up after a pause) is kept while
	// the consumer is back at the tail and gets small responses: it is needed at the next pause.
	c.cfg.MaxPartitionFetchBytes = 1 << 20
	full := 1<<20 + 200 // the records and the response's metadata
	tail := &fetchBuf{f: f, b: make([]byte, full, full+full/8)[:16<<10]}
	for range 10 * fetchBufShrinkAfter {
		f.putBufLocked(tail)
		if f.takeBufLocked(0) != tail || cap(tail.b) != full+full/8 {
			t.Fatalf("a buffer of one partition's full response (%d bytes) was dropped", full+full/8)
		}
		tail.b = tail.b[:16<<10]
	}

	var pb pollBufs
	for i := range maxPollDecompressors {
		if pb.decompressor(100) == nil {
			t.Fatalf("no decompressor for batch %d", i)
		}
	}
	if pb.decompressor(100) != nil || pb.created != maxPollDecompressors {
		t.Fatalf("%d decompressors, cap %d", pb.created, maxPollDecompressors)
	}
	pb.free, pb.held = pb.held, nil
	if pb.decompressor(maxRingBatchBytes+1) != nil {
		t.Fatal("a batch over maxRingBatchBytes got a reused decompressor")
	}
}

// With several partitions, responses of all of them and of one alternate (a fetcher that
// is slower than Poll finds every partition fetchable; one that is faster, one at a time).
// Each response must get an idle buffer that already holds it: the last buffer returned was
// taken whatever its size, so a response of four partitions grew a one-partition buffer (a
// fresh allocation of its size, and the smaller buffer dropped), and buffers beyond four idle
// ones were dropped and allocated again. A 4-partition consume read 17 % of its bytes into
// fresh memory that way.
func TestFetchBufsFitTheResponses(t *testing.T) {
	c := &Consumer{cfg: ConsumerConfig{FetchMaxBytes: 50 << 20, MaxPartitionFetchBytes: 1 << 20}}
	f := &fetcher{c: c, maxParts: 4}

	// Best fit: the smallest idle buffer that holds the response, else the largest.
	sizes := []int{c.responseBufBytes(1), c.responseBufBytes(4), c.responseBufBytes(2)}
	for _, n := range sizes {
		f.free = append(f.free, &fetchBuf{f: f, b: make([]byte, 0, n)})
	}
	for _, tc := range []struct{ want, got int }{
		{c.responseBufBytes(3), c.responseBufBytes(4)},
		{c.responseBufBytes(1), c.responseBufBytes(1)},
		{c.responseBufBytes(8), c.responseBufBytes(2)}, // none holds it: the largest left
	} {
		if fb := f.takeBufLocked(tc.want); cap(fb.b) != tc.got {
			t.Fatalf("want %d: got a buffer of %d, want %d", tc.want, cap(fb.b), tc.got)
		}
	}

	// A stream whose responses carry 4, 1, 1, 1, 1 partitions over and over; each buffer comes
	// back two responses later (Poll is draining the one before). After a warm-up, no response
	// finds its buffer too small, and none is dropped.
	f.free = nil
	var held []*fetchBuf
	grown, dropped := 0, 0
	for i := range 200 {
		parts := 1
		if i%5 == 0 {
			parts = 4
		}
		want := c.responseBufBytes(parts)
		fb := f.takeBufLocked(want)
		if cap(fb.b) < want {
			if i >= 20 {
				grown++
			}
			fb.b = make([]byte, want, want+want/8) // what Conn.CallInto does
		}
		fb.b = fb.b[:want]
		held = append(held, fb)
		if len(held) > 2 {
			back := held[0]
			held = held[1:]
			idle := len(f.free)
			f.putBufLocked(back)
			if len(f.free) == idle && i >= 20 {
				dropped++
			}
		}
	}
	if grown > 0 || dropped > 0 {
		t.Errorf("after the warm-up, %d responses grew their buffer and %d buffers were dropped", grown, dropped)
	}
	if max := f.idleBufs(); max != (responsesAhead+1)*4 {
		t.Errorf("a fetcher of 4 partitions keeps %d idle buffers, want %d", max, (responsesAhead+1)*4)
	}
}

// A fetcher that reads spans of files keeps the buffers of its pieces (spanPieceFactor ×
// max.partition.fetch.bytes, larger than one partition's full response) while the consumer is
// back at the tail and gets small responses: it needs them at its next catch-up. They used to
// be dropped after fetchBufShrinkAfter small responses, and allocated afresh at each one.
func TestFetchBufKeepsSpanPieces(t *testing.T) {
	c := &Consumer{cfg: ConsumerConfig{FetchMaxBytes: 50 << 20, MaxPartitionFetchBytes: 1 << 20}}
	f := &fetcher{c: c, spans: map[TopicPartition]*fileSpan{{Topic: "t"}: {}}}
	f.spanAheadLocked() // the fetcher reads a span: it sizes its buffers for it
	f.spans = nil       // and is at the tail now
	piece := int(spanPieceFactor * c.cfg.MaxPartitionFetchBytes)
	fb := &fetchBuf{f: f, b: make([]byte, piece)} // read by readSpan (fileSpan.read sizes it)
	for i := range 10 * fetchBufShrinkAfter {
		fb.b = fb.b[:16<<10] // a small response at the tail
		f.putBufLocked(fb)
		if f.takeBufLocked(0) != fb || cap(fb.b) != piece {
			t.Fatalf("a span piece's buffer (%d bytes) was dropped after %d small responses", piece, i+1)
		}
	}

	// A fetcher that never read a span keeps to one partition's full response.
	g := &fetcher{c: c}
	big := &fetchBuf{f: g, b: make([]byte, piece)}
	for range fetchBufShrinkAfter {
		big.b = big.b[:16<<10]
		g.putBufLocked(big)
		g.takeBufLocked(0)
	}
	if big.b != nil {
		t.Fatalf("a %d-byte buffer of a fetcher without spans was kept through %d small responses", piece, fetchBufShrinkAfter)
	}
}
