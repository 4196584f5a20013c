package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/wire"
)

var (
	buildOnce sync.Once
	binDir    string
	binErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildSluice compiles the binary once per test run.
func buildSluice(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "sluice-bin"); binErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "sluice"), ".")
		cmd.Stderr = os.Stderr
		binErr = cmd.Run()
	})
	if binErr != nil {
		t.Fatalf("go build: %v", binErr)
	}
	return filepath.Join(binDir, "sluice")
}

// serve starts `sluice serve` on a unix socket only (no TCP port to collide on) and waits until
// it answers.
func serve(t *testing.T, bin, dataDir string) (*exec.Cmd, string, *lockedBuffer) {
	t.Helper()
	sock := filepath.Join(dataDir, "s.sock")
	var logs lockedBuffer // exec's copier goroutine writes it while a failing test reads it
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--listen", "", "--unix", sock)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "unix://" + sock
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a, err := client.NewAdmin(ctx, addr)
		if err == nil {
			_, err = a.ListTopics(ctx)
			a.Close()
		}
		cancel()
		if err == nil {
			return cmd, addr, &logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not come up: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func produceAll(t *testing.T, c *client.Conn, topic string, value string) wire.ProduceResponsePartition {
	t.Helper()
	bl := batch.NewBuilder(batch.DefaultBuilderOptions())
	bl.Append(&batch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(value)})
	recs, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	var resp wire.ProduceResponse
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Call(ctx, &wire.ProduceRequest{Acks: wire.AcksAll, TimeoutMs: 10000, Topics: []wire.ProduceRequestTopic{
		{Topic: topic, Partitions: []wire.ProduceRequestPartition{{Partition: 0, Records: append([]byte(nil), recs...)}}},
	}}, &resp)
	if err != nil {
		return wire.ProduceResponsePartition{ErrorCode: wire.ErrNetworkException}
	}
	return resp.Topics[0].Partitions[0]
}

// Every record acknowledged with acks=all survives kill -9, and topics are intact.
func TestKill9KeepsAcknowledgedRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	dir := t.TempDir()
	proc, addr, logs := serve(t, bin, dir)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateTopic(ctx, client.TopicSpec{Name: "durable", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	c, err := client.Dial(ctx, addr, "kill9")
	if err != nil {
		t.Fatal(err)
	}
	// Produce from a goroutine and kill the broker while it runs: the last requests are cut off
	// mid-flight; only the acknowledged ones are promised.
	acked := make(chan string, 10000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 5000; i++ {
			v := fmt.Sprintf("record-%d", i)
			if res := produceAll(t, c, "durable", v); res.ErrorCode != wire.NoError {
				return
			}
			acked <- v
		}
	}()
	// Kill once 200 are acknowledged; a producer that stops before that fails the test
	// rather than leaving it to wait for go test's timeout.
	for deadline := time.Now().Add(60 * time.Second); len(acked) < 200; {
		select {
		case <-done:
			if len(acked) < 200 {
				t.Fatalf("the producer stopped after %d acknowledged records, before the kill", len(acked))
			}
		case <-time.After(time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("only %d records acknowledged in 60 s", len(acked))
			}
		}
	}
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	_ = proc.Wait()
	c.Close()
	close(acked)
	var want []string
	for v := range acked {
		want = append(want, v)
	}

	_, addr, logs = serve(t, bin, dir)
	c2, err := client.Dial(ctx, addr, "kill9-check")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	got := checkAcknowledgedKept(ctx, t, c2, "durable", want, "kill -9 and restart", logs)
	t.Logf("%d acknowledged, %d present after kill -9 and restart", len(want), len(got))
}

// checkAcknowledgedKept reads partition 0 of topic from the start through c, checking every
// batch's CRC, and fails unless the values begin with want (every acknowledged record, in
// order) after what (a kill, a power cut). It returns every value read.
func checkAcknowledgedKept(ctx context.Context, t *testing.T, c *client.Conn, topic string, want []string, what string, logs fmt.Stringer) []string {
	t.Helper()
	var got []string
	for off := int64(0); ; {
		var resp wire.FetchResponse
		err := c.Call(ctx, &wire.FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, Topics: []wire.FetchRequestTopic{
			{Topic: topic, Partitions: []wire.FetchRequestPartition{{Partition: 0, FetchOffset: off, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}},
		}}, &resp)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode == wire.ErrNotLeaderOrFollower && ctx.Err() == nil {
			// The log is still opening (the broker answers metadata first): retry, as a
			// client does after refreshing its metadata.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if p.ErrorCode != wire.NoError {
			t.Fatalf("fetch after %s: %v\n%s", what, p.ErrorCode, logs.String())
		}
		if len(p.Records) == 0 {
			break
		}
		for rest := p.Records; len(rest) > 0; {
			bt, r, err := batch.Next(rest)
			if err != nil {
				break
			}
			if err := bt.Validate(); err != nil {
				t.Fatalf("served a corrupt batch after %s: %v", what, err)
			}
			it := bt.Iter(batch.IterOptions{})
			var rec batch.Record
			for it.Next(&rec) {
				got = append(got, string(rec.Value))
			}
			off = int64(bt.NextOffset())
			rest = r
		}
	}
	if len(got) < len(want) {
		t.Fatalf("%d records after %s, but %d were acknowledged", len(got), what, len(want))
	}
	for i, v := range want {
		if got[i] != v {
			t.Fatalf("record %d is %q, want %q", i, got[i], v)
		}
	}
	return got
}

// The topic commands work against a live broker, and print what a user expects.
func TestTopicCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	_, addr, _ := serve(t, bin, t.TempDir())
	run := func(args ...string) (string, error) {
		cmd := rootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, "--broker", addr))
		err := cmd.Execute()
		return out.String(), err
	}
	steps := []struct {
		args    []string
		want    string
		wantErr string
	}{
		{[]string{"topic", "create", "events", "--partitions", "2", "--config", "retention.ms=60000"}, "Created topic events.", ""},
		{[]string{"topic", "create", "events"}, "", "TOPIC_ALREADY_EXISTS"},
		{[]string{"topic", "create", "bad/name"}, "", "INVALID_TOPIC_EXCEPTION"},
		{[]string{"topic", "create", "zero", "--partitions", "0"}, "", "--partitions 0: a topic needs at least 1"},
		{[]string{"topic", "create", "neg", "--partitions", "-1"}, "", "--partitions -1"},
		{[]string{"topic", "create", "norf", "--replication-factor", "0"}, "", "--replication-factor 0"},
		{[]string{"topic", "alter", "events", "--config", "retention.ms=5", "--delete-config", "retention.ms"}, "", "retention.ms is both set"},
		{[]string{"topic", "list"}, "events", ""},
		// Removing what is not an override is refused, as by kafka-configs.sh: a typo must
		// not read as success.
		{[]string{"topic", "alter", "events", "--delete-config", "retention.m"}, "", "--delete-config retention.m: no such topic config (topic events's overrides: retention.ms)"},
		{[]string{"topic", "alter", "events", "--delete-config", "write.caching"}, "", "--delete-config write.caching: topic events does not override it (it has the default value"},
		{[]string{"topic", "alter", "events", "--config", "write.caching=true"}, "Altered topic events.", ""},
		{[]string{"topic", "describe", "events"}, "write.caching=true", ""},
		{[]string{"topic", "alter", "events", "--delete-config", "write.caching"}, "Altered topic events.", ""},
		{[]string{"topic", "describe", "events"}, "write.caching=false", ""},
		{[]string{"topic", "describe", "events"}, "retention.ms=60000", ""},
		{[]string{"topic", "delete", "events"}, "Deleted topic events.", ""},
		{[]string{"topic", "describe", "events"}, "", "UNKNOWN_TOPIC_OR_PARTITION"},
	}
	for _, s := range steps {
		out, err := run(s.args...)
		switch {
		case s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)):
			t.Errorf("%v: error %v, want %s", s.args, err, s.wantErr)
		case s.wantErr == "" && err != nil:
			t.Errorf("%v: %v", s.args, err)
		case !strings.Contains(out, s.want):
			t.Errorf("%v: output %q lacks %q", s.args, out, s.want)
		}
	}
}

// SIGTERM shuts the broker down cleanly within its bound and leaves the clean-shutdown marker.
func TestSIGTERMShutsDownCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	dir := t.TempDir()
	proc, _, logs := serve(t, bin, dir)
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("broker still running 30 s after SIGTERM\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, ".clean-shutdown")); err != nil {
		t.Fatalf("no clean-shutdown marker: %v\n%s", err, logs.String())
	}
}

// A command that only groups subcommands fails, with its usage on stderr, on a word that
// names none of them and without one: a script must not take a typo for success. Asking for
// help succeeds.
func TestGroupCommandsNeedASubcommand(t *testing.T) {
	for _, c := range []struct {
		args    []string
		wantErr string // "": succeeds, printing the help on stdout
	}{
		{[]string{"topic", "craete", "orders"}, `unknown command "craete" for "sluice topic"; did you mean create?`},
		{[]string{"bench", "bogus"}, `unknown command "bogus" for "sluice bench"`},
		{[]string{"bogus"}, `unknown command "bogus" for "sluice"`},
		{[]string{"completion", "bogus"}, `unknown command "bogus" for "sluice completion"`},
		{[]string{"topic", "--broker", "unix:///tmp/s.sock"}, `missing subcommand for "sluice topic"`},
		{[]string{"bench"}, `missing subcommand for "sluice bench"`},
		{[]string{}, `missing subcommand for "sluice"`},
		{[]string{"topic", "--help"}, ""},
		{[]string{"help", "bench"}, ""},
		{[]string{"topic", "help"}, ""},
		{[]string{"topic", "help", "x"}, `unknown command "help" for "sluice topic"`},
		{[]string{"--help"}, ""},
	} {
		root := rootCmd()
		var stdout, stderr bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		root.SetArgs(c.args) // not nil: cobra would take the test binary's arguments
		err := root.Execute()
		switch {
		case c.wantErr == "" && (err != nil || !strings.Contains(stdout.String(), "Usage:")):
			t.Errorf("sluice %v: %v, stdout %q", c.args, err, stdout.String())
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("sluice %v: error %v, want %q", c.args, err, c.wantErr)
		case c.wantErr != "" && stdout.Len() > 0:
			t.Errorf("sluice %v failed, yet wrote to stdout: %q", c.args, stdout.String())
		case strings.HasPrefix(c.wantErr, "missing") && !strings.Contains(stderr.String(), "Available Commands:"):
			t.Errorf("sluice %v: stderr %q, want the usage", c.args, stderr.String())
		}
	}
}

// A command that takes no arguments says so, and where the argument may belong, instead of
// cobra's "unknown command", which sends a user looking for a subcommand.
func TestLeafCommandsRefuseArguments(t *testing.T) {
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"consume", "orders"}, `sluice consume takes no arguments, got "orders": the topic goes in --topic`},
		{[]string{"produce", "--topic", "orders", "k:v"}, `sluice produce takes no arguments, got "k:v": the topic goes in --topic, the input on stdin or in --file`},
		{[]string{"topic", "list", "orders", "x"}, `sluice topic list takes no arguments, got "orders x": to see one topic, use describe NAME`},
	} {
		root := rootCmd()
		var stdout, stderr bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		root.SetArgs(append(c.args, "--broker", "unix:///nonexistent/s.sock"))
		err := root.Execute()
		if err == nil || err.Error() != c.wantErr {
			t.Errorf("sluice %v: error %v, want %q", c.args, err, c.wantErr)
		}
		if stdout.Len() > 0 {
			t.Errorf("sluice %v failed, yet wrote to stdout: %q", c.args, stdout.String())
		}
	}
}

// `sluice serve FILE` reads FILE as --config does (here an unknown property, which is an
// error); both, or more than one argument, are refused. The binary runs in a child process,
// so that a serve that ignored its arguments and started (waiting for a signal) fails the
// test at the timeout rather than hanging it.
func TestServePropertiesArgument(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte("no.such.property=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{props}, `unknown property "no.such.property"`},
		{[]string{props, "--config", props}, "properties file given twice"},
		{[]string{props, "other.properties"}, "at most one argument"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		args := append([]string{"serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--unix", "-"}, c.args...)
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		switch {
		case timedOut:
			t.Errorf("serve %v: still running after 10 s, the argument ignored\n%s", c.args, out)
		case err == nil || !strings.Contains(string(out), c.wantErr):
			t.Errorf("serve %v: %v, output %q, want %q", c.args, err, out, c.wantErr)
		}
	}
}

// topic create and alter --help list every topic config the broker knows, with what it does.
func TestTopicHelpListsEveryConfig(t *testing.T) {
	for _, sub := range []string{"create", "alter"} {
		root := rootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"topic", sub, "--help"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		for _, d := range cluster.TopicConfigDefs() {
			if !strings.Contains(out.String(), "  "+d.Name+" ") || !strings.Contains(out.String(), d.Doc) {
				t.Fatalf("topic %s --help does not list %s with its doc %q:\n%s", sub, d.Name, d.Doc, out.String())
			}
		}
	}
}
