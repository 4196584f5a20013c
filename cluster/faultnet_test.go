package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// faultNet connects in-process nodes over loopback TCP through their Dial seams, and cuts,
// delays or one-way drops the link between any two of them. A connection dialed by a to b
// carries a→b in its writes and b→a in its reads, so the dialer's wrapper governs both
// directions of the connections it made.
type faultNet struct {
	mu    sync.Mutex
	addrs map[string]int32 // listener address → node
	rules map[[2]int32]rule
	conns map[*faultConn]struct{}
}

type rule struct {
	drop  bool // a→b: swallowed (the connection is closed when the rule goes)
	delay time.Duration
}

func newFaultNet() *faultNet {
	return &faultNet{addrs: map[string]int32{}, rules: map[[2]int32]rule{}, conns: map[*faultConn]struct{}{}}
}

func (n *faultNet) register(id int32, addr string) {
	n.mu.Lock()
	n.addrs[addr] = id
	n.mu.Unlock()
}

// dialer is node from's Dial.
func (n *faultNet) dialer(from int32) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.mu.Lock()
		to, ok := n.addrs[addr]
		cut := ok && n.rules[[2]int32{from, to}].drop && n.rules[[2]int32{to, from}].drop
		n.mu.Unlock()
		if cut {
			return nil, errors.New("faultnet: link cut")
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		fc := &faultConn{Conn: c, n: n, from: from, to: to}
		n.mu.Lock()
		n.conns[fc] = struct{}{}
		n.mu.Unlock()
		return fc, nil
	}
}

// set replaces the rule for a→b and closes the connections that carried a→b traffic, so that a
// drop takes effect at once and a healed link starts on clean streams.
func (n *faultNet) set(a, b int32, r rule) {
	n.mu.Lock()
	n.rules[[2]int32{a, b}] = r
	var victims []*faultConn
	for c := range n.conns {
		if (c.from == a && c.to == b) || (c.from == b && c.to == a) {
			victims = append(victims, c)
		}
	}
	n.mu.Unlock()
	if r.delay == 0 {
		for _, c := range victims {
			_ = c.Close()
		}
	}
}

// cut drops both directions between a and b.
func (n *faultNet) cut(a, b int32) {
	n.set(a, b, rule{drop: true})
	n.set(b, a, rule{drop: true})
}

// isolate cuts a from every other node.
func (n *faultNet) isolate(a int32, others ...int32) {
	for _, o := range others {
		if o != a {
			n.cut(a, o)
		}
	}
}

// heal removes every rule.
func (n *faultNet) heal() {
	n.mu.Lock()
	var pairs [][2]int32
	for p := range n.rules {
		pairs = append(pairs, p)
	}
	n.mu.Unlock()
	for _, p := range pairs {
		n.set(p[0], p[1], rule{})
	}
}

func (n *faultNet) rule(a, b int32) rule {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rules[[2]int32{a, b}]
}

type faultConn struct {
	net.Conn
	n        *faultNet
	from, to int32
	once     sync.Once
}

func (c *faultConn) Write(p []byte) (int, error) {
	r := c.n.rule(c.from, c.to)
	if r.delay > 0 {
		time.Sleep(r.delay) // the link's latency, not a wait for a condition
	}
	if r.drop {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if n > 0 && c.n.rule(c.to, c.from).drop {
			continue // b→a is dropped: swallow what arrives
		}
		return n, err
	}
}

func (c *faultConn) Close() error {
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.conns, c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}

// fakeClock is a Clock a test advances.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, fakeWaiter{at: f.now.Add(d), ch: ch})
	return ch
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}
