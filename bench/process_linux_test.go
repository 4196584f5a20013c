package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
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

// TestChildDiesWithTheBench: a process started with childAttr ends when the process that
// started it is killed with SIGKILL. The test binary plays both: a parent that starts a
// sleeping child and waits, killed here, and the child.
func TestChildDiesWithTheBench(t *testing.T) {
	switch os.Getenv("SLUICE_TEST_CHILD_ROLE") {
	case "child":
		time.Sleep(time.Minute)
		return
	case "parent":
		c := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTheBench$")
		c.Env = append(os.Environ(), "SLUICE_TEST_CHILD_ROLE=child")
		c.SysProcAttr = childAttr()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		fmt.Println(c.Process.Pid)
		time.Sleep(time.Minute)
		return
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTheBench$")
	parent.Env = append(os.Environ(), "SLUICE_TEST_CHILD_ROLE=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		parent.Process.Kill()
		parent.Wait()
		t.Fatalf("child's pid: %v", err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for childAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d still running 10 s after its parent was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childAlive reports whether pid is a running process (not gone, not a zombie).
func childAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
