package faultproxy

import (
	"context"
	"net"
	"net/netip"
)

// conn is one connection through a front: accepted from src on node's front, forwarded to the
// front's target. Its rules are those of src→node and node→src when it was accepted: a change
// of either closes it, so they never change under it.
type conn struct {
	src, node int32
	up, down  Rule // src→node (client to server), node→src (server to client)
	client    net.Conn
	ctx       context.Context // cancelled when the connection closes: ends its dial and delays
	cancel    context.CancelFunc

	// Guarded by Proxy.mu.
	closed bool
	server net.Conn // nil until dialed
}

// serve identifies the source of an accepted connection, closes it at once across a cut link,
// dials the front's target, and pumps both ways: client to server on this goroutine, server to
// client on a second one.
func (p *Proxy) serve(client net.Conn, node int32, target string) {
	defer p.wg.Done()
	src := p.identify(client)

	p.mu.Lock()
	up, down := p.mu.rules[[2]int32{src, node}], p.mu.rules[[2]int32{node, src}]
	if p.mu.closed || (up.Drop && down.Drop) {
		p.mu.Unlock()
		_ = client.Close()
		return
	}
	// Registered under the lock the rules were read under: a later Set finds and closes it.
	c := &conn{src: src, node: node, up: up, down: down, client: client}
	c.ctx, c.cancel = context.WithCancel(p.ctx)
	p.mu.conns[c] = struct{}{}
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(c.ctx, dialTimeout)
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		p.closeConn(c) // the node is down: its clients see a closed connection
		return
	}
	p.mu.Lock()
	if c.closed {
		p.mu.Unlock()
		_ = server.Close()
		return
	}
	c.server = server
	p.mu.Unlock()

	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pump(c, server, client, c.down)
	}()
	p.pump(c, client, server, c.up)
}

// identify is the node whose registered process owns the socket client was accepted from, or
// Clients.
func (p *Proxy) identify(client net.Conn) int32 {
	front, ok1 := addrPort(client.LocalAddr())
	peer, ok2 := addrPort(client.RemoteAddr())
	if !ok1 || !ok2 {
		return Clients
	}
	p.mu.Lock()
	nodes := make(map[int]int32, len(p.mu.pids))
	pids := make([]int, 0, len(p.mu.pids))
	for node, pid := range p.mu.pids {
		nodes[pid] = node
		pids = append(pids, pid)
	}
	p.mu.Unlock()
	if len(pids) == 0 {
		return Clients
	}
	if node, ok := nodes[p.owner(front, peer, pids)]; ok {
		return node
	}
	return Clients
}

func addrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := t.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// closeConn closes both sides of c and forgets it. Idempotent.
func (p *Proxy) closeConn(c *conn) {
	p.mu.Lock()
	if c.closed {
		p.mu.Unlock()
		return
	}
	c.closed = true
	delete(p.mu.conns, c)
	server := c.server
	p.mu.Unlock()
	c.cancel()
	_ = c.client.Close()
	if server != nil {
		_ = server.Close()
	}
}
