package server

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// pipeListener is a listener of an in-process network: Dial hands Accept one end of a
// net.Pipe. Its connections have no descriptor, so the server writes file parts without
// sendfile.
type pipeListener struct {
	conns     chan net.Conn
	closeOnce sync.Once
	closed    chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(t *testing.T) *client {
	t.Helper()
	srv, cli := net.Pipe()
	select {
	case l.conns <- srv:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not accept")
	}
	t.Cleanup(func() { cli.Close() })
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, nc: cli}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe:1" }

// Config.Listen replaces net.Listen: a test runs servers on an injected network (here an
// in-process one of net.Pipe connections) and the server serves it as it serves TCP, file parts
// included (written without sendfile, which needs a socket's descriptor).
func TestInjectedListener(t *testing.T) {
	ln := newPipeListener()
	var asked []string
	cfg := Config{TCPAddr: "127.0.0.1:9092", Logger: testConfig(t, "tcp").Logger, Listen: func(network, address string) (net.Listener, error) {
		asked = append(asked, network+" "+address)
		return ln, nil
	}}
	fs := vfs.NewMemFS()
	f, err := fs.Create("data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("0123456789"), 0); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg, HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
		p := c.NewPending()
		buf, start := wire.BeginFrame(p.Buf[:0])
		buf = append(buf, 0, 0, 0, byte(h.CorrelationID))
		buf = append(buf, body...)
		if err := wire.FinishFrame(buf, start, 4); err != nil {
			panic(err)
		}
		p.Buf = buf
		p.AppendBytes(buf)
		p.AppendFile(f, 2, 4) // "2345"
		p.Complete()
		return p
	}))
	if len(asked) != 1 || asked[0] != "tcp 127.0.0.1:9092" {
		t.Fatalf("Listen called with %q, want one call for tcp 127.0.0.1:9092", asked)
	}
	if got := s.Addr(); got == nil || got.String() != "pipe:1" {
		t.Fatalf("Addr = %v, want the injected listener's", got)
	}
	c := ln.dial(t)
	c.send(wire.Produce, 7, []byte("body:"))
	corr, body := c.recv()
	if corr != 7 || string(body) != "body:2345" {
		t.Fatalf("response %d %q, want 7 %q", corr, body, "body:2345")
	}
}
