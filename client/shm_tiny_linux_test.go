package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// A batch.size smaller than a batch header (61 bytes) is a valid configuration (every record
// gets a batch of its own) and works over TCP; over a unix socket the producer once carved its
// shared-memory region into batch.size slots, and UseBuffer sliced a slot to HeaderSize, which
// panicked inside Send: no region for batches smaller than a header.
func TestTinyBatchSizeOverUnix(t *testing.T) {
	b := prodOpenBroker(t, prodBrokerConfig(t.TempDir(), "127.0.0.1:0"))
	for _, tc := range []struct{ name, addr string }{
		{"tcp", b.Addr().String()},
		{"unix", "unix://" + b.UnixAddr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "tiny-" + tc.name
			prodCreateTopic(t, tc.addr, topic, 1)
			p := prodNew(t, client.ProducerConfig{
				Config: client.Config{Brokers: []string{tc.addr}}, BatchSize: 32, Linger: time.Millisecond,
			})
			ctx := prodCtx(t, 10*time.Second)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("Send panicked: %v", r)
					}
				}()
				_, err = p.SendSync(ctx, &client.Record{Topic: topic, Value: []byte("v")})
			}()
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
