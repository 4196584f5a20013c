package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/net/wire"
)

// fileEcho answers a request with body "take" with the contents of the oldest
// file passed and not yet taken, or "none"; other requests take nothing. (A
// file arrives with the bytes it was sent with, which the server may read
// ahead of the request before, so only requests that expect one take one.)
var fileEcho = HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
	p := c.NewPending()
	if string(body) != "take" {
		respond(p, h.CorrelationID, []byte("none"))
		return p
	}
	f := c.TakeFile()
	if f == nil {
		respond(p, h.CorrelationID, []byte("none"))
		return p
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		b = []byte("read error: " + err.Error())
	}
	respond(p, h.CorrelationID, b)
	return p
})

// tempFileWith returns a file holding s, open for reading.
func tempFileWith(t *testing.T, s string) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// sendWithFiles writes a request frame in one sendmsg with files passed as SCM_RIGHTS.
func (c *client) sendWithFiles(corr int32, files ...*os.File) {
	c.t.Helper()
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	frame := appendRequest(nil, wire.APIVersions, corr, []byte("take"))
	n, oobn, err := c.nc.(*net.UnixConn).WriteMsgUnix(frame, syscall.UnixRights(fds...), nil)
	if err != nil || n != len(frame) || oobn == 0 {
		c.t.Fatalf("sendmsg: %d/%d bytes, %d oob: %v", n, len(frame), oobn, err)
	}
}

func TestPassedFilesReachTheirRequests(t *testing.T) {
	s := startServer(t, testConfig(t, "unix"), fileEcho)
	c := dial(t, s, "unix")
	// Pipelined: a request with a file, one without, two more with files, and one that asks
	// for a file that was not sent, all written before any response is read, so the server's
	// reader reads ahead of the handler.
	c.sendWithFiles(1, tempFileWith(t, "first"))
	c.send(wire.APIVersions, 2, nil)
	c.sendWithFiles(3, tempFileWith(t, "third"))
	c.sendWithFiles(4, tempFileWith(t, "fourth"))
	c.send(wire.APIVersions, 5, []byte("take"))
	want := map[int32]string{1: "first", 2: "none", 3: "third", 4: "fourth", 5: "none"}
	for i := int32(1); i <= 5; i++ {
		corr, body := c.recv()
		if corr != i || string(body) != want[i] {
			t.Fatalf("response %d: corr %d body %q, want %q", i, corr, body, want[i])
		}
	}
}

func TestPassedFilesBoundedAndClosed(t *testing.T) {
	// The handler takes nothing: every descriptor stays queued until the connection ends.
	h := HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, _ []byte) *Pending {
		p := c.NewPending()
		respond(p, h.CorrelationID, nil)
		return p
	})
	s := startServer(t, testConfig(t, "unix"), h)
	f := tempFileWith(t, "x")
	before := openFDs(t)
	c := dial(t, s, "unix")
	files := make([]*os.File, maxPassedFiles+3)
	for i := range files {
		files[i] = f
	}
	c.sendWithFiles(1, files...) // more than the server keeps: the kernel closes the rest
	c.sendWithFiles(2, f, f)     // over the bound: closed on arrival
	c.recv()
	c.recv()
	var conn *Conn
	for _, sc := range s.snapshot() {
		conn = sc
	}
	if conn == nil {
		t.Fatal("no server connection")
	}
	n := 0
	for f := conn.TakeFile(); f != nil; f = conn.TakeFile() {
		n++
		f.Close()
	}
	if n != maxPassedFiles {
		t.Errorf("kept %d descriptors, want %d", n, maxPassedFiles)
	}
	c.sendWithFiles(3, f) // left untaken: the connection's end closes it
	c.recv()
	c.nc.Close()
	waitFor(t, "the connection to end", func() bool { return len(s.snapshot()) == 0 })
	// The connection closes what it kept before it is forgotten. (Checked at once: an
	// os.File's finalizer would close a leaked descriptor at some later GC.)
	if now := openFDs(t); now != before {
		t.Errorf("%d descriptors open after the connection ended, %d before it", now, before)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

type closeCounter struct{ n atomic.Int32 }

func (c *closeCounter) Close() error { c.n.Add(1); return nil }

func TestConnValuesClosedWhenTheConnectionEnds(t *testing.T) {
	type key struct{}
	first, second := &closeCounter{}, &closeCounter{}
	h := HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, _ []byte) *Pending {
		p := c.NewPending()
		var reply string
		switch h.CorrelationID {
		case 1:
			c.SetValue(key{}, first)
		case 2:
			if c.Value(key{}) == first {
				reply = "first"
			}
			c.SetValue(key{}, second) // closes first
		case 3:
			if c.Value(key{}) == second {
				reply = "second"
			}
		}
		respond(p, h.CorrelationID, []byte(reply))
		return p
	})
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			first.n.Store(0)
			second.n.Store(0)
			s := startServer(t, testConfig(t, tr), h)
			c := dial(t, s, tr)
			for i, want := range []string{"", "first", "second"} {
				c.send(wire.APIVersions, int32(i+1), nil)
				if _, body := c.recv(); string(body) != want {
					t.Fatalf("request %d: %q, want %q", i+1, body, want)
				}
			}
			if first.n.Load() != 1 || second.n.Load() != 0 {
				t.Fatalf("after replacing: first closed %d times, second %d", first.n.Load(), second.n.Load())
			}
			c.nc.Close()
			waitFor(t, "the value to be closed", func() bool { return second.n.Load() == 1 })
			if first.n.Load() != 1 {
				t.Errorf("first closed %d times", first.n.Load())
			}
		})
	}
}

// sizedLoader stands a request of key 9001 whose body is "<size> <byte>" for a body of size
// copies of byte; Serve answers each request with its body's length and first byte.
type sizedLoader struct{}

func (sizedLoader) Serve(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
	p := c.NewPending()
	first := byte('-')
	if len(body) > 0 {
		first = body[0]
	}
	respond(p, h.CorrelationID, fmt.Appendf(nil, "%d %c", len(body), first))
	return p
}

func (sizedLoader) BodyLength(_ *Conn, h wire.RequestHeader, small []byte) (int, error) {
	if h.APIKey != 9001 {
		return -1, nil
	}
	var n int
	var b byte
	if _, err := fmt.Sscanf(string(small), "%d %c", &n, &b); err != nil {
		return 0, err
	}
	return n, nil
}

func (sizedLoader) LoadBody(_ *Conn, _ wire.RequestHeader, small, dst []byte) error {
	for i := range dst {
		dst[i] = small[len(small)-1]
	}
	return nil
}

// A BodyLoader's requests are served with the bodies it loads, large ones on the overlap
// goroutine, in request order with the requests around them; one it cannot load closes the
// connection.
func TestBodyLoader(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			cfg := testConfig(t, tr)
			cfg.MaxRequestBytes = 1 << 20
			s := startServer(t, cfg, sizedLoader{})
			c := dial(t, s, tr)
			want := []string{}
			for i, body := range []string{"100000 a", "plain", "10 b", "200000 c", "x"} {
				key := wire.APIKey(9001)
				if !strings.Contains(body, " ") {
					key = wire.APIVersions
				}
				c.send(key, int32(i), []byte(body))
				switch body {
				case "plain":
					want = append(want, "5 p")
				case "x":
					want = append(want, "1 x")
				default:
					var n int
					var b byte
					fmt.Sscanf(body, "%d %c", &n, &b)
					want = append(want, fmt.Sprintf("%d %c", n, b))
				}
			}
			for i, w := range want {
				if corr, body := c.recv(); corr != int32(i) || string(body) != w {
					t.Fatalf("response %d: corr %d %q, want %q", i, corr, body, w)
				}
			}
			if st := s.Stats(); st.LoadedBytes != 300010 || st.Overlapped != 2 {
				t.Errorf("loaded %d bytes, overlapped %d requests; want 300010 and 2", st.LoadedBytes, st.Overlapped)
			}
			c.send(9001, 9, []byte("2000000 z")) // over MaxRequestBytes
			c.expectClosed()
			c2 := dial(t, s, tr)
			c2.send(9001, 1, []byte("no size"))
			c2.expectClosed()
		})
	}
}
