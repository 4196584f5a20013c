package cluster

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMuxCloseDoesNotWaitForTag: close returns, and closes the connection, while a peer that
// connected has sent no protocol tag yet, instead of waiting out tagTimeout (which held a
// Controller's Close, and so a broker's shutdown, for 10 seconds).
func TestMuxCloseDoesNotWaitForTag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 1)
	m := newMux(&signalListener{Listener: ln, accepted: accepted}, slog.New(slog.DiscardHandler))
	m.start(func(c net.Conn) { t.Error("rpc served a connection that sent no tag") })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the mux did not accept the connection")
	}
	done := make(chan struct{})
	go func() { _ = m.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(tagTimeout / 2):
		t.Fatalf("mux.close still waiting after %v for a connection that sent no tag", tagTimeout/2)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection is still open after mux.close")
	}
}

// signalListener signals each connection it accepted.
type signalListener struct {
	net.Listener
	accepted chan struct{}
}

func (l *signalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted <- struct{}{}
	}
	return c, err
}

// TestOpenFailureClosesListener: Open owns the CONTROLLER listener from the start, so an Open
// that fails on its meta directory closes it rather than leave the port bound.
func TestOpenFailureClosesListener(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a := ln.Addr().(*net.TCPAddr)
	cfg := testConfig(filepath.Join(file, "meta")) // under a file: MkdirAll fails
	cfg.NodeID, cfg.Listener = 1, ln
	cfg.Voters = []Voter{{ID: 1, Host: "127.0.0.1", Port: a.Port}}
	if _, err := Open(cfg); err == nil {
		t.Fatal("Open with a meta directory under a file succeeded")
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second)) // a listener left open times out
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the listener after a failed Open: Accept = %v, want net.ErrClosed", err)
	}
}
