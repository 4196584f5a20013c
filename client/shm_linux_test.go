package client_test

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// A producer over the unix socket with a shared-memory region: every record lands, in order,
// and the requests went through the region, the ones that found it full through the socket.
func TestProducerSharedMemory(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := "unix://" + b.UnixAddr().String()
	for _, tc := range []struct {
		name        string
		regionBytes int
		allShared   bool
	}{
		{"roomy", 4 << 20, true},       // five 64 KiB requests in flight fit many times over
		{"tight", 150 << 10, false},    // two fit: a request that finds no room goes through the socket
		{"too small", 16 << 10, false}, // no request fits: all through the socket
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "shm-" + fmt.Sprint(tc.regionBytes)
			prodCreateTopic(t, addr, topic, 1)
			p := prodNew(t, client.ProducerConfig{
				Config: client.Config{Brokers: []string{addr}, SharedMemoryBytes: tc.regionBytes},
				Acks:   client.AcksLeader, BatchSize: 64 << 10, Linger: 5 * time.Millisecond,
			})
			ctx := prodCtx(t, 20*time.Second)
			const n = 5000
			var failed atomic.Int32
			for i := range n {
				v := append(fmt.Appendf(nil, "%05d", i), bytes.Repeat([]byte{'x'}, 200)...)
				p.Send(ctx, &client.Record{Topic: topic, Value: v}, func(_ client.RecordMetadata, err error) {
					if err != nil {
						failed.Add(1)
					}
				})
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if failed.Load() != 0 {
				t.Fatalf("%d records failed", failed.Load())
			}
			i := 0
			for _, fb := range prodFetch(t, addr, topic, 0, n) {
				for _, r := range fb.records {
					if want := fmt.Sprintf("%05d", i); string(r.Value[:5]) != want {
						t.Fatalf("record %d holds %q", i, r.Value[:5])
					}
					i++
				}
			}
			if i != n {
				t.Fatalf("%d records in the log, want %d", i, n)
			}
			st := p.Stats()
			switch {
			case tc.regionBytes < 64<<10 && st.SharedRequests != 0:
				t.Errorf("%d of %d requests through a region smaller than any", st.SharedRequests, st.Requests)
			case tc.allShared && st.SharedRequests != st.Requests:
				t.Errorf("%d of %d requests through the region", st.SharedRequests, st.Requests)
			case tc.regionBytes >= 64<<10 && st.SharedRequests == 0:
				t.Errorf("no request of %d through the region", st.Requests)
			}
		})
	}
}
