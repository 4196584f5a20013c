package sched

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestSetSliceReachesEveryThreadAndItsClones(t *testing.T) {
	def, err := Slice() // the kernel's default: nothing set this process's yet
	if errors.Is(err, ErrUnsupported) {
		t.Skip("kernel without custom slices (before 6.12)")
	}
	// One thread with a raised nice value: the slice must not reset it.
	niced := make(chan int)
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread() // never unlocked: the niced thread exits with the goroutine
		tid := unix.Gettid()
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 7); err != nil {
			t.Error(err)
		}
		niced <- tid
		<-release
	}()
	nicedTID := <-niced

	const slice = 300 * time.Microsecond
	n, err := SetSlice(slice)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("set %d threads; the process has at least the test's and the niced one", n)
	}

	// Threads created afterwards: goroutines locked to threads while others are blocked force
	// the runtime to clone new ones.
	ready := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ready <- struct{}{}
			<-release
		}()
	}
	for range 4 {
		<-ready
	}
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	if len(tids) < n+1 {
		t.Logf("%d threads after %d set (the runtime reused idle ones)", len(tids), n)
	}
	for _, tid := range tids {
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // exited
		}
		if time.Duration(a.Runtime) != slice {
			t.Errorf("thread %d: slice %v, want %v", tid, time.Duration(a.Runtime), slice)
		}
		if tid == nicedTID && a.Nice != 7 {
			t.Errorf("thread %d: nice %d after SetSlice, want the 7 it had", tid, a.Nice)
		}
	}
	close(release)
	wg.Wait()

	// 0 gives the threads the kernel's default back.
	if _, err := SetSlice(0); err != nil {
		t.Fatal(err)
	}
	if got, err := Slice(); err != nil || got != def {
		t.Fatalf("slice after SetSlice(0) = %v, %v; want the default %v", got, err, def)
	}
}
