package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// fakeOwners stands in for /proc: the tests' dial helper records each connection's local port
// with the pid it plays, and the proxy's lookup waits (bounded) for that record, since Accept
// may return before Dial does.
type fakeOwners struct {
	mu    sync.Mutex
	ports map[uint16]int
}

func (f *fakeOwners) owner(front, peer netip.AddrPort, pids []int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		pid, ok := f.ports[peer.Port()]
		f.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return pid
		}
		time.Sleep(time.Millisecond) // polling the test's record, bounded by the deadline
	}
}

// newFake is a proxy whose sources are the pids the tests say; node n plays pid 100+n.
func newFake(t *testing.T) (*Proxy, *fakeOwners) {
	t.Helper()
	f := &fakeOwners{ports: map[uint16]int{}}
	p := newProxy(f.owner)
	for n := int32(1); n <= 3; n++ {
		p.SetPID(n, 100+int(n))
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, f
}

// dialAs dials addr as node from (Clients for a client).
func (f *fakeOwners) dialAs(t *testing.T, from int32, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	pid := 0
	if from != Clients {
		pid = 100 + int(from)
	}
	f.mu.Lock()
	f.ports[uint16(c.LocalAddr().(*net.TCPAddr).Port)] = pid
	f.mu.Unlock()
	return c
}

// server is a node's real listener running handle on each connection.
type server struct {
	ln net.Listener
	wg sync.WaitGroup
}

func serve(t *testing.T, handle func(net.Conn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *server) close() { _ = s.ln.Close(); s.wg.Wait() }

func (s *server) addr() string { return s.ln.Addr().String() }

func echo(c net.Conn) { _, _ = io.Copy(c, c) }

// talker greets each connection with "hello" and sends what it reads to got.
type talker struct {
	*server
	got chan string
}

func startTalker(t *testing.T) *talker {
	tk := &talker{got: make(chan string, 16)}
	tk.server = serve(t, func(c net.Conn) {
		if _, err := c.Write([]byte("hello")); err != nil {
			return
		}
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				tk.got <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	})
	return tk
}

func front(t *testing.T, p *Proxy, node int32, target string) string {
	t.Helper()
	addr, err := p.Front(node, target)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// roundTrip writes msg on c and reads it back within d; it reports whether it came back.
func roundTrip(c net.Conn, msg string, d time.Duration) bool {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return false
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return false
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return false
	}
	return string(buf) == msg
}

// readN reads n bytes from c within d.
func readN(c net.Conn, n int, d time.Duration) (string, error) {
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// closedSoon fails unless the proxy closes c (its reads end in EOF or a reset, not a timeout).
func closedSoon(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // bytes sent before the close
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: still open after 5s", what)
		}
		return
	}
}

// nothingFor fails if a value arrives on got within d: the bytes of a dropped direction.
func nothingFor(t *testing.T, got <-chan string, d time.Duration, what string) {
	t.Helper()
	select {
	case s := <-got:
		t.Fatalf("%s: %q arrived", what, s)
	case <-time.After(d):
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling, bounded by the deadline
	}
}

// TestPassesBothWays: a client's bytes reach the node's listener and its answers come back,
// intact and in order, a MiB each way, on a connection the proxy counts as the client's.
func TestPassesBothWays(t *testing.T) {
	p, f := newFake(t)
	e := serve(t, echo)
	c := f.dialAs(t, Clients, front(t, p, 2, e.addr()))
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	errc := make(chan error, 1)
	go func() { _, err := c.Write(msg); errc <- err }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, msg) {
		t.Fatal("the echo differs from what was sent")
	}
	if got := p.LinkConns(Clients, 2); got != 1 || p.Conns() != 1 {
		t.Fatalf("LinkConns(Clients, 2) = %d, Conns = %d, want 1 and 1", got, p.Conns())
	}
}

// TestCutAndHeal: a cut between nodes 1 and 2 closes their connections in both directions of
// dialing (1 to 2's front, 2 to 1's), closes a new one at once, and leaves a client's and
// another node's connections working; Heal lets new connections through.
func TestCutAndHeal(t *testing.T) {
	p, f := newFake(t)
	e := serve(t, echo)
	front1, front2 := front(t, p, 1, e.addr()), front(t, p, 2, e.addr())
	c12 := f.dialAs(t, 1, front2)
	c21 := f.dialAs(t, 2, front1)
	c32 := f.dialAs(t, 3, front2)
	cl := f.dialAs(t, Clients, front2)
	for _, c := range []net.Conn{c12, c21, c32, cl} {
		if !roundTrip(c, "x", 5*time.Second) {
			t.Fatal("no echo on a healthy link")
		}
	}
	if p.LinkConns(1, 2) != 1 || p.LinkConns(2, 1) != 1 || p.LinkConns(3, 2) != 1 {
		t.Fatal("connections not told by their source")
	}

	p.Cut(1, 2)
	closedSoon(t, c12, "1→2 after the cut")
	closedSoon(t, c21, "2→1 after the cut")
	closedSoon(t, f.dialAs(t, 1, front2), "a connection dialed across the cut")
	if !roundTrip(c32, "y", 5*time.Second) || !roundTrip(cl, "y", 5*time.Second) {
		t.Fatal("the cut of 1-2 broke another link")
	}
	waitFor(t, "the cut connections forgotten", func() bool { return p.LinkConns(1, 2)+p.LinkConns(2, 1) == 0 })

	p.Heal()
	if !roundTrip(f.dialAs(t, 1, front2), "healed", 5*time.Second) {
		t.Fatal("no echo after Heal")
	}
	if p.Rule(1, 2) != (Rule{}) || p.Rule(2, 1) != (Rule{}) {
		t.Fatal("rules left after Heal")
	}
}

// TestIsolate: isolating node 2 with its clients cuts 1→2, 3→2 and the clients, and not 1→3.
func TestIsolate(t *testing.T) {
	p, f := newFake(t)
	e := serve(t, echo)
	front2, front3 := front(t, p, 2, e.addr()), front(t, p, 3, e.addr())
	p.Isolate(2, true, 1, 2, 3)
	closedSoon(t, f.dialAs(t, 1, front2), "1→2")
	closedSoon(t, f.dialAs(t, 3, front2), "3→2")
	closedSoon(t, f.dialAs(t, Clients, front2), "a client of 2")
	if !roundTrip(f.dialAs(t, 1, front3), "z", 5*time.Second) {
		t.Fatal("isolating 2 cut 1→3")
	}
}

// TestOneWayDrop: with 1→2 dropped, node 2's bytes reach node 1 and node 1's never reach 2
// (its writes succeed); the other way round after a heal. Each rule change closes the
// connection it concerns.
func TestOneWayDrop(t *testing.T) {
	p, f := newFake(t)
	tk := startTalker(t)
	front2 := front(t, p, 2, tk.addr())

	old := f.dialAs(t, 1, front2)
	if s, err := readN(old, 5, 5*time.Second); err != nil || s != "hello" {
		t.Fatalf("greeting %q, %v", s, err)
	}
	p.Set(1, 2, Rule{Drop: true})
	closedSoon(t, old, "a connection whose rule changed")

	c := f.dialAs(t, 1, front2)
	if s, err := readN(c, 5, 5*time.Second); err != nil || s != "hello" {
		t.Fatalf("2→1 passes, yet the greeting is %q, %v", s, err)
	}
	if _, err := c.Write([]byte("lost")); err != nil {
		t.Fatalf("a write into a dropped direction failed: %v", err)
	}
	nothingFor(t, tk.got, 300*time.Millisecond, "1→2 dropped")

	p.Heal()
	closedSoon(t, c, "a dropped connection after Heal")
	p.Set(2, 1, Rule{Drop: true})
	c = f.dialAs(t, 1, front2)
	if _, err := c.Write([]byte("arrives")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-tk.got:
		if s != "arrives" {
			t.Fatalf("got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("1→2 passes, yet node 2 got nothing")
	}
	if s, err := readN(c, 5, 300*time.Millisecond); err == nil {
		t.Fatalf("2→1 dropped, yet node 1 read %q", s)
	}
}

// TestDelay: a delay of d on both directions makes a round trip take at least 2d, and a
// transfer larger than what a direction may hold arrives whole and in order.
func TestDelay(t *testing.T) {
	p, f := newFake(t)
	e := serve(t, echo)
	front2 := front(t, p, 2, e.addr())
	const d = 50 * time.Millisecond
	p.Delay(1, 2, d)
	c := f.dialAs(t, 1, front2)
	start := time.Now()
	if !roundTrip(c, "slow", 5*time.Second) {
		t.Fatal("no echo on a delayed link")
	}
	if el := time.Since(start); el < 2*d {
		t.Fatalf("round trip took %v on a link delayed %v each way", el, d)
	}

	msg := make([]byte, 3*maxHeld)
	for i := range msg {
		msg[i] = byte(i * 7 / 5)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.Write(msg); errc <- err }()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, msg) {
		t.Fatal("a delayed transfer came back altered")
	}
}

// TestTargetDown: a connection to a front whose node is not listening is closed.
func TestTargetDown(t *testing.T) {
	p, f := newFake(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	_ = ln.Close()
	closedSoon(t, f.dialAs(t, Clients, front(t, p, 2, gone)), "a connection to a stopped node")
	waitFor(t, "no connection counted", func() bool { return p.Conns() == 0 })
}

// TestCloseLeavesNothing: Close closes the fronts and every connection (a passing one, one
// whose bytes a long delay holds, one dropped one way), refuses later fronts, and waits for
// every goroutine the proxy started.
func TestCloseLeavesNothing(t *testing.T) {
	e := serve(t, echo)
	before := runtime.NumGoroutine()
	p := newProxy(func(netip.AddrPort, netip.AddrPort, []int) int { return 0 })
	t.Cleanup(func() { _ = p.Close() }) // before the echo server's, should the test fail
	func() {
		pass := front(t, p, 1, e.addr())
		slow := front(t, p, 2, e.addr())
		lossy := front(t, p, 3, e.addr())
		p.Set(Clients, 2, Rule{Delay: time.Hour})
		p.Set(3, Clients, Rule{Drop: true})
		var conns []net.Conn
		for _, a := range []string{pass, slow, lossy} {
			c, err := net.DialTimeout("tcp", a, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte("held")); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		if s, err := readN(conns[0], 4, 5*time.Second); err != nil || s != "held" {
			t.Fatalf("echo %q, %v", s, err)
		}
		waitFor(t, "3 connections", func() bool { return p.Conns() == 3 })
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if p.Conns() != 0 {
			t.Fatalf("%d connections after Close", p.Conns())
		}
		for _, c := range conns {
			closedSoon(t, c, "a connection after Close")
		}
		if _, err := net.DialTimeout("tcp", pass, time.Second); err == nil {
			t.Fatal("a front still accepts after Close")
		}
		if _, err := p.Front(1, e.addr()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Front after Close: %v, want ErrClosed", err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	waitFor(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}
