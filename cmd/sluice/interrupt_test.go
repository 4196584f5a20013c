package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startSluice starts the built binary with args, its stdout and stderr in buffers, and kills
// it when the test ends if it is still running.
func startSluice(t *testing.T, cmd *exec.Cmd) (stdout, stderr *lockedBuffer) {
	t.Helper()
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return stdout, stderr
}

// waitFor polls cond until it holds, failing the test after 15 s.
func waitFor(t *testing.T, what string, cond func() bool, stderr *lockedBuffer) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 15 s; stderr:\n%s", what, stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exitAfterSignal sends sig to cmd's process and returns how it exited: its exit status, or -1
// with the signal that killed it.
func exitAfterSignal(t *testing.T, cmd *exec.Cmd, sig os.Signal, stderr *lockedBuffer) (int, syscall.Signal) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15 s after %v; stderr:\n%s", sig, stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return -1, ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// Ctrl-C (SIGINT), and SIGTERM, end `sluice consume` as its help says: it commits the group's
// offsets of what it printed, says how many it printed, and exits 0; the group's next consumer
// resumes right after them. The binary runs as a child process, signalled once it has printed
// the records.
func TestConsumeSignalCommitsAndExits(t *testing.T) {
	bin := buildSluice(t)
	e := newConsumeEnv(t)
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGINT", syscall.SIGINT}, {"SIGTERM", syscall.SIGTERM}} {
		sig := c.sig
		t.Run(c.name, func(t *testing.T) {
			topic, group := "sig-"+c.name, "g-"+c.name
			e.topic(topic, 1)
			e.produce(topic, 0, 1000, "v0", "v1", "v2")
			cmd := exec.Command(bin, "consume", "--broker", e.b.Addr().String(), "--topic", topic, "--group", group, "--from-beginning")
			stdout, stderr := startSluice(t, cmd)
			waitFor(t, "consume printing the three records", func() bool { return stdout.String() == "v0\nv1\nv2\n" }, stderr)

			status, killedBy := exitAfterSignal(t, cmd, sig, stderr)
			if killedBy != 0 || status != 0 {
				t.Fatalf("after %v: exit status %d, killed by %v; want exit status 0\nstderr:\n%s", sig, status, killedBy, stderr.String())
			}
			if got := stderr.String(); !strings.HasSuffix(got, "Processed a total of 3 messages\n") {
				t.Fatalf("after %v stderr is %q, want it to end with the count of printed records", sig, got)
			}
			e.produce(topic, 0, 2000, "v3")
			if got := e.run("--topic", topic, "--group", group, "--from-beginning", "--max-messages", "1"); got != "v3\n" {
				t.Fatalf("the group's next consumer printed %q, want v3 alone: the interrupted one did not commit", got)
			}
		})
	}
}

// Ctrl-C (SIGINT) stops `sluice produce` reading its input (here a pipe held open, as a
// terminal), says so, delivers what it read, prints the summary and exits non-zero
// ("interrupted"). The binary runs as a child process, signalled once its lines are in the
// topic.
func TestProduceSIGINTDeliversAndExits(t *testing.T) {
	bin := buildSluice(t)
	addr := produceTestBroker(t, "psig")
	cmd := exec.Command(bin, "produce", "--topic", "psig", "--broker", addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	_, stderr := startSluice(t, cmd)
	if _, err := stdin.Write([]byte("a\nb\nc\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the three lines in the topic", func() bool { return produceTestHighWatermark(t, addr, "psig") == 3 }, stderr)

	status, killedBy := exitAfterSignal(t, cmd, syscall.SIGINT, stderr)
	if killedBy != 0 || status != 1 {
		t.Fatalf("after SIGINT: exit status %d, killed by %v; want exit status 1\nstderr:\n%s", status, killedBy, stderr.String())
	}
	want := "interrupted: delivering the records already read (interrupt again to quit at once)\n" +
		"3 records, 3 bytes, 0 errors\n" +
		"sluice: interrupted: interrupt signal received\n"
	if got := stderr.String(); !strings.HasSuffix(got, want) {
		t.Fatalf("after SIGINT stderr is\n%s\nwant it to end with\n%s", got, want)
	}
}
