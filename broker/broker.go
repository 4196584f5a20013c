package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/net/server"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// Broker is one broker process: it hosts partitions, serves the protocol over TCP and a unix
// socket, and keeps its metadata in the cluster controller.
//
// Ownership: mu guards the partition map; each partition guards itself. The reconciler goroutine
// is the only writer of the map besides Open and Close. Goroutines (reconciler, retention,
// scrub, parked fetches, acks=all waiters, the log supervisor) stop through ctx and Close waits
// for them through wg.
type Broker struct {
	cfg           Config
	logger        *slog.Logger
	openFiles     *segment.FileCache // log.max.open.files, shared by every partition's log
	topicDefaults cluster.TopicConfig
	ctrl          *cluster.Controller
	member        *cluster.Member // registration and heartbeats (lifecycle.go); nil for a controller-only node
	srv           *server.Server
	groups        *groupCoordinator // consumer groups and committed offsets (groupcoord.go)
	disk          *diskMonitor      // free space of the data directory's filesystem (diskspace.go)
	// uncleanStart: the previous run stopped without its clean-shutdown marker. Leader-epoch
	// checkpoints are written behind the appends (epochwriter.go), so after such a stop each
	// log's epochs are rebuilt from its batch headers rather than trusted from the file.
	uncleanStart bool
	// fetchers are the replica fetchers of the partitions this broker follows (fetcher.go,
	// issue #23 stream D2).
	fetchers *replicaFetchers
	// hwLoaded is the high-watermark checkpoint as read at Open (read-only after), and
	// hwWritten what the periodic checkpoint (then Close) last wrote (hwcheckpoint.go).
	hwLoaded  map[topicPartition]batch.Offset
	hwWritten map[topicPartition]batch.Offset
	epochQ    epochWrites // leader-epoch checkpoints to write (epochwriter.go)
	// sessions are the fetch sessions of the followers (and consumers) fetching from this
	// broker (fetchsession.go).
	sessions fetchSessions
	// pids hands out producer ids from this broker's block (initproducerid.go).
	pids producerIDs
	// leaderQuota and followerQuota cap the bytes of the replicas moves are adding, sent as
	// their leader and fetched as their follower (throttle.go); the reconciler sets their
	// rates from the metadata's dynamic broker configs.
	leaderQuota, followerQuota replicationQuota

	mu struct {
		sync.RWMutex
		partitions map[topicPartition]*partition
		// unopened: the partitions assigned to this broker whose logs are not open, with nil
		// while they are opening (start-up) or the error their open failed with.
		unopened map[topicPartition]error
	}
	reconcileMu sync.Mutex
	reconciled  uint64 // guarded by reconcileMu: the metadata version last applied

	ctx    context.Context // cancelled by Close: parked fetches answer at once
	cancel context.CancelFunc
	// ready is closed once Open has registered the broker and loaded the committed offsets.
	// The listeners open earlier (registration needs their addresses), so requests that arrive
	// in between wait for it.
	ready chan struct{}
	// opened is closed once the logs of the partitions hosted at start-up are open (or failed
	// to): they open after the listeners serve (PartitionsOpen).
	opened  chan struct{}
	wg      sync.WaitGroup
	closing atomic.Bool

	// healKick wakes the log supervisor (heal.go) when a partition log stops (buffered 1).
	healKick chan struct{}
	hooks    atomic.Pointer[testHooks] // nil outside tests (hooks.go)
}

const cleanShutdownFile = ".clean-shutdown"

// Open starts a broker: metadata (bootstrapping a single-node cluster on first start), the
// partitions assigned to it, the consumer offsets, and the listeners.
func Open(cfg Config) (*Broker, error) {
	nodeID := cfg.NodeID
	cfg = cfg.withDefaults()
	if cfg.NodeIDSet {
		cfg.NodeID = nodeID // 0 is a node id when set; withDefaults reads it as unset
	}
	if err := cfg.checkReplicaFetch(); err != nil { // ReadProperties checks it too; a Config built in code is checked here
		return nil, fmt.Errorf("broker: config: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b := &Broker{cfg: cfg, logger: cfg.Logger, topicDefaults: cfg.topicDefaults()}
	b.openFiles = segment.NewFileCache(b.maxOpenFiles())
	b.mu.partitions = map[topicPartition]*partition{}
	b.mu.unopened = map[topicPartition]error{}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.ready = make(chan struct{})
	b.healKick = make(chan struct{}, 1)
	b.epochQ.kick = make(chan struct{}, 1)
	// The first reading, before raft and the logs write: on a full disk it deletes the
	// ballast, so that they can.
	b.disk = newDiskMonitor(cfg)
	b.disk.onLow = b.dropStandbys
	b.disk.check()
	b.opened = make(chan struct{})

	marker := filepath.Join(cfg.DataDir, cleanShutdownFile)
	if _, err := os.Stat(marker); err == nil {
		b.logger.Info("previous shutdown was clean")
		if err := os.Remove(marker); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
	} else if _, err := os.Stat(filepath.Join(cfg.DataDir, "meta")); err != nil {
		b.logger.Info("new data directory", "dir", cfg.DataDir)
	} else {
		b.logger.Info("no clean-shutdown marker: logs recover from their recovery points")
		b.uncleanStart = true
	}

	id, err := resolveNodeID(cfg)
	if err != nil {
		return nil, err
	}
	cfg.NodeID = id
	b.cfg = cfg
	if err := checkNodeID(cfg); err != nil {
		return nil, err
	}
	ctrl, err := b.openController()
	if err != nil {
		return nil, b.startupError(err)
	}
	b.ctrl = ctrl
	b.fetchers = newReplicaFetchers(b) // after ctrl (they read endpoints from its metadata), before any reconcile
	fail := func(err error) (*Broker, error) {
		b.cancel()
		b.fetchers.close()
		if b.member != nil {
			b.member.Close()
		}
		b.closeLogs()
		_ = ctrl.Close()
		return nil, b.startupError(err)
	}
	idCtx, idCancel := context.WithTimeout(b.ctx, 30*time.Second)
	err = b.checkCluster(idCtx)
	idCancel()
	if err != nil {
		return fail(err)
	}
	md := ctrl.Metadata()
	if err := b.removeStrayDirs(md); err != nil {
		return fail(err)
	}
	b.loadHWCheckpoint() // before any partition opens: each replica starts from its entry
	// The offsets topic's logs open now (the offset store loads from them); the others once
	// the listeners serve, in the background, so that metadata is answered while they open.
	b.markOpening(md)
	b.groups = newGroupCoordinator(b) // before the offsets topic's leaderships are applied
	b.groups.topics = topicIDs(md)
	if err := b.reconcileTopics(md, OffsetsTopic); err != nil {
		return fail(err)
	}
	b.srv, err = server.New(server.Config{
		TCPAddr:         cfg.Listen,
		Listen:          cfg.listen,
		UnixPath:        cfg.unixPath(),
		MaxRequestBytes: cfg.SocketRequestMaxBytes,
		IdleTimeout:     cfg.IdleTimeout,
		Logger:          b.logger,

		MaxConnections:         cfg.maxConnections(),
		MaxConnectionsPerIP:    cfg.MaxConnectionsPerIP,
		ListenerMaxConnections: cfg.listenerMaxConnections(),
		RequestTimeout:         cfg.RequestTimeout,
		QueuedMaxRequestBytes:  cfg.QueuedMaxRequestBytes,
	}, b)
	if err != nil {
		return fail(err)
	}
	// A start-up failure after the listeners are open: requests already waiting in Serve for
	// the broker to be ready give up when b.ctx ends, so it ends before the server's Close
	// waits for them.
	stopServing := func(err error) (*Broker, error) {
		b.cancel()
		_ = b.srv.Close(context.Background())
		return fail(err)
	}
	if err := b.register(); err != nil {
		return stopServing(err)
	}
	if len(cfg.Voters) <= 1 {
		// A single-node quorum: the topic can have one replica only, so it is made now, as
		// before there were clusters, rather than on the first group request.
		if err := b.groups.createTopicNow(); err != nil {
			return stopServing(err)
		}
	}
	close(b.ready)
	updates, stop := ctrl.Subscribe()
	b.wg.Add(9)
	go b.epochWriterLoop()
	// Every led partition's replica ticks (followers behind for longer than
	// replica.lag.time.max.ms are proposed out of the ISR), and the high watermarks that moved
	// are checkpointed.
	go b.every(tickInterval(b.cfg.ReplicaLagTimeMax), func() { b.tickReplicas(time.Now()) })
	go b.every(b.cfg.HighWatermarkCheckpoint, b.writeHWCheckpoint)
	go func() {
		defer b.wg.Done()
		defer close(b.opened)
		t0 := time.Now()
		// The metadata as it is now, not md: registering moved this broker's leaderships (fenced,
		// then unfenced: new leader epochs) after md was read and before the subscription began,
		// so md would leave the partitions at epochs older than the clients' (UNKNOWN_LEADER_EPOCH).
		if err := b.reconcile(b.ctrl.Metadata()); err != nil {
			b.logger.Error("opening partitions", "err", err)
		}
		b.logger.Info("partitions open", "partitions", len(b.partitionList()), "took", time.Since(t0).Round(time.Millisecond))
	}()
	go b.reconcileLoop(updates, stop)
	go b.retentionLoop()
	go b.every(b.cfg.ProducerIDExpirationCheck, b.expireProducers)
	go b.healLoop()
	b.wg.Add(1)
	go b.every(groupTickInterval, b.groups.tick)
	go func() {
		defer b.wg.Done()
		b.disk.run(b.ctx.Done())
	}()
	if cfg.ScrubBytesPerSec > 0 {
		b.wg.Add(1)
		go b.scrubLoop()
	}
	b.logger.Info("broker started", "node", cfg.NodeID, "tcp", addrString(b.srv.Addr()), "unix", addrString(b.srv.UnixAddr()), "data", cfg.DataDir,
		"max.connections", cfg.maxConnections()) // 0: no limit
	return b, nil
}

// startupError is the error Open returns. A full disk is said first, whichever step met it (the
// raft log in meta/, a partition's index or recovery point): every later step would fail the
// same way, and the step's own error can otherwise read as something else. Such a broker does
// not start read-only: raft must write its term and log to lead even a single-node cluster,
// and every partition's active segment needs its index pages.
func (b *Broker) startupError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("broker: cannot start: the disk holding %s is full (free space on it, then start again): %w", b.cfg.DataDir, err)
	}
	return fmt.Errorf("broker: %w", err)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Listen == "" && c.UnixPath == "" && c.Roles.Broker() { // a controller-only node may have no client listener
		c.Listen = d.Listen
	}
	c.NodeID = nonZero(c.NodeID, d.NodeID)
	c.DataDir = nonZero(c.DataDir, d.DataDir)
	c.NumPartitions = positive(c.NumPartitions, d.NumPartitions)
	c.DefaultReplication = positive(c.DefaultReplication, d.DefaultReplication)
	c.MessageMaxBytes = positive(c.MessageMaxBytes, d.MessageMaxBytes)
	c.SocketRequestMaxBytes = positive(c.SocketRequestMaxBytes, d.SocketRequestMaxBytes)
	c.OffsetsTopicPartitions = positive(c.OffsetsTopicPartitions, d.OffsetsTopicPartitions)
	c.OffsetsTopicReplication = positive(c.OffsetsTopicReplication, d.OffsetsTopicReplication)
	c.OffsetsCommitTimeout = positive(c.OffsetsCommitTimeout, d.OffsetsCommitTimeout)
	c.GroupInitialRebalanceDelay = nonZero(c.GroupInitialRebalanceDelay, d.GroupInitialRebalanceDelay)
	c.GroupMinSessionTimeout = positive(c.GroupMinSessionTimeout, d.GroupMinSessionTimeout)
	c.GroupMaxSessionTimeout = positive(c.GroupMaxSessionTimeout, d.GroupMaxSessionTimeout)
	c.SegmentBytes = positive(c.SegmentBytes, d.SegmentBytes)
	c.SegmentMs = positive(c.SegmentMs, d.SegmentMs)
	c.RetentionCheck = positive(c.RetentionCheck, d.RetentionCheck)
	c.ProducerIDExpiration = positive(c.ProducerIDExpiration, d.ProducerIDExpiration)
	c.ProducerIDExpirationCheck = positive(c.ProducerIDExpirationCheck, d.ProducerIDExpirationCheck)
	c.FlushMessages = positive(c.FlushMessages, d.FlushMessages)
	c.IndexIntervalBytes = positive(c.IndexIntervalBytes, d.IndexIntervalBytes)
	c.IndexMaxBytes = positive(c.IndexMaxBytes, d.IndexMaxBytes)
	c.ShutdownTimeout = positive(c.ShutdownTimeout, d.ShutdownTimeout)
	c.HeartbeatInterval = positive(c.HeartbeatInterval, d.HeartbeatInterval)
	c.SessionTimeout = positive(c.SessionTimeout, d.SessionTimeout)
	c.ControllerListenerName = nonZero(c.ControllerListenerName, d.ControllerListenerName)
	c.LogRetryBackoff = positive(c.LogRetryBackoff, d.LogRetryBackoff)
	c.LogRetryBackoffMax = max(positive(c.LogRetryBackoffMax, d.LogRetryBackoffMax), c.LogRetryBackoff)
	// Negative means "never" or "unlimited" for these, so only zero takes the default.
	c.RetentionMs = nonZero(c.RetentionMs, d.RetentionMs)
	c.RetentionBytes = nonZero(c.RetentionBytes, d.RetentionBytes)
	c.FlushMs = nonZero(c.FlushMs, d.FlushMs)
	c.IdleTimeout = nonZero(c.IdleTimeout, d.IdleTimeout)
	c.RequestTimeout = nonZero(c.RequestTimeout, d.RequestTimeout)
	c.QueuedMaxRequestBytes = nonZero(c.QueuedMaxRequestBytes, d.QueuedMaxRequestBytes)
	c.WritebackBytes = nonZero(c.WritebackBytes, d.WritebackBytes)
	c.PreallocateBytes = nonZero(c.PreallocateBytes, d.PreallocateBytes)
	c.SharedMemoryBytes = nonZero(c.SharedMemoryBytes, d.SharedMemoryBytes)
	c.SpaceAlertFreePercent = nonZero(c.SpaceAlertFreePercent, d.SpaceAlertFreePercent)
	c.BallastBytes = nonZero(c.BallastBytes, d.BallastBytes)
	c.ScrubBytesPerSec = nonZero(c.ScrubBytesPerSec, d.ScrubBytesPerSec)
	c.ReplicaLagTimeMax = positive(c.ReplicaLagTimeMax, d.ReplicaLagTimeMax)
	c.HighWatermarkCheckpoint = positive(c.HighWatermarkCheckpoint, d.HighWatermarkCheckpoint)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// positive returns v, or d when v is zero or negative.
func positive[T ~int | ~int32 | ~int64](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// nonZero returns v, or d when v is the zero value.
func nonZero[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// advertisedUnixPath is the socket path clients learn from metadata. A relative path (the default
// <data-dir>/sluice.sock with a relative data directory) names the socket only from the broker's
// working directory, so it is made absolute; a client elsewhere could not dial it otherwise. A
// path whose absolute form is too long for a socket address (108 bytes on Linux) stays as given,
// reachable from the broker's directory only, with a warning.
func (b *Broker) advertisedUnixPath(path string) string {
	abs, err := filepath.Abs(path)
	switch {
	case err != nil:
		b.logger.Warn("unix socket path advertised as given", "path", path, "err", err)
		return path
	case len(abs) >= maxUnixPathBytes:
		b.logger.Warn("unix socket path advertised as given: its absolute form is too long for a socket address",
			"path", path, "absolute", abs)
		return path
	}
	return abs
}

// maxUnixPathBytes is the size of sockaddr_un's sun_path on Linux, which includes the
// terminating zero (the BSDs' is smaller still, 104).
const maxUnixPathBytes = 108

// PartitionsOpen is closed once every partition the broker hosted when it started has its log
// open (or failed to open; requests to it then get KAFKA_STORAGE_ERROR). Open returns before:
// metadata is answered while the logs open, and a request to a partition still opening gets
// NOT_LEADER_OR_FOLLOWER, retriable. The offsets topic's logs are open when Open returns.
func (b *Broker) PartitionsOpen() <-chan struct{} { return b.opened }

// Addr is the TCP listener's address (nil without TCP).
func (b *Broker) Addr() net.Addr { return b.srv.Addr() }

// UnixAddr is the unix socket's address (nil without one).
func (b *Broker) UnixAddr() net.Addr { return b.srv.UnixAddr() }

// Controller exposes the metadata controller (tests, the CLI's describe).
func (b *Broker) Controller() *cluster.Controller { return b.ctrl }

// reconcileLoop applies metadata changes as they are committed.
func (b *Broker) reconcileLoop(updates <-chan struct{}, stop func()) {
	defer b.wg.Done()
	defer stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-updates:
			if err := b.reconcile(b.ctrl.Metadata()); err != nil {
				b.logger.Error("applying metadata", "err", err)
			}
		}
	}
}

// retentionLoop applies retention every log.retention.check.interval.ms, below each
// partition's high watermark (segment.Log.DeleteExpired: the active segment goes too once it
// has expired, rolled away first).
func (b *Broker) retentionLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.RetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
			for _, p := range b.partitionList() {
				if b.ctx.Err() != nil {
					return // shutting down: the rest waits for the next start
				}
				b.applyRetention(p)
			}
		}
	}
}

// expireProducers makes every partition forget the idempotent producers idle for
// producer.id.expiration.ms (Kafka's check, every producer.id.expiration.check.interval.ms).
func (b *Broker) expireProducers() {
	now := time.Now()
	for _, p := range b.partitionList() {
		if b.ctx.Err() != nil {
			return
		}
		if n := p.log().ExpireProducers(now); n > 0 {
			b.logger.Debug("expired idle producers", "partition", p.tp.String(), "producers", n)
		}
	}
}

// applyRetention deletes p's expired segments (retentionLoop).
func (b *Broker) applyRetention(p *partition) {
	if p.tp.topic == OffsetsTopic {
		// Not compacted (yet): deleting a segment would delete the only record of the offsets
		// committed in it, which a restart would then not find.
		return
	}
	l := p.log()
	res, err := l.DeleteExpired(p.highWatermark()) // never above it: followers may still need the rest
	if res.Segments > 0 {
		b.disk.kick() // space freed: produce may resume
		p.repMu.Lock()
		p.rep.LogStartMoved(l.StartOffset())
		b.applyReady(p, p.rep.Ready())
		p.repMu.Unlock()
	}
	if err != nil && !errors.Is(err, segment.ErrClosed) {
		// A closed log is a partition deleted or moved away since the pass listed it, or the
		// broker shutting down: nothing to report.
		b.logger.Warn("retention", "partition", p.tp.String(), "err", err)
	}
}

func (b *Broker) partitionList() []*partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*partition, 0, len(b.mu.partitions))
	for _, p := range b.mu.partitions {
		out = append(out, p)
	}
	return out
}

func (b *Broker) partition(topic string, p int32) *partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.partitions[topicPartition{topic, p}]
}

// Close shuts the broker down within ctx (or the configured shutdown timeout): it stops
// accepting connections, answers parked fetches at once, lets in-flight requests finish and
// their responses go out, flushes and closes every log (each records its recovery point at its
// end, so the next start reads no data), and writes the clean-shutdown marker.
func (b *Broker) Close(ctx context.Context) error {
	if !b.closing.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.ShutdownTimeout)
		defer cancel()
	}
	// Leaderships move while this broker still serves, so that clients see only retriable
	// errors (NOT_LEADER_OR_FOLLOWER) as they follow them; then the heartbeats stop.
	b.controlledShutdown(ctx)
	b.cancel()
	b.groups.closeShards() // parked joins and syncs answer NOT_COORDINATOR before the server closes
	if b.member != nil {
		b.member.Close()
	}
	var errs []error
	if err := b.srv.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("server: %w", err))
	}
	b.wg.Wait()
	b.fetchers.close() // before the logs close: a fetcher appends to them
	// After the last request's answer and the last follower fetch: the next start begins at
	// the high watermarks the clients saw.
	b.writeHWCheckpoint()
	b.writeQueuedEpochs()
	stopped, err := b.closeLogsCounting()
	errs = append(errs, err)
	if err := b.ctrl.Close(); err != nil {
		errs = append(errs, fmt.Errorf("controller: %w", err))
	}
	err = errors.Join(errs...)
	switch {
	case err != nil:
	case stopped > 0:
		// Their recovery points are not at their ends: the next start recovers them, and
		// must not be told the shutdown was clean.
		b.logger.Warn("no clean-shutdown marker: logs stopped by a disk error recover at the next start", "logs", stopped)
	default:
		// The marker only spares the next start a log line's worth of doubt: a disk too full
		// for it is no failure of the shutdown, whose logs are closed and checkpointed.
		if merr := writeFileSync(filepath.Join(b.cfg.DataDir, cleanShutdownFile), []byte(strconv.FormatInt(time.Now().UnixMilli(), 10)+"\n")); merr != nil {
			b.logger.Warn("cannot write the clean-shutdown marker: the next start recovers from the recovery points", "err", merr)
		}
	}
	b.logger.Info("broker stopped", "err", err)
	return err
}

func (b *Broker) closeLogs() error {
	_, err := b.closeLogsCounting()
	return err
}

// closeLogsCounting closes every log. A log that a disk error had stopped before the close
// was reported then ("log stopped after a disk error"), and its Close, which only gives that
// error back, is no failure of the shutdown: it is counted in stopped, not returned, so that a
// broker stopped cleanly on a sick disk exits 0. An error met by the close itself (the final
// fsync or recovery point) is returned.
func (b *Broker) closeLogsCounting() (stopped int, err error) {
	b.mu.Lock()
	parts := b.mu.partitions
	b.mu.partitions = map[topicPartition]*partition{}
	b.mu.Unlock()
	// partitionOpenWorkers at a time: closing a log syncs it and its indexes, a few fsyncs
	// each, which for 10,000 partitions one after another outlast the shutdown timeout.
	list := make([]*partition, 0, len(parts))
	for _, p := range parts {
		list = append(list, p)
	}
	errs := make([]error, len(list))
	var nstopped atomic.Int64
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(partitionOpenWorkers, len(list)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p := list[i]
				l := p.log()
				failed := l.Err()
				err := l.Close()
				switch {
				case err == nil:
				case failed != nil && errors.Is(err, segment.ErrFailed):
					// Stopped by an I/O error and not reopened yet by the supervisor
					// (heal.go): the next start recovers it as the supervisor would have.
					b.logger.Warn("closed a stopped partition log", "partition", p.tp.String(), "err", err)
					nstopped.Add(1)
				default:
					errs[i] = fmt.Errorf("close %s: %w", p.tp, err)
				}
			}
		}()
	}
	for i := range list {
		next <- i
	}
	close(next)
	wg.Wait()
	return int(nstopped.Load()), errors.Join(errs...)
}

// Serve implements server.Handler: one request, on the connection's reader goroutine (or its
// overlap goroutine, for a large one), one at a time per connection, in request order.
func (b *Broker) Serve(ctx context.Context, c *server.Conn, h wire.RequestHeader, body []byte) *server.Pending {
	select {
	case <-b.ready:
	default:
		// Start-up only (milliseconds): the one wait a handler may do on a connection's goroutine.
		select {
		case <-b.ready:
		case <-ctx.Done():
			return nil
		case <-b.ctx.Done():
			c.Close()
			return nil
		}
	}
	if h.APIKey == wire.APIVersions {
		return b.handleAPIVersions(c, h)
	}
	if err := wire.CheckVersion(h.APIKey, h.APIVersion); err != nil {
		b.logger.Debug("closing connection: unsupported request", "api", h.APIKey, "version", h.APIVersion, "err", err)
		c.Close()
		return nil
	}
	switch h.APIKey {
	case wire.Produce:
		return b.handleProduce(c, h, body)
	case wire.Fetch, wire.FetchShared:
		return b.handleFetch(ctx, c, h, body)
	case wire.ListOffsets:
		return b.handleListOffsets(c, h, body)
	case wire.OffsetForLeaderEpoch:
		return b.handleOffsetForLeaderEpoch(c, h, body)
	case wire.Metadata:
		return b.handleMetadata(c, h, body)
	case wire.CreateTopics:
		return b.handleCreateTopics(c, h, body)
	case wire.DeleteTopics:
		return b.handleDeleteTopics(c, h, body)
	case wire.DescribeConfigs:
		return b.handleDescribeConfigs(c, h, body)
	case wire.AlterConfigs:
		return b.handleAlterConfigs(c, h, body)
	case wire.OffsetCommit:
		return b.handleOffsetCommit(c, h, body)
	case wire.OffsetFetch:
		return b.handleOffsetFetch(c, h, body)
	case wire.ListGroups:
		return b.handleListGroups(c, h, body)
	case wire.DeleteGroups:
		return b.handleDeleteGroups(c, h, body)
	case wire.FindCoordinator:
		return b.handleFindCoordinator(c, h, body)
	case wire.JoinGroup:
		return b.handleJoinGroup(c, h, body)
	case wire.SyncGroup:
		return b.handleSyncGroup(c, h, body)
	case wire.Heartbeat:
		return b.handleHeartbeat(c, h, body)
	case wire.LeaveGroup:
		return b.handleLeaveGroup(c, h, body)
	case wire.DescribeGroups:
		return b.handleDescribeGroups(c, h, body)
	case wire.OffsetDelete:
		return b.handleOffsetDelete(c, h, body)
	case wire.DescribeCluster:
		return b.handleDescribeCluster(c, h, body)
	case wire.DescribeReplicas:
		return b.handleDescribeReplicas(c, h, body)
	case wire.CreatePartitions:
		return b.handleCreatePartitions(c, h, body)
	case wire.ElectLeaders:
		return b.handleElectLeaders(c, h, body)
	case wire.AlterPartitionReassignments:
		return b.handleAlterPartitionReassignments(c, h, body)
	case wire.ListPartitionReassignments:
		return b.handleListPartitionReassignments(c, h, body)
	case wire.AttachMemory:
		return b.handleAttachMemory(c, h, body)
	case wire.ProduceShared:
		return b.handleProduce(c, h, body) // the reader loaded the body (BodyLength, LoadBody)
	case wire.InitProducerID:
		return b.handleInitProducerID(c, h, body)
	}
	c.Close()
	return nil
}

// respond encodes msg as the response frame of h into a Pending and completes it.
func respond(c *server.Conn, h wire.RequestHeader, msg wire.Encoder) *server.Pending {
	p := c.NewPending()
	complete(p, h, msg)
	return p
}

// complete encodes msg as the response of h into p and completes it.
func complete(p *server.Pending, h wire.RequestHeader, msg wire.Encoder) {
	p.Buf = wire.AppendResponseFrame(p.Buf[:0], h.CorrelationID, msg)
	p.AppendBytes(p.Buf)
	p.Complete()
}

// async runs work off the connection's reader goroutine (for requests that wait on raft) and
// answers with what it returns; the connection's other requests keep flowing, and their
// responses still go out in request order.
func (b *Broker) async(c *server.Conn, h wire.RequestHeader, work func() wire.Encoder) *server.Pending {
	p := c.NewPending()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		complete(p, h, work())
	}()
	return p
}

// malformed closes a connection whose request body did not decode: DESIGN's rule for bad
// frames is that the connection goes and nothing else is touched.
func (b *Broker) malformed(c *server.Conn, h wire.RequestHeader, err error) *server.Pending {
	b.logger.Debug("closing connection: malformed request", "api", h.APIKey, "err", err)
	c.Close()
	return nil
}

func (b *Broker) handleAPIVersions(c *server.Conn, h wire.RequestHeader) *server.Pending {
	resp := &wire.APIVersionsResponse{APIKeys: wire.SupportedAPIs()}
	if err := wire.CheckVersion(h.APIKey, h.APIVersion); err != nil {
		resp.ErrorCode = wire.ErrUnsupportedVersion
	}
	return respond(c, h, resp)
}

// every runs fn every d until the broker closes; it is one of b.wg's goroutines.
func (b *Broker) every(d time.Duration, fn func()) {
	defer b.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
