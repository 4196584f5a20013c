package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The CONTROLLER listener carries two protocols: raft's (hashicorp's NetworkTransport) and the
// controller's own RPCs (rpc.go). The dialing side writes one tag byte first on every connection,
// and the mux hands the connection to the protocol it names. An unknown tag, or none within
// tagTimeout, closes the connection: nothing from the network is trusted further than that.
const (
	tagRaft byte = 'R'
	tagRPC  byte = 'C'
)

const tagTimeout = 10 * time.Second

// DialFunc dials a CONTROLLER listener (net.Dialer.DialContext's shape).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// mux owns the CONTROLLER listener from Open on. Its accept loop and the goroutines reading
// tags are stopped and waited for by close.
type mux struct {
	ln     net.Listener
	log    *slog.Logger
	raftCh chan net.Conn // connections tagged tagRaft, taken by streamLayer.Accept
	rpc    func(net.Conn)
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	mu    sync.Mutex
	conns map[net.Conn]struct{} // accepted connections but raft's, closed by close
}

func newMux(ln net.Listener, log *slog.Logger) *mux {
	return &mux{ln: ln, log: log, raftCh: make(chan net.Conn), done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
}

// start runs the accept loop; rpc serves a connection tagged tagRPC until it ends.
func (m *mux) start(rpc func(net.Conn)) {
	m.rpc = rpc
	m.wg.Add(1)
	go m.acceptLoop()
}

// Accept backoff after a failure other than the listener closing (EMFILE, ENFILE, ENOBUFS,
// ECONNABORTED...): net/http's, 5 ms doubling to 1 s, reset by the next accepted connection.
// Giving up instead would leave the node cut off from raft and the controller RPCs for good.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	var backoff time.Duration
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				m.log.Warn("controller listener closed, not accepting any more", "addr", m.ln.Addr(), "err", err)
				return
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			m.log.Warn("controller listener: accept failed, retrying", "addr", m.ln.Addr(), "err", err, "in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-m.done:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		m.wg.Add(1)
		go m.route(conn)
	}
}

// route reads the tag and hands conn on. The connection is tracked from the start, so that
// close does not wait tagTimeout for a peer that connected and sent nothing, and until it is
// closed, so that close ends raft's reads of it too.
func (m *mux) route(conn net.Conn) {
	defer m.wg.Done()
	if !m.track(conn) {
		return
	}
	var tag [1]byte
	_ = conn.SetReadDeadline(time.Now().Add(tagTimeout))
	if _, err := io.ReadFull(conn, tag[:]); err != nil {
		m.untrack(conn)
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	switch tag[0] {
	case tagRaft:
		// Still tracked: raft's transport neither closes the connections it accepted when it
		// shuts down nor stops the goroutines blocked reading them, so close does. Raft's own
		// Close of one (its peer went) untracks it.
		select {
		case m.raftCh <- &raftConn{Conn: conn, m: m}:
		case <-m.done:
			m.untrack(conn)
		}
	case tagRPC:
		m.rpc(conn)
		m.untrack(conn)
	default:
		m.log.Debug("controller listener: unknown protocol tag, closing", "remote", conn.RemoteAddr(), "tag", tag[0])
		m.untrack(conn)
	}
}

func (m *mux) track(conn net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
		_ = conn.Close()
		return false
	default:
	}
	m.conns[conn] = struct{}{}
	return true
}

func (m *mux) untrack(conn net.Conn) {
	m.mu.Lock()
	delete(m.conns, conn)
	m.mu.Unlock()
	_ = conn.Close()
}

// close closes the listener and every RPC connection, and waits for the mux's goroutines.
func (m *mux) close() error {
	var err error
	m.once.Do(func() {
		m.mu.Lock()
		close(m.done)
		for c := range m.conns {
			_ = c.Close()
		}
		m.mu.Unlock()
		err = m.ln.Close()
	})
	m.wg.Wait()
	return err
}

// streamLayer is raft's view of the mux: the raft-tagged connections in, and dials that write
// the tag first out.
type streamLayer struct {
	m    *mux
	addr raftAddr
	dial DialFunc
}

// raftAddr is the address raft advertises for this node: the voter's configured host:port, which
// is what peers dial (the listener may be bound to 0.0.0.0).
type raftAddr string

func (a raftAddr) Network() string { return "tcp" }
func (a raftAddr) String() string  { return string(a) }

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.m.raftCh:
		return c, nil
	case <-s.m.done:
		return nil, net.ErrClosed
	}
}

// Close is raft's: the mux, which the controller closes after raft, owns the listener.
func (s *streamLayer) Close() error { return nil }

func (s *streamLayer) Addr() net.Addr { return s.addr }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return dialTagged(ctx, s.dial, string(address), tagRaft)
}

// dialTagged dials addr and writes the protocol tag.
func dialTagged(ctx context.Context, dial DialFunc, addr string, tag byte) (net.Conn, error) {
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetWriteDeadline(dl)
	}
	if _, err := conn.Write([]byte{tag}); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("cluster: dial %s: %w", addr, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

func defaultDial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// raftConn is an accepted raft connection: closing it untracks it.
type raftConn struct {
	net.Conn
	m *mux
}

func (c *raftConn) Close() error {
	c.m.mu.Lock()
	delete(c.m.conns, c.Conn)
	c.m.mu.Unlock()
	return c.Conn.Close()
}
