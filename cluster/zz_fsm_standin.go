package cluster

// Stand-ins for what the fsm stream (issue #22) adds to the state machine, so that this branch
// compiles and its tests run before the merge. The lead deletes this file at the merge; the
// names and signatures below are the ones the quorum code calls.

import (
	"context"
	"errors"
	"sync"
	"time"
)

var (
	// ErrBrokerRegistered: a node id registered by a live broker of another incarnation.
	ErrBrokerRegistered = errors.New("cluster: node id registered by a live broker")
	// ErrStaleBrokerEpoch: a heartbeat or request under a broker epoch that is not the current one.
	ErrStaleBrokerEpoch = errors.New("cluster: stale broker epoch")
)

// standin holds, on the controller, what the fsm will hold in the replicated metadata: the
// cluster id, each broker's epoch and fenced state. It is not replicated: a new active
// controller starts it afresh.
type standin struct {
	mu        sync.Mutex
	clusterID string
	epochs    map[int32]int64
	fenced    map[int32]bool
	shutdown  map[int32]bool
}

func (c *Controller) sa() *standin {
	c.standinOnce.Do(func() {
		c.standinState = &standin{epochs: map[int32]int64{}, fenced: map[int32]bool{}, shutdown: map[int32]bool{}}
	})
	return c.standinState
}

// standinClusterKey keeps the stand-in's cluster id in raft.db's stable store, so that it
// survives a restart (the fsm's is in the replicated metadata).
var standinClusterKey = []byte("sluice.standin.cluster.id")

// standinClusterID is Metadata.ClusterID().
func standinClusterID(c *Controller, _ *Metadata) string {
	s := c.sa()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusterID == "" && c.store != nil && !c.closed.Load() {
		if v, err := c.store.Get(standinClusterKey); err == nil {
			s.clusterID = string(v)
		}
	}
	return s.clusterID
}

// standinInitCluster is proposing InitCluster{id}.
func standinInitCluster(c *Controller, _ context.Context, id string) error {
	s := c.sa()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusterID == "" {
		s.clusterID = id
		return c.store.Set(standinClusterKey, []byte(id))
	}
	return nil
}

// standinFenced is BrokerInfo.Fenced.
func standinFenced(c *Controller, _ *Metadata, id int32) bool {
	s := c.sa()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced[id]
}

// standinEpoch is BrokerInfo.Epoch.
func standinEpoch(c *Controller, _ *Metadata, id int32) int64 {
	s := c.sa()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochs[id]
}

// RegisterBroker is the fsm's RegisterBroker(ctx, info) (epoch, err): it records the broker
// (fenced) and returns its new broker epoch, the raft index of the registration.
func (c *Controller) RegisterBroker(ctx context.Context, info BrokerInfo) (int64, error) {
	res, idx, err := c.proposeIndexed(ctx, &registerBrokerCmd{Broker: info})
	if err != nil {
		return 0, err
	}
	_ = res
	epoch := int64(max(idx, c.raft.AppliedIndex()))
	s := c.sa()
	s.mu.Lock()
	s.epochs[info.ID] = epoch
	s.fenced[info.ID] = true
	delete(s.shutdown, info.ID)
	s.mu.Unlock()
	return epoch, nil
}

// FenceBroker is the fsm's: fences the broker and moves the leadership of each partition it leads
// to the first other ISR replica that is not fenced (here through SetPartitionLeader).
func (c *Controller) FenceBroker(ctx context.Context, id int32, epoch int64) error {
	s := c.sa()
	s.mu.Lock()
	if s.epochs[id] != epoch {
		s.mu.Unlock()
		return ErrStaleBrokerEpoch
	}
	s.fenced[id] = true
	s.mu.Unlock()
	return c.standinMoveLeaders(ctx, id)
}

// UnfenceBroker is the fsm's.
func (c *Controller) UnfenceBroker(ctx context.Context, id int32, epoch int64) error {
	s := c.sa()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epochs[id] != epoch {
		return ErrStaleBrokerEpoch
	}
	s.fenced[id] = false
	return nil
}

// ControlledShutdown is the fsm's.
func (c *Controller) ControlledShutdown(ctx context.Context, id int32, epoch int64) error {
	s := c.sa()
	s.mu.Lock()
	if e, ok := s.epochs[id]; ok && e != epoch { // a follower knows no epochs
		s.mu.Unlock()
		return ErrStaleBrokerEpoch
	}
	s.shutdown[id] = true
	s.mu.Unlock()
	return c.standinMoveLeaders(ctx, id)
}

func (c *Controller) standinMoveLeaders(ctx context.Context, id int32) error {
	s := c.sa()
	for _, t := range c.Metadata().Topics() {
		for _, p := range t.Partitions {
			if p.Leader != id {
				continue
			}
			next := NoLeader
			s.mu.Lock()
			for _, r := range p.Replicas {
				if r != id && !s.fenced[r] && !s.shutdown[r] && containsID(p.ISR, r) {
					next = r
					break
				}
			}
			s.mu.Unlock()
			if next == NoLeader {
				continue
			}
			if _, err := c.SetPartitionLeader(ctx, LeaderChange{Topic: t.Name, Partition: p.Partition, Leader: next, LeaderEpoch: p.LeaderEpoch}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Sessions is the fsm's pure session tracker: one session per broker, keyed by id, holding the
// incarnation and the time of the last heartbeat.
type Sessions struct {
	timeout time.Duration
	m       map[int32]session
}

type session struct {
	incarnation string
	last        time.Time
}

func NewSessions(timeout time.Duration) *Sessions {
	return &Sessions{timeout: timeout, m: map[int32]session{}}
}

// Heartbeat starts or renews id's session.
func (s *Sessions) Heartbeat(id int32, incarnation string, now time.Time) {
	s.m[id] = session{incarnation: incarnation, last: now}
}

// Reset gives each of ids a full session from now (a new active controller).
func (s *Sessions) Reset(ids []int32, incarnations map[int32]string, now time.Time) {
	s.m = map[int32]session{}
	for _, id := range ids {
		s.m[id] = session{incarnation: incarnations[id], last: now}
	}
}

// Expired lists the brokers whose session ended.
func (s *Sessions) Expired(now time.Time) []int32 {
	var out []int32
	for id, ss := range s.m {
		if now.Sub(ss.last) >= s.timeout {
			out = append(out, id)
		}
	}
	return out
}

// Live reports id's incarnation when its session is live.
func (s *Sessions) Live(id int32, now time.Time) (string, bool) {
	ss, ok := s.m[id]
	if !ok || now.Sub(ss.last) >= s.timeout {
		return "", false
	}
	return ss.incarnation, true
}

// Remove ends id's session.
func (s *Sessions) Remove(id int32) { delete(s.m, id) }
