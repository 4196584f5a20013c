package server

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// BenchmarkRequestFrame sends request frames of a produce's sizes, one in flight, each
// answered with an empty response: the cost of reading a frame into its buffer (taken at its
// declared size up to 1 MiB, grown as it arrives above) and of charging the request budget.
func BenchmarkRequestFrame(b *testing.B) {
	for _, tr := range transports {
		for _, size := range []int{16 << 10, 1 << 20, 4 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", tr, size>>10), func(b *testing.B) {
				cfg := testConfig(b, tr)
				cfg.OverlapBytes = -1 // the reader's own cost, not the overlap's
				s := startServer(b, cfg, tiny)
				c := dial(b, s, tr)
				c.nc.SetDeadline(time.Time{})
				frame := appendRequest(nil, wire.Produce, 1, make([]byte, size))
				resp := make([]byte, 8)
				b.SetBytes(int64(len(frame)))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := c.nc.Write(frame); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(c.nc, resp); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
