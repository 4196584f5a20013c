package client_test

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
)

// A producer over the unix socket builds its batches in a shared-memory region and sends
// pointers to them: every record lands, in order, whether its batch was in the region or (no
// free buffer there, or acks=0) went through the socket.
func TestProducerSharedMemory(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	addr := "unix://" + b.UnixAddr().String()
	const batchSize = 16 << 10
	for _, tc := range []struct {
		name        string
		regionBytes int
		acks        client.Acks
		allShared   bool
		noneShared  bool
	}{
		{"default", 0, client.AcksLeader, true, false},                    // buffer.memory: every batch has a buffer there
		{"three buffers", 3 * batchSize, client.AcksLeader, false, false}, // the rest are built and sent as usual
		{"smaller than a batch", batchSize - 1, client.AcksLeader, false, true},
		{"off", -1, client.AcksLeader, false, true},
		{"acks=0", 0, client.AcksNone, false, true}, // no response would say when a buffer is free
		// With a codec the compressed batches are built in the region.
		{"gzip", 0, client.AcksLeader, true, false},
		{"snappy", 0, client.AcksLeader, true, false},
		{"lz4", 0, client.AcksLeader, true, false},
		{"zstd", 0, client.AcksLeader, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := fmt.Sprintf("shm-%d-%v-%s", tc.regionBytes, tc.acks, tc.name[:2])
			prodCreateTopic(t, addr, topic, 1)
			codec, err := batch.ParseCodec(tc.name)
			if err != nil {
				codec = batch.None
			}
			p := prodNew(t, client.ProducerConfig{
				Config: client.Config{Brokers: []string{addr}, SharedMemoryBytes: tc.regionBytes},
				Acks:   tc.acks, BatchSize: batchSize, Linger: 5 * time.Millisecond, MaxInFlight: 1, Compression: codec,
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
			case tc.allShared && st.SharedRequests != st.Requests:
				t.Errorf("%d of %d requests through the region", st.SharedRequests, st.Requests)
			case tc.noneShared && st.SharedRequests != 0:
				t.Errorf("%d of %d requests through the region", st.SharedRequests, st.Requests)
			case !tc.noneShared && st.SharedRequests == 0:
				t.Errorf("no request of %d through the region", st.Requests)
			}
		})
	}
}
