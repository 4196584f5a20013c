package main

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/internal/sched"
)

// A signal while the broker is still opening (minutes with many partitions) is not lost: the
// broker shuts down cleanly once open, and a second signal exits at once.
func TestServeSignalDuringStartup(t *testing.T) {
	for _, signals := range []int{1, 2} {
		t.Run(map[int]string{1: "one signal", 2: "two signals"}[signals], func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			openBroker = func(cfg broker.Config) (*broker.Broker, error) {
				close(started)
				<-release
				return broker.Open(cfg)
			}
			exited := make(chan int, 1)
			exitNow = func(code int) { exited <- code }
			t.Cleanup(func() { openBroker, exitNow = broker.Open, nil })

			cmd := rootCmd()
			var logs lockedBuffer
			cmd.SetErr(&logs)
			cmd.SetArgs([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--unix", "-", "--log-level", "warn"})
			// The test's own subscription shows when the runtime has taken each signal in:
			// two SIGTERMs that arrive before it has are merged into one (the runtime keeps
			// a pending bit per signal), and serve would see a single signal.
			delivered := make(chan os.Signal, 2)
			signal.Notify(delivered, syscall.SIGTERM)
			defer signal.Stop(delivered)
			done := make(chan error, 1)
			go func() { done <- cmd.Execute() }()
			<-started
			for range signals {
				if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				select { // taken in, and so passed to every subscriber, serve's too
				case <-delivered:
				case <-time.After(10 * time.Second):
					t.Fatal("SIGTERM not delivered within 10 s")
				}
			}
			if signals == 2 {
				select {
				case code := <-exited:
					if code != 1 {
						t.Fatalf("exit status %d after a second signal, want 1", code)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a second signal during start-up did not exit")
				}
			}
			close(release)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("serve: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("serve still running 30 s after a signal during start-up; logs:\n%s", logs.String())
			}
			if signals == 1 && len(exited) > 0 {
				t.Fatal("one signal exited at once")
			}
		})
	}
}

// --sched-slice sets the broker process's threads' slice before the broker opens, and a slice
// out of the kernel's range is refused before anything starts.
func TestServeSchedSlice(t *testing.T) {
	if _, err := sched.Slice(); errors.Is(err, sched.ErrUnsupported) {
		t.Skip("kernel without custom slices (before 6.12)")
	}
	t.Cleanup(func() { sched.SetSlice(0) })
	var seen time.Duration
	openBroker = func(cfg broker.Config) (*broker.Broker, error) {
		seen, _ = sched.Slice()
		return nil, errors.New("stop here")
	}
	t.Cleanup(func() { openBroker = broker.Open })

	cmd := rootCmd()
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--unix", "-", "--sched-slice", "250us"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "stop here") {
		t.Fatalf("serve: %v, want the stub's error", err)
	}
	if seen != 250*time.Microsecond {
		t.Fatalf("the broker opened with a slice of %v, want 250µs", seen)
	}

	seen = 0
	cmd = rootCmd()
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--unix", "-", "--sched-slice", "50us"})
	if err := cmd.Execute(); !errors.Is(err, sched.ErrRange) {
		t.Fatalf("serve --sched-slice 50us: %v, want ErrRange", err)
	}
	if seen != 0 {
		t.Fatal("the broker opened despite a slice out of range")
	}
}

// A --log-level that is not one of slog's names is refused before anything opens, with a
// message naming the flag and the choices.
func TestServeBadLogLevel(t *testing.T) {
	openBroker = func(broker.Config) (*broker.Broker, error) {
		t.Fatal("the broker opened despite a bad --log-level")
		return nil, nil
	}
	t.Cleanup(func() { openBroker = broker.Open })
	cmd := rootCmd()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--data-dir", t.TempDir(), "--log-level", "loud"})
	const want = `--log-level "loud": want debug, info, warn or error`
	if err := cmd.Execute(); err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
