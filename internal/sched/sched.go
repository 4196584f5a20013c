// Package sched asks the kernel's scheduler for a shorter time slice for every thread of the
// process: EEVDF's custom slices (Linux 6.12 and later), sched_attr.sched_runtime of a
// SCHED_OTHER thread.
//
// Why: a broker and its clients are mostly asleep, waking for each request for a few
// microseconds of work. When the cores are busy with something else (a build, another
// process, the client's own goroutines), a woken thread waits for the running one's slice
// to end (1.4 ms on a 2-core machine with the kernel's defaults), and that wait is a request's
// tail latency. A thread that asks for a shorter slice gets an earlier virtual deadline each
// time it wakes, so it preempts a thread that has been running longer; it is also preempted
// sooner, which costs context switches if it runs long. It changes no thread's share of the CPU
// (its nice value), only how finely the shares are cut.
//
// The setting is the process's, not a library's to make: the broker's serve command and the
// benchmark harness offer it as a flag (--sched-slice); an embedded broker or the client never
// touch it.
//
// Invariant: SetSlice sets every thread that exists when it returns; a thread created later is
// cloned from one of them and inherits the slice (the kernel copies it on clone).
package sched

import (
	"errors"
	"time"
)

// MinSlice and MaxSlice are the kernel's bounds on a custom slice (it clamps to them).
const (
	MinSlice = 100 * time.Microsecond
	MaxSlice = 100 * time.Millisecond
)

// ErrUnsupported: the system has no custom slices (not Linux, or a kernel before 6.12, which
// accepts and ignores the request).
var ErrUnsupported = errors.New("sched: custom scheduler slices need Linux 6.12 or later")

// ErrRange: a slice outside [MinSlice, MaxSlice].
var ErrRange = errors.New("sched: slice out of range (100µs to 100ms)")
