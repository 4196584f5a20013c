package bench

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// timerfdAlarm is an alarm on a timerfd registered with the runtime's poller and never read:
// when it expires, the fd's readiness wakes a poller blocked in epoll_wait (whose own timeout
// is whole milliseconds), and the woken runtime then runs the Go timers that are due.
type timerfdAlarm struct {
	f  *os.File // keeps the fd open and registered with the poller
	fd int
}

func newAlarm() (alarm, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// A non-blocking fd makes os.NewFile register it with the poller (edge-triggered), which
	// is all the alarm needs. Re-arming resets the expiry count, so each expiry is a new edge.
	return &timerfdAlarm{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}, nil
}

func (a *timerfdAlarm) set(d time.Duration) error {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))} // zero would disarm it
	return unix.TimerfdSettime(a.fd, 0, &spec, nil)
}

func (a *timerfdAlarm) close() error { return a.f.Close() }
