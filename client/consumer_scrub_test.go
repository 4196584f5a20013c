package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// TestScrubFindsFlipAndConsumerGetsCorruptMessage flips a bit in a record of a sealed, fsynced
// segment while the broker is down (the disk's doing), restarts the broker with its scrub on,
// and checks, through the Go client over the broker's sockets: the scrub finds the batch and
// the replica shows as corrupt in DescribeTopic; a consumer from the start gets the records
// before the bad batch and then CORRUPT_MESSAGE, never a byte of the bad batch (over TCP, where
// the broker sends the file with sendfile, and the unix socket, where the client may read the
// segment file itself: FetchShared); a consumer that starts after the bad batch reads on.
func TestScrubFindsFlipAndConsumerGetsCorruptMessage(t *testing.T) {
	dir := t.TempDir()
	cfg := brokertest.Config(dir, "127.0.0.1:0")
	cfg.ScrubBytesPerSec = -1 // off while the data is written
	b := brokertest.Open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	a, err := client.NewAdmin(ctx, b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// Segments of about two batches: the victim's segment is sealed (and fsynced at the roll)
	// once the batches after it are written. Batches of 90 KB: over the unix socket the
	// consumer is told where the good ones are (FetchShared spans start at 64 KiB) and reads
	// the segment file itself.
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: "scrubbed", Partitions: 1, Configs: map[string]string{"segment.bytes": "200000"}}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	conn, err := client.Dial(ctx, b.Addr().String(), "scrub-test")
	if err != nil {
		t.Fatal(err)
	}
	f := &consumerFixture{t: t, b: b, conn: conn, ctx: ctx}
	pad := strings.Repeat(".", 30000)
	var afterBase int64
	for i, tag := range []string{"intact", "victim", "after", "later", "last"} {
		off := f.produceValues("scrubbed", 0, tag+"-0"+pad, tag+"-1"+pad, tag+"-2"+pad)
		if i == 2 {
			afterBase = off
		}
	}
	conn.Close()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Flip a bit of the victim's value in its segment file (not the last segment: it must be
	// sealed for the scrub to read it).
	logs, err := filepath.Glob(filepath.Join(dir, "scrubbed-0", "*.log"))
	if err != nil || len(logs) < 2 {
		t.Fatalf("segment files: %v, %v", logs, err)
	}
	sort.Strings(logs)
	flipped := false
	for _, path := range logs[:len(logs)-1] {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if at := bytes.Index(data, []byte("victim-1")); at >= 0 {
			data[at] ^= 0x20 // "Victim-1"
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			flipped = true
		}
	}
	if !flipped {
		t.Fatal("the victim's batch is not in a sealed segment")
	}

	cfg.ScrubBytesPerSec = 1 << 30
	b = brokertest.Open(t, cfg)
	a, err = client.NewAdmin(ctx, b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// The scrub's first pass starts at once; poll DescribeTopic until it has found the batch.
	for {
		info, _, err := a.DescribeTopic(ctx, "scrubbed")
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Partitions[0].CorruptReplicas; slices.Equal(got, []int32{0}) {
			break
		} else if len(got) != 0 {
			t.Fatalf("corrupt replicas %v", got)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the scrub did not find the flipped bit")
		case <-time.After(10 * time.Millisecond):
		}
	}

	f = &consumerFixture{t: t, b: b, ctx: ctx}
	for _, tr := range []struct{ name, addr string }{{"tcp", f.tcp()}, {"unix", f.unix()}} {
		addr := tr.addr
		t.Run(tr.name, func(t *testing.T) {
			f := &consumerFixture{t: t, b: b, ctx: ctx}
			tp := client.TopicPartition{Topic: "scrubbed"}
			c := f.consumer(client.ConsumerConfig{Config: client.Config{Brokers: []string{addr}}, AutoOffsetReset: client.OffsetResetEarliest}, tp)
			var got []string
			for {
				recs, err := c.Poll(ctx)
				for _, r := range recs {
					got = append(got, string(r.Value[:8]))
				}
				if err != nil {
					if !errors.Is(err, wire.ErrCorruptMessage) {
						t.Fatalf("Poll error %v, want CORRUPT_MESSAGE", err)
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
			// Past the bad batch the log reads on.
			if err := c.Seek(tp, afterBase); err != nil {
				t.Fatal(err)
			}
			recs := f.pollN(c, 9) // after, later, last
			if v := string(recs[0].Value[:7]); v != "after-0" {
				t.Fatalf("first record after the bad batch: %q", v)
			}
		})
	}
}
