package chaos

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/chaos/faultproxy"
)

// fakeCluster is a Cluster of one node whose "broker" is the shell script body (run for
// `serve ...`), for the process lifecycle alone.
func fakeCluster(t *testing.T, body string) *Cluster {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs /bin/sh")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "fake-sluice")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{cfg: ClusterConfig{Exe: exe, LogLevel: "info"}, Proxy: faultproxy.New()}
	c.nodes = []*Node{{ID: 0, PropsFile: filepath.Join(dir, "p"), LogFile: filepath.Join(dir, "log"), JournalFile: filepath.Join(dir, "j")}}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestTermKillsPastItsBound: a broker that does not stop within the SIGTERM bound is killed,
// by its pid, and the error says so (found by review: the node was marked stopped before the
// kill, which then refused it, and the process lived on).
func TestTermKillsPastItsBound(t *testing.T) {
	c := fakeCluster(t, "trap '' TERM\ntouch \"$0.ready\"\nexec sleep 60")
	if err := c.Start(0); err != nil {
		t.Fatal(err)
	}
	pid := c.PID(0)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(c.cfg.Exe + ".ready"); err == nil {
			break // SIGTERM is ignored from here on
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake broker never got ready")
		}
		time.Sleep(5 * time.Millisecond) // polling for the script's marker
	}
	_, err := c.Term(0, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not stop within") {
		t.Fatalf("Term of a broker that ignores SIGTERM: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d still there after Term gave up on it (kill 0: %v)", pid, err)
	}
	if c.Running(0) || c.PID(0) != 0 {
		t.Fatal("the node is not stopped")
	}
}

// TestCrashedIsToldApart: a broker that exits on its own is reported by Crashed once, marked
// stopped, and a signal to it fails saying so rather than reporting success.
func TestCrashedIsToldApart(t *testing.T) {
	c := fakeCluster(t, "exit 3")
	if err := c.Start(0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.signal(0, syscall.SIGCONT, running)
		if err != nil {
			if !strings.Contains(err.Error(), "exited on its own") {
				t.Fatalf("signal to a dead broker: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake broker did not exit")
		}
		time.Sleep(10 * time.Millisecond) // polling for the child's exit
	}
	if got := c.Crashed(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("Crashed = %v, want [0]", got)
	}
	if got := c.Crashed(); len(got) != 0 {
		t.Fatalf("Crashed again = %v, want none", got)
	}
	if err := c.Start(0); err != nil {
		t.Fatalf("restart after the crash: %v", err)
	}
}
