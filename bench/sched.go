package bench

import (
	"context"
	"time"
)

// Clock is the time source of a run; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// SleepUntil returns when t has come (at once if it has), or when ctx ends.
	SleepUntil(ctx context.Context, t time.Time) error
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

func (realClock) SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pacer schedules the records of one open-loop producer: record i is due at Start + i*Interval,
// whatever happened to the records before it. Interval 0 means flat out: every record is due
// when it is sent.
type Pacer struct {
	Start    time.Time
	Interval time.Duration
}

// NewPacer returns the pacer of a producer sending rate records per second from start; rate 0
// means flat out.
func NewPacer(start time.Time, rate float64) Pacer {
	if rate <= 0 {
		return Pacer{Start: start}
	}
	return Pacer{Start: start, Interval: time.Duration(float64(time.Second) / rate)}
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
// call. It returns the number of records sent.
func Pace(ctx context.Context, clock Clock, p Pacer, stop func(i int64, due time.Time) bool, send Sender) (int64, error) {
	var i int64
	for ; ; i++ {
		var due time.Time
		if p.OpenLoop() {
			due = p.Due(i)
			if stop(i, due) {
				return i, nil
			}
			if err := clock.SleepUntil(ctx, due); err != nil {
				return i, err
			}
		} else {
			due = clock.Now()
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
