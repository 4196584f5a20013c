package cluster

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// closingConn closes its controller, and waits for Close to return, when the first heartbeat
// request is written through it, then fails the write as the closed controller's link would.
type closingConn struct {
	net.Conn
	armed *atomic.Bool
	close func()
}

func (c *closingConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"op":"heartbeat"`)) && c.armed.CompareAndSwap(true, false) {
		c.close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// TestRegisterRefusedAfterClose: a controller closed while Register is between the registration
// and the start of its heartbeat goroutine refuses the registration (ErrClosed) rather than
// adding to the WaitGroup Close has finished waiting on.
func TestRegisterRefusedAfterClose(t *testing.T) {
	tc, lns := newTestCluster(t, 3)
	var armed atomic.Bool
	tc.tweak = func(cfg *Config) {
		id, dial := cfg.NodeID, cfg.Dial
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &closingConn{Conn: conn, armed: &armed, close: func() { _ = tc.node(id).Close() }}, nil
		}
	}
	tc.start(lns)
	tc.leader()
	f := tc.node(tc.follower())
	armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := f.Register(ctx, MemberConfig{Info: BrokerInfo{ID: 7, Host: "127.0.0.1", Port: 9099}, HeartbeatInterval: time.Second})
	if armed.Load() {
		t.Fatal("the first heartbeat was never forwarded")
	}
	if !errors.Is(err, ErrClosed) {
		if m != nil {
			m.Close()
		}
		t.Fatalf("Register on a controller closed during it: member %v, err %v; want ErrClosed", m != nil, err)
	}
}
