// Package faultproxy is the TCP proxy `sluice chaos` puts in front of every broker listener
// (client and controller), so that the harness can cut, drop one way, or delay the traffic
// between any two brokers, or between a broker and the clients, while the brokers run as real
// processes.
//
// Each fronted listener belongs to a node. A connection accepted on node b's front comes from
// node a when a's process (the pid given by SetPID) owns the connecting socket, which the
// proxy finds through /proc on Linux: the inode of the socket whose local address is the
// accepted connection's remote one and whose remote address is the front's (/proc/net/tcp and
// tcp6), among the links of /proc/<pid>/fd. Nothing of that lookup is cached, so a restarted
// broker is told apart as soon as SetPID names its new pid. Any other connection is a client's
// (faultnet.Clients); on other systems than Linux every connection is a client's, so only the
// rules between a node and Clients have an effect there.
//
// The connection then carries a→b in its client half and b→a in its server half, and the rules
// of those two directions govern it, as they were when it was accepted.
//
// Rules are internal/faultnet's: Drop swallows the bytes of a direction (the writer is told
// they went), Delay holds each chunk that long (the chunks queue, up to maxHeld bytes a
// direction, so that a delayed link keeps its throughput). Changing the rule of a direction
// closes the connections it concerns, so that the change takes effect at once and a healed
// link starts on clean streams; a connection accepted across a link cut both ways is closed at
// once. The end of either half (EOF or an error) closes the whole connection, after the bytes
// read before an EOF are delivered: half-closes are not forwarded (Kafka's protocol uses none).
//
// Every goroutine (one accept loop per front, two pumps per connection, the first of which
// also identifies the source and dials the target) stops on Close, which waits for them.
//
// # Lock order
//
// Proxy.mu guards the fronts, the pids, the rules and the connections (with each connection's
// closed flag and server side); it is never held across socket or /proc I/O.
package faultproxy

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/faultnet"
)

// Clients is the pseudo-node of connections from no registered process.
const Clients = faultnet.Clients

// Rule is what happens to the bytes going one way between two nodes.
type Rule = faultnet.Rule

// dialTimeout bounds the dial of a front's target (a broker's real listener on this host).
const dialTimeout = 5 * time.Second

// ownerFunc is the pid among pids that owns the socket connected from peer to front, or 0.
// The OS's is socketOwner; tests inject their own.
type ownerFunc func(front, peer netip.AddrPort, pids []int) int

// Proxy fronts listeners. The zero value is not usable; call New.
type Proxy struct {
	owner  ownerFunc
	ctx    context.Context // cancelled by Close: ends dials and delays in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loops and pumps

	mu struct {
		sync.Mutex
		closed bool
		fronts []net.Listener
		pids   map[int32]int // node → its process
		rules  map[[2]int32]Rule
		conns  map[*conn]struct{}
	}
}

// New returns a proxy with every link passing.
func New() *Proxy { return newProxy(socketOwner) }

func newProxy(owner ownerFunc) *Proxy {
	p := &Proxy{owner: owner}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.mu.pids = map[int32]int{}
	p.mu.rules = map[[2]int32]Rule{}
	p.mu.conns = map[*conn]struct{}{}
	return p
}

// Front listens on a free port of 127.0.0.1 and forwards each connection to target (a node's
// real listener), as traffic to node. It returns the address to advertise.
func (p *Proxy) Front(node int32, target string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		_ = ln.Close()
		return "", ErrClosed
	}
	p.mu.fronts = append(p.mu.fronts, ln)
	p.wg.Add(1)
	p.mu.Unlock()
	go p.accept(ln, node, target)
	return ln.Addr().String(), nil
}

// accept is the accept loop of one front; it ends when the front is closed.
func (p *Proxy) accept(ln net.Listener, node int32, target string) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			// Out of descriptors, or the like: wait a little rather than spin.
			t := time.NewTimer(10 * time.Millisecond)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(c, node, target)
	}
}

// SetPID records node's process (again after each restart), so that its outgoing connections
// are told from clients'. pid 0 forgets it.
func (p *Proxy) SetPID(node int32, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pid == 0 {
		delete(p.mu.pids, node)
		return
	}
	p.mu.pids[node] = pid
}

// Set sets the rule of the direction from → to, closing the connections it concerns if it
// changed: those accepted on to's fronts from from (their client half), and those accepted on
// from's fronts from to (their server half).
func (p *Proxy) Set(from, to int32, r Rule) {
	k := [2]int32{from, to}
	p.mu.Lock()
	old := p.mu.rules[k]
	if old == r {
		p.mu.Unlock()
		return
	}
	if r == (Rule{}) {
		delete(p.mu.rules, k)
	} else {
		p.mu.rules[k] = r
	}
	var victims []*conn
	for c := range p.mu.conns {
		if (c.src == from && c.node == to) || (c.src == to && c.node == from) {
			victims = append(victims, c)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		p.closeConn(c)
	}
}

// Rule is the rule of the direction from → to.
func (p *Proxy) Rule(from, to int32) Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.rules[[2]int32{from, to}]
}

// Cut drops both directions between a and b.
func (p *Proxy) Cut(a, b int32) {
	p.Set(a, b, Rule{Drop: true})
	p.Set(b, a, Rule{Drop: true})
}

// Isolate cuts a from every other node given (a itself among them is skipped), and from
// clients if withClients.
func (p *Proxy) Isolate(a int32, withClients bool, others ...int32) {
	for _, o := range others {
		if o != a {
			p.Cut(a, o)
		}
	}
	if withClients {
		p.Cut(a, Clients)
	}
}

// Delay delays both directions between a and b by d (replacing their rules: a drop is lifted).
func (p *Proxy) Delay(a, b int32, d time.Duration) {
	p.Set(a, b, Rule{Delay: d})
	p.Set(b, a, Rule{Delay: d})
}

// Heal lifts every rule.
func (p *Proxy) Heal() {
	p.mu.Lock()
	ks := make([][2]int32, 0, len(p.mu.rules))
	for k := range p.mu.rules {
		ks = append(ks, k)
	}
	p.mu.Unlock()
	for _, k := range ks {
		p.Set(k[0], k[1], Rule{})
	}
}

// Conns is the number of connections open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.conns)
}

// LinkConns is the number of connections open through the proxy from from to to's fronts
// (from is Clients for the connections of no registered process).
func (p *Proxy) LinkConns(from, to int32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.mu.conns {
		if c.src == from && c.node == to {
			n++
		}
	}
	return n
}

// Close closes every front and connection and waits for the proxy's goroutines. Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.mu.closed = true
	fronts := p.mu.fronts
	p.mu.fronts = nil
	victims := make([]*conn, 0, len(p.mu.conns))
	for c := range p.mu.conns {
		victims = append(victims, c)
	}
	p.mu.Unlock()
	p.cancel()
	for _, ln := range fronts {
		_ = ln.Close()
	}
	for _, c := range victims {
		p.closeConn(c)
	}
	p.wg.Wait()
	return nil
}
