package cluster

import (
	"slices"
	"testing"
	"time"
)

func TestSessions(t *testing.T) {
	m := newMachine(t)
	var epochs [3]int64
	for id := range int32(3) {
		epochs[id] = m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: id, Host: "h", Port: 9092, Incarnation: "i" + string('a'+rune(id))}}).BrokerEpoch
		m.ok(&unfenceBrokerCmd{brokerEpochCmd{ID: id, Epoch: epochs[id]}})
	}
	s := NewSessions(func() *Metadata { return m.md })
	t0 := time.Unix(1000, 0)
	const timeout = 9 * time.Second

	// A new active controller gives everyone a full session.
	s.Reset(t0, m.md)
	if got := s.Expired(t0.Add(timeout), timeout); len(got) != 0 {
		t.Fatalf("expired at the timeout: %v", got)
	}
	s.Heartbeat(0, epochs[0], t0.Add(5*time.Second))
	s.Heartbeat(1, epochs[1], t0.Add(5*time.Second))
	got := s.Expired(t0.Add(timeout+time.Second), timeout)
	if !slices.Equal(got, []BrokerRef{{ID: 2, Epoch: epochs[2]}}) {
		t.Fatalf("Expired = %v, want broker 2", got)
	}
	if inc, ok := s.Live(0, t0.Add(10*time.Second), timeout); !ok || inc != "ia" {
		t.Fatalf("Live(0) = %q, %v", inc, ok)
	}
	if _, ok := s.Live(2, t0.Add(10*time.Second), timeout); ok {
		t.Fatal("broker 2 is live after its session expired")
	}

	// Once fenced, broker 2 is not reported again.
	m.ok(&fenceBrokerCmd{brokerEpochCmd{ID: 2, Epoch: epochs[2]}})
	s.Remove(2)
	if got := s.Expired(t0.Add(time.Hour), timeout); slices.ContainsFunc(got, func(r BrokerRef) bool { return r.ID == 2 }) {
		t.Fatalf("fenced broker reported: %v", got)
	}

	// A heartbeat at an old epoch does not keep a re-registered broker's
	// session: the registration starts a new one.
	e := m.ok(&registerBrokerCmd{Broker: BrokerInfo{ID: 0, Host: "h", Port: 9092, Incarnation: "ia2"}}).BrokerEpoch
	m.ok(&unfenceBrokerCmd{brokerEpochCmd{ID: 0, Epoch: e}})
	now := t0.Add(20 * time.Second)
	s.Heartbeat(0, epochs[0], now)
	if _, ok := s.Live(0, now, timeout); ok {
		t.Fatal("a heartbeat at the old epoch counts for the new registration")
	}
	if got := s.Expired(now, timeout); slices.ContainsFunc(got, func(r BrokerRef) bool { return r.ID == 0 }) {
		t.Fatalf("the new registration expired at once: %v", got)
	}
	s.Heartbeat(0, e, now)
	if inc, ok := s.Live(0, now, timeout); !ok || inc != "ia2" {
		t.Fatalf("Live(0) after the new registration = %q, %v", inc, ok)
	}
}
