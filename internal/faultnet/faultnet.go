// Package faultnet is a fault-injecting loopback network for tests that run several nodes
// (brokers, controllers) in one process: it wraps their listen and dial seams so that a test can
// cut the link between two nodes in both directions, drop one direction only, delay one
// direction, isolate a node from every other (and from its clients: a paused process whose
// goroutines keep running), and heal.
//
// A connection dialed through node a's Dialer to an address that node b listens on (through b's
// Listen, or Register) carries a→b in its writes and b→a in its reads, so the dialer's wrapper
// governs both directions of the connections it made: the accepting side needs no rules for
// them. A connection accepted by b from an address no node dialed from is a client's (Clients):
// b's listener wrapper applies the rules between b and Clients to it.
//
// A drop swallows the bytes of its direction (the writer is told they went; the reader never
// sees them), as a network that loses packets would, except that setting or lifting a drop
// closes the connections it concerns, so that the change takes effect at once and a healed link
// starts on clean streams, and that a dial across a link cut both ways fails at once rather
// than after a connect timeout. A delay holds each write of its direction for that long (the
// link's latency).
//
// Net starts no goroutine. Close closes every connection it made or accepted and fails later
// dials; the listeners stay their owners' to close.
package faultnet

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Clients is the pseudo-node of the connections a node accepted from outside the Net (the
// test's clients).
const Clients int32 = -1

// ErrCut is the error of a dial across a link cut in both directions.
var ErrCut = errors.New("faultnet: link cut")

// ErrClosed is the error of a dial on a closed Net.
var ErrClosed = errors.New("faultnet: closed")

// Rule is what happens to the bytes going one way between two nodes. The zero Rule passes
// them.
type Rule struct {
	Drop  bool          // swallowed
	Delay time.Duration // each write held this long first
}

// Net is the network. The zero value is not usable; call New.
type Net struct {
	done chan struct{} // closed by Close: ends delays in progress

	mu struct {
		sync.Mutex
		closed bool
		addrs  map[string]int32 // listener address → its node
		local  map[string]int32 // local address of a connection a node dialed → that node
		rules  map[[2]int32]Rule
		conns  map[*conn]struct{}
	}
}

// New returns a network with every link passing.
func New() *Net {
	n := &Net{done: make(chan struct{})}
	n.mu.addrs = map[string]int32{}
	n.mu.local = map[string]int32{}
	n.mu.rules = map[[2]int32]Rule{}
	n.mu.conns = map[*conn]struct{}{}
	return n
}

// Register records that node id listens on addr (a listener opened outside the Net, whose
// accepted connections then follow no client rules).
func (n *Net) Register(id int32, addr string) {
	n.mu.Lock()
	n.mu.addrs[addr] = id
	n.mu.Unlock()
}

// Listen is node id's listen function (net.Listen's shape): it listens on loopback, records the
// bound address as id's, and applies the rules between id and Clients to the connections it
// accepts from clients.
func (n *Net) Listen(id int32) func(network, addr string) (net.Listener, error) {
	return func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return n.Wrap(id, ln), nil
	}
}

// Wrap is Listen for a listener already open: it records ln's address as id's.
func (n *Net) Wrap(id int32, ln net.Listener) net.Listener {
	n.Register(id, ln.Addr().String())
	return &listener{Listener: ln, n: n, id: id}
}

// Dialer is node from's dial function (net.Dialer.DialContext's shape).
func (n *Net) Dialer(from int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.mu.Lock()
		closed := n.mu.closed
		to, known := n.mu.addrs[addr]
		cut := known && n.mu.rules[[2]int32{from, to}].Drop && n.mu.rules[[2]int32{to, from}].Drop
		n.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case cut:
			return nil, ErrCut
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if !known {
			return c, nil // outside the Net: no rules
		}
		fc := &conn{Conn: c, n: n, from: from, to: to}
		n.mu.Lock()
		if n.mu.closed {
			n.mu.Unlock()
			_ = c.Close()
			return nil, ErrClosed
		}
		// Recorded before any byte is written, so the accepting side, which reads those bytes
		// first, always knows the connection is a node's.
		fc.local = c.LocalAddr().String()
		n.mu.local[fc.local] = from
		n.mu.conns[fc] = struct{}{}
		n.mu.Unlock()
		return fc, nil
	}
}

// Set replaces the rule for the bytes from a to b, and closes the connections between a and b
// when a drop is set or lifted.
func (n *Net) Set(a, b int32, r Rule) {
	n.mu.Lock()
	old := n.mu.rules[[2]int32{a, b}]
	if r == (Rule{}) {
		delete(n.mu.rules, [2]int32{a, b})
	} else {
		n.mu.rules[[2]int32{a, b}] = r
	}
	var victims []*conn
	if old.Drop != r.Drop {
		for c := range n.mu.conns {
			if (c.from == a && c.to == b) || (c.from == b && c.to == a) {
				victims = append(victims, c)
			}
		}
	}
	n.mu.Unlock()
	for _, c := range victims {
		if !c.exempt() { // a node's connection accepted by a: its dialer's rules govern it
			_ = c.Close()
		}
	}
}

// Rule is the rule for the bytes from a to b.
func (n *Net) Rule(a, b int32) Rule {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.rules[[2]int32{a, b}]
}

// Cut drops both directions between a and b.
func (n *Net) Cut(a, b int32) {
	n.Set(a, b, Rule{Drop: true})
	n.Set(b, a, Rule{Drop: true})
}

// Isolate cuts a from each of others (a itself among them is skipped): a network partition
// with a alone on its side. Pass Clients among others to cut its clients too (a paused
// process).
func (n *Net) Isolate(a int32, others ...int32) {
	for _, o := range others {
		if o != a {
			n.Cut(a, o)
		}
	}
}

// HealNode removes every rule to or from a.
func (n *Net) HealNode(a int32) {
	for _, p := range n.pairs() {
		if p[0] == a || p[1] == a {
			n.Set(p[0], p[1], Rule{})
		}
	}
}

// Heal removes every rule.
func (n *Net) Heal() {
	for _, p := range n.pairs() {
		n.Set(p[0], p[1], Rule{})
	}
}

func (n *Net) pairs() [][2]int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([][2]int32, 0, len(n.mu.rules))
	for p := range n.mu.rules {
		out = append(out, p)
	}
	return out
}

// Conns is the number of connections the Net tracks (dialed between nodes, or accepted from
// clients) that are not closed yet.
func (n *Net) Conns() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.mu.conns)
}

// Close closes every connection the Net tracks and makes later dials fail. Idempotent.
func (n *Net) Close() error {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil
	}
	n.mu.closed = true
	close(n.done)
	var victims []*conn
	for c := range n.mu.conns {
		victims = append(victims, c)
	}
	n.mu.Unlock()
	for _, c := range victims {
		_ = c.Close()
	}
	return nil
}

// peerOf is the node that dialed from addr, or Clients.
func (n *Net) peerOf(addr string) int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id, ok := n.mu.local[addr]; ok {
		return id
	}
	return Clients
}

// listener is a node's listener in the Net.
type listener struct {
	net.Listener
	n  *Net
	id int32
}

// Accept wraps each client connection so the rules between the node and Clients apply; a
// node's connection passes unwrapped (its dialer's wrapper governs it).
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	// The dialer records its connection's local address before it writes, but Accept may
	// return before Dial does: classify the connection lazily, at its first read or write,
	// which a node's connection only sees after its dialer's first write.
	fc := &conn{Conn: c, n: l.n, from: l.id, to: Clients, accepted: true}
	l.n.mu.Lock()
	if l.n.mu.closed {
		l.n.mu.Unlock()
		_ = c.Close()
		return nil, ErrClosed
	}
	l.n.mu.conns[fc] = struct{}{}
	l.n.mu.Unlock()
	return fc, nil
}

// conn is one connection in the Net: dialed by from to to, or accepted by from (to is
// Clients). Writes carry from→to, reads to→from.
type conn struct {
	net.Conn
	n        *Net
	from, to int32
	local    string // a dialed connection's local address, as recorded in n.mu.local
	accepted bool

	peer atomic.Bool // accepted from a node: no rules here
	once sync.Once
}

// exempt reports whether the connection follows no rules: accepted from another node. Until
// the dialer has recorded it (before its first write) an accepted connection looks like a
// client's; once a node's, always a node's.
func (c *conn) exempt() bool {
	if !c.accepted {
		return false
	}
	if c.peer.Load() {
		return true
	}
	if c.n.peerOf(c.RemoteAddr().String()) != Clients {
		c.peer.Store(true)
		return true
	}
	return false
}

func (c *conn) Write(p []byte) (int, error) {
	if c.exempt() {
		return c.Conn.Write(p)
	}
	r := c.n.Rule(c.from, c.to)
	if r.Delay > 0 {
		t := time.NewTimer(r.Delay) // the link's latency, not a wait for a condition
		select {
		case <-t.C:
		case <-c.n.done:
			t.Stop()
			return 0, net.ErrClosed
		}
	}
	if r.Drop {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *conn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		// Classified after the bytes arrived: a node's first bytes follow its dialer's record.
		if n > 0 && !c.exempt() && c.n.Rule(c.to, c.from).Drop {
			if err != nil {
				return 0, err
			}
			continue // to→from is dropped: swallow what arrives
		}
		return n, err
	}
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.mu.conns, c)
		if c.local != "" && c.n.mu.local[c.local] == c.from {
			delete(c.n.mu.local, c.local)
		}
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}
