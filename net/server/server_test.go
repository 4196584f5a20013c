package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// Pipelined requests come back in request order although the handler
// completes each group of ten in reverse order.
func TestPipelinedResponsesInOrder(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			type job struct {
				p    *Pending
				corr int32
				body []byte // aliases the frame buffer: valid until p is written
			}
			jobs := make(chan job)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // completes later requests first
				defer wg.Done()
				var group []job
				for j := range jobs {
					group = append(group, j)
					if len(group) == 10 {
						for i := len(group) - 1; i >= 0; i-- {
							respond(group[i].p, group[i].corr, group[i].body)
						}
						group = group[:0]
					}
				}
			}()
			t.Cleanup(func() { close(jobs); wg.Wait() })
			s := startServer(t, testConfig(t, tr), HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				p := c.NewPending()
				jobs <- job{p, h.CorrelationID, body}
				return p
			}))
			c := dial(t, s, tr)
			const n = 100
			var frames []byte
			for i := range n {
				frames = appendRequest(frames, wire.Produce, int32(i), fmt.Appendf(nil, "request %d", i))
			}
			c.write(frames) // all of them before reading anything
			for i := range n {
				corr, body := c.recv()
				if want := fmt.Sprintf("request %d", i); corr != int32(i) || string(body) != want {
					t.Fatalf("response %d: corr %d body %q, want %d %q", i, corr, body, i, want)
				}
			}
			// Responses is counted after the write returns: the client may be first.
			waitFor(t, "responses counted", func() bool { return s.Stats().Responses == n })
			if st := s.Stats(); st.Requests != n {
				t.Fatalf("stats %+v, want %d requests", st, n)
			}
		})
	}
}

// A nil Pending (acks=0) writes nothing and keeps the others in order; so
// does a Pending completed empty, which keeps the body alive until then.
func TestNoResponse(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s := startServer(t, testConfig(t, tr), HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				switch string(body) {
				case "acks=0":
					return nil
				case "empty":
					p := c.NewPending()
					p.Complete()
					return p
				}
				return echo(nil, c, h, body)
			}))
			c := dial(t, s, tr)
			var frames []byte
			for i, body := range []string{"a", "acks=0", "b", "empty", "acks=0", "c"} {
				frames = appendRequest(frames, wire.Produce, int32(i), []byte(body))
			}
			c.write(frames)
			for _, want := range []struct {
				corr int32
				body string
			}{{0, "a"}, {2, "b"}, {5, "c"}} {
				corr, body := c.recv()
				if corr != want.corr || string(body) != want.body {
					t.Fatalf("got %d %q, want %d %q", corr, body, want.corr, want.body)
				}
			}
		})
	}
}

func TestConnInfo(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			var mu sync.Mutex
			ids := map[uint64]bool{}
			s := startServer(t, testConfig(t, tr), HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				if c.Transport() != tr || c.RemoteAddr() == nil || c.LocalAddr() == nil {
					panic(fmt.Sprintf("conn info: %q %v", c.Transport(), c.RemoteAddr()))
				}
				mu.Lock()
				ids[c.ID()] = true
				mu.Unlock()
				return echo(ctx, c, h, body)
			}))
			for range 3 {
				c := dial(t, s, tr)
				c.send(wire.Metadata, 1, nil)
				c.recv()
			}
			mu.Lock()
			defer mu.Unlock()
			if len(ids) != 3 {
				t.Fatalf("conn ids %v, want 3 distinct", ids)
			}
		})
	}
}

// A frame size outside [MinRequestHeaderLen, MaxRequestBytes] closes that
// connection without allocating the size; other connections keep working.
func TestBadFrameSize(t *testing.T) {
	for _, tr := range transports {
		for _, tc := range []struct {
			name string
			size uint32
		}{{"huge", 1 << 30}, {"above-max", 1025}, {"negative", 0x80000000}, {"minus-one", 0xffffffff}, {"too-small", 3}} {
			t.Run(tr+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig(t, tr)
				cfg.MaxRequestBytes = 1024
				s := startServer(t, cfg, echo)
				good := dial(t, s, tr)
				good.send(wire.Metadata, 1, nil)
				good.recv()

				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				bad := dial(t, s, tr)
				bad.write(binary.BigEndian.AppendUint32(nil, tc.size))
				bad.expectClosed()
				runtime.ReadMemStats(&after)
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
					t.Fatalf("server allocated %d bytes for a rejected frame", grew)
				}
				if st := s.Stats(); st.Malformed != 1 {
					t.Fatalf("Malformed = %d, want 1", st.Malformed)
				}
				good.send(wire.Metadata, 2, []byte("still here"))
				if corr, body := good.recv(); corr != 2 || string(body) != "still here" {
					t.Fatalf("other connection: %d %q", corr, body)
				}
			})
		}
	}
}

// A header that does not decode closes the connection, but only after the
// responses queued before it are written.
func TestGarbageHeaderAfterQueuedResponse(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			held := make(chan *Pending, 1)
			s := startServer(t, testConfig(t, tr), HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				p := c.NewPending()
				held <- p
				return p
			}))
			c := dial(t, s, tr)
			c.send(wire.Produce, 1, nil)
			p := <-held
			// size 10, api key, version, correlation id, then a client id
			// length of 32767 with no bytes behind it.
			c.write([]byte{0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 2, 0x7f, 0xff})
			waitFor(t, "malformed frame detected", func() bool { return s.Stats().Malformed == 1 })
			respond(p, 1, []byte("queued"))
			if corr, body := c.recv(); corr != 1 || string(body) != "queued" {
				t.Fatalf("got %d %q, want the queued response", corr, body)
			}
			c.expectClosed()
		})
	}
}

// Conn.Close from a handler (e.g. an unknown api key) writes what is queued,
// reads nothing more, and closes.
func TestHandlerClosesConn(t *testing.T) {
	var served atomic.Int32
	s := startServer(t, testConfig(t, "tcp"), HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
		served.Add(1)
		if h.APIKey == 999 {
			c.Close()
			return nil
		}
		return echo(ctx, c, h, body)
	}))
	c := dial(t, s, "tcp")
	var frames []byte
	frames = appendRequest(frames, wire.Metadata, 1, []byte("x"))
	frames = appendRequest(frames, 999, 2, nil)
	frames = appendRequest(frames, wire.Metadata, 3, []byte("never served"))
	c.write(frames)
	if corr, _ := c.recv(); corr != 1 {
		t.Fatalf("corr %d, want 1", corr)
	}
	c.expectClosed()
	if n := served.Load(); n != 2 {
		t.Fatalf("served %d requests, want 2", n)
	}
}

func TestIdleTimeout(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			// The deadline set at accept also bounds the wait for the first
			// request: idle leaves a slow machine time to start the reader
			// before the connection would count as idle, unserved.
			const idle = 500 * time.Millisecond
			held := make(chan *Pending, 1)
			cfg := testConfig(t, tr)
			cfg.IdleTimeout = idle
			s := startServer(t, cfg, HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				if string(body) == "hold" {
					p := c.NewPending()
					held <- p
					return p
				}
				return echo(ctx, c, h, body)
			}))

			c := dial(t, s, tr)
			start := time.Now() // the server's last activity is after this
			c.send(wire.Metadata, 1, nil)
			c.recv()
			c.expectClosed()
			if d := time.Since(start); d < idle {
				t.Fatalf("closed after %v, before the idle timeout %v", d, idle)
			}

			// An outstanding response keeps a connection alive past the timeout.
			busy := dial(t, s, tr)
			busy.send(wire.Fetch, 2, []byte("hold"))
			p := <-held
			<-time.After(3 * idle) // the time must pass; nothing to poll for
			respond(p, 2, []byte("late"))
			if corr, body := busy.recv(); corr != 2 || string(body) != "late" {
				t.Fatalf("got %d %q", corr, body)
			}
			// Still open, not just draining: a connection closed for idleness while the
			// response was outstanding would deliver it and serve nothing more.
			busy.send(wire.Metadata, 3, nil)
			if corr, _ := busy.recv(); corr != 3 {
				t.Fatalf("after the late response: got correlation %d, want 3", corr)
			}
			busy.expectClosed() // idle again afterwards
			waitFor(t, "connections gone", func() bool { return s.Stats().Open == 0 })
		})
	}
}

// Close lets a request whose response completes after Close started finish
// and be written before the connection closes.
func TestGracefulClose(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			held := make(chan *Pending, 1)
			var ctxDone atomic.Bool
			s, err := New(testConfig(t, tr), HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				p := c.NewPending()
				p.OnDone(func() { ctxDone.Store(ctx.Err() != nil) })
				held <- p
				return p
			}))
			if err != nil {
				t.Fatal(err)
			}
			c := dial(t, s, tr)
			c.send(wire.Produce, 7, nil)
			p := <-held

			closed := make(chan error, 1)
			go func() { closed <- s.Close(context.Background()) }()
			waitFor(t, "listener closed", func() bool {
				addr := s.Addr()
				if tr == "unix" {
					addr = s.UnixAddr()
				}
				nc, err := net.Dial(addr.Network(), addr.String())
				if err == nil {
					nc.Close()
				}
				return err != nil
			})
			select {
			case err := <-closed:
				t.Fatalf("Close returned %v before the in-flight request completed", err)
			default:
			}
			respond(p, 7, []byte("after close"))
			if corr, body := c.recv(); corr != 7 || string(body) != "after close" {
				t.Fatalf("got %d %q", corr, body)
			}
			c.expectClosed()
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if ctxDone.Load() {
				t.Fatal("connection context cancelled before its response was written")
			}
			if err := s.Close(context.Background()); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Close: %v, want ErrClosed", err)
			}
			waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= goroutines })
		})
	}
}

// When Close's context ends, connections are closed hard; a response
// completed later still runs its OnDone hooks, exactly once.
func TestCloseHard(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	held := make(chan *Pending, 1)
	var ctxErr atomic.Value
	s, err := New(testConfig(t, "tcp"), HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
		p := c.NewPending()
		held <- p
		go func() { <-ctx.Done(); ctxErr.Store(ctx.Err()) }()
		return p
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, s, "tcp")
	c.send(wire.Fetch, 1, nil)
	p := <-held
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want DeadlineExceeded", err)
	}
	c.expectClosed()
	waitFor(t, "connection context cancelled", func() bool { return ctxErr.Load() != nil })
	var released atomic.Int32
	p.OnDone(func() { released.Add(1) })
	p.Complete() // after the connection died: releases at once
	if n := released.Load(); n != 1 {
		t.Fatalf("OnDone ran %d times, want 1", n)
	}
	checkNoServerGoroutines(t)
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= goroutines })
}

// A client that stops reading stalls only its own connection: the
// MaxInFlight bound stops its reader and other connections are served.
func TestSlowReaderDoesNotBlockOthers(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			big := make([]byte, 1<<20)
			var slowServed atomic.Int32
			cfg := testConfig(t, tr)
			cfg.MaxInFlight = 2
			s := startServer(t, cfg, HandlerFunc(func(ctx context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
				if string(body) != "big" {
					return echo(ctx, c, h, body)
				}
				slowServed.Add(1)
				p := c.NewPending()
				p.Buf = binary.BigEndian.AppendUint32(p.Buf[:0], uint32(4+len(big)))
				p.Buf = binary.BigEndian.AppendUint32(p.Buf, uint32(h.CorrelationID))
				p.AppendBytes(p.Buf)
				p.AppendBytes(big)
				p.Complete()
				return p
			}))
			slow := dial(t, s, tr)
			const n = 64 // 64 MiB of responses: far more than socket buffers hold
			var frames []byte
			for i := range n {
				frames = appendRequest(frames, wire.Fetch, int32(i), []byte("big"))
			}
			slow.write(frames)

			fast := dial(t, s, tr)
			for i := range 20 {
				fast.send(wire.Metadata, int32(i), []byte("ping"))
				if corr, _ := fast.recv(); corr != int32(i) {
					t.Fatalf("fast client: corr %d, want %d", corr, i)
				}
			}
			if got := slowServed.Load(); got >= n {
				t.Fatalf("slow client had all %d requests read: no backpressure", got)
			}
			slow.nc.Close() // its writer fails and the connection ends
			waitFor(t, "slow connection gone", func() bool { return s.Stats().Open == 1 })
		})
	}
}

func TestUnixSocketFile(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "s.sock")

	// A stale socket (its listener gone without unlinking) is replaced.
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	cfg := testConfig(t, "")
	cfg.UnixPath = path
	s := startServer(t, cfg, echo)
	c := dial(t, s, "unix")
	c.send(wire.Metadata, 1, nil)
	c.recv()

	// A live one is not.
	if _, err := New(cfg, echo); !errors.Is(err, ErrUnixSocketInUse) {
		t.Fatalf("New on a live socket: %v, want ErrUnixSocketInUse", err)
	}
	// Nor is a file that is not a socket.
	cfg.UnixPath = filepath.Join(dir, "regular")
	if err := os.WriteFile(cfg.UnixPath, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, echo); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("New on a regular file: %v, want ErrNotSocket", err)
	}
	if _, err := os.Stat(cfg.UnixPath); err != nil {
		t.Fatalf("regular file removed: %v", err)
	}
	if _, err := New(Config{}, echo); !errors.Is(err, ErrNoListener) {
		t.Fatalf("New without listeners: %v", err)
	}
}

// Both listeners at once; Close removes the socket file.
func TestBothListeners(t *testing.T) {
	cfg := testConfig(t, "tcp")
	cfg.UnixPath = testConfig(t, "unix").UnixPath
	s, err := New(cfg, echo)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range transports {
		c := dial(t, s, tr)
		c.send(wire.Metadata, 3, []byte(tr))
		if _, body := c.recv(); string(body) != tr {
			t.Fatalf("%s: %q", tr, body)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(cfg.UnixPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after Close: %v", err)
	}
	checkNoServerGoroutines(t)
}

// An idle timeout too large to add to a time (math.MaxInt64, how the broker spells
// connections.max.idle.ms=-1) means no timeout; the idle arithmetic used to overflow into the
// past, which would have closed every connection at its first idle check.
func TestIdleTimeoutForever(t *testing.T) {
	cfg := Config{IdleTimeout: time.Duration(math.MaxInt64)}.withDefaults()
	if cfg.IdleTimeout >= 0 {
		t.Fatalf("IdleTimeout %v after withDefaults, want negative (none)", cfg.IdleTimeout)
	}
	c := &Conn{srv: &Server{cfg: Config{IdleTimeout: time.Duration(math.MaxInt64)}, epoch: time.Now()}}
	c.touch()
	if _, ok := c.idleDeadline(); !ok {
		t.Fatal("a connection just used counts as idle under a huge timeout")
	}
}
