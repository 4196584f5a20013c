package bench

import (
	"context"
	"errors"
	"time"
)

// Clock is the time source of a run; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// NewSleeper returns a Sleeper for one goroutine (a pacer) to wait with. interval is the
	// time between the records of every pacer of the run together (0 flat out): how often
	// the process as a whole waits.
	NewSleeper(interval time.Duration) Sleeper
}

// Sleeper waits for due times. It is owned by one goroutine; Close releases it.
type Sleeper interface {
	// SleepUntil returns when t has come (at once if it has), or when ctx ends.
	SleepUntil(ctx context.Context, t time.Time) error
	Close() error
}

// realClock is the monotonic clock, read as an offset from a base time.
//
// time.Now reads two clocks (wall and monotonic, two vDSO calls of about 25 ns each on a
// kvm-clock VM); time.Since on a time with a monotonic reading reads only the monotonic one.
// At millions of records a second the harness reads the clock twice per record, so this
// halves the cost of its own timekeeping. The times it returns are base's wall time plus
// elapsed monotonic time: right for intervals, which is all the harness measures, and at most
// a run's worth of clock drift away from the wall clock.
type realClock struct{ base time.Time }

func newRealClock() realClock { return realClock{base: time.Now()} }

func (c realClock) Now() time.Time { return c.base.Add(time.Since(c.base)) }

func (realClock) NewSleeper(interval time.Duration) Sleeper {
	s := &realSleeper{}
	if interval >= alarmMin {
		s.alarm, _ = newAlarm() // nil where there is none: Go's timers alone
	}
	return s
}

const (
	// alarmSlack: the alarm is set this much after the Go timer, so that the timer is due
	// when the alarm wakes the runtime.
	alarmSlack = 2 * time.Microsecond
	// alarmMin: the pacers of a process together wait at most once every alarmMin, so that each
	// wait can have the alarm (Pacer.minWait). Setting the alarm is a system call and each
	// expiry a wake-up, together tens of microseconds of CPU on a 2-vCPU VM: an alarm per
	// record at 100,000 records/s doubled the system time of an e2e run and made its latency
	// worse, not better (and so did sixteen pacers of 6,250 records/s each, with an alarm
	// each); a periodic alarm every 200 µs (a timerfd read by a goroutine) cut the lag of a
	// 20,000 records/s pacer from 1.1 to 0.35 ms at p99 but cost a third of a core.
	alarmMin = 100 * time.Microsecond
)

// realSleeper waits on Go timers, with an alarm that makes them precise while the process is
// idle. Go's timers fire within microseconds while the runtime is busy (every scheduling
// decision checks them), but an idle runtime sleeps in epoll_wait, whose timeout is in whole
// milliseconds, so a timer due in 10 µs then fires about 1 ms later (golang/go#53824). An
// open-loop pacer waiting so sends late, and since latency is measured from the due time, the
// harness's lateness is counted as the system's: at 1,000 records/s it was most of a 0.6 ms
// median round trip over a unix socket. The alarm (a timerfd in the poller, on Linux) wakes
// the idle runtime at the due time. Waiting on the alarm itself instead would not do: the
// poller is consulted only when a processor runs out of work, so a busy process would see it
// up to 10 ms late. What lateness remains is measured (Result.SendLagMs).
type realSleeper struct {
	alarm alarm       // nil: none on this system
	timer *time.Timer // nil until the first wait
}

func (s *realSleeper) SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	if s.alarm != nil {
		if err := s.alarm.set(d + alarmSlack); err != nil {
			// Go's timers alone from here on; the lag report shows what that costs.
			_ = s.alarm.close()
			s.alarm = nil
		}
	}
	select {
	case <-s.timer.C:
		return nil
	case <-ctx.Done():
		s.timer.Stop()
		return ctx.Err()
	}
}

func (s *realSleeper) Close() error {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.alarm != nil {
		return s.alarm.close()
	}
	return nil
}

// alarm wakes an idle runtime after a delay; see realSleeper.
type alarm interface {
	set(d time.Duration) error
	close() error
}

// Pacer schedules the records of one open-loop producer: record i is due at Start + i*Interval,
// whatever happened to the records before it. Interval 0 means flat out: every record is due
// when it is sent.
type Pacer struct {
	Start    time.Time
	Interval time.Duration
	// Pacers is how many pacers run side by side in the process, this one included (0 counts
	// as 1); with Interval it gives how often the process as a whole waits.
	Pacers int
	// ClockEvery: flat out, the clock is read once every this many records (0 or 1: every
	// record), and the records in between are due at the last reading.
	ClockEvery int
	// Deadline (open-loop; zero for none) ends a pacer that has fallen behind: once the clock
	// has passed it, no more records are sent, and Pace returns ErrPastDeadline. A pacer that
	// keeps up never meets it, if it is after the due time of the last record to send.
	Deadline time.Time
}

// ErrPastDeadline is what Pace returns when it stopped at Pacer.Deadline with records still to
// send: the system (or the harness) did not keep up with the schedule.
var ErrPastDeadline = errors.New("bench: pacer past its deadline")

// deadlineEvery: behind schedule, records go out without a wait, and the pacer reads the clock
// for its Deadline (and looks at ctx) once every this many records, not for every one: a clock
// read is tens of nanoseconds, and the run is then as fast as the system takes records.
const deadlineEvery = 64

// NewPacer returns the pacer of a producer sending rate records per second from start; rate 0
// means flat out.
func NewPacer(start time.Time, rate float64) Pacer {
	if rate <= 0 {
		return Pacer{Start: start}
	}
	return Pacer{Start: start, Interval: time.Duration(float64(time.Second) / rate)}
}

// processInterval is the time between records of all the run's pacers together.
func (p Pacer) processInterval() time.Duration { return p.Interval / time.Duration(max(p.Pacers, 1)) }

// minWait is the shortest wait of an open-loop pacer: records due less than this apart are
// waited for together, until the last of them is due, and then sent one after the other. So
// the run's pacers together wait at most once every alarmMin, each wait can have the alarm,
// and a record is sent at most minWait after its due time on this account. Waiting for each
// record on Go's timers alone made them late by up to a millisecond whenever the runtime went
// idle between records (an e2e run at 100,000 records/s: send lag p95 0.96 ms, p99 1.15 ms),
// which counts in the latency measured from the due time; in groups of 100 µs with the alarm,
// p95 0.2 ms and p99 0.5 ms. Records sent on time arrive more evenly than records sent in
// late bursts, so the system under test then gets more, smaller requests (17 % more at
// 100,000 records/s) and the run takes more CPU: that is the open loop it claims to be.
func (p Pacer) minWait() time.Duration {
	if !p.OpenLoop() || p.processInterval() >= alarmMin {
		return 0
	}
	return alarmMin * time.Duration(max(p.Pacers, 1))
}

// processWaits is how often the process as a whole waits: the pacers' waits together.
func (p Pacer) processWaits() time.Duration {
	if w := p.minWait(); w > 0 {
		return w / time.Duration(max(p.Pacers, 1))
	}
	return p.processInterval()
}

// OpenLoop reports whether records have scheduled times.
func (p Pacer) OpenLoop() bool { return p.Interval > 0 }

// Due is the scheduled send time of record i.
func (p Pacer) Due(i int64) time.Time { return p.Start.Add(time.Duration(i) * p.Interval) }

// Sender sends one record; due is the time latency is measured from (the scheduled time
// open-loop, the time of the call flat out), and the sender must call done exactly once, with
// the acknowledgement's error.
type Sender func(i int64, due time.Time)

// Pace runs the send loop of one producer: for each i from 0 until stop(i, due) is true it
// waits until record i is due (open-loop) and sends it. Flat out, due is clock.Now() at the
// call, or at the last reading of it with Pacer.ClockEvery. It returns the number of records
// sent. Open-loop with a Deadline, it stops when the clock has passed it (checked after each
// wait, and once every deadlineEvery records sent without one), with ErrPastDeadline.
func Pace(ctx context.Context, clock Clock, p Pacer, stop func(i int64, due time.Time) bool, send Sender) (int64, error) {
	sleeper := clock.NewSleeper(p.processWaits())
	defer sleeper.Close()
	every := int64(max(p.ClockEvery, 1))
	minWait := p.minWait()
	var now time.Time
	// awake: open-loop, the records due by then can be sent without reading the clock.
	var awake time.Time
	var i int64
	for ; ; i++ {
		var due time.Time
		if p.OpenLoop() {
			due = p.Due(i)
			if stop(i, due) {
				return i, nil
			}
			if due.After(awake) {
				var err error
				if awake, err = p.waitFor(ctx, clock, sleeper, i, due, minWait); err != nil {
					return i, err
				}
				if p.pastDeadline(clock) {
					return i, ErrPastDeadline
				}
			} else if i%deadlineEvery == 0 {
				// Behind schedule, records are sent without a wait, and the waits that
				// would see ctx end come ever further apart (a run at a rate the system
				// cannot keep up ignored Ctrl-C for minutes, and, sending every record
				// due in its duration however late, ran for minutes past it).
				if err := ctx.Err(); err != nil {
					return i, err
				}
				if p.pastDeadline(clock) {
					return i, ErrPastDeadline
				}
			}
		} else {
			if i%every == 0 {
				now = clock.Now()
			}
			due = now
			if stop(i, due) {
				return i, nil
			}
			if i&1023 == 0 && ctx.Err() != nil {
				return i, ctx.Err()
			}
		}
		send(i, due)
	}
}

// pastDeadline reports whether the clock has passed the pacer's Deadline.
func (p Pacer) pastDeadline(clock Clock) bool {
	return !p.Deadline.IsZero() && clock.Now().After(p.Deadline)
}

// dueBefore is how many of the pacer's records are due before t (open-loop).
func (p Pacer) dueBefore(t time.Time) int64 {
	if !p.OpenLoop() || !t.After(p.Start) {
		return 0
	}
	return int64((t.Sub(p.Start) + p.Interval - 1) / p.Interval)
}

// waitFor waits until record i, due at due, may be sent, and returns the time up to which the
// records after it are due without another wait: with minWait, the last of those due within
// minWait of now is waited for (none is ever sent before it is due; a late record is sent at
// once).
func (p Pacer) waitFor(ctx context.Context, clock Clock, sleeper Sleeper, i int64, due time.Time, minWait time.Duration) (time.Time, error) {
	if minWait <= 0 {
		return due, sleeper.SleepUntil(ctx, due)
	}
	now := clock.Now()
	if !due.After(now) {
		return now, ctx.Err()
	}
	until := due
	if due.Sub(now) < minWait {
		until = p.Due(i + int64(now.Add(minWait).Sub(due)/p.Interval))
	}
	return until, sleeper.SleepUntil(ctx, until)
}
