package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// Config configures a Controller. Zero values take the defaults noted. With no Voters the
// controller is today's single voter over an in-memory transport (data directories made before
// the cluster work open unchanged); with Voters it is one member of a raft group over TCP on the
// CONTROLLER listener, with timings for a real network.
type Config struct {
	// NodeID is this broker's id (node.id); it is also the raft server id.
	NodeID int32
	// Dir holds the raft log and stable store (raft.db) and the snapshots
	// (snapshots/): <data.dir>/meta.
	Dir string
	// Voters is controller.quorum.voters. nil: this node alone, over the in-memory transport.
	// Otherwise the node must be named in it (with its Listener's address) unless NonVoter.
	Voters []Voter
	// NonVoter is process.roles=broker: the node follows the metadata log as a raft non-voter,
	// added by the active controller when it asks to join, and must not be named in Voters.
	NonVoter bool
	// Listener is the CONTROLLER listener: raft and the controller RPCs (rpc.go), told apart by a
	// tag byte (mux.go). Required with Voters; the controller owns it from Open on.
	Listener net.Listener
	// Advertised is the address other nodes reach Listener at: for a non-voter, "" means the
	// listener's own address; for a voter, its voter entry must name either the listener or
	// Advertised (advertised.listeners' CONTROLLER entry: a proxy or NAT in between, as
	// `sluice chaos` puts its fault proxy there).
	Advertised string
	// Dial dials other nodes' CONTROLLER listeners. nil: a net.Dialer.
	Dial DialFunc
	// Transport carries raft RPCs (a test seam). nil: an in-memory transport at
	// DefaultAddress(NodeID) without Voters, hashicorp's NetworkTransport over Listener with
	// them. The controller owns the transport from Open on: Close, or a failed Open, closes it.
	Transport raft.Transport
	// Clock drives broker sessions (liveness.go). nil: real time.
	Clock Clock
	// SessionTimeout is broker.session.timeout.ms (default 9s): a broker without a heartbeat
	// for that long is fenced by the active controller.
	SessionTimeout time.Duration
	// AutoLeaderRebalance is auto.leader.rebalance.enable: the active controller moves
	// leaderships back to preferred replicas (leaderbalance.go). Kafka's default is true; a
	// zero Config leaves it off, so the broker passes its config's value.
	AutoLeaderRebalance bool
	// LeaderImbalancePerBrokerPercentage is leader.imbalance.per.broker.percentage (default 10).
	LeaderImbalancePerBrokerPercentage int
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds (default 300s),
	// on Clock.
	LeaderImbalanceCheckInterval time.Duration
	// Logger receives the controller's and raft's logs. nil: slog.Default().
	Logger *slog.Logger
	// RaftLogLevel drops raft's own messages below it. nil: slog.LevelWarn.
	RaftLogLevel slog.Leveler

	// HeartbeatTimeout (default 50ms alone, 500ms with Voters) is also how long a restarted
	// node waits (between 1x and 2x) before it campaigns: with a quorum it bounds failover.
	HeartbeatTimeout time.Duration
	// ElectionTimeout (default 1s alone, 500ms with Voters) is how long a candidate waits for
	// votes. A single voter only waits for its own vote, written to raft.db with an fsync; a
	// short timeout there lets a slow fsync restart the election.
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration // default 50ms alone, 250ms with Voters; at most HeartbeatTimeout
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

	// StartupTimeout bounds Open's wait for a leader and log replay (default 5s alone; 2m
	// with Voters, so that the nodes of a cluster may be started one after another).
	StartupTimeout time.Duration
	// ApplyTimeout bounds a command whose context has no deadline (default 5s alone, 15s with
	// Voters: a forwarded command outlives a controller failover).
	ApplyTimeout time.Duration
	// LockTimeout bounds the wait for raft.db's file lock, held by another
	// process using the same Dir (default 1s).
	LockTimeout time.Duration
}

// Option adjusts Open beyond Config (tests).
type Option func(*openOptions)

type openOptions struct {
	// storeFault fails raft.db writes before they reach bolt (raftStore.fault).
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
	if cfg.Voters != nil {
		// A real network: failover (kill -9 of the leader until a new one commits) is about
		// one to two heartbeat timeouts plus an election.
		def(&cfg.HeartbeatTimeout, 500*time.Millisecond)
		def(&cfg.ElectionTimeout, 500*time.Millisecond)
		def(&cfg.LeaderLeaseTimeout, 250*time.Millisecond)
		def(&cfg.StartupTimeout, 2*time.Minute)
		def(&cfg.ApplyTimeout, 15*time.Second)
		// Raft's leader sends each follower an AppendEntries every CommitTimeout, even with
		// nothing to commit, so that followers learn the commit index: at 5 ms that cost an
		// idle active controller 10 to 19 % of a core (issue #22's measurement). 20 ms costs a
		// fraction of that and delays a follower's view of a commit (a leader change reaching
		// the brokers) by 10 ms on average.
		def(&cfg.CommitTimeout, 20*time.Millisecond)
	}
	def(&cfg.HeartbeatTimeout, 50*time.Millisecond)
	def(&cfg.ElectionTimeout, time.Second)
	def(&cfg.LeaderLeaseTimeout, 50*time.Millisecond)
	def(&cfg.CommitTimeout, 5*time.Millisecond)
	def(&cfg.SnapshotInterval, 2*time.Minute)
	def(&cfg.StartupTimeout, 5*time.Second)
	def(&cfg.ApplyTimeout, 5*time.Second)
	def(&cfg.LockTimeout, time.Second)
	def(&cfg.SessionTimeout, 9*time.Second)
	def(&cfg.LeaderImbalanceCheckInterval, 300*time.Second)
	if cfg.LeaderImbalancePerBrokerPercentage == 0 {
		cfg.LeaderImbalancePerBrokerPercentage = 10
	}
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
	if cfg.Dial == nil {
		cfg.Dial = defaultDial
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	return cfg
}

// Controller is the cluster metadata state machine replicated by raft on
// this node. All methods are safe for concurrent use.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	self     raft.ServerID
	addr     string // this node's raft address ("" alone)
	fsm      *fsm
	indexed  *indexedFSM // what raft drives: fsm, recording the index it applied
	notifier *notifier
	store    *raftStore
	raft     *raft.Raft
	mux      *mux // nil without Voters
	rpcc     *rpcClient
	live     *liveness

	stop chan struct{} // closed by Close: ends the goroutines below
	wg   sync.WaitGroup
	// goMu orders wg.Add after Open (Register's heartbeat goroutine) against Close: closed is
	// set under it, and nothing is added to wg once it is, so Close's wg.Wait is never raced.
	goMu sync.Mutex

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open opens the stores under cfg.Dir and starts raft. A fresh node bootstraps: alone, a
// single-voter cluster; with Voters, the whole voters configuration (every voter bootstraps the
// identical one, so the nodes of a new cluster may start in any order). A node with raft state
// whose voters differ from cfg.Voters is refused. Open returns once a leader is known and this
// node's state machine has applied what the leader had committed when Open began waiting, so
// Metadata() reflects all that was committed before.
func Open(cfg Config, opts ...Option) (*Controller, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("cluster: node id %d is negative", cfg.NodeID)
	}
	if cfg.Dir == "" {
		return nil, errors.New("cluster: no meta directory")
	}
	cfg = cfg.withDefaults()
	start := time.Now()
	c := &Controller{cfg: cfg, log: cfg.Logger.With("component", "controller"), notifier: newNotifier(),
		self: raft.ServerID(strconv.Itoa(int(cfg.NodeID))), stop: make(chan struct{})}
	c.rpcc = newRPCClient(cfg.Dial)
	var advertise string
	if cfg.Voters != nil {
		a, err := checkVoters(cfg)
		if err != nil {
			if cfg.Listener != nil {
				_ = cfg.Listener.Close()
			}
			return nil, err
		}
		advertise = a
		c.addr = a
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close() // Open owns it, failed or not
		}
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.fsm = newFSM(c.notifier.notify)
	c.fsm.log = c.log
	hlog := newHCLogAdapter(cfg.Logger, cfg.RaftLogLevel)

	trans := cfg.Transport
	if cfg.Voters != nil {
		c.mux = newMux(cfg.Listener, c.log)
		if trans == nil {
			trans = unpipelined{raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
				Stream:  &streamLayer{m: c.mux, addr: raftAddr(advertise), dial: cfg.Dial},
				MaxPool: 3,
				Timeout: 2 * time.Second,
				Logger:  hlog,
			})}
		}
	} else if trans == nil {
		_, trans = raft.NewInmemTransport(DefaultAddress(cfg.NodeID))
	}
	var store *raftStore
	fail := func(err error) (*Controller, error) {
		if wc, ok := trans.(raft.WithClose); ok {
			_ = wc.Close()
		}
		if c.mux != nil {
			_ = c.mux.close()
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
			err = fmt.Errorf("locked by another process (is another broker using the data directory %s?): %w", filepath.Dir(cfg.Dir), err)
		}
		return fail(fmt.Errorf("cluster: open %s: %w", path, err))
	}
	store = &raftStore{BoltStore: bolt, path: path, fault: o.storeFault}
	c.store = store
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, cfg.SnapshotRetain, hlog)
	if err != nil {
		return fail(fmt.Errorf("cluster: snapshot store: %w", err))
	}

	notify := make(chan bool, 1)
	rc := raft.DefaultConfig()
	rc.LocalID = c.self
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = uint64(cfg.TrailingLogs)
	rc.Logger = hlog
	rc.NoLegacyTelemetry = true
	rc.NotifyCh = notify
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("cluster: raft config: %w", err))
	}

	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return fail(fmt.Errorf("cluster: read raft state: %w", err))
	}
	switch {
	case existing && cfg.Voters != nil:
		probe := *rc // GetConfiguration marks its config "skip startup"
		have, err := raft.GetConfiguration(&probe, newFSM(func() {}), store, store, snaps, trans)
		if err != nil {
			return fail(fmt.Errorf("cluster: read raft configuration: %w", err))
		}
		if err := sameVoters(have, cfg.Voters, cfg.Dir); err != nil {
			return fail(err)
		}
	case !existing && (cfg.Voters == nil || !cfg.NonVoter):
		// First start of a voter. A non-voter bootstraps nothing: the active controller adds it.
		boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr()}}}
		if cfg.Voters != nil {
			boot = votersConfiguration(cfg.Voters)
		}
		if err := raft.BootstrapCluster(rc, store, store, snaps, trans, boot); err != nil {
			return fail(fmt.Errorf("cluster: bootstrap: %w", err))
		}
	}
	c.indexed = &indexedFSM{fsm: c.fsm}
	r, err := raft.NewRaft(rc, c.indexed, store, store, snaps, trans)
	if err != nil {
		return fail(fmt.Errorf("cluster: start raft: %w", err))
	}
	c.raft = r
	c.live = newLiveness(c)
	c.wg.Add(1)
	go c.watchLeadership(notify)
	if cfg.AutoLeaderRebalance {
		c.wg.Add(1)
		go c.balanceLeaders()
	}
	if c.mux != nil {
		c.mux.start(c.serveRPC)
	}
	if err := c.awaitReady(existing); err != nil {
		_ = c.Close()
		return nil, err
	}
	c.log.Info("controller ready", "node", cfg.NodeID, "bootstrapped", !existing,
		"version", c.Metadata().Version(), "leader", c.ControllerID(), "took", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// awaitReady waits, bounded by StartupTimeout, until the node is ready to serve the metadata:
// alone, until it leads and (with a log to replay) a Barrier has applied every committed entry;
// in a quorum, until a leader is known and this node has applied the leader's commit index as it
// was then (readyQuorum).
func (c *Controller) awaitReady(replay bool) error {
	if c.cfg.Voters != nil {
		return c.readyQuorum()
	}
	return c.readyAlone(replay)
}

// readyAlone waits until this node leads and, if there was a log to replay,
// its FSM has applied every committed entry (the Barrier), bounded by
// StartupTimeout. Raft applies the entries after the last snapshot only
// once the new leader commits its first entry, hence the Barrier. It fails
// sooner when the raft log cannot be written: an append failed, and so did
// the one of raft's next election.
func (c *Controller) readyAlone(replay bool) error {
	self := c.self
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

// DeleteTopic deletes a user topic. The delete names the topic's id as this node knows it, so
// that a retry never deletes a topic re-created under the name since, and a retry after an
// ambiguous try (see forward.go) that finds that id gone reports the earlier try's success.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	cmd := &deleteTopicCmd{Name: name}
	if t, ok := c.Metadata().Topic(name); ok {
		cmd.ID = t.ID
	}
	_, idx, err := c.proposeIndexed(ctx, cmd)
	if err != nil && !cmd.ID.IsZero() && errors.Is(err, errMayHaveCommitted) && errors.Is(err, ErrUnknownTopic) {
		// Read-your-writes as on success: idx is what the refusing leader had applied.
		if aerr := c.awaitApplied(ctx, idx); aerr != nil {
			return aerr
		}
		c.log.Info("topic deleted by an earlier try", "topic", name, "topic.id", cmd.ID, "err", err)
		return nil
	}
	return err
}

// AlterTopicConfigs sets and deletes topic config overrides in one step
// (Kafka's IncrementalAlterConfigs SET and DELETE); deleting a key reverts it
// to the broker default.
func (c *Controller) AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string) error {
	_, err := c.propose(ctx, &alterTopicConfigsCmd{Name: name, Set: set, Delete: del, CheckMinISR: true})
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

// Close stops the liveness loop and raft (waiting for their goroutines), closes the CONTROLLER
// listener and its connections, the stores and the transport, and closes every subscriber
// channel. It is idempotent. A Register still in flight is refused (ErrClosed).
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.goMu.Lock()
		c.closed.Store(true)
		close(c.stop)
		c.goMu.Unlock()
		var errs []error
		if c.raft != nil {
			errs = append(errs, c.raft.Shutdown().Error())
		}
		c.wg.Wait()
		if c.mux != nil {
			if err := c.mux.close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
		c.rpcc.close()
		errs = append(errs, c.store.Close())
		c.notifier.close()
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("cluster: close: %w", err)
		}
	})
	return c.closeErr
}

// proposeLocal, on the leader, first applies cmd to the current metadata as a dry run, so that
// a request that would be rejected, or would change nothing (a broker re-registering
// unchanged), never reaches the log; then it submits it. The dry run is only a filter: Apply
// decides, against the state at commit. It returns Apply's result and the entry's raft index
// (0 when nothing was submitted).
func (c *Controller) proposeLocal(ctx context.Context, cmd command) (applyResult, uint64, error) {
	if c.closed.Load() {
		return applyResult{}, 0, ErrClosed
	}
	md := c.Metadata()
	if next, res := cmd.apply(md, 0); res.Err != nil || next == md {
		// Nothing to submit: what was applied here is what a forwarding node must wait for (a
		// retried command may have committed in an earlier try).
		return res, c.indexed.applied.Load(), res.Err
	}
	return c.submit(ctx, cmd)
}

// submit appends cmd to the raft log and waits until it is applied,
// returning Apply's result. Once the entry is enqueued, ctx no longer
// matters: raft offers no way to withdraw it.
func (c *Controller) submit(ctx context.Context, cmd command) (applyResult, uint64, error) {
	if err := ctx.Err(); err != nil {
		return applyResult{}, 0, err
	}
	timeout := c.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 { // raft reads 0 as "no timeout"
			return applyResult{}, 0, context.DeadlineExceeded
		}
	}
	data, err := encodeCommand(cmd)
	if err != nil {
		return applyResult{}, 0, err
	}
	f := c.raft.Apply(data, timeout)
	// hashicorp/raft answers every entry it took up, but one still in its apply queue when it
	// shuts down is never answered (its leader loop returns without draining the queue): a
	// submit racing Close (the liveness loop's InitCluster as a node that failed to open
	// closes, seen in CI) waited for ever, and Close with it. So the wait also ends at Close;
	// the goroutine left waiting then holds only the future.
	answered := make(chan error, 1)
	go func() { answered <- f.Error() }()
	select {
	case err := <-answered:
		if err != nil {
			return applyResult{}, 0, c.raftErr(err)
		}
	case <-c.stop:
		return applyResult{}, 0, ErrClosed
	}
	res, _ := f.Response().(applyResult)
	return res, f.Index(), res.Err
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

// indexedFSM records the index of the last command the state machine applied. Raft's own
// AppliedIndex moves when an entry is handed to the FSM goroutine, before Apply has run, so a
// forwarded write waits on this one to read its own write.
type indexedFSM struct {
	*fsm
	applied atomic.Uint64
}

func (f *indexedFSM) Apply(l *raft.Log) any {
	res := f.fsm.Apply(l)
	f.applied.Store(l.Index)
	return res
}

// Restore replaces the state with a snapshot's; the snapshot covers at least the version it holds.
func (f *indexedFSM) Restore(rc io.ReadCloser) error {
	if err := f.fsm.Restore(rc); err != nil {
		return err
	}
	if v := f.state.Load().Version(); v > f.applied.Load() {
		f.applied.Store(v)
	}
	return nil
}
