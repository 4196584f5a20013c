package cluster

import (
	"slices"
	"time"
)

// Sessions tracks broker heartbeats for the active controller, which
// fences a broker whose session expired (Kafka's BrokerHeartbeatManager).
// It is pure bookkeeping: the caller passes the time in, runs no goroutine,
// and proposes the FenceBroker commands Expired suggests. Only the active
// controller has one; a node that becomes active calls Reset, so brokers
// are not fenced for heartbeats sent to the previous controller.
//
// Not safe for concurrent use: the controller's lifecycle loop owns it.
type Sessions struct {
	md   func() *Metadata // the current metadata (Controller.Metadata)
	last map[int32]session
}

type session struct {
	epoch int64
	at    time.Time
}

// BrokerRef names one registration of a broker: a fence is aimed at it, and
// is refused if the broker registered again since (ErrStaleBrokerEpoch).
type BrokerRef struct {
	ID    int32
	Epoch int64
}

// NewSessions returns an empty tracker reading the brokers' registrations
// from md (normally Controller.Metadata).
func NewSessions(md func() *Metadata) *Sessions {
	return &Sessions{md: md, last: map[int32]session{}}
}

// Heartbeat records a heartbeat from broker id at epoch.
func (s *Sessions) Heartbeat(id int32, epoch int64, now time.Time) {
	s.last[id] = session{epoch: epoch, at: now}
}

// Reset gives every registered broker of md a full session from now and
// forgets brokers md no longer has. Call it on becoming the active
// controller: as Kafka does after a failover, the new controller knows no
// heartbeat times, and fencing brokers it never heard from would fence
// the whole cluster.
func (s *Sessions) Reset(now time.Time, md *Metadata) {
	s.last = make(map[int32]session, len(md.brokerIDs))
	for _, b := range md.Brokers() {
		s.last[b.ID] = session{epoch: b.Epoch, at: now}
	}
}

// Expired returns the brokers unfenced in the metadata whose last heartbeat at their
// current epoch is older than timeout, sorted by id, to fence. A broker the
// metadata has that the tracker never heard of (registered since Reset through
// another path) gets a session from now instead.
func (s *Sessions) Expired(now time.Time, timeout time.Duration) []BrokerRef {
	var out []BrokerRef
	for _, b := range s.md().Brokers() {
		if b.Fenced {
			continue
		}
		last, ok := s.last[b.ID]
		if !ok || last.epoch != b.Epoch {
			// No heartbeat at this epoch yet: the registration itself counts.
			s.last[b.ID] = session{epoch: b.Epoch, at: now}
			continue
		}
		if now.Sub(last.at) > timeout {
			out = append(out, BrokerRef{ID: b.ID, Epoch: b.Epoch})
		}
	}
	slices.SortFunc(out, func(a, b BrokerRef) int { return int(a.ID) - int(b.ID) })
	return out
}

// Live reports whether broker id has a session that has not expired, and
// the incarnation the metadata records for it. The controller refuses a registration
// of a live id with another incarnation (ErrDuplicateBroker); the same
// incarnation registering again is a retry and allowed.
func (s *Sessions) Live(id int32, now time.Time, timeout time.Duration) (incarnation string, ok bool) {
	b, registered := s.md().Broker(id)
	last, seen := s.last[id]
	if !registered || !seen || last.epoch != b.Epoch || now.Sub(last.at) > timeout {
		return "", false
	}
	return b.Incarnation, true
}

// Remove forgets broker id (it was fenced or unregistered).
func (s *Sessions) Remove(id int32) { delete(s.last, id) }
