package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// produceTestBroker starts an in-process broker with the given topics (one partition each)
// and returns its unix socket address.
func produceTestBroker(t *testing.T, topics ...string) string {
	t.Helper()
	b := brokertest.Start(t)
	addr := "unix://" + b.UnixAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, topic := range topics {
		if err := a.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return addr
}

// runProduceCmd runs `sluice produce args...` with stdin and returns its stderr and error.
func runProduceCmd(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := produceCmd()
	var stderr bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(io.Discard)
	cmd.SetErr(&stderr)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return stderr.String(), err
}

// produceTestConn dials addr for a test's direct requests, within a 10 s context; both end
// with the test.
func produceTestConn(t *testing.T, addr string) (context.Context, *client.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	conn, err := client.Dial(ctx, addr, "produce-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return ctx, conn
}

// produceTestFetch returns partition 0's records, from offset 0, once it holds want.
func produceTestFetch(t *testing.T, addr, topic string, want int) []batch.Record {
	t.Helper()
	ctx, conn := produceTestConn(t, addr)
	var out []batch.Record
	for next := int64(0); len(out) < want; {
		var resp wire.FetchResponse
		err := conn.Call(ctx, &wire.FetchRequest{ReplicaID: wire.ConsumerReplicaID, MaxWaitMs: 100, MinBytes: 1, MaxBytes: 1 << 20,
			Topics: []wire.FetchRequestTopic{{Topic: topic, Partitions: []wire.FetchRequestPartition{
				{FetchOffset: next, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}}, &resp)
		if err != nil {
			t.Fatalf("fetch %s: %d of %d records: %v", topic, len(out), want, err)
		}
		for rest := resp.Topics[0].Partitions[0].Records; len(rest) > 0; {
			bt, r, err := batch.Next(rest)
			if err != nil {
				break
			}
			rest = r
			it := bt.Iter(batch.IterOptions{})
			var rec batch.Record
			for it.Next(&rec) {
				if int64(rec.Offset) >= next {
					out = append(out, batch.Record{Offset: rec.Offset, Key: bytes.Clone(rec.Key), Value: bytes.Clone(rec.Value)})
				}
			}
			next = int64(bt.NextOffset())
		}
	}
	return out
}

func TestProduceCommandKeysAndErrors(t *testing.T) {
	addr := produceTestBroker(t, "lines")
	stdin := "k1:v1\nk2:with:colons\r\nno separator\n:empty key\nk3:\n"
	stderr, err := runProduceCmd(t, stdin, "--topic", "lines", "--broker", addr, "--key-separator", ":", "--linger-ms", "1")
	if err == nil || !strings.Contains(err.Error(), "1 of 5 records failed") {
		t.Fatalf("error %v, want one failed record", err)
	}
	if !strings.Contains(stderr, `line 3: no key separator ":"`) || !strings.Contains(stderr, "4 records, 28 bytes, 1 errors") {
		t.Fatalf("stderr:\n%s", stderr)
	}
	want := []struct{ key, value string }{{"k1", "v1"}, {"k2", "with:colons"}, {"", "empty key"}, {"k3", ""}}
	got := produceTestFetch(t, addr, "lines", len(want))
	for i, w := range want {
		if string(got[i].Key) != w.key || string(got[i].Value) != w.value || got[i].Key == nil {
			t.Errorf("record %d: %q=%q, want %q=%q", i, got[i].Key, got[i].Value, w.key, w.value)
		}
	}
}

func TestProduceCommandFileCompressedNoKey(t *testing.T) {
	addr := produceTestBroker(t, "file")
	var lines []string
	for i := range 500 {
		lines = append(lines, strings.Repeat(string(rune('a'+i%26)), 1+i%300))
	}
	lines = append(lines, "", strings.Repeat("long", 50000)) // an empty line and one longer than the read buffer
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil { // no final newline
		t.Fatal(err)
	}
	stderr, err := runProduceCmd(t, "ignored\n", "--topic", "file", "--broker", addr, "--file", path,
		"--compression", "zstd", "--acks", "1", "--linger-ms", "0", "--batch-size", "4096")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "502 records") || !strings.Contains(stderr, " 0 errors") {
		t.Fatalf("stderr:\n%s", stderr)
	}
	got := produceTestFetch(t, addr, "file", len(lines))
	for i, l := range lines {
		if got[i].Key != nil || string(got[i].Value) != l {
			t.Fatalf("record %d: key %q, value of %d bytes, want line %d (%d bytes)", i, got[i].Key, len(got[i].Value), i, len(l))
		}
	}
}

func TestProduceCommandFailures(t *testing.T) {
	addr := produceTestBroker(t)
	if _, err := runProduceCmd(t, "x\n", "--broker", addr); err == nil || !strings.Contains(err.Error(), `"topic" not set`) {
		t.Fatalf("no --topic: %v", err)
	}
	if _, err := runProduceCmd(t, "x\n", "--topic", "t", "--broker", addr, "--acks", "2"); err == nil {
		t.Fatal("--acks 2 accepted")
	}
	if _, err := runProduceCmd(t, "x\n", "--topic", "t", "--broker", addr, "--compression", "brotli"); err == nil ||
		!strings.Contains(err.Error(), "--compression") || !strings.Contains(err.Error(), "zstd") {
		t.Fatalf("--compression brotli: %v, want the flag and its choices named", err)
	}
	// A directory as --file is refused before anything is sent or summed up.
	stderr, err := runProduceCmd(t, "", "--topic", "t", "--broker", addr, "--file", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "is a directory") || strings.Contains(stderr, "records") {
		t.Fatalf("--file DIR: %v, stderr %q; want it refused before any summary", err, stderr)
	}
}

// A topic that cannot be produced to (missing, or a name no topic can have) fails the first
// line and stops the input there: each later line would wait max.block.ms for it in turn.
func TestProduceStopsAtTopicFailure(t *testing.T) {
	addr := produceTestBroker(t)
	for _, tc := range []struct {
		topic string
		want  error
	}{
		{"missing", client.ErrUnknownTopic},
		{"no/such", wire.ErrInvalidTopicException},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			// max.block.ms bounds the missing topic's lookups, and the cause checked below is
			// the broker's answer to one of them: 2 s leaves a loaded machine room to give one
			// (100 ms could all go by before the first metadata answer, leaving only the
			// deadline as the cause).
			stderr, err := runProduceCmd(t, "x\ny\nz\n", "--topic", tc.topic, "--broker", addr, "--max-block-ms", "2000")
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "line 1: ") || !strings.Contains(err.Error(), "were not sent") {
				t.Fatalf("error %v, want line 1's %v and the input stopped", err, tc.want)
			}
			if tc.want == client.ErrUnknownTopic && strings.Count(err.Error(), "unknown topic or partition") < 2 {
				t.Fatalf("error %v: want the broker's answer as the cause, not the lookup cut off by max.block.ms", err)
			}
			if !strings.Contains(stderr, "0 records, 0 bytes, 1 errors") || strings.Contains(stderr, "line 2") {
				t.Fatalf("stderr, want one error, for line 1:\n%s", stderr)
			}
		})
	}
}

// interruptedInput is an input that does not end: numbered lines, as fast as they are read.
// At line cancelAt it calls cancel, as Ctrl-C cancels the command's context, and it goes on
// for 200 ms more, so that a command that sends after the interrupt is caught at it.
type interruptedInput struct {
	next, cancelAt int
	cancel         func()
	cancelled      time.Time
}

func (r *interruptedInput) Read(p []byte) (int, error) {
	if !r.cancelled.IsZero() && time.Since(r.cancelled) > 200*time.Millisecond {
		return 0, io.EOF
	}
	n := 0
	for n+32 <= len(p) {
		n += copy(p[n:], "line "+strconv.Itoa(r.next)+"\n")
		if r.next++; r.next == r.cancelAt {
			r.cancel()
			r.cancelled = time.Now()
		}
	}
	return n, nil
}

// produceTestHighWatermark returns partition 0's high watermark.
func produceTestHighWatermark(t *testing.T, addr, topic string) int64 {
	t.Helper()
	ctx, conn := produceTestConn(t, addr)
	var resp wire.FetchResponse
	err := conn.Call(ctx, &wire.FetchRequest{ReplicaID: wire.ConsumerReplicaID, MaxBytes: 1,
		Topics: []wire.FetchRequestTopic{{Topic: topic, Partitions: []wire.FetchRequestPartition{
			{PartitionMaxBytes: 1, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}}, &resp)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].HighWatermark
}

// An interrupt stops reading the input before the producer closes: no record read after it
// fails as "producer closed", and the summary counts what reached the topic, all of it.
func TestProduceInterruptCountsOnlyWhatWasSent(t *testing.T) {
	addr := produceTestBroker(t, "intr")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	intr, interrupt := context.WithCancel(ctx)
	defer interrupt()
	cmd := produceCmd()
	var stderr lockedBuffer // a reader that went on sending would write to it after the command
	cmd.SetArgs([]string{"--topic", "intr", "--broker", addr})
	cmd.SetIn(&interruptedInput{cancelAt: 20000, cancel: interrupt})
	cmd.SetOut(io.Discard)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(intr)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v, want interrupted\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^(\d+) records, \d+ bytes, (\d+) errors$`).FindStringSubmatch(stderr.String())
	if m == nil || m[2] != "0" || strings.Contains(stderr.String(), "closed") {
		t.Fatalf("stderr, want no errors:\n%s", stderr.String())
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	if hw := produceTestHighWatermark(t, addr, "intr"); n == 0 || hw != n {
		t.Fatalf("summary counts %d records, the topic holds %d", n, hw)
	}
}
