package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
	"golang.org/x/sys/unix"
)

// BenchmarkFetchShape compares the server with the least a server can do for
// the same exchange: "plain" is one goroutine that reads a request and
// answers with an 8-byte prefix and sendfile(2) of 1 MiB, no queue, no
// writer goroutine. The client keeps one fetch in flight, as a consumer does.
// The ratio server/plain is the server's own cost, like with like.
//
// The file is 64 MiB (more than a CPU cache holds), written in 16,000-byte
// pieces as a log of 16 KiB batches is, or in 1 MiB pieces. How the page
// cache was filled matters as much as the server: pages written in small
// pieces are small folios, and both the sendfile into a unix socket and the
// client's read of it cost per folio (about 2x slower than 1 MiB folios on
// the machine of BENCHMARKS.md).
func BenchmarkFetchShape(b *testing.B) {
	const (
		fileLen = 64 << 20
		partLen = 1 << 20
	)
	for _, tr := range transports {
		for _, piece := range []int{16000, 1 << 20} {
			for _, impl := range []string{"server", "plain"} {
				name := fmt.Sprintf("%s/writes=%dB/%s", tr, piece, impl)
				b.Run(name, func(b *testing.B) {
					f := writtenInPieces(b, fileLen, piece)
					var addr net.Addr
					if impl == "server" {
						s := startServer(b, testConfig(b, tr), HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
							p := c.NewPending()
							p.Buf = binary.BigEndian.AppendUint32(p.Buf[:0], uint32(wire.ResponseHeaderLen+partLen))
							p.Buf = binary.BigEndian.AppendUint32(p.Buf, uint32(h.CorrelationID))
							p.AppendBytes(p.Buf)
							p.AppendFile(f, int64(binary.BigEndian.Uint64(body)), partLen)
							p.Complete()
							return p
						}))
						addr = s.UnixAddr()
						if tr == "tcp" {
							addr = s.Addr()
						}
					} else {
						addr = plainFetchServer(b, tr, f, partLen)
					}
					nc, err := net.Dial(addr.Network(), addr.String())
					if err != nil {
						b.Fatal(err)
					}
					defer nc.Close()
					var req []byte
					resp := make([]byte, 8+partLen)
					b.SetBytes(partLen)
					b.ResetTimer()
					for i := range b.N {
						// Unaligned, like a fetch that starts at a batch boundary.
						pos := (int64(i)*partLen)%(fileLen-partLen) + 37
						req = appendRequest(req[:0], wire.Fetch, int32(i), binary.BigEndian.AppendUint64(nil, uint64(pos)))
						if _, err := nc.Write(req); err != nil {
							b.Fatal(err)
						}
						if _, err := io.ReadFull(nc, resp); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
				})
			}
		}
	}
}

// writtenInPieces returns a file of n bytes written in pieces of the given
// size, so its page cache is made of folios of about that size.
func writtenInPieces(b *testing.B, n, piece int) vfs.File {
	f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "seg.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	content := randomContent(piece)
	for off := 0; off < n; off += piece {
		if _, err := f.WriteAt(content[:min(piece, n-off)], int64(off)); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

// plainFetchServer serves one connection on one goroutine: read a request,
// write the prefix, sendfile the part.
func plainFetchServer(b *testing.B, tr string, f vfs.File, partLen int) net.Addr {
	network, address := "tcp", "127.0.0.1:0"
	if tr == "unix" {
		network, address = "unix", filepath.Join(shortTempDir(b), "p.sock")
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		b.Fatal(err)
	}
	fd, ok := vfs.FdOf(f)
	if !ok {
		b.Fatal("file without a descriptor")
	}
	done := make(chan struct{})
	b.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		nc.(interface{ SetWriteBuffer(int) error }).SetWriteBuffer(DefaultSendBufferBytes)
		raw, err := nc.(syscall.Conn).SyscallConn()
		if err != nil {
			return
		}
		var size [4]byte
		frame := make([]byte, 256)
		prefix := make([]byte, 8)
		var h wire.RequestHeader
		for {
			if _, err := io.ReadFull(nc, size[:]); err != nil {
				return
			}
			n := int(binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(nc, frame[:n]); err != nil {
				return
			}
			body, err := h.ReadFrom(frame[:n])
			if err != nil {
				return
			}
			off := int64(binary.BigEndian.Uint64(body))
			binary.BigEndian.PutUint32(prefix, uint32(wire.ResponseHeaderLen+partLen))
			binary.BigEndian.PutUint32(prefix[4:], uint32(h.CorrelationID))
			if _, err := nc.Write(prefix); err != nil {
				return
			}
			left := partLen
			var serr error
			err = raw.Write(func(s uintptr) bool {
				for left > 0 {
					m, err := unix.Sendfile(int(s), int(fd), &off, left)
					if m > 0 {
						left -= m
					}
					switch {
					case err == unix.EAGAIN:
						return false
					case err == unix.EINTR:
					case err != nil:
						serr = err
						return true
					case m == 0:
						serr = io.ErrUnexpectedEOF
						return true
					}
				}
				return true
			})
			if err != nil || serr != nil {
				return
			}
		}
	}()
	return ln.Addr()
}
