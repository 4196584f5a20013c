package cluster

import (
	"fmt"
	"slices"
)

// The broker lifecycle in the state machine: registration, fencing,
// unfencing and controlled shutdown, each with the leader elections and ISR
// changes it causes (Kafka's ClusterControlManager and the broker handlers
// of its ReplicationControlManager). The active controller decides when to
// fence (a session expired, sessions.go) and proposes the command; Apply
// only checks the broker epoch and moves partitions, deterministically.
//
// Invariant kept here: a fenced broker leads no partition, and is in an ISR
// only as its last member. A shutting-down broker leads only partitions that
// have no other alive ISR member.

// maxIncarnationLen bounds a registration's incarnation id (Kafka's is a
// 22-character UUID).
const maxIncarnationLen = 64

func (c *registerBrokerCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	b := c.Broker
	var err error
	switch {
	case b.ID < 0:
		err = fmt.Errorf("%w: id %d is negative", ErrInvalidBroker, b.ID)
	case b.Port < 0 || b.Port > 65535:
		err = fmt.Errorf("%w: broker %d: port %d out of range", ErrInvalidBroker, b.ID, b.Port)
	case (b.Host == "") != (b.Port == 0):
		err = fmt.Errorf("%w: broker %d: host and port go together", ErrInvalidBroker, b.ID)
	case b.Host == "" && b.UnixSocket == "":
		err = fmt.Errorf("%w: broker %d: no endpoint", ErrInvalidBroker, b.ID)
	case len(b.Incarnation) > maxIncarnationLen:
		err = fmt.Errorf("%w: broker %d: incarnation id of %d bytes; want at most %d", ErrInvalidBroker, b.ID, len(b.Incarnation), maxIncarnationLen)
	}
	if err != nil {
		return m, applyResult{Err: err}
	}
	if b.Incarnation == "" {
		// A registration from before brokers had a lifecycle (a log written
		// by an older version, replayed): the broker is alive, as it was
		// then, at epoch 0, as a snapshot of that time restores it.
		b.Epoch, b.Fenced, b.ShuttingDown = 0, false, false
		if old, ok := m.brokers[b.ID]; ok && old == b {
			return m, applyResult{} // nothing new, as then
		}
		next := m.clone()
		next.brokers[b.ID] = b
		return next.finish(index), applyResult{}
	}
	b.Epoch = int64(index)
	// Every registration, a restart or a retry, gets a new epoch and starts
	// fenced, so commands from the previous run are refused and the broker
	// leads nothing until its first heartbeat unfences it.
	b.Fenced, b.ShuttingDown = true, false
	next, elections, _ := m.withBroker(b, fencePartition)
	return next.finish(index), applyResult{BrokerEpoch: b.Epoch, Elections: elections}
}

// brokerEpochCmd is what fence, unfence and controlled shutdown carry: the
// broker and the epoch the proposer saw it at.
type brokerEpochCmd struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// check returns the broker if it is registered at that epoch.
func (c brokerEpochCmd) check(m *Metadata) (BrokerInfo, error) {
	b, ok := m.brokers[c.ID]
	switch {
	case !ok:
		return b, fmt.Errorf("%w: broker %d", ErrUnknownBroker, c.ID)
	case b.Epoch != c.Epoch:
		return b, fmt.Errorf("%w: broker %d is at epoch %d, not %d", ErrStaleBrokerEpoch, c.ID, b.Epoch, c.Epoch)
	}
	return b, nil
}

type fenceBrokerCmd struct{ brokerEpochCmd }

type unfenceBrokerCmd struct{ brokerEpochCmd }

type controlledShutdownCmd struct{ brokerEpochCmd }

func (c *fenceBrokerCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	b, err := c.check(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("fence broker %d: %w", c.ID, err)}
	}
	if b.Fenced {
		return m, applyResult{BrokerEpoch: b.Epoch} // a retry after a controller failover
	}
	b.Fenced = true
	next, elections, _ := m.withBroker(b, fencePartition)
	return next.finish(index), applyResult{BrokerEpoch: b.Epoch, Elections: elections}
}

func (c *unfenceBrokerCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	b, err := c.check(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("unfence broker %d: %w", c.ID, err)}
	}
	if b.eligible() {
		return m, applyResult{BrokerEpoch: b.Epoch}
	}
	b.Fenced, b.ShuttingDown = false, false
	next, elections, _ := m.withBroker(b, unfencePartition)
	return next.finish(index), applyResult{BrokerEpoch: b.Epoch, Elections: elections}
}

func (c *controlledShutdownCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	b, err := c.check(m)
	if err != nil {
		return m, applyResult{Err: fmt.Errorf("controlled shutdown of broker %d: %w", c.ID, err)}
	}
	was := b.ShuttingDown
	b.ShuttingDown = true
	// Run the moves again on every request, not only the first: a broker
	// that could not hand a partition over (no other alive ISR member) asks
	// again, and one may have come back since.
	next, elections, changed := m.withBroker(b, shutdownPartition)
	if was && !changed {
		return m, applyResult{BrokerEpoch: b.Epoch}
	}
	return next.finish(index), applyResult{BrokerEpoch: b.Epoch, Elections: elections}
}

// fencePartition moves the leadership of a partition the fenced broker led
// to the next eligible replica (or NoLeader), and takes the broker out of
// the ISR where others remain.
func fencePartition(next *Metadata, t *TopicMeta, c *partitionChange, id int32) {
	if c.p.Leader == id {
		c.setLeader(ElectLeader(c.p.Replicas, c.p.ISR, next.eligible, uncleanElection(t)))
	}
	c.removeFromISR(id)
}

// unfencePartition gives a leaderless partition a leader now that broker id
// is back: it, when it is in the ISR (or, where the topic allows, uncleanly).
func unfencePartition(next *Metadata, t *TopicMeta, c *partitionChange, id int32) {
	if c.p.Leader == NoLeader {
		c.setLeader(ElectLeader(c.p.Replicas, c.p.ISR, next.eligible, uncleanElection(t)))
	}
}

// shutdownPartition hands the leadership to the first other alive ISR
// member in AR order (never uncleanly: the broker is still serving), and
// takes the broker out of the ISR where others remain and it no longer leads.
func shutdownPartition(next *Metadata, _ *TopicMeta, c *partitionChange, id int32) {
	if c.p.Leader == id {
		if l, _ := ElectLeader(c.p.Replicas, c.p.ISR, next.eligible, false); l != NoLeader {
			c.setLeader(l, false)
		}
	}
	c.removeFromISR(id)
}

// withBroker returns the next metadata with broker b replaced and change
// applied to every partition b is a replica of, the elections made (in
// topic-name and partition order, so every node reports the same), and
// whether any partition changed.
// The caller stamps the result with finish.
func (m *Metadata) withBroker(b BrokerInfo, change func(next *Metadata, t *TopicMeta, c *partitionChange, id int32)) (*Metadata, []Election, bool) {
	next := m.clone()
	next.brokers[b.ID] = b
	var elections []Election
	changed := false
	for _, name := range m.names {
		old := m.topics[name]
		var t *TopicMeta
		for i, p := range old.Partitions {
			if !slices.Contains(p.Replicas, b.ID) || !epochsCanGrow(p) {
				continue
			}
			c := newPartitionChange(p)
			change(next, old, c, b.ID)
			c.completeReassignment(next.eligible) // a leader or ISR change may let a move end
			np, el := c.result(name)
			if !c.changed {
				continue
			}
			if t == nil {
				cp := *old
				cp.Partitions = slices.Clone(old.Partitions)
				t = &cp
				next.topics[name] = t
			}
			t.Partitions[i] = np
			changed = true
			if el != nil {
				elections = append(elections, *el)
			}
		}
	}
	return next, elections, changed
}

// PartitionsLedBy returns how many partitions broker id leads. A broker in
// controlled shutdown may stop once it leads none (Kafka's shouldShutDown).
func (m *Metadata) PartitionsLedBy(id int32) int {
	n := 0
	for _, t := range m.topics {
		for _, p := range t.Partitions {
			if p.Leader == id {
				n++
			}
		}
	}
	return n
}
