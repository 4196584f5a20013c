package bench

import (
	"os"
	"testing"
	"time"
)

// childCPU reads a process's CPU time from /proc: this one's, after some work, agrees with
// getrusage to within /proc's 10 ms ticks.
func TestChildCPU(t *testing.T) {
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ { // spin for a bounded time
		_ = x * x
	}
	proc, ok := childCPU(os.Getpid())
	self, ok2 := processCPU()
	if !ok || !ok2 {
		t.Fatalf("childCPU %v, processCPU %v", ok, ok2)
	}
	if proc <= 0 || proc > self+20*time.Millisecond || proc < self-50*time.Millisecond {
		t.Fatalf("/proc says %v, getrusage %v", proc, self)
	}
	if _, ok := childCPU(-1); ok {
		t.Fatal("a CPU time for no process")
	}
}
