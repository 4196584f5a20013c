package server

import (
	"context"
	"encoding/binary"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// tiny answers every request with an empty-bodied response, encoded into
// the Pending's own buffer: the server's steady state allocates nothing.
var tiny = HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, _ []byte) *Pending {
	p := c.NewPending()
	p.Buf = binary.BigEndian.AppendUint32(p.Buf[:0], wire.ResponseHeaderLen)
	p.Buf = binary.BigEndian.AppendUint32(p.Buf, uint32(h.CorrelationID))
	p.AppendBytes(p.Buf)
	p.Complete()
	return p
})

// BenchmarkRoundTrip measures request/response round trips with a trivial
// handler: one request in flight (latency bound), and a window of 16
// pipelined requests (throughput). allocs/op covers client and server.
func BenchmarkRoundTrip(b *testing.B) {
	for _, tr := range transports {
		for _, window := range []int{1, 16} {
			name := tr + "/serial"
			if window > 1 {
				name = tr + "/pipelined16"
			}
			b.Run(name, func(b *testing.B) {
				s := startServer(b, testConfig(b, tr), tiny)
				c := dial(b, s, tr)
				var frames []byte
				for i := range window {
					frames = appendRequest(frames, wire.Metadata, int32(i), []byte("0123456789abcdef"))
				}
				resp := make([]byte, window*8)
				roundTrip := func() {
					if _, err := c.nc.Write(frames); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(c.nc, resp); err != nil {
						b.Fatal(err)
					}
				}
				for range 100 { // warm the pools
					roundTrip()
				}
				c.nc.SetDeadline(time.Time{})
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += window {
					roundTrip()
				}
			})
		}
	}
}

// BenchmarkFetch sends Fetch-like responses of a small prefix and a 1 MiB
// file part: with sendfile from a real file, and copied from MemFS for
// comparison.
func BenchmarkFetch(b *testing.B) {
	const partLen = 1 << 20
	for _, src := range []string{"sendfile", "copy"} {
		for _, tr := range transports {
			b.Run(src+"/"+tr, func(b *testing.B) {
				var f vfs.File
				var err error
				if src == "sendfile" {
					f, err = vfs.Default.Create(filepath.Join(b.TempDir(), "seg.log"))
				} else {
					f, err = vfs.NewMemFS().Create("seg.log")
				}
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if _, err := f.WriteAt(randomContent(4*partLen), 0); err != nil {
					b.Fatal(err)
				}
				s := startServer(b, testConfig(b, tr), HandlerFunc(func(_ context.Context, c *Conn, h wire.RequestHeader, body []byte) *Pending {
					p := c.NewPending()
					p.Buf = binary.BigEndian.AppendUint32(p.Buf[:0], uint32(wire.ResponseHeaderLen+partLen))
					p.Buf = binary.BigEndian.AppendUint32(p.Buf, uint32(h.CorrelationID))
					p.AppendBytes(p.Buf)
					p.AppendFile(f, int64(body[0])*partLen, partLen) // body[0] picks one of 4 ranges
					p.Complete()
					return p
				}))
				c := dial(b, s, tr)
				c.nc.SetDeadline(time.Time{})
				var reqs [4][]byte
				for i := range reqs {
					reqs[i] = appendRequest(nil, wire.Fetch, int32(i), []byte{byte(i)})
				}
				resp := make([]byte, 8+partLen)
				b.SetBytes(partLen)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := c.nc.Write(reqs[i%4]); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(c.nc, resp); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if st := s.Stats(); src == "sendfile" && st.CopiedFileBytes != 0 {
					b.Fatalf("%d file bytes copied", st.CopiedFileBytes)
				}
			})
		}
	}
}
