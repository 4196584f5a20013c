package sched

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// maxScans bounds SetSlice's rescans: each finds the threads cloned during the previous one,
// which the Go runtime creates a few at a time.
const maxScans = 10

// SetSlice sets a custom slice of d on every thread of this process and returns how many it
// set; 0 gives them the kernel's default back. Threads with a real-time or deadline policy are
// left alone, as is their nice value on the others. It returns ErrUnsupported if the kernel
// ignored the request.
func SetSlice(d time.Duration) (int, error) {
	if d != 0 && (d < MinSlice || d > MaxSlice) {
		return 0, fmt.Errorf("%w: %v", ErrRange, d)
	}
	done := make(map[int]bool)
	for range maxScans {
		tids, err := threads()
		if err != nil {
			return len(done), err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh++
			if err := setThread(tid, d); err != nil {
				if err == unix.ESRCH {
					continue // exited since the listing
				}
				return len(done), err
			}
			done[tid] = true
		}
		if fresh == 0 {
			return len(done), nil
		}
	}
	return len(done), fmt.Errorf("sched: threads still appearing after %d scans: some may keep the default slice", maxScans)
}

// Slice returns the calling thread's slice: the custom one if set, else the kernel's default.
func Slice() (time.Duration, error) {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0, fmt.Errorf("sched: sched_getattr: %w", err)
	}
	if a.Runtime == 0 {
		return 0, ErrUnsupported // kernels before 6.12 report no slice for SCHED_OTHER
	}
	return time.Duration(a.Runtime), nil
}

// threads lists the process's thread IDs.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("sched: list threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// setThread sets one thread's slice, keeping its policy (SCHED_OTHER or SCHED_BATCH) and nice.
func setThread(tid int, d time.Duration) error {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return err
	}
	if a.Policy != unix.SCHED_NORMAL && a.Policy != unix.SCHED_BATCH {
		return nil
	}
	want := uint64(d)
	a.Runtime, a.Deadline, a.Period = want, 0, 0
	a.Flags &^= unix.SCHED_FLAG_KEEP_PARAMS | unix.SCHED_FLAG_KEEP_POLICY
	if err := unix.SchedSetAttr(tid, a, 0); err != nil {
		return fmt.Errorf("sched: sched_setattr of thread %d: %w", tid, err)
	}
	got, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return err
	}
	if want != 0 && got.Runtime != want {
		return ErrUnsupported
	}
	return nil
}
