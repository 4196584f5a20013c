//go:build unix

package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

// TestServeSIGUSR1DumpsStacks: SIGUSR1 makes `sluice serve` write every goroutine's stack to
// its log, and the broker goes on serving (sluice chaos sends it to a stuck cluster).
func TestServeSIGUSR1DumpsStacks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	proc, addr, logs := serve(t, bin, t.TempDir())
	if err := proc.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // polling, bounded
		out := logs.String()
		if strings.Contains(out, "every goroutine's stack follows") && strings.Contains(out, "reconcileLoop") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stacks in the log 10 s after SIGUSR1:\n%s", out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := client.NewAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.ListTopics(ctx); err != nil {
		t.Fatalf("the broker after SIGUSR1: %v", err)
	}
}
