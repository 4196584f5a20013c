package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MemberConfig configures a broker's membership of the cluster (Controller.Register).
type MemberConfig struct {
	// Info is the broker's id and endpoints, as clients reach them.
	Info BrokerInfo
	// HeartbeatInterval is broker.heartbeat.interval.ms (default 2s).
	HeartbeatInterval time.Duration
}

// Member is a broker's registration with the active controller: it holds the incarnation (drawn
// at random per process start) and the broker epoch the controller answered, and heartbeats on
// the controller's Clock until Close. A heartbeat refused for a stale epoch registers again; one
// that fails otherwise is retried at the next interval, against the leader resolved afresh.
type Member struct {
	c           *Controller
	cfg         MemberConfig
	incarnation string

	epoch  atomic.Int64
	fenced atomic.Bool
	beats  atomic.Int64 // heartbeats answered (tests wait on it)
	// lastErr is the first heartbeat's error (tests), written before run starts.
	lastErr error

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// Register registers this broker with the active controller (forwarded if need be), sends the
// first heartbeat, which unfences a broker that has caught up, and starts heartbeating.
func (c *Controller) Register(ctx context.Context, cfg MemberConfig) (*Member, error) {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 2 * time.Second
	}
	m := &Member{c: c, cfg: cfg, incarnation: NewIncarnation(), stop: make(chan struct{}), done: make(chan struct{})}
	if err := m.register(ctx); err != nil {
		return nil, err
	}
	if err := m.beat(ctx); err != nil {
		c.log.Warn("first heartbeat failed", "broker", cfg.Info.ID, "err", err)
		m.lastErr = err
	}
	if !c.goAdd() {
		// Close ran during the registration: its wg.Wait may be over, so no goroutine may
		// start. The session expires on the active controller.
		return nil, fmt.Errorf("cluster: register broker %d: %w", cfg.Info.ID, ErrClosed)
	}
	go m.run()
	return m, nil
}

// registerRetry is how often a registration refused as a duplicate is tried again.
const registerRetry = 250 * time.Millisecond

// goAdd adds a goroutine to c.wg unless Close has begun (goMu), and reports whether it did.
func (c *Controller) goAdd() bool {
	c.goMu.Lock()
	defer c.goMu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.wg.Add(1)
	return true
}

// register registers this incarnation. A registration refused because the previous
// incarnation's session is still live (a broker restarted within broker.session.timeout.ms of
// its crash) is retried until that session expires, as Kafka's broker does with
// DUPLICATE_BROKER_REGISTRATION: found by sluice chaos, where a broker killed and restarted
// within the session timeout exited at start.
func (m *Member) register(ctx context.Context) error {
	c := m.c
	info := m.cfg.Info
	req := &rpcRequest{Op: opRegister, Broker: &info, Incarnation: m.incarnation}
	var (
		resp    rpcResponse
		err     error
		dup     error // the last refusal as a duplicate
		waiting time.Time
	)
	for {
		resp, err = c.callLeader(ctx, req, func(ctx context.Context) (rpcResponse, error) {
			epoch, want, err := c.live.register(ctx, info, m.incarnation)
			return rpcResponse{Epoch: epoch, Index: want}, err
		})
		if !errors.Is(err, ErrDuplicateBroker) {
			if dup != nil && ctx.Err() != nil {
				// The deadline ended a retry: the refusal before it is the answer that explains.
				return fmt.Errorf("cluster: register broker %d: %w (last: %w)", info.ID, ctx.Err(), dup)
			}
			break
		}
		dup = err
		if waiting.IsZero() {
			waiting = c.cfg.Clock.Now()
			c.log.Info("waiting for the previous incarnation's session to expire before registering", "broker", info.ID, "err", err)
		}
		// Past two session timeouts the other incarnation is alive, not a ghost: give up.
		if c.cfg.Clock.Now().Sub(waiting) > 2*c.cfg.SessionTimeout {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: register broker %d: %w (last: %w)", info.ID, ctx.Err(), err)
		case <-c.stop:
			return fmt.Errorf("cluster: register broker %d: %w", info.ID, ErrClosed)
		case <-time.After(registerRetry):
		}
	}
	if err != nil {
		return fmt.Errorf("cluster: register broker %d: %w", info.ID, err)
	}
	// Catch up before the first heartbeat, which then unfences the broker.
	if err := c.awaitApplied(ctx, resp.Index); err != nil {
		return fmt.Errorf("cluster: register broker %d: %w", info.ID, err)
	}
	m.epoch.Store(resp.Epoch)
	m.fenced.Store(true)
	return nil
}

// beat sends one heartbeat and registers again when the controller no longer knows the epoch.
func (m *Member) beat(ctx context.Context) error {
	c := m.c
	req := &rpcRequest{Op: opHeartbeat, BrokerID: m.cfg.Info.ID, Incarnation: m.incarnation, Epoch: m.epoch.Load(), Applied: c.appliedIndex()}
	resp, err := c.callLeader(ctx, req, nil)
	if errors.Is(err, ErrStaleBrokerEpoch) {
		c.log.Info("broker epoch is stale: registering again", "broker", m.cfg.Info.ID, "err", err)
		if err = m.register(ctx); err == nil {
			return m.beat(ctx)
		}
	}
	if err != nil {
		return err
	}
	m.fenced.Store(resp.Fenced)
	m.beats.Add(1)
	return nil
}

func (m *Member) run() {
	defer m.c.wg.Done()
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		case <-m.c.stop:
			return
		case <-m.c.cfg.Clock.After(m.cfg.HeartbeatInterval):
		}
		ctx, cancel := contextWithTimeout(m.stop, max(m.cfg.HeartbeatInterval, time.Second))
		if err := m.beat(ctx); err != nil && !errors.Is(err, ErrClosed) {
			m.c.log.Warn("heartbeat failed", "broker", m.cfg.Info.ID, "err", err)
		}
		cancel()
	}
}

// Epoch is the broker epoch of the current registration.
func (m *Member) Epoch() int64 { return m.epoch.Load() }

// Fenced reports whether the last heartbeat found this broker fenced.
func (m *Member) Fenced() bool { return m.fenced.Load() }

// ControlledShutdown asks the active controller to move this broker's leaderships to other
// alive in-sync replicas, and asks again on each metadata change (and every
// controlledShutdownRetry) until the metadata shows this broker leads no partition that has
// another eligible ISR member, bounded by ctx. Heartbeats go on until Close.
func (m *Member) ControlledShutdown(ctx context.Context) error {
	c := m.c
	id := m.cfg.Info.ID
	if leadsWithOthersInSync(c.Metadata(), id) == 0 {
		// Nothing another broker could take over (a lone node, or the last of a cluster
		// stopping): no need for a write that, without a quorum left, would wait out ctx.
		return nil
	}
	ch, cancel := c.Subscribe()
	defer cancel()
	for {
		if err := c.ControlledShutdown(ctx, id, m.epoch.Load()); err != nil {
			return fmt.Errorf("cluster: controlled shutdown of broker %d: %w", id, err)
		}
		n := leadsWithOthersInSync(c.Metadata(), id)
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-time.After(controlledShutdownRetry):
		case <-ctx.Done():
			return fmt.Errorf("cluster: controlled shutdown of broker %d: still leads %d partitions with other in-sync replicas: %w", id, n, ctx.Err())
		case <-c.stop:
			return ErrClosed
		}
	}
}

// controlledShutdownRetry is how often a controlled shutdown asks again without a metadata
// change (a partition whose other ISR members were all fenced may get one back).
const controlledShutdownRetry = 500 * time.Millisecond

// leadsWithOthersInSync counts the partitions id leads whose ISR has another member that may
// lead: registered, not fenced, not shutting down.
func leadsWithOthersInSync(md *Metadata, id int32) int {
	n := 0
	for _, t := range md.Topics() {
		for _, p := range t.Partitions {
			if p.Leader != id {
				continue
			}
			for _, r := range p.ISR {
				if b, ok := md.Broker(r); ok && r != id && !b.Fenced && !b.ShuttingDown {
					n++
					break
				}
			}
		}
	}
	return n
}

// Close stops heartbeating and waits for the heartbeat goroutine. The session then expires on
// the active controller, unless the broker shut down in a controlled way first.
func (m *Member) Close() {
	m.stopOnce.Do(func() { close(m.stop) })
	<-m.done
}
