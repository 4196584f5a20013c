package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
)

// consumeEnv is an in-process broker with a raw connection to produce test data with.
type consumeEnv struct {
	t    *testing.T
	b    *broker.Broker
	conn *client.Conn
	ctx  context.Context
}

func newConsumeEnv(t *testing.T) *consumeEnv {
	t.Helper()
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	conn, err := client.Dial(ctx, b.Addr().String(), "consume-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &consumeEnv{t: t, b: b, conn: conn, ctx: ctx}
}

func (e *consumeEnv) topic(name string, partitions int32) {
	e.t.Helper()
	var resp wire.CreateTopicsResponse
	if err := e.conn.Call(e.ctx, &wire.CreateTopicsRequest{TimeoutMs: 10000, Topics: []wire.CreateTopicsRequestTopic{{Topic: name, NumPartitions: partitions, ReplicationFactor: -1}}}, &resp); err != nil || resp.Topics[0].ErrorCode != wire.NoError {
		e.t.Fatalf("create %s: %v %v", name, err, resp.Topics)
	}
}

// produce appends one batch of records with keys k<i> and values.
func (e *consumeEnv) produce(topic string, partition int32, ts int64, values ...string) {
	e.t.Helper()
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	for i, v := range values {
		bl.Append(&batch.Record{Timestamp: ts, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)})
	}
	bt, err := bl.Build()
	if err != nil {
		e.t.Fatal(err)
	}
	var resp wire.ProduceResponse
	// acks=all: answered once the record is under the high watermark, so that what the test
	// reads next (ListOffsets latest, a consumer) sees it; an acks=1 answer comes before the
	// fsync that commits the record.
	req := &wire.ProduceRequest{Acks: wire.AcksAll, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: partition, Records: bt}}}}}
	if err := e.conn.Call(e.ctx, req, &resp); err != nil || resp.Topics[0].Partitions[0].ErrorCode != wire.NoError {
		e.t.Fatalf("produce: %v %v", err, resp.Topics)
	}
}

// run executes `sluice consume` with args and returns its stdout.
func (e *consumeEnv) run(args ...string) string {
	e.t.Helper()
	cmd := consumeCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"--broker", e.b.Addr().String()}, args...))
	if err := cmd.ExecuteContext(e.ctx); err != nil {
		e.t.Fatalf("consume %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

func TestConsumeFromBeginningMaxMessages(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("cli", 2)
	e.produce("cli", 0, 1000, "a0", "a1", "a2", "a3")
	e.produce("cli", 1, 1000, "b0", "b1", "b2")

	// Every partition, the default format: one value per line.
	lines := strings.Split(strings.TrimSuffix(e.run("--topic", "cli", "--from-beginning", "--max-messages", "7"), "\n"), "\n")
	var a, b []string
	for _, l := range lines {
		if strings.HasPrefix(l, "a") {
			a = append(a, l)
		} else {
			b = append(b, l)
		}
	}
	if !slices.Equal(a, []string{"a0", "a1", "a2", "a3"}) || !slices.Equal(b, []string{"b0", "b1", "b2"}) {
		t.Fatalf("printed %q", lines)
	}
	// --max-messages stops early; --partition picks one partition.
	if got := e.run("--topic", "cli", "--partition", "0", "--from-beginning", "--max-messages", "2"); got != "a0\na1\n" {
		t.Fatalf("--partition 0 --max-messages 2 printed %q", got)
	}
	// --offset starts every partition there.
	if got := e.run("--topic", "cli", "--partition", "1", "--offset", "2", "--max-messages", "1"); got != "b2\n" {
		t.Fatalf("--offset 2 printed %q", got)
	}
}

func TestConsumeFormat(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("fmt", 1)
	e.produce("fmt", 0, 1234567, "x", "y")
	got := e.run("--topic", "fmt", "--from-beginning", "--max-messages", "2", "--format", `%t/%p/%o@%T %k=%s (%K,%S)\t100%%\n`)
	want := "fmt/0/0@1234567 k0=x (2,1)\t100%\nfmt/0/1@1234567 k1=y (2,1)\t100%\n"
	if got != want {
		t.Fatalf("--format printed %q, want %q", got, want)
	}
	for _, bad := range []string{"%z", "abc%", `\q`} {
		if _, err := parseConsumeFormat(bad); err == nil {
			t.Errorf("--format %q accepted", bad)
		}
	}
}

// With --group, the next run resumes after the records the previous one printed, even when a
// Poll returned more than --max-messages let it print; --timeout ends a run with nothing new.
func TestConsumeGroupResumes(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("grp", 1)
	e.produce("grp", 0, 1000, "v0", "v1", "v2", "v3", "v4")
	if got := e.run("--topic", "grp", "--group", "g", "--from-beginning", "--max-messages", "2"); got != "v0\nv1\n" {
		t.Fatalf("first run printed %q", got)
	}
	if got := e.run("--topic", "grp", "--group", "g", "--max-messages", "2"); got != "v2\nv3\n" {
		t.Fatalf("second run printed %q", got)
	}
	if got := e.run("--topic", "grp", "--group", "g", "--max-messages", "1"); got != "v4\n" {
		t.Fatalf("third run printed %q", got)
	}
	// Nothing is left: --timeout ends the run, having printed nothing. The timeout also bounds
	// the first Poll, which finds the coordinator, the committed offset and the leader first;
	// on a loaded machine that may take all of it, and the run ends the same way. (Checked on
	// a run that had a record to print, the timeout had to cover that first Poll.)
	if got := e.run("--topic", "grp", "--group", "g", "--timeout", "1s"); got != "" {
		t.Fatalf("fourth run printed %q, want nothing", got)
	}
	if e.ctx.Err() != nil {
		t.Fatal("the fourth run ended with the test's context, not at --timeout")
	}
}

// Bad flags fail before anything is consumed, without the "Processed" summary, which would
// read as a run that found nothing.
func TestConsumeFlagErrors(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("errs", 1)
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--topic", "errs", "--partition", "0", "--offset", "3", "--from-beginning"}, "--offset and --from-beginning"},
		{[]string{"--topic", "errs", "--partition", "0", "--offset", "3", "--group", "g"}, "--offset and --group"},
		{[]string{"--topic", "errs", "--offset", "3"}, "--offset 3 needs --partition"},
		{[]string{"--topic", "errs", "--offset", "soon"}, "--offset"},
		{[]string{"--topic", "errs", "--offset", "-5"}, "--offset"},
		{[]string{"--topic", "errs", "--partition", "4"}, "--partition 4"},
		{[]string{"--topic", "errs", "--partition", "7", "--from-beginning"}, "--partition 7"},
		{[]string{"--topic", "errs", "--partition", "-2"}, "--partition -2"},
		{[]string{"--topic", "missing", "--timeout", "1s"}, ""},
		{[]string{"--from-beginning"}, "topic"},
	} {
		cmd := consumeCmd()
		var stderr bytes.Buffer
		cmd.SetOut(io.Discard)
		cmd.SetErr(&stderr)
		cmd.SetArgs(append([]string{"--broker", e.b.Addr().String()}, c.args...))
		err := cmd.ExecuteContext(e.ctx)
		switch {
		case err == nil:
			t.Errorf("consume %v: no error", c.args)
		case !strings.Contains(err.Error(), c.wantErr):
			t.Errorf("consume %v: error %q, want it to name %s", c.args, err, c.wantErr)
		case strings.Contains(stderr.String(), "Processed"):
			t.Errorf("consume %v failed before consuming, yet printed a summary:\n%s", c.args, stderr.String())
		}
	}
}

// An --offset the partition does not hold is an error naming the offsets it holds, not a
// silent start at the log's end (where the run would print nothing until new records came).
func TestConsumeOffsetPastTheEnd(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("short", 2)
	e.produce("short", 0, 1000, "v0", "v1", "v2")
	// The end itself is in range: the run waits there for new records.
	if got := e.run("--topic", "short", "--partition", "0", "--offset", "3", "--timeout", "500ms"); got != "" {
		t.Fatalf("--offset 3 (the end) printed %q", got)
	}
	for _, c := range []struct{ partition, offset, want string }{
		{"0", "7", "[0, 3)"},
		{"1", "1", "the log is empty, at offset 0"},
	} {
		cmd := consumeCmd()
		var stderr bytes.Buffer
		cmd.SetOut(io.Discard)
		cmd.SetErr(&stderr)
		cmd.SetArgs([]string{"--broker", e.b.Addr().String(), "--topic", "short", "--partition", c.partition, "--offset", c.offset, "--timeout", "30s"})
		err := cmd.ExecuteContext(e.ctx)
		if !errors.Is(err, wire.ErrOffsetOutOfRange) || !strings.Contains(err.Error(), "--offset "+c.offset) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("--partition %s --offset %s: %v, want it to say %q; stderr:\n%s", c.partition, c.offset, err, c.want, stderr.String())
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An interrupt (SIGINT and SIGTERM cancel the command's context) ends the command without an
// error, after committing what it printed.
func TestConsumeInterruptCommits(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("intr", 1)
	e.produce("intr", 0, 1000, "v0", "v1", "v2")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var out lockedBuffer
	cmd := consumeCmd()
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--broker", e.b.Addr().String(), "--topic", "intr", "--group", "gi", "--from-beginning"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	for out.String() != "v0\nv1\nv2\n" {
		if e.ctx.Err() != nil {
			t.Fatalf("printed %q", out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interrupted consume: %v", err)
		}
	case <-e.ctx.Done():
		t.Fatal("consume did not exit on interrupt")
	}
	var resp wire.OffsetFetchResponse
	if err := e.conn.Call(e.ctx, &wire.OffsetFetchRequest{GroupID: "gi", Topics: []wire.OffsetFetchRequestTopic{{Topic: "intr", Partitions: []int32{0}}}}, &resp); err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[0].Offset; got != 3 {
		t.Fatalf("committed %d after the interrupt, want 3", got)
	}
}
