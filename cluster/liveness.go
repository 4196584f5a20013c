package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// liveness is the active controller's view of broker sessions. Heartbeats are not raft entries:
// they update Sessions in memory on the leader only. What they decide is: a broker whose
// session expired is fenced (FenceBroker, a raft entry that moves its leaderships), and a fenced
// broker is unfenced once its heartbeat reports it has applied the metadata up to what the
// controller had committed when it registered. A node that gains leadership starts every
// registered broker a full session (Reset): it cannot know when they last beat.
//
// Sessions and want are guarded by mu; proposals run without it.
type liveness struct {
	c    *Controller
	kick chan struct{} // leadership changed (buffered 1)

	leading atomic.Bool
	// terms counts the times this node became the active controller. The liveness loop tells
	// a new term by it, not by leading alone: a loss and a regain that both land while the
	// loop is busy (a fence waiting out the failover) leave leading true, and the sessions
	// from before the loss, when the brokers beat elsewhere, would all look expired.
	terms atomic.Uint64

	mu       sync.Mutex
	sessions *Sessions
	want     map[int32]uint64 // applied index that unfences a broker
	// heard: the brokers this controller heard from (registration or heartbeat) since it
	// became active. Reset gives every broker a session it only assumes; a restarted broker
	// (a lone node's, or one back within its session timeout after a controller failover) may
	// register again under a new incarnation unless this controller heard its old one.
	heard map[int32]bool
}

// livenessTick is how often the active controller looks for expired sessions (on Clock).
const livenessTick = 250 * time.Millisecond

func newLiveness(c *Controller) *liveness {
	return &liveness{c: c, kick: make(chan struct{}, 1), sessions: NewSessions(c.Metadata), want: map[int32]uint64{}, heard: map[int32]bool{}}
}

// watchLeadership follows raft's leadership notifications (which raft sends blocking: this
// goroutine only records them) and runs the liveness loop in a second goroutine.
func (c *Controller) watchLeadership(notify <-chan bool) {
	defer c.wg.Done()
	c.wg.Add(1)
	go c.live.run()
	for {
		select {
		case lead := <-notify:
			c.live.leadershipChanged(lead)
			if lead {
				c.log.Info("this node is the active controller", "node", c.cfg.NodeID)
			}
		case <-c.stop:
			return
		}
	}
}

// leadershipChanged records one of raft's leadership notifications and wakes the loop.
func (l *liveness) leadershipChanged(lead bool) {
	if lead {
		l.terms.Add(1) // before leading: a loop that sees leading sees the new term
	}
	l.leading.Store(lead)
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *liveness) run() {
	defer l.c.wg.Done()
	var term uint64 // the term the sessions were reset for; 0: none yet
	for {
		select {
		case <-l.c.stop:
			return
		case <-l.kick:
		case <-l.c.cfg.Clock.After(livenessTick):
		}
		term = l.step(term)
	}
}

// step is one pass of the loop on the active controller: a new term resets the sessions first
// (becameLeader), then expired sessions are fenced. It returns the term the sessions are for.
func (l *liveness) step(term uint64) uint64 {
	if !l.leading.Load() {
		return term
	}
	if t := l.terms.Load(); t != term {
		l.becameLeader()
		term = t
	}
	l.fenceExpired()
	return term
}

// becameLeader resets the sessions and records a cluster id if the metadata has none.
func (l *liveness) becameLeader() {
	c := l.c
	now := c.cfg.Clock.Now()
	md := c.Metadata()
	l.mu.Lock()
	for _, b := range md.Brokers() {
		l.want[b.ID] = c.indexed.applied.Load()
	}
	l.sessions.Reset(now, md)
	l.heard = map[int32]bool{}
	l.mu.Unlock()
	if md.ClusterID() == "" {
		ctx, cancel := contextWithTimeout(c.stop, c.cfg.ApplyTimeout)
		defer cancel()
		if err := c.InitCluster(ctx, newClusterID()); err != nil {
			c.log.Warn("cannot record the cluster id", "err", err)
		} else {
			c.log.Info("new cluster", "cluster.id", c.Metadata().ClusterID())
		}
	}
}

// fenceExpired fences every broker whose session expired.
func (l *liveness) fenceExpired() {
	c := l.c
	now := c.cfg.Clock.Now()
	l.mu.Lock()
	// The sessions stay until their fence commits: one that fails (a lost quorum, the apply
	// timeout) leaves the session expired, and the next step fences again, where removing it
	// first gave the broker a fresh full session.
	expired := l.sessions.Expired(now, c.cfg.SessionTimeout)
	l.mu.Unlock()
	for _, ref := range expired {
		if !l.leading.Load() {
			return // no longer the active controller: these sessions are not the brokers' own
		}
		id, epoch := ref.ID, ref.Epoch
		ctx, cancel := contextWithTimeout(c.stop, c.cfg.ApplyTimeout)
		// On this node's raft only, never forwarded: a controller that lost leadership while
		// it looked (its sessions stopped hearing the brokers then) must not have the new
		// leader fence brokers that are beating there.
		_, _, err := c.proposeLocal(ctx, &fenceBrokerCmd{brokerEpochCmd{ID: id, Epoch: epoch}})
		cancel()
		if err != nil {
			c.log.Warn("cannot fence a broker whose session expired", "broker", id, "epoch", epoch, "err", err)
			continue
		}
		l.mu.Lock()
		l.sessions.Remove(id)
		l.mu.Unlock()
		c.log.Warn("broker fenced: no heartbeat within the session timeout", "broker", id, "epoch", epoch, "broker.session.timeout.ms", c.cfg.SessionTimeout.Milliseconds())
	}
}

// register records a broker's registration, refusing a node id whose session is live under
// another incarnation, and returns the new broker epoch and the index the broker must have
// applied to be unfenced. The broker starts fenced; heartbeat
// unfences it once it has caught up.
func (l *liveness) register(ctx context.Context, info BrokerInfo, incarnation string) (int64, uint64, error) {
	c := l.c
	l.mu.Lock()
	if inc, ok := l.sessions.Live(info.ID, c.cfg.Clock.Now(), c.cfg.SessionTimeout); ok && l.heard[info.ID] && inc != incarnation {
		l.mu.Unlock()
		return 0, 0, fmt.Errorf("%w: node id %d is registered by a live broker (incarnation %s)", ErrDuplicateBroker, info.ID, inc)
	}
	l.mu.Unlock()
	info.Incarnation = incarnation
	epoch, err := c.RegisterBroker(ctx, info)
	if err != nil {
		return 0, 0, err
	}
	// What the state machine here has applied, registration included: an index of a command,
	// which the broker's own state machine reaches (the commit index may be raft's no-op).
	want := c.indexed.applied.Load()
	l.mu.Lock()
	l.sessions.Heartbeat(info.ID, epoch, c.cfg.Clock.Now())
	l.heard[info.ID] = true
	l.want[info.ID] = want
	l.mu.Unlock()
	c.log.Info("broker registered", "broker", info.ID, "epoch", epoch, "incarnation", incarnation, "host", info.Host, "port", info.Port)
	return epoch, want, nil
}

// heartbeat renews a session and unfences a caught-up broker; it reports whether the broker is
// fenced after it.
func (l *liveness) heartbeat(ctx context.Context, id int32, incarnation string, epoch int64, applied uint64) (bool, error) {
	c := l.c
	md := c.Metadata()
	b, ok := md.Broker(id)
	if !ok {
		return true, fmt.Errorf("%w: broker %d is not registered", ErrStaleBrokerEpoch, id)
	}
	if b.Epoch != epoch || b.Incarnation != incarnation {
		return true, fmt.Errorf("%w: broker %d heartbeat at epoch %d, the current one is %d: register again", ErrStaleBrokerEpoch, id, epoch, b.Epoch)
	}
	l.mu.Lock()
	l.sessions.Heartbeat(id, epoch, c.cfg.Clock.Now())
	l.heard[id] = true
	want, known := l.want[id]
	if !known { // registered with an earlier active controller
		want = c.indexed.applied.Load()
		l.want[id] = want
	}
	l.mu.Unlock()
	if !b.Fenced {
		return false, nil
	}
	if applied < want {
		return true, nil
	}
	if err := c.UnfenceBroker(ctx, id, epoch); err != nil {
		return true, err
	}
	c.log.Info("broker unfenced: caught up with the metadata", "broker", id, "epoch", epoch, "applied", applied)
	return false, nil
}

// ClusterID is the cluster's id, "" until the first active controller has recorded it.
func (c *Controller) ClusterID() string { return c.Metadata().ClusterID() }

// AwaitClusterID waits until the cluster id is in this node's metadata: the first active
// controller records it when it finds none.
func (c *Controller) AwaitClusterID(ctx context.Context) (string, error) {
	ch, cancel := c.Subscribe()
	defer cancel()
	for {
		if id := c.ClusterID(); id != "" {
			return id, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", fmt.Errorf("cluster: the cluster id is not known yet: %w", ctx.Err())
		case <-c.stop:
			return "", ErrClosed
		}
	}
}
