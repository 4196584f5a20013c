package faultnet

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// echoNode is node id listening through the Net, echoing every byte back on each connection.
type echoNode struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startEcho(t *testing.T, n *Net, id int32) *echoNode {
	t.Helper()
	ln, err := n.Listen(id)("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoNode{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); e.wg.Wait() })
	return e
}

// roundTrip writes msg on c and reads it back within d; it reports whether it came back.
func roundTrip(t *testing.T, c net.Conn, msg string, d time.Duration) bool {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return false // closed (by a cut)
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

func dial(t *testing.T, n *Net, from int32, addr string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := n.Dialer(from)(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %d: %v", addr, from, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestCutHealAndOneWay: a cut closes the link's connections and refuses new dials; a one-way
// drop lets the dial through but swallows that direction (writes succeed, nothing echoes);
// heal restores both; links not named are untouched throughout.
func TestCutHealAndOneWay(t *testing.T) {
	n := New()
	defer n.Close()
	b := startEcho(t, n, 1)
	c := startEcho(t, n, 2)
	ab := dial(t, n, 0, b.ln.Addr().String())
	ac := dial(t, n, 0, c.ln.Addr().String())
	if !roundTrip(t, ab, "x", 5*time.Second) || !roundTrip(t, ac, "x", 5*time.Second) {
		t.Fatal("no echo on healthy links")
	}

	n.Cut(0, 1)
	if roundTrip(t, ab, "y", time.Second) {
		t.Fatal("a cut link still carried bytes")
	}
	if _, err := n.Dialer(0)(context.Background(), "tcp", b.ln.Addr().String()); !errors.Is(err, ErrCut) {
		t.Fatalf("dial across a cut: %v, want ErrCut", err)
	}
	if !roundTrip(t, ac, "z", 5*time.Second) {
		t.Fatal("the cut of 0-1 broke 0-2")
	}

	n.Heal()
	ab = dial(t, n, 0, b.ln.Addr().String())
	if !roundTrip(t, ab, "healed", 5*time.Second) {
		t.Fatal("no echo after heal")
	}

	// One way: 1→0 dropped. The dial and the write go through; the echo never comes back.
	n.Set(1, 0, Rule{Drop: true})
	ab = dial(t, n, 0, b.ln.Addr().String())
	if roundTrip(t, ab, "lost", 500*time.Millisecond) {
		t.Fatal("the dropped direction carried the echo")
	}
	n.HealNode(1)
	ab = dial(t, n, 0, b.ln.Addr().String())
	if !roundTrip(t, ab, "back", 5*time.Second) {
		t.Fatal("no echo after HealNode")
	}
}

// TestDelay: a delay holds each write of its direction at least that long, and Close ends a
// write held by one at once.
func TestDelay(t *testing.T) {
	n := New()
	b := startEcho(t, n, 1)
	ab := dial(t, n, 0, b.ln.Addr().String())
	n.Set(0, 1, Rule{Delay: 200 * time.Millisecond})
	start := time.Now()
	if !roundTrip(t, ab, "slow", 5*time.Second) {
		t.Fatal("no echo on a delayed link")
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("round trip took %v on a link delayed 200ms", el)
	}
	n.Set(0, 1, Rule{Delay: time.Hour})
	done := make(chan error, 1)
	go func() { _, err := ab.Write([]byte("never")); done <- err }()
	_ = n.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a write held by a delay succeeded after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a delayed write")
	}
}

// TestClientsIsolated: cutting a node from Clients blackholes the client connections it
// accepted (and those it accepts later) while its links to other nodes, accepted on the same
// listener, keep working.
func TestClientsIsolated(t *testing.T) {
	n := New()
	defer n.Close()
	b := startEcho(t, n, 1)
	var d net.Dialer
	client, err := d.Dial("tcp", b.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if !roundTrip(t, client, "hi", 5*time.Second) {
		t.Fatal("no echo to a client")
	}
	peer := dial(t, n, 0, b.ln.Addr().String())
	if !roundTrip(t, peer, "hi", 5*time.Second) {
		t.Fatal("no echo to a node")
	}
	n.Isolate(1, Clients)
	if roundTrip(t, client, "gone", time.Second) {
		t.Fatal("an isolated node still answered its client")
	}
	late, err := d.Dial("tcp", b.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if roundTrip(t, late, "late", 500*time.Millisecond) {
		t.Fatal("an isolated node answered a client that connected after the cut")
	}
	if !roundTrip(t, peer, "still", 5*time.Second) {
		t.Fatal("cutting the clients broke a node's link")
	}
}

// TestCloseLeavesNothing: Close closes every tracked connection, refuses later dials, and
// leaves no goroutine of the Net's behind (it starts none: the echo servers' end when their
// connections close).
func TestCloseLeavesNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	n := New()
	func() {
		b := startEcho(t, n, 1)
		for range 5 {
			c := dial(t, n, 0, b.ln.Addr().String())
			if !roundTrip(t, c, "x", 5*time.Second) {
				t.Fatal("no echo")
			}
		}
		if got := n.Conns(); got < 5 {
			t.Fatalf("%d connections tracked, want at least the 5 dialed", got)
		}
		_ = n.Close()
		if got := n.Conns(); got != 0 {
			t.Fatalf("%d connections left after Close", got)
		}
		if _, err := n.Dialer(0)(context.Background(), "tcp", b.ln.Addr().String()); !errors.Is(err, ErrClosed) {
			t.Fatalf("dial after Close: %v, want ErrClosed", err)
		}
		_ = b.ln.Close()
		b.wg.Wait()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond) // polling, bounded by the deadline
	}
}
