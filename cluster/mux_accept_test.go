package cluster

import (
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// emfileListener fails its first n Accepts as a process out of file descriptors does.
type emfileListener struct {
	net.Listener
	n atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestMuxAcceptRetriesAfterEMFILE: accept failures that are not the listener closing (here
// EMFILE) are retried with backoff, and the CONTROLLER listener goes on serving afterwards.
func TestMuxAcceptRetriesAfterEMFILE(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &emfileListener{Listener: ln}
	fl.n.Store(4)
	served := make(chan struct{}, 1)
	m := newMux(fl, slog.New(slog.DiscardHandler))
	m.start(func(c net.Conn) { served <- struct{}{} })
	defer m.close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{tagRPC}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatalf("no RPC connection served after EMFILE (accept failures left: %d)", fl.n.Load())
	}
}

// TestMuxCloseDuringAcceptBackoff: close stops the accept loop while it backs off.
func TestMuxCloseDuringAcceptBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &emfileListener{Listener: ln}
	fl.n.Store(1 << 30)
	m := newMux(fl, slog.New(slog.DiscardHandler))
	m.start(func(net.Conn) {})
	deadline := time.Now().Add(10 * time.Second)
	for fl.n.Load() > 1<<30-3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // poll: the loop has failed a few accepts
	}
	if fl.n.Load() > 1<<30-3 {
		t.Fatal("the accept loop stopped retrying")
	}
	done := make(chan struct{})
	go func() { _ = m.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("mux.close did not stop the accept loop's backoff")
	}
}
