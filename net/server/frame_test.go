package server

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// A frame trickled one byte per 100 ms is closed once RequestTimeout has passed since its first
// byte, though bytes keep coming (the idle timeout alone never would); a connection idle
// between requests for longer than RequestTimeout is not.
func TestSlowFrameClosed(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			cfg := testConfig(t, tr)
			cfg.RequestTimeout = timeout
			s := startServer(t, cfg, echo)

			idle := dial(t, s, tr)
			idle.roundTrip(1)
			<-time.After(2 * timeout) // the time must pass; nothing to poll for
			idle.roundTrip(2)

			slow := dial(t, s, tr)
			frame := appendRequest(nil, wire.Metadata, 3, make([]byte, 100)) // 10 s at this pace
			start := time.Now()
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for _, b := range frame {
					if _, err := slow.nc.Write([]byte{b}); err != nil {
						return // closed by the server
					}
					select {
					case <-tick.C:
					case <-stop:
						return
					}
				}
			}()
			slow.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			slow.expectClosed()
			if d := time.Since(start); d < timeout {
				t.Fatalf("closed after %v, before the request timeout %v", d, timeout)
			}
			waitFor(t, "the slow frame counted", func() bool { return s.Stats().SlowFrames == 1 })
			if st := s.Stats(); st.Requests != 2 {
				t.Fatalf("%d requests served, want 2", st.Requests)
			}
			idle.roundTrip(4) // the other connection is untouched
		})
	}
}

// sendPartial writes the first part bytes of a frame declaring size bytes.
func (c *client) sendPartial(size, part int) {
	c.t.Helper()
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	h := wire.RequestHeader{APIKey: wire.Produce, CorrelationID: 1, ClientID: "test"}
	b = h.AppendTo(b)
	b = append(b, make([]byte, part-(len(b)-wire.FrameSizeLen))...)
	c.write(b)
}

// Frames declared large and sent in part hold buffers the size of what arrived (doubling),
// not of what they declared; when their connections close, the buffers and the budget they
// hold go back (measured by what the server counts, not RSS).
func TestPartialLargeFramesReleased(t *testing.T) {
	const (
		conns    = 20
		declared = 100 << 20
		sent     = 1<<20 + 1<<19 // 1.5 MiB: a 1 MiB buffer, filled, then a 2 MiB one
	)
	cfg := testConfig(t, "tcp")
	cfg.QueuedMaxRequestBytes = conns * declared // room for all, so each is being read
	s := startServer(t, cfg, echo)
	var cs []*client
	for range conns {
		c := dial(t, s, "tcp")
		c.sendPartial(declared, sent)
		cs = append(cs, c)
	}
	waitFor(t, "every frame's buffer grown to 2 MiB", func() bool {
		return s.Stats().FrameBufferBytes == conns*2<<20
	})
	if st := s.Stats(); st.QueuedRequestBytes != conns*declared {
		t.Fatalf("budget held %d, want the declared %d", st.QueuedRequestBytes, conns*declared)
	}
	for _, c := range cs {
		c.nc.Close()
	}
	waitFor(t, "buffers and budget released", func() bool {
		st := s.Stats()
		return st.FrameBufferBytes == 0 && st.QueuedRequestBytes == 0 && st.Open == 0
	})
}

// At queued.max.request.bytes, connections stop reading: a request sent then is not served
// (nor read) until responses held elsewhere are written and give their budget back, and is
// served then. A frame larger than the whole budget is read alone.
func TestQueuedRequestBytesPausesReads(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			const budget = 1 << 20
			held := make(chan *Pending, 2)
			cfg := testConfig(t, tr)
			cfg.QueuedMaxRequestBytes = budget
			cfg.OverlapBytes = -1
			s := startServer(t, cfg, HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				if len(body) > 0 && body[0] == 'H' {
					p := c.NewPending()
					held <- p
					return p
				}
				return echo(ctx, c, h, body)
			}))
			hold := make([]byte, 300<<10) // a 512 KiB buffer: two fill the budget
			hold[0] = 'H'
			a, b, c := dial(t, s, tr), dial(t, s, tr), dial(t, s, tr)
			a.send(wire.Produce, 1, hold)
			pa := <-held
			b.send(wire.Produce, 2, hold)
			pb := <-held
			if st := s.Stats(); st.QueuedRequestBytes != budget {
				t.Fatalf("budget held %d, want all %d", st.QueuedRequestBytes, budget)
			}
			c.send(wire.Metadata, 3, []byte("ping"))
			waitFor(t, "the third connection waiting for budget", func() bool { return s.Stats().BudgetWaits == 1 })
			if st := s.Stats(); st.Requests != 2 {
				t.Fatalf("%d requests served while the budget was full, want 2", st.Requests)
			}
			respond(pa, 1, nil)
			if corr, _ := a.recv(); corr != 1 {
				t.Fatalf("a: correlation %d", corr)
			}
			if corr, body := c.recv(); corr != 3 || string(body) != "ping" {
				t.Fatalf("c after the budget freed: %d %q", corr, body)
			}
			respond(pb, 2, nil)
			b.recv()

			big := make([]byte, 3*budget)
			c.send(wire.Produce, 4, big)
			if corr, body := c.recv(); corr != 4 || len(body) != len(big) {
				t.Fatalf("a frame over the budget: %d, %d bytes", corr, len(body))
			}
			waitFor(t, "budget released", func() bool { return s.Stats().QueuedRequestBytes == 0 })
		})
	}
}

// A connection that dies with a large frame more than half read has had the frame's full
// buffer, beyond the pools; its death returns free memory to the operating system (once per
// scavengeInterval), so an idle broker does not keep it until the runtime's next forced
// collection. A large frame that arrives whole does not.
func TestAbandonedLargeFrameReturnsMemory(t *testing.T) {
	const declared = 10 << 20
	cfg := testConfig(t, "tcp")
	s := startServer(t, cfg, echo)
	whole := dial(t, s, "tcp")
	whole.send(wire.Produce, 1, make([]byte, declared))
	whole.recv()
	if st := s.Stats(); st.MemoryReturns != 0 {
		t.Fatalf("%d returns of memory after a frame that arrived whole", st.MemoryReturns)
	}

	c := dial(t, s, "tcp")
	c.sendPartial(declared, 6<<20)
	waitFor(t, "the frame's own buffer", func() bool { return s.Stats().FrameBufferBytes >= declared })
	c.nc.Close()
	waitFor(t, "free memory returned", func() bool { return s.Stats().MemoryReturns == 1 })
	if st := s.Stats(); st.FrameBufferBytes != 0 || st.QueuedRequestBytes != 0 {
		t.Fatalf("after the close: buffers %d, budget %d", st.FrameBufferBytes, st.QueuedRequestBytes)
	}
}

// Large frames read through chunks arrive intact: every byte where it was sent, whatever the
// size relative to the chunks, pipelined back to back with small ones.
func TestLargeFramesIntact(t *testing.T) {
	cfg := testConfig(t, "unix")
	cfg.OverlapBytes = -1
	s := startServer(t, cfg, echo)
	c := dial(t, s, "unix")
	sizes := []int{frameGrowFrom - 100, frameGrowFrom + 1, 3*frameGrowFrom/2 + 7, 2 * frameGrowFrom, 5*frameGrowFrom + 3}
	var frames []byte
	for i, n := range sizes {
		body := make([]byte, n)
		for j := range body {
			body[j] = byte(j*7 + i)
		}
		frames = appendRequest(frames, wire.Produce, int32(i), body)
		frames = appendRequest(frames, wire.Metadata, int32(100+i), []byte("small"))
	}
	go c.nc.Write(frames) // the server answers while this is written
	for i, n := range sizes {
		corr, body := c.recv()
		if corr != int32(i) || len(body) != n {
			t.Fatalf("frame %d: correlation %d, %d bytes; want %d bytes", i, corr, len(body), n)
		}
		for j, b := range body {
			if b != byte(j*7+i) {
				t.Fatalf("frame %d of %d bytes: byte %d is %d, want %d", i, n, j, b, byte(j*7+i))
			}
		}
		if corr, body := c.recv(); corr != int32(100+i) || string(body) != "small" {
			t.Fatalf("after frame %d: %d %q", i, corr, body)
		}
	}
}

// A connection that sends requests and never reads their responses cannot hold
// queued.max.request.bytes for ever: a large response fills its socket, the frame of a request
// behind it holds the whole budget, and every other connection stops reading. Once no response
// byte has been taken for RequestTimeout the connection is closed and its budget given back.
func TestUnreadResponsesReleaseBudget(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			const budget = 1<<20 + 4<<10 // the hostile frames' 1 MiB and 256 B, not 8 KiB more
			cfg := testConfig(t, tr)
			cfg.QueuedMaxRequestBytes = budget
			cfg.OverlapBytes = -1
			cfg.SendBufferBytes = 64 << 10
			cfg.RequestTimeout = 500 * time.Millisecond
			held := make(chan *Pending, 1)
			s := startServer(t, cfg, HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				if len(body) > 0 && body[0] == 'B' {
					p := c.NewPending()
					held <- p
					return p
				}
				return echo(ctx, c, h, body)
			}))
			hostile := dial(t, s, tr)
			hostile.send(wire.Fetch, 1, []byte("B"))
			frame := make([]byte, 700<<10) // a 1 MiB buffer
			hostile.send(wire.Produce, 2, frame)
			waitFor(t, "the hostile frames holding the budget", func() bool { return s.Stats().QueuedRequestBytes == 1<<20+256 })
			respond(<-held, 1, make([]byte, 16<<20)) // a response it never reads

			other := dial(t, s, tr)
			ping := make([]byte, 8<<10)
			other.send(wire.Metadata, 3, ping)
			if corr, body := other.recv(); corr != 3 || len(body) != len(ping) {
				t.Fatalf("other connection: %d, %d bytes", corr, len(body))
			}
			waitFor(t, "the hostile connection closed", func() bool {
				st := s.Stats()
				return st.Open == 1 && st.QueuedRequestBytes == 0
			})
		})
	}
}

// A handler that calls RequestDone keeps its Pending without its frame: the frame's buffer and
// budget go back when Serve returns, and the response is written when it completes.
func TestRequestDoneReturnsFrameEarly(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			held := make(chan *Pending, 1)
			cfg := testConfig(t, tr)
			cfg.QueuedMaxRequestBytes = 1 << 20
			s := startServer(t, cfg, HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				p := c.NewPending()
				p.RequestDone()
				held <- p
				return p
			}))
			c := dial(t, s, tr)
			c.send(wire.Fetch, 1, make([]byte, 100<<10))
			p := <-held
			waitFor(t, "the frame given back while its response waits", func() bool {
				st := s.Stats()
				return st.QueuedRequestBytes == 0 && st.FrameBufferBytes == 0
			})
			respond(p, 1, []byte("late"))
			if corr, body := c.recv(); corr != 1 || string(body) != "late" {
				t.Fatalf("response: %d %q", corr, body)
			}
		})
	}
}

// A frame's time runs from when the reader comes to it: the first bytes of a frame that arrived
// with an earlier one, while the reader was busy serving that one for longer than the request
// timeout, waited for the server, not for the peer, and do not get the connection closed.
func TestBufferedFrameTimedFromReader(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			const timeout = 200 * time.Millisecond
			cfg := testConfig(t, tr)
			cfg.RequestTimeout = timeout
			cfg.OverlapBytes = -1
			served := make(chan struct{})
			release := make(chan struct{})
			s := startServer(t, cfg, HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				if h.CorrelationID == 1 {
					close(served)
					<-release // a slow Serve on the reader goroutine
				}
				return echo(ctx, c, h, body)
			}))
			c := dial(t, s, tr)
			second := appendRequest(nil, wire.Metadata, 2, []byte("second"))
			// The first frame and the start of the second in one write: one read buffers both.
			c.write(append(appendRequest(nil, wire.Metadata, 1, []byte("first")), second[:6]...))
			<-served
			<-time.After(2 * timeout) // the time must pass; nothing to poll for
			close(release)
			c.write(second[6:])
			for _, want := range []int32{1, 2} {
				if corr, _ := c.recv(); corr != want {
					t.Fatalf("correlation %d, want %d", corr, want)
				}
			}
			if st := s.Stats(); st.SlowFrames != 0 {
				t.Fatalf("%d slow frames, want 0", st.SlowFrames)
			}
		})
	}
}
