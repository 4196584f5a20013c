package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// fileRange is a request body naming a range of the test file.
func fileRange(pos int64, n int) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(pos))
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// fetchHandler answers a request whose body is two file ranges with a real
// Fetch response of two partitions laid out for sendfile (prefix, file,
// prefix, file, tail), as a broker does. released counts OnDone hooks.
func fetchHandler(f vfs.File, released *atomic.Int64) Handler {
	return HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
		var pos [2]int64
		var lens [2]int32
		for i := range 2 {
			pos[i] = int64(binary.BigEndian.Uint64(body[12*i:]))
			lens[i] = int32(binary.BigEndian.Uint32(body[12*i+8:]))
		}
		resp := &wire.FetchResponse{Topics: []wire.FetchResponseTopic{
			{Topic: "t", Partitions: []wire.FetchResponsePartition{{Partition: 0, HighWatermark: 10}}},
			{Topic: "u", Partitions: []wire.FetchResponsePartition{{Partition: 3, HighWatermark: 20}}},
		}}
		p := c.NewPending()
		buf, cuts, err := wire.AppendFetchResponseFrame(p.Buf[:0], h.CorrelationID, resp, lens[:], nil)
		if err != nil {
			panic(err)
		}
		p.Buf = buf
		prev := 0
		for i, cut := range cuts {
			p.AppendBytes(buf[prev:cut])
			p.AppendFile(f, pos[i], int(lens[i]))
			prev = cut
		}
		p.AppendBytes(buf[prev:])
		p.OnDone(func() { released.Add(1) })
		p.Complete()
		return p
	})
}

// fetchAndCheck sends concurrent fetches of random ranges of content, of at
// most maxLen bytes (0: any length), and checks every decoded partition's
// records against the file. It returns the number of record bytes fetched.
func fetchAndCheck(t *testing.T, s *Server, tr string, content []byte, maxLen int) int64 {
	if maxLen <= 0 {
		maxLen = len(content)
	}
	const clients, rounds = 4, 8
	var total atomic.Int64
	var wg sync.WaitGroup
	for ci := range clients {
		c := dial(t, s, tr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(ci), 1))
			var resp wire.FetchResponse
			for r := range rounds {
				var want [2][]byte
				var body []byte
				for i := range 2 {
					pos := rng.IntN(len(content))
					n := rng.IntN(min(len(content)-pos, maxLen) + 1)
					want[i] = content[pos : pos+n]
					body = append(body, fileRange(int64(pos), n)...)
					total.Add(int64(n))
				}
				c.send(wire.Fetch, int32(r), body)
				corr, rb, err := c.tryRecv()
				if err != nil {
					t.Errorf("read: %v", err)
					return
				}
				if err := resp.ReadFrom(rb); err != nil || corr != int32(r) {
					t.Errorf("decode response %d (corr %d): %v", r, corr, err)
					return
				}
				for i, tp := range resp.Topics {
					if got := tp.Partitions[0].Records; !bytes.Equal(got, want[i]) {
						t.Errorf("partition %d: %d bytes differ from the file's %d", i, len(got), len(want[i]))
					}
				}
			}
		}()
	}
	wg.Wait()
	// The counters move after each write returns, so the client can see the
	// bytes first; Responses moves after a response's last write.
	waitFor(t, "responses counted", func() bool { return s.Stats().Responses == clients*rounds })
	return total.Load()
}

func randomContent(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

// osFileWith is an operating-system file (with a descriptor) holding content, closed when the
// test ends.
func osFileWith(t *testing.T, content []byte) vfs.File {
	t.Helper()
	f, err := vfs.Default.Create(filepath.Join(t.TempDir(), "seg.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteAt(content, 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// File parts from a real file go out with sendfile, but for small ones
// (inlineFileMax), which are read into memory and leave with the bytes
// around them: nothing is copied otherwise, and concurrent fetches of one
// file at different offsets do not disturb each other.
func TestSendfileZeroCopy(t *testing.T) {
	if !sendfileSupported {
		t.Skip("no sendfile on this system: file parts are copied, as TestInjectedListenerCopies checks")
	}
	content := randomContent(1<<20 + 3)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			f, err := vfs.Default.Create(filepath.Join(t.TempDir(), "00000000000000000000.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(content, 0); err != nil {
				t.Fatal(err)
			}
			if _, ok := vfs.FdOf(f); !ok {
				t.Fatal("OS file without a descriptor")
			}
			var released atomic.Int64
			s := startServer(t, testConfig(t, tr), fetchHandler(f, &released))
			want := fetchAndCheck(t, s, tr, content, 0)
			st := s.Stats()
			if st.CopiedFileBytes != 0 || st.SendfileBytes == 0 || st.SendfileBytes+st.InlinedFileBytes != want {
				t.Fatalf("file bytes copied %d, sent with sendfile %d, inlined %d; want 0 and %d in all, some sent with sendfile",
					st.CopiedFileBytes, st.SendfileBytes, st.InlinedFileBytes, want)
			}
			waitFor(t, "OnDone hooks", func() bool { return released.Load() == st.Responses })
		})
	}
}

// File parts of at most inlineFileMax bytes, from a file with a descriptor or
// without, are read into memory and written with the rest of the response
// (one writev, no sendfile), and arrive intact.
func TestSmallFilePartsInlined(t *testing.T) {
	content := randomContent(300_000)
	osFile := osFileWith(t, content)
	memFile, err := vfs.NewMemFS().Create("seg.log")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := memFile.WriteAt(content, 0); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]vfs.File{"os": osFile, "mem": memFile} {
		for _, tr := range transports {
			t.Run(name+"/"+tr, func(t *testing.T) {
				var released atomic.Int64
				s := startServer(t, testConfig(t, tr), fetchHandler(f, &released))
				want := fetchAndCheck(t, s, tr, content, inlineFileMax)
				st := s.Stats()
				if st.SendfileBytes != 0 || st.CopiedFileBytes != 0 || st.InlinedFileBytes != want {
					t.Fatalf("file bytes sent with sendfile %d, copied %d, inlined %d; want 0, 0 and %d",
						st.SendfileBytes, st.CopiedFileBytes, st.InlinedFileBytes, want)
				}
				waitFor(t, "OnDone hooks", func() bool { return released.Load() == st.Responses })
				if n := s.loaned.Load(); n != 0 {
					t.Fatalf("%d bytes of chunks still loaned after every response was written", n)
				}
			})
		}
	}
}

// Inlined parts sent through a small socket buffer: direct writes stop part way through the
// loaned chunks and hand the rest to the writer goroutine, while other connections take and
// return chunks of the same pool; every byte arrives intact and every chunk comes back.
func TestInlinedPartsThroughAFullSocket(t *testing.T) {
	content := randomContent(1 << 20)
	f := osFileWith(t, content)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			cfg := testConfig(t, tr)
			cfg.SendBufferBytes = 4 << 10
			var released atomic.Int64
			s := startServer(t, cfg, fetchHandler(f, &released))
			want := fetchAndCheck(t, s, tr, content, inlineFileMax)
			st := s.Stats()
			if st.SendfileBytes != 0 || st.CopiedFileBytes != 0 || st.InlinedFileBytes != want {
				t.Fatalf("file bytes sent with sendfile %d, copied %d, inlined %d; want 0, 0 and %d",
					st.SendfileBytes, st.CopiedFileBytes, st.InlinedFileBytes, want)
			}
			if directWriteSupported && st.HandedOff == 0 {
				t.Errorf("no direct write was handed off part way: %+v", st)
			}
			if n := s.loaned.Load(); n != 0 {
				t.Fatalf("%d bytes of chunks still loaned", n)
			}
		})
	}
}

// Past the server's budget for chunks, parts that would need one go with sendfile, and the
// budget is left as it was; parts that fit the write buffer are still inlined.
func TestInlineBudgetFallsBackToSendfile(t *testing.T) {
	if !sendfileSupported {
		t.Skip("no sendfile on this system")
	}
	content := randomContent(1 << 20)
	f := osFileWith(t, content)
	var released atomic.Int64
	s := startServer(t, testConfig(t, "unix"), fetchHandler(f, &released))
	s.loaned.Store(serverLoanBudget) // as if other connections held every chunk
	want := fetchAndCheck(t, s, "unix", content, inlineFileMax)
	st := s.Stats()
	if st.CopiedFileBytes != 0 || st.SendfileBytes == 0 || st.InlinedFileBytes == 0 || st.SendfileBytes+st.InlinedFileBytes != want {
		t.Fatalf("file bytes copied %d, sent with sendfile %d, inlined %d; want 0, some and some, %d in all",
			st.CopiedFileBytes, st.SendfileBytes, st.InlinedFileBytes, want)
	}
	if n := s.loaned.Load(); n != serverLoanBudget {
		t.Fatalf("loaned %d after the run, want the %d it started with", n, serverLoanBudget)
	}
}

// Files without a descriptor (MemFS) are read with ReadAt and written, and
// counted as user-space bytes: small parts inlined, larger ones copied.
func TestFileFallbackMemFS(t *testing.T) {
	content := randomContent(300_000)
	fs := vfs.NewMemFS()
	f, err := fs.Create("seg.log")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(content, 0); err != nil {
		t.Fatal(err)
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			var released atomic.Int64
			s := startServer(t, testConfig(t, tr), fetchHandler(f, &released))
			want := fetchAndCheck(t, s, tr, content, 0)
			if st := s.Stats(); st.SendfileBytes != 0 || st.CopiedFileBytes == 0 || st.CopiedFileBytes+st.InlinedFileBytes != want {
				t.Fatalf("file bytes copied %d, inlined %d, sent with sendfile %d; want %d in all, some copied, 0 with sendfile",
					st.CopiedFileBytes, st.InlinedFileBytes, st.SendfileBytes, want)
			}
		})
	}
}

// plainConn hides the socket's descriptor, as a connection from an injected
// virtual network would.
type plainConn struct{ net.Conn }

type plainListener struct{ net.Listener }

func (l plainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return plainConn{c}, nil
}

// With an injected listener whose connections have no descriptor, even a
// real file is copied: the same code path, no sendfile.
func TestInjectedListenerCopies(t *testing.T) {
	content := randomContent(200_000)
	f := osFileWith(t, content)
	cfg := testConfig(t, "tcp")
	cfg.Listen = func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		return plainListener{ln}, err
	}
	var released atomic.Int64
	s := startServer(t, cfg, fetchHandler(f, &released))
	want := fetchAndCheck(t, s, "tcp", content, 0)
	if st := s.Stats(); st.SendfileBytes != 0 || st.CopiedFileBytes == 0 || st.CopiedFileBytes+st.InlinedFileBytes != want {
		t.Fatalf("file bytes copied %d, inlined %d, sent with sendfile %d; want %d in all, some copied, 0 with sendfile",
			st.CopiedFileBytes, st.InlinedFileBytes, st.SendfileBytes, want)
	}
}

// A file part running past the end of its file closes the connection
// (the frame size promised bytes that do not exist).
func TestShortFileClosesConn(t *testing.T) {
	for _, name := range []string{"os", "mem"} {
		t.Run(name, func(t *testing.T) {
			var f vfs.File
			var err error
			if name == "os" {
				f, err = vfs.Default.Create(filepath.Join(t.TempDir(), "seg.log"))
			} else {
				f, err = vfs.NewMemFS().Create("seg.log")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			f.WriteAt(make([]byte, 1000), 0)
			var released atomic.Int64
			s := startServer(t, testConfig(t, "tcp"), fetchHandler(f, &released))
			// A part read into the write buffer, one read into a chunk of its own (both
			// inlined: see inlineFileMax), and one too large to inline.
			for i, n := range []int{200, copyMax + 100, inlineFileMax + 100} {
				c := dial(t, s, "tcp")
				c.send(wire.Fetch, 1, append(fileRange(0, 10), fileRange(900, n)...))
				if _, _, err := c.tryRecv(); err == nil {
					t.Fatalf("part of %d bytes: read a whole response whose file part is past EOF", n)
				}
				c.expectClosed()
				waitFor(t, "OnDone hook", func() bool { return released.Load() == int64(i+1) })
			}
		})
	}
}
