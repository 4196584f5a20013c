package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

var transports = []string{"tcp", "unix"}

// testConfig listens on the given transport only, with a silent logger.
func testConfig(t testing.TB, transport string) Config {
	cfg := Config{Logger: slog.New(slog.DiscardHandler)}
	switch transport {
	case "tcp":
		cfg.TCPAddr = "127.0.0.1:0"
	case "unix":
		// t.TempDir paths can exceed the 108-byte sun_path limit; keep it short.
		cfg.UnixPath = filepath.Join(shortTempDir(t), "s.sock")
	}
	return cfg
}

func shortTempDir(t testing.TB) string {
	dir := t.TempDir()
	if len(dir) < 90 {
		return dir
	}
	d, err := os.MkdirTemp("", "sl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startServer starts a server and, at cleanup, closes it and checks that
// none of its goroutines are left.
func startServer(t testing.TB, cfg Config, h Handler) *Server {
	t.Helper()
	s, err := New(cfg, h)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
		checkNoServerGoroutines(t)
	})
	return s
}

// serverFuncs are the functions whose presence in a goroutine stack means a
// server goroutine is still running.
var serverFuncs = []string{"(*Conn).readLoop", "(*Conn).writeLoop", "(*Conn).overlapLoop", "(*Server).acceptLoop", "(*Server).scavengeLoop", "(*Server).Close.func"}

func checkNoServerGoroutines(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		leak := ""
		for _, f := range serverFuncs {
			if strings.Contains(stacks, "net/server."+f) {
				leak = f
			}
		}
		if leak == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server goroutine %s still running:\n%s", leak, stacks)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // poll interval, not a wait for a condition
	}
}

func dial(t testing.TB, s *Server, transport string) *client {
	t.Helper()
	var addr net.Addr
	if transport == "tcp" {
		addr = s.Addr()
	} else {
		addr = s.UnixAddr()
	}
	nc, err := net.Dial(addr.Network(), addr.String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, nc: nc}
}

// client speaks the frame layer by hand.
type client struct {
	t    testing.TB
	nc   net.Conn
	wbuf []byte
	rbuf []byte
	size [4]byte
}

// appendRequest appends a request frame with the given header fields and body.
func appendRequest(dst []byte, key wire.APIKey, corr int32, body []byte) []byte {
	buf, start := wire.BeginFrame(dst)
	h := wire.RequestHeader{APIKey: key, CorrelationID: corr, ClientID: "test"}
	buf = h.AppendTo(buf)
	buf = append(buf, body...)
	if err := wire.FinishFrame(buf, start, 0); err != nil {
		panic(err)
	}
	return buf
}

func (c *client) send(key wire.APIKey, corr int32, body []byte) {
	c.t.Helper()
	c.wbuf = appendRequest(c.wbuf[:0], key, corr, body)
	c.write(c.wbuf)
}

func (c *client) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// recv reads one response frame and returns its correlation id and body
// (valid until the next recv).
func (c *client) recv() (int32, []byte) {
	c.t.Helper()
	corr, body, err := c.tryRecv()
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	return corr, body
}

func (c *client) tryRecv() (int32, []byte, error) {
	if _, err := io.ReadFull(c.nc, c.size[:]); err != nil {
		return 0, nil, err
	}
	n, err := wire.ReadResponseFrameSize(c.size, 1<<30)
	if err != nil {
		return 0, nil, err
	}
	if cap(c.rbuf) < n {
		c.rbuf = make([]byte, n)
	}
	c.rbuf = c.rbuf[:n]
	if _, err := io.ReadFull(c.nc, c.rbuf); err != nil {
		return 0, nil, err
	}
	var h wire.ResponseHeader
	body, err := h.ReadFrom(c.rbuf)
	return h.CorrelationID, body, err
}

// expectClosed reads until the server closes the connection.
func (c *client) expectClosed() {
	c.t.Helper()
	buf := make([]byte, 4096)
	for {
		n, err := c.nc.Read(buf)
		if err == nil {
			c.t.Fatalf("connection still open: read %d unexpected bytes", n)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatal("connection not closed before the deadline")
		}
		return // EOF or reset
	}
}

// respond fills p with a response frame echoing body and completes it.
func respond(p *Pending, corr int32, body []byte) {
	buf, start := wire.BeginFrame(p.Buf[:0])
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = append(buf, body...)
	if err := wire.FinishFrame(buf, start, 0); err != nil {
		panic(err)
	}
	p.Buf = buf
	p.AppendBytes(buf)
	p.Complete()
}

// echo answers every request at once with its own body.
var echo = HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
	p := c.NewPending()
	respond(p, h.CorrelationID, body)
	return p
})

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll interval
	}
}
