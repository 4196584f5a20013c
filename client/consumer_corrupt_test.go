package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
)

// TestConsumerStopsAtCorruptBatch damages a record on disk behind the broker's back (it
// validates what it appends, and serves the log file as it is, by sendfile) and checks that
// the consumer returns the intact batch before it, then the CRC error, and nothing from the
// damaged batch or after it, over both transports and in both record-buffer modes.
func TestConsumerStopsAtCorruptBatch(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.Open(t, brokertest.Config(dir, "127.0.0.1:0"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, b.Addr().String(), "corrupt-test")
	if err != nil {
		t.Fatal(err)
	}
	f := &consumerFixture{t: t, b: b, conn: conn, ctx: ctx}
	f.createTopic("corrupt", 1)
	f.produceValues("corrupt", 0, "intact-0", "intact-1", "intact-2")
	f.produceValues("corrupt", 0, "damaged-3", "victim-record-4", "damaged-5")
	f.produceValues("corrupt", 0, "after-6", "after-7")
	conn.Close()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	logs, err := filepath.Glob(filepath.Join(dir, "corrupt-0", "*.log"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("segment files: %v, %v", logs, err)
	}
	data, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, []byte("victim-record-4"))
	if at < 0 {
		t.Fatal("record not found in the segment")
	}
	data[at] ^= 0x20 // "Victim": a flipped bit in a record value, inside the batch's CRC
	if err := os.WriteFile(logs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}

	b = brokertest.Open(t, brokertest.Config(dir, "127.0.0.1:0"))
	conn, err = client.Dial(ctx, b.Addr().String(), "corrupt-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f = &consumerFixture{t: t, b: b, conn: conn, ctx: ctx}
	for _, tr := range []struct{ name, addr string }{{"tcp", f.tcp()}, {"unix", f.unix()}} {
		for _, mode := range consumerModes {
			t.Run(tr.name+"/"+mode.name, func(t *testing.T) {
				c := f.consumer(client.ConsumerConfig{Config: client.Config{Brokers: []string{tr.addr}},
					AutoOffsetReset: client.OffsetResetEarliest, ReuseRecordBuffers: mode.reuse},
					client.TopicPartition{Topic: "corrupt", Partition: 0})
				var got []string
				for {
					recs, err := c.Poll(ctx)
					for _, r := range recs {
						got = append(got, string(r.Value))
					}
					if err != nil {
						if !errors.Is(err, batch.ErrCRC) {
							t.Fatalf("Poll error %v, want a CRC mismatch", err)
						}
						break
					}
					if len(got) > 3 {
						t.Fatalf("records past the intact batch: %q", got)
					}
				}
				if want := []string{"intact-0", "intact-1", "intact-2"}; !slices.Equal(got, want) {
					t.Fatalf("got %q before the error, want %q", got, want)
				}
				// The partition stays failed: polling again repeats the error, delivers nothing.
				recs, err := c.Poll(ctx)
				if len(recs) != 0 || !errors.Is(err, batch.ErrCRC) {
					t.Fatalf("second Poll: %d records, %v", len(recs), err)
				}
			})
		}
	}
}
