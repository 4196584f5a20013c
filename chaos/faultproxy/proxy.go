// Package faultproxy is the TCP proxy `sluice chaos` puts in front of every broker listener
// (client and controller), so that the harness can cut, drop one way, or delay the traffic
// between any two brokers, or between a broker and the clients, while the brokers run as real
// processes.
//
// Each fronted listener belongs to a node. A connection accepted on node b's front comes from
// node a when a's process (the pid given by SetPID) owns the connecting socket, which the
// proxy finds through /proc (the socket's inode among /proc/<pid>/fd) on Linux; any other
// connection is a client's (faultnet.Clients). The connection then carries a→b in its client
// half and b→a in its server half, and the rules of those two directions govern it.
//
// Rules are internal/faultnet's: Drop swallows the bytes of a direction (the writer is told
// they went), Delay holds each chunk that long. Changing the rule of a direction closes the
// connections it concerns, so that the change takes effect at once and a healed link starts on
// clean streams; a connection accepted across a link cut both ways is closed at once.
//
// Every goroutine (one accept loop per front, two pumps per connection) stops on Close, which
// waits for them.
package faultproxy

import (
	"errors"
	"time"

	"github.com/sluicemq/sluice/internal/faultnet"
)

// Clients is the pseudo-node of connections from no registered process.
const Clients = faultnet.Clients

// Rule is what happens to the bytes going one way between two nodes.
type Rule = faultnet.Rule

// ErrClosed is the error of Front on a closed Proxy.
var ErrClosed = errors.New("faultproxy: closed")

// Proxy fronts listeners. The zero value is not usable; call New.
type Proxy struct{}

// New returns a proxy with every link passing.
func New() *Proxy { panic("faultproxy: stream B") }

// Front listens on a free port of 127.0.0.1 and forwards each connection to target (a node's
// real listener), as traffic to node. It returns the address to advertise.
func (p *Proxy) Front(node int32, target string) (string, error) { panic("faultproxy: stream B") }

// SetPID records node's process (again after each restart), so that its outgoing connections
// are told from clients'. pid 0 forgets it.
func (p *Proxy) SetPID(node int32, pid int) { panic("faultproxy: stream B") }

// Set sets the rule of the direction from → to, closing the connections it concerns if it
// changed.
func (p *Proxy) Set(from, to int32, r Rule) { panic("faultproxy: stream B") }

// Cut drops both directions between a and b.
func (p *Proxy) Cut(a, b int32) { panic("faultproxy: stream B") }

// Isolate cuts a from every other node given, and from clients if withClients.
func (p *Proxy) Isolate(a int32, withClients bool, others ...int32) { panic("faultproxy: stream B") }

// Delay delays both directions between a and b by d.
func (p *Proxy) Delay(a, b int32, d time.Duration) { panic("faultproxy: stream B") }

// Heal lifts every rule.
func (p *Proxy) Heal() { panic("faultproxy: stream B") }

// Conns is the number of connections open through the proxy.
func (p *Proxy) Conns() int { panic("faultproxy: stream B") }

// Close closes every front and connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error { panic("faultproxy: stream B") }
