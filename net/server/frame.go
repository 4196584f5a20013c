package server

import (
	"io"
	"time"
)

// frameGrowFrom is the largest frame whose buffer is taken at its declared size before its
// bytes arrive; it is also the size of the chunks a larger frame is first read into. A larger
// frame is read into pooled chunks until half of it has arrived, then into a buffer of its
// declared size, into which the chunks are copied: a peer that declares 100 MiB and sends 10
// holds 10 MiB, not 100, and a frame that arrives whole costs one copy of its first half. (A
// buffer doubling as bytes arrive holds as little, but copies almost the whole frame and
// leaves each smaller buffer to the collector: BenchmarkRequestFrame's 16 MiB frames
// allocated 45 MB each that way, against 17 MB this way and 16.8 MB at the declared size.)
// 1 MiB is Kafka's default max.request.size, so the requests of most producers are read as
// before, with no copy.
const frameGrowFrom = 1 << 20

// frame is a request's frame buffer and what it holds of the server's budget.
type frame struct {
	buf    *[]byte
	charge int64 // given back to Server.budget with the buffer
}

// takeBuf returns a buffer of length n from the pools, counted in Stats.FrameBufferBytes
// until dropBuf.
func (s *Server) takeBuf(n int) *[]byte {
	b := getBuf(n)
	s.stats.frameBytes.Add(int64(cap(*b)))
	return b
}

// dropBuf returns a buffer from takeBuf.
func (s *Server) dropBuf(b *[]byte) {
	s.stats.frameBytes.Add(-int64(cap(*b)))
	putBuf(b)
}

// putFrame gives a frame's buffer and budget back. Any goroutine.
func (s *Server) putFrame(f frame) {
	if f.buf != nil {
		s.dropBuf(f.buf)
	}
	s.budget.release(f.charge)
}

// charge waits for the budget of a frame whose buffer will hold n bytes (see budget). A wait
// is the server's, not the peer's: the frame's deadline starts again after it. Reader only.
func (c *Conn) charge(n int) (int64, error) {
	ch := c.srv.budget.charge(bufCap(n))
	waited, err := c.srv.budget.acquire(ch, c.stop, c.hard, c.writerDone)
	if waited {
		c.touch()
		c.frameStart = c.lastActive.Load()
	}
	return ch, err
}

// readFrame reads the n bytes of a frame after its size: charged against the budget first,
// then into a buffer taken at once when the frame is small or already buffered, and as its
// bytes arrive otherwise (see frameGrowFrom). On an error nothing is held. Reader only.
func (c *Conn) readFrame(n int) (frame, error) {
	s := c.srv
	charge, err := c.charge(n)
	if err != nil {
		return frame{}, err
	}
	f := frame{charge: charge}
	if c.br.Buffered() < n {
		c.armFrameDeadline()
	}
	if n <= frameGrowFrom || c.br.Buffered() >= n {
		f.buf = s.takeBuf(n)
		if _, err := io.ReadFull(c.br, *f.buf); err != nil {
			s.putFrame(f)
			return frame{}, err
		}
		return f, nil
	}
	got := 0
	defer func() {
		for i, ch := range c.chunks {
			s.dropBuf(ch)
			c.chunks[i] = nil
		}
		c.chunks = c.chunks[:0]
	}()
	for got < n/2 { // so n-got > n/2: no chunk reads past the frame
		ch := s.takeBuf(min(frameGrowFrom, n-got))
		c.chunks = append(c.chunks, ch)
		m, err := io.ReadFull(c.br, *ch)
		got += m
		if err != nil {
			s.budget.release(charge)
			return frame{}, err
		}
	}
	f.buf = s.takeBuf(n)
	at := 0
	for _, ch := range c.chunks {
		at += copy((*f.buf)[at:], *ch)
	}
	if _, err := io.ReadFull(c.br, (*f.buf)[got:]); err != nil {
		s.noteAbandoned(cap(*f.buf))
		s.putFrame(f)
		return frame{}, err
	}
	return f, nil
}

// armFrameDeadline makes the socket's read deadline no later than the frame's own (its first
// byte's arrival plus RequestTimeout), for a frame that is not all buffered yet: only such a
// frame needs a read, so a small request that arrives whole costs no deadline change. Reader
// only.
func (c *Conn) armFrameDeadline() {
	c.inFrame = true
	rt := c.srv.cfg.RequestTimeout
	if rt <= 0 || c.frameArmed {
		return
	}
	c.frameArmed = true
	// The frame is timed from now if the reader comes to it later than the read that brought
	// its first byte: a byte buffered with an earlier frame, while the reader served that one
	// or waited for a slot, waited for the server, not for the peer.
	c.frameStart = max(c.frameStart, int64(time.Since(c.srv.epoch)))
	d := c.frameDeadline()
	if !c.readDeadline.IsZero() && !d.Before(c.readDeadline) {
		return
	}
	c.setReadDeadline(d)
}

// frameDeadline is when the frame being read must have arrived whole.
func (c *Conn) frameDeadline() time.Time {
	return c.srv.epoch.Add(time.Duration(c.frameStart) + c.srv.cfg.RequestTimeout)
}

// frameDone: the frame has been read; the next one is timed from its own first byte.
func (c *Conn) frameDone() {
	c.inFrame, c.frameArmed = false, false
}
