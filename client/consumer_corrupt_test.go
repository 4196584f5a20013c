package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
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
	f := damagedLogFixture(t, "corrupt", [][]string{
		{"intact-0", "intact-1", "intact-2"},
		{"damaged-3", "victim-record-4", "damaged-5"},
		{"after-6", "after-7"},
	}, "victim-record-4", flipValueBit)
	ctx := f.ctx
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

// damagedLogFixture produces batches (one per entry) to a one-partition topic on a broker of
// its own, closes the broker, damages the segment file with damage(data, at), where at is
// where victim's bytes start, and reopens the broker on the damaged log: the broker validates
// what it appends and serves its log files as they are (sendfile), so only the consumer's
// checks stand between the damage and the application.
func damagedLogFixture(t *testing.T, topic string, batches [][]string, victim string, damage func(data []byte, at int)) *consumerFixture {
	t.Helper()
	dir := t.TempDir()
	b := brokertest.Open(t, brokertest.Config(dir, "127.0.0.1:0"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	conn, err := client.Dial(ctx, b.Addr().String(), "damage-test")
	if err != nil {
		t.Fatal(err)
	}
	f := &consumerFixture{t: t, b: b, conn: conn, ctx: ctx}
	f.createTopic(topic, 1)
	for _, values := range batches {
		f.produceValues(topic, 0, values...)
	}
	conn.Close()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	logs, err := filepath.Glob(filepath.Join(dir, topic+"-0", "*.log"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("segment files: %v, %v", logs, err)
	}
	data, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, []byte(victim))
	if at < 0 {
		t.Fatal("record not found in the segment")
	}
	damage(data, at)
	if err := os.WriteFile(logs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}

	b = brokertest.Open(t, brokertest.Config(dir, "127.0.0.1:0"))
	conn, err = client.Dial(ctx, b.Addr().String(), "damage-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &consumerFixture{t: t, b: b, conn: conn, ctx: ctx}
}

// flipValueBit flips a bit of a record value ("victim" -> "Victim"): inside the batch's CRC,
// found by Poll's check.
func flipValueBit(data []byte, at int) { data[at] ^= 0x20 }

// breakMagic breaks the magic byte of the batch holding at (found by the fetcher, which checks
// lengths and magic before queueing a response).
func breakMagic(data []byte, at int) {
	pos := 0 // the start of the batch holding at: the last batch boundary before it
	for {
		size := int(binary.BigEndian.Uint32(data[pos+8:])) + 12 // the 12 bytes up to and with the length field
		if pos+size > at {
			break
		}
		pos += size
	}
	data[pos+16] = 7
}
