package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Config configures a Controller. Zero values take the defaults noted, which
// suit a single-voter quorum; a multi-voter cluster over a real network needs
// raft's usual timeouts (about 1s heartbeat and election, 500ms lease).
type Config struct {
	// NodeID is this broker's id (broker.id); it is also the raft server id.
	NodeID int32
	// Dir holds the raft log and stable store (raft.db) and the snapshots
	// (snapshots/): <data.dir>/meta.
	Dir string
	// Transport carries raft RPCs. nil: an in-memory transport at
	// DefaultAddress(NodeID), enough for a single voter. The controller owns
	// the transport from Open on: Close, or a failed Open, closes it.
	Transport raft.Transport
	// Logger receives the controller's and raft's logs. nil: slog.Default().
	Logger *slog.Logger
	// RaftLogLevel drops raft's own messages below it. nil: slog.LevelWarn.
	RaftLogLevel slog.Leveler

	// HeartbeatTimeout (default 50ms) is also how long a restarted node
	// waits (between 1x and 2x) before it campaigns: it sets startup time.
	HeartbeatTimeout time.Duration
	// ElectionTimeout (default 1s) is how long a candidate waits for votes.
	// A single voter only waits for its own vote, written to raft.db with an
	// fsync; a short timeout here lets a slow fsync restart the election.
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration // default 50ms; at most HeartbeatTimeout
	CommitTimeout      time.Duration // default 5ms

	// SnapshotInterval is how often raft checks whether to snapshot
	// (default 2m); it snapshots when SnapshotThreshold entries (default
	// 8192) were applied since the last one.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	// TrailingLogs is how many entries stay in the log behind a snapshot
	// (default 10240); negative keeps none, so the snapshot alone holds the
	// state it covers.
	TrailingLogs int
	// SnapshotRetain is how many snapshots stay on disk (default 2).
	SnapshotRetain int

	// StartupTimeout bounds Open's wait for leadership and log replay
	// (default 5s).
	StartupTimeout time.Duration
	// ApplyTimeout bounds a command whose context has no deadline (default 5s).
	ApplyTimeout time.Duration
	// LockTimeout bounds the wait for raft.db's file lock, held by another
	// process using the same Dir (default 1s).
	LockTimeout time.Duration

	// storeFault, when set (tests), fails raft.db writes (raftStore.fault).
	storeFault func(op string) error
}

// DefaultAddress is the in-memory transport address of a node.
func DefaultAddress(nodeID int32) raft.ServerAddress {
	return raft.ServerAddress(fmt.Sprintf("sluice-node-%d", nodeID))
}

func (cfg Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.HeartbeatTimeout, 50*time.Millisecond)
	def(&cfg.ElectionTimeout, time.Second)
	def(&cfg.LeaderLeaseTimeout, 50*time.Millisecond)
	def(&cfg.CommitTimeout, 5*time.Millisecond)
	def(&cfg.SnapshotInterval, 2*time.Minute)
	def(&cfg.StartupTimeout, 5*time.Second)
	def(&cfg.ApplyTimeout, 5*time.Second)
	def(&cfg.LockTimeout, time.Second)
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 8192
	}
	switch {
	case cfg.TrailingLogs == 0:
		cfg.TrailingLogs = 10240
	case cfg.TrailingLogs < 0:
		cfg.TrailingLogs = 0
	}
	if cfg.SnapshotRetain == 0 {
		cfg.SnapshotRetain = 2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RaftLogLevel == nil {
		cfg.RaftLogLevel = slog.LevelWarn
	}
	return cfg
}

// Controller is the cluster metadata state machine replicated by raft on
// this node. All methods are safe for concurrent use.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	fsm      *fsm
	notifier *notifier
	store    *raftStore
	raft     *raft.Raft

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open opens the stores under cfg.Dir, starts raft, bootstraps a
// single-voter cluster if there is no raft state yet, and returns once this
// node leads and has applied every committed entry, so Metadata() reflects
// all that was committed before the last shutdown.
func Open(cfg Config) (*Controller, error) {
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("cluster: node id %d is negative", cfg.NodeID)
	}
	if cfg.Dir == "" {
		return nil, errors.New("cluster: no meta directory")
	}
	cfg = cfg.withDefaults()
	start := time.Now()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Controller{cfg: cfg, log: cfg.Logger.With("component", "controller"), notifier: newNotifier()}
	c.fsm = newFSM(c.notifier.notify)
	c.fsm.log = c.log
	hlog := newHCLogAdapter(cfg.Logger, cfg.RaftLogLevel)

	trans := cfg.Transport
	if trans == nil {
		_, trans = raft.NewInmemTransport(DefaultAddress(cfg.NodeID))
	}
	var store *raftStore
	fail := func(err error) (*Controller, error) {
		if wc, ok := trans.(raft.WithClose); ok {
			_ = wc.Close()
		}
		if store != nil {
			_ = store.Close()
		}
		return nil, err
	}
	path := filepath.Join(cfg.Dir, "raft.db")
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: cfg.LockTimeout}})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			err = fmt.Errorf("locked by another process: %w", err)
		}
		return fail(fmt.Errorf("cluster: open %s: %w", path, err))
	}
	store = &raftStore{BoltStore: bolt, path: path, fault: cfg.storeFault}
	c.store = store
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, cfg.SnapshotRetain, hlog)
	if err != nil {
		return fail(fmt.Errorf("cluster: snapshot store: %w", err))
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = uint64(cfg.TrailingLogs)
	rc.Logger = hlog
	rc.NoLegacyTelemetry = true
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("cluster: raft config: %w", err))
	}

	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return fail(fmt.Errorf("cluster: read raft state: %w", err))
	}
	if !existing {
		// First start: a quorum of one. Joining an existing cluster (the
		// multi-broker work) must skip this and be added with AddVoter.
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr(),
		}}}
		if err := raft.BootstrapCluster(rc, store, store, snaps, trans, boot); err != nil {
			return fail(fmt.Errorf("cluster: bootstrap: %w", err))
		}
	}
	r, err := raft.NewRaft(rc, c.fsm, store, store, snaps, trans)
	if err != nil {
		return fail(fmt.Errorf("cluster: start raft: %w", err))
	}
	c.raft = r
	if err := c.awaitReady(rc.LocalID, existing); err != nil {
		_ = c.Close()
		return nil, err
	}
	c.log.Info("controller ready", "node", cfg.NodeID, "bootstrapped", !existing,
		"version", c.Metadata().Version(), "took", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// awaitReady waits until this node leads and, if there was a log to replay,
// its FSM has applied every committed entry (the Barrier), bounded by
// StartupTimeout. Raft applies the entries after the last snapshot only
// once the new leader commits its first entry, hence the Barrier. It fails
// sooner when the raft log cannot be written: an append failed, and so did
// the one of raft's next election.
//
// A multi-voter cluster needs a different notion of ready for followers:
// a known leader and applied index ≥ the commit index seen at startup.
func (c *Controller) awaitReady(self raft.ServerID, replay bool) error {
	deadline := time.Now().Add(c.cfg.StartupTimeout)
	cf := c.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("cluster: read raft configuration: %w", err)
	}
	voter := false
	for _, s := range cf.Configuration().Servers {
		voter = voter || (s.ID == self && s.Suffrage == raft.Voter)
	}
	if !voter {
		return fmt.Errorf("cluster: node %s is not a voter in the raft configuration in %s (was node.id changed?)", self, c.cfg.Dir)
	}
	timer := time.NewTimer(c.cfg.StartupTimeout)
	defer timer.Stop()
	tick := time.NewTicker(5 * time.Millisecond) // LeaderCh may have fired before we listen
	defer tick.Stop()
	for {
		for c.raft.State() != raft.Leader {
			select {
			case <-c.raft.LeaderCh():
			case <-tick.C:
				if serr := c.store.appendsFailing(); serr != nil {
					// Raft steps down when it cannot write its log and tries again at the next
					// election. Once that one has failed the same way (a full or failing disk),
					// say so rather than wait for StartupTimeout; a single failure may pass.
					return fmt.Errorf("cluster: no leadership: cannot write the raft log: %w (%w)", serr, ErrNotLeader)
				}
			case <-timer.C:
				if serr := c.store.writeErr(); serr != nil {
					return fmt.Errorf("cluster: no leadership after %v: cannot write the raft log: %w (%w)", c.cfg.StartupTimeout, serr, ErrNotLeader)
				}
				return fmt.Errorf("cluster: no leadership after %v: %w", c.cfg.StartupTimeout, ErrNotLeader)
			}
		}
		if !replay {
			return nil
		}
		// Barrier waits without a bound when given none: a millisecond at least.
		err := c.raft.Barrier(max(time.Until(deadline), time.Millisecond)).Error()
		if err == nil {
			return nil
		}
		if (errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrNotLeader)) &&
			c.store.appendsFailing() == nil && time.Now().Before(deadline) {
			// Leadership lost (raft steps down when an append fails): its next election may
			// get past a failure that does not come back.
			continue
		}
		if serr := c.store.writeErr(); serr != nil {
			// Raft steps down when it cannot write its log (a full disk): the write's error
			// says what failed, the leadership lost that followed does not.
			return fmt.Errorf("cluster: replay log: cannot write the raft log: %w (%w)", serr, c.raftErr(err))
		}
		return fmt.Errorf("cluster: replay log: %w", c.raftErr(err))
	}
}

// Metadata returns the current metadata. It is one atomic load: call it on
// every request rather than caching the result.
func (c *Controller) Metadata() *Metadata { return c.fsm.state.Load() }

// Subscribe returns a channel that receives a signal after the metadata
// changes (coalesced: one pending signal covers any number of changes, so
// re-read Metadata() and diff against what you last saw), and a cancel
// function. The channel is closed by cancel or by Close.
func (c *Controller) Subscribe() (<-chan struct{}, func()) { return c.notifier.subscribe() }

// ControllerID returns the node id of the current raft leader, or -1.
func (c *Controller) ControllerID() int32 {
	_, id := c.raft.LeaderWithID()
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// RegisterBroker, CreateTopic and SetPartitionLeader are in ops.go, with the other commands
// the cluster work added.

// DeleteTopic deletes a user topic.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.propose(ctx, &deleteTopicCmd{Name: name})
	return err
}

// AlterTopicConfigs sets and deletes topic config overrides in one step
// (Kafka's IncrementalAlterConfigs SET and DELETE); deleting a key reverts it
// to the broker default.
func (c *Controller) AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string) error {
	_, err := c.propose(ctx, &alterTopicConfigsCmd{Name: name, Set: set, Delete: del})
	return err
}

// Snapshot forces a raft snapshot (and log compaction down to TrailingLogs).
func (c *Controller) Snapshot() error {
	if c.closed.Load() {
		return ErrClosed
	}
	err := c.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: snapshot: %w", c.raftErr(err))
	}
	return nil
}

// Close stops raft (waiting for its goroutines), closes the stores and the
// transport, and closes every subscriber channel. It is idempotent.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		var errs []error
		if c.raft != nil {
			errs = append(errs, c.raft.Shutdown().Error())
		}
		errs = append(errs, c.store.Close())
		c.notifier.close()
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("cluster: close: %w", err)
		}
	})
	return c.closeErr
}

// propose first applies cmd to the current metadata as a dry run, so that a
// request that would be rejected, or would change nothing (a broker
// re-registering unchanged), never reaches the log; then it submits it. The
// dry run is only a filter: Apply decides, against the state at commit.
func (c *Controller) propose(ctx context.Context, cmd command) (applyResult, error) {
	if c.closed.Load() {
		return applyResult{}, ErrClosed
	}
	md := c.Metadata()
	if next, res := cmd.apply(md, 0); res.Err != nil || next == md {
		return res, res.Err
	}
	return c.submit(ctx, cmd)
}

// submit appends cmd to the raft log and waits until it is applied,
// returning Apply's result. Once the entry is enqueued, ctx no longer
// matters: raft offers no way to withdraw it.
func (c *Controller) submit(ctx context.Context, cmd command) (applyResult, error) {
	if err := ctx.Err(); err != nil {
		return applyResult{}, err
	}
	timeout := c.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 { // raft reads 0 as "no timeout"
			return applyResult{}, context.DeadlineExceeded
		}
	}
	data, err := encodeCommand(cmd)
	if err != nil {
		return applyResult{}, err
	}
	f := c.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		return applyResult{}, c.raftErr(err)
	}
	res, _ := f.Response().(applyResult)
	return res, res.Err
}

// raftErr maps raft's errors onto this package's sentinels.
func (c *Controller) raftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		// After ErrLeadershipLost the command may still commit: re-read.
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("cluster: %w: %w", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("cluster: raft: %w", err)
}
