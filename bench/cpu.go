package bench

import (
	"sync"
	"time"
)

// cpuMeter measures the CPU time the process spends in a run's measured window: user and
// system time of every thread, so the client, the harness and an in-process broker together.
// Throughput on a shared machine moves with what else runs; the CPU a run costs per byte moves
// much less, and cores used (CPU time over wall time) tells a run bound by CPU from one bound by
// waiting. The zero value is ready; its methods may be called from any goroutine.
type cpuMeter struct {
	// broker, if set, reads the CPU time of a broker in a process of its own
	// (BrokerCPUReader), counted in the window too and reported apart. Set before begin.
	broker func() (time.Duration, bool)

	mu      sync.Mutex
	started bool
	ok      bool // the system reports the process's CPU time
	start   time.Duration
	last    time.Duration // the latest reading since start (mark)
	markAt  time.Time     // the caller's time of the last markSoon that read the clock
	// The broker process's readings at begin and at the last mark; brokerOK: it reports them.
	brokerStart, brokerLast time.Duration
	brokerOK                bool
}

// cpuMarkEvery spaces the readings of markSoon: a consumer may call it on every Poll, and a
// getrusage per Poll would cost the run a few percent of its CPU here.
const cpuMarkEvery = 5 * time.Millisecond

// begin starts the window now; later calls do nothing.
func (m *cpuMeter) begin() {
	now, ok := processCPU()
	b, bok := m.readBroker()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		m.started, m.ok, m.start, m.last = true, ok, now, now
		m.brokerOK, m.brokerStart, m.brokerLast = bok, b, b
	}
}

// mark moves the window's end to now, if it has begun.
func (m *cpuMeter) mark() {
	now, ok := processCPU()
	b, bok := m.readBroker()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started && ok && now > m.last {
		m.last = now
	}
	if m.started && m.brokerOK && bok && b > m.brokerLast {
		m.brokerLast = b
	}
}

func (m *cpuMeter) readBroker() (time.Duration, bool) {
	if m.broker == nil {
		return 0, false
	}
	return m.broker()
}

// brokerSeconds returns the broker process's CPU time in the window, 0 if there is none.
func (m *cpuMeter) brokerSeconds() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started || !m.brokerOK {
		return 0
	}
	return (m.brokerLast - m.brokerStart).Seconds()
}

// markSoon is mark for a window that ends with an event the caller sees often (a record
// received): now is the caller's clock, and the process's CPU time is read at most once per
// cpuMarkEvery of it, so the window ends within that of the last call. A run that ends with
// a wait (consume of all records waits IdleTimeout for more) thereby leaves the wait out.
func (m *cpuMeter) markSoon(now time.Time) {
	m.mu.Lock()
	due := m.started && now.Sub(m.markAt) >= cpuMarkEvery
	if due {
		m.markAt = now
	}
	m.mu.Unlock()
	if due {
		m.mark()
	}
}

// seconds returns the CPU time between begin and the last mark, 0 if the window never began
// or the system does not report CPU time.
func (m *cpuMeter) seconds() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started || !m.ok {
		return 0
	}
	own := m.last - m.start
	if m.brokerOK {
		own += m.brokerLast - m.brokerStart
	}
	return own.Seconds()
}
