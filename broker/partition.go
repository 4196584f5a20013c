package broker

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/replication"
	"github.com/sluicemq/sluice/segment"
)

// topicPartition names a partition.
type topicPartition struct {
	topic     string
	partition int32
}

func (tp topicPartition) String() string { return fmt.Sprintf("%s-%d", tp.topic, tp.partition) }

// partition is one partition hosted by this broker: its log, its resolved topic config and the
// fetches parked on it.
//
// Ownership: the log is set at creation and swapped only by the log supervisor (heal.go), which
// reopens a stopped log under reconcileMu and rebuilds rep for it; cfg and lead are swapped
// atomically by the metadata reconciler (lead through setLeadership, which also hands the
// committed leadership and ISR to rep: leadership.go); waiters is guarded by waitMu; rep, waits
// and nextWait by repMu. hw and acksAll are rep's outputs, published by applyReady (replica.go)
// so that the request path reads them in one atomic load.
type partition struct {
	tp      topicPartition
	topicID cluster.TopicID
	current atomic.Pointer[segment.Log] // read through log(), once per request
	cfg     atomic.Pointer[cluster.TopicConfig]
	// lead is the partition's leader and leader epoch as the metadata last reconciled says,
	// packed in one word (packLead) so that a request reads both in one atomic load.
	lead atomic.Uint64
	// replicas is the partition's assignment as the metadata last reconciled says: a follower's
	// fetch from a broker outside it is refused (fetch.go).
	replicas atomic.Pointer[[]int32]
	// adding is the replicas a move in progress is adding (nil: none), as the metadata last
	// reconciled says: their catch-up is what the replication throttles cap (throttle.go).
	adding atomic.Pointer[[]int32]
	// hw is the high watermark rep last reported (applyReady): consumers read below it.
	hw atomic.Int64
	// acksAll is rep.AcceptsAcksAll() as of the last applyReady: acks=all is refused up front
	// while it is false (this replica does not lead, or the committed ISR is below
	// min.insync.replicas).
	acksAll atomic.Bool

	waitMu  sync.Mutex
	waiters map[chan struct{}]struct{}

	// rep is the partition's replication state (issue #23): created with the partition, changed
	// only under repMu; after every call on it the caller hands rep.Ready() to b.applyReady
	// (replica.go) before it lets go of repMu.
	repMu sync.Mutex
	rep   *replication.Replica
	// waits are the acks=all produce waits parked in rep, by the id rep releases them with
	// (guarded by repMu; nextWait names the next).
	waits    map[replication.WaitID]*ackWait
	nextWait replication.WaitID
	// applied is the leadership and partition epoch last handed to rep (setLeadership), so that
	// an unchanged metadata version changes nothing; appliedSet is false until the first.
	applied    cluster.PartitionMeta
	appliedSet bool
	// syncedFn is the group-commit callback of every append on a write.caching=false topic
	// (produce.go), bound once so that asking for it allocates nothing.
	syncedFn func(error)
}

// log is the partition's current log (a stopped one until the supervisor swaps in its reopened
// successor). A request loads it once: one that appends and then waits for durability waits on
// the log it appended to.
func (p *partition) log() *segment.Log { return p.current.Load() }

// highWatermark is the offset below which records are committed: what consumers may read,
// ListOffsets' latest, the bound below which retention may delete, the offsets replay's end
// and offset-for-timestamp's bound. It is the replica's (replication/), published by
// applyReady: the smallest log end over the ISR, each counted only up to its fsynced end on a
// write.caching=false topic, so on a single node it is the leader's fsynced end.
func (p *partition) highWatermark() batch.Offset { return batch.Offset(p.hw.Load()) }

// park registers wake to be signalled on the next append.
func (p *partition) park(wake chan struct{}) {
	p.waitMu.Lock()
	if p.waiters == nil {
		p.waiters = map[chan struct{}]struct{}{}
	}
	p.waiters[wake] = struct{}{}
	p.waitMu.Unlock()
}

func (p *partition) unpark(wake chan struct{}) {
	p.waitMu.Lock()
	delete(p.waiters, wake)
	p.waitMu.Unlock()
}

// wake signals every parked fetch: the append itself wakes long polls, no sleep loops.
func (p *partition) wake() {
	p.waitMu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.waitMu.Unlock()
}

// logOptions turns a topic config into segment options.
func (b *Broker) logOptions(c *cluster.TopicConfig) segment.Options {
	flushMs := c.FlushInterval
	if flushMs == cluster.Forever {
		flushMs = -1
	}
	retention := c.Retention
	switch retention {
	case cluster.Forever:
		retention = -1
	case 0:
		// Kafka's retention.ms=0: every segment whose newest record is in the past goes, the
		// active one too (rolled first). segment.Options takes 0 for unset (7 days);
		// retention compares whole milliseconds, so 1 ns is the same rule.
		retention = time.Nanosecond
	}
	retentionBytes := c.RetentionBytes
	switch {
	case retentionBytes == 0:
		// Kafka's retention.bytes=0: every segment goes, the active one too (rolled first).
		// segment.Options takes 0 for unset (no limit).
		retentionBytes = segment.ZeroRetentionBytes
	case retentionBytes < 0:
		retentionBytes = -1 // any negative is unlimited, as in Kafka
	}
	indexInterval := c.IndexIntervalBytes
	if indexInterval == 0 {
		indexInterval = 1 // Kafka's 0: an entry for every batch; 0 is unset (4096) in segment.Options
	}
	return segment.Options{
		SegmentBytes:       c.SegmentBytes,
		SegmentMs:          c.SegmentTime,
		SegmentJitter:      c.SegmentJitter,
		IndexIntervalBytes: int(indexInterval),
		SegmentIndexBytes:  int(c.SegmentIndexBytes),
		RetentionBytes:     retentionBytes,
		RetentionMs:        retention,
		FlushMessages:      c.FlushMessages,
		FlushMs:            flushMs,
		Logger:             b.logger,
		FS:                 b.cfg.logFS,
		WritebackBytes:     b.cfg.WritebackBytes,
		PreallocateBytes:   b.cfg.PreallocateBytes,
		RetryBackoff:       b.cfg.LogRetryBackoff,
		RetryBackoffMax:    b.cfg.LogRetryBackoffMax,
		OnFailure:          b.logStopped,
		Reserve:            b.disk.reserve,
		OpenFiles:          b.openFiles,

		ProducerIDExpiration: b.cfg.ProducerIDExpiration,
	}
}

const partitionMetadataFile = "partition.metadata"

// openPartition opens (creating if needed) the log of a partition this broker hosts. A
// directory left by an earlier topic of the same name (another topic id) is removed first.
func (b *Broker) openPartition(t cluster.TopicMeta, pm cluster.PartitionMeta) (*partition, error) {
	tp := topicPartition{t.Name, pm.Partition}
	cfg, err := cluster.ResolveTopicConfig(t.Configs, b.topicDefaults)
	if err != nil {
		return nil, fmt.Errorf("partition %s: %w", tp, err)
	}
	dir := filepath.Join(b.cfg.DataDir, tp.String())
	idFile := filepath.Join(dir, partitionMetadataFile)
	want := []byte("version: 0\ntopic_id: " + hex.EncodeToString(t.ID[:]) + "\n")
	have, err := os.ReadFile(idFile)
	switch {
	case err == nil && !bytes.Equal(have, want):
		b.logger.Info("removing data of an earlier topic with the same name", "dir", dir)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if !bytes.Equal(have, want) {
		if err := writeFileSync(idFile, want); err != nil {
			return nil, err
		}
	}
	l, err := segment.Open(dir, b.logOptions(&cfg))
	if err != nil {
		return nil, err
	}
	p := &partition{tp: tp, topicID: t.ID}
	p.current.Store(l)
	p.cfg.Store(&cfg)
	// Offline until openPartitions hands it its leadership (setLeadership), once it is in the
	// partition map: requests meanwhile are refused as for a partition still opening.
	p.lead.Store(packLead(cluster.NoLeader, pm.LeaderEpoch))
	p.syncedFn = func(err error) { b.logSynced(p, err) }
	p.rep = replication.New(b.replicaConfig(&cfg), b.logState(p, l, len(pm.Replicas)))
	p.hw.Store(int64(p.rep.HighWatermark()))
	return p, nil
}

// writeFileSync writes a small file durably (temp, fsync, rename, fsync dir).
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			_ = d.Close()
		}
	}
	return err
}

// partitionDirName reports whether name looks like "<topic>-<partition>".
func partitionDirName(name string) (topicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return topicPartition{}, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || n < 0 {
		return topicPartition{}, false
	}
	return topicPartition{name[:i], int32(n)}, true
}

// reconcile makes the hosted partitions match the metadata: opens partitions assigned to this
// broker, applies altered configs and leader epochs, and deletes the data of partitions whose
// topic is gone. It runs on the reconciler goroutine, in Open, and in admin handlers that must
// see their change applied before answering; reconcileMu serialises them.
func (b *Broker) reconcile(md *cluster.Metadata) error {
	return b.reconcileTopics(md, "")
}

// reconcileTopics is reconcile, or with only set, the opening of that one topic's partitions
// alone (Open opens the offsets topic before the others): it then deletes nothing and does
// not count as having applied md.
func (b *Broker) reconcileTopics(md *cluster.Metadata, only string) error {
	b.reconcileMu.Lock()
	defer b.reconcileMu.Unlock()
	if md.Version() < b.reconciled {
		return nil // an older view than one already applied (a racing caller)
	}
	if only == "" {
		b.reconciled = md.Version()
		now := time.Now()
		b.leaderQuota.setRate(md.ThrottleRate(b.cfg.NodeID, cluster.LeaderReplicationThrottledRate), now)
		b.followerQuota.setRate(md.ThrottleRate(b.cfg.NodeID, cluster.FollowerReplicationThrottledRate), now)
	}
	wanted := map[topicPartition]struct{}{}
	var errs []error
	var jobs []openJob
	for _, t := range md.Topics() {
		if only != "" && t.Name != only {
			continue
		}
		for _, pm := range t.Partitions {
			if !containsID(pm.Replicas, b.cfg.NodeID) {
				continue
			}
			tp := topicPartition{t.Name, pm.Partition}
			wanted[tp] = struct{}{}
			b.mu.RLock()
			p := b.mu.partitions[tp]
			b.mu.RUnlock()
			if p != nil && p.topicID != t.ID {
				b.dropPartition(p) // re-created topic: the old data goes
				p = nil
			}
			if p == nil {
				jobs = append(jobs, openJob{t: t, pm: pm})
				continue
			}
			cfg, err := cluster.ResolveTopicConfig(t.Configs, b.topicDefaults)
			if err == nil && cfg != *p.cfg.Load() {
				p.cfg.Store(&cfg)
				p.log().Reconfigure(b.logOptions(&cfg))
				p.repMu.Lock()
				p.rep.SetConfig(b.replicaConfig(&cfg))
				b.applyReady(p, p.rep.Ready())
				p.repMu.Unlock()
			}
			b.setLeadership(p, pm)
		}
	}
	errs = append(errs, b.openPartitions(jobs)...)
	if only != "" {
		return b.joinPartitionErrors(errs)
	}
	b.mu.Lock()
	var gone []*partition
	for tp, p := range b.mu.partitions {
		if _, ok := wanted[tp]; !ok {
			gone = append(gone, p)
		}
	}
	for tp := range b.mu.unopened {
		if _, ok := wanted[tp]; !ok {
			delete(b.mu.unopened, tp) // its topic went before its log could open
		}
	}
	b.mu.Unlock()
	for _, p := range gone {
		if t, ok := md.Topic(p.tp.topic); ok && t.ID == p.topicID {
			// Moved off this broker (a reassignment), not deleted: a request caught here is
			// told to find the partition's leader, as any request for a partition this broker
			// does not host is.
			b.dropPartitionAs(p, fmt.Errorf("%w: %s: no longer a replica here", ErrNotLeaderOrFollower, p.tp))
			continue
		}
		b.dropPartition(p)
	}
	if s := b.groups; s != nil {
		// The groups' offsets of deleted topics go, whether or not this broker hosted them
		// (a group's coordinator need not host the partitions it commits for).
		s.reconcileTopics(md)
	}
	return b.joinPartitionErrors(errs)
}

// openJob is a partition reconcile opens.
type openJob struct {
	t  cluster.TopicMeta
	pm cluster.PartitionMeta
}

// partitionOpenWorkers bounds the logs opened (at start-up and for a new topic) or closed (at
// shutdown) at once: opening or closing a log is a few file system calls, fsyncs and page
// faults, so a few workers hide their latency (a restart after a crash scans the unsynced
// tails, reading from the disk) without flooding the disk queue or the file table.
const partitionOpenWorkers = 8

// openPartitions opens the partitions of jobs, partitionOpenWorkers at a time, and puts each
// in the map as soon as it is open, so requests to it are served while others still open. A
// partition that fails to open is recorded in unopened with its error (requests to it are
// answered with KAFKA_STORAGE_ERROR) and tried again at the next reconcile, which the log
// supervisor runs after a backoff (heal.go). It stops early when the broker closes. It returns the errors, in jobs' order.
func (b *Broker) openPartitions(jobs []openJob) []error {
	if len(jobs) == 0 {
		return nil
	}
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(partitionOpenWorkers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				tp := topicPartition{j.t.Name, j.pm.Partition}
				np, err := b.openPartition(j.t, j.pm)
				b.mu.Lock()
				if err != nil {
					errs[i] = err
					b.mu.unopened[tp] = fmt.Errorf("%w: %s: %w", ErrPartitionOffline, tp, err)
					b.logStopped(err) // the supervisor opens it again (heal.go: retryUnopened)
				} else {
					delete(b.mu.unopened, tp)
					b.mu.partitions[tp] = np
				}
				b.mu.Unlock()
				if err == nil {
					// In the map first: the fetchers (follow) and the proposals it may
					// start find the partition as hosted.
					b.setLeadership(np, j.pm)
				}
			}
		}()
	}
	for i := range jobs {
		if b.ctx.Err() != nil {
			break // closing: the logs not yet open stay closed
		}
		next <- i
	}
	close(next)
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// markOpening records every partition md assigns to this broker and that is not open as
// opening, so that requests to it are answered with a retriable error until its log is open
// (a restart opens the logs after it starts serving metadata).
func (b *Broker) markOpening(md *cluster.Metadata) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range md.Topics() {
		for _, pm := range t.Partitions {
			tp := topicPartition{t.Name, pm.Partition}
			if _, open := b.mu.partitions[tp]; !open && containsID(pm.Replicas, b.cfg.NodeID) {
				b.mu.unopened[tp] = nil
			}
		}
	}
}

// missingPartitionErr is what a request to a partition that is not open gets: ErrPartitionLoading
// while its log is opening (NOT_LEADER_OR_FOLLOWER, retriable: the client refreshes its metadata
// and tries again, as Kafka's clients do for a partition its broker does not host yet), the
// open's error if it failed, and ErrUnknownPartition otherwise.
func (b *Broker) missingPartitionErr(topic string, partition int32) error {
	b.mu.RLock()
	err, ok := b.mu.unopened[topicPartition{topic, partition}]
	b.mu.RUnlock()
	switch {
	case !ok:
		return ErrUnknownPartition
	case err == nil:
		return fmt.Errorf("%w: %s-%d", ErrPartitionLoading, topic, partition)
	}
	return err
}

// maxPartitionErrors is how many partition errors reconcile returns in full.
const maxPartitionErrors = 3

// joinPartitionErrors joins the partitions' errors, the first few in full: when every
// partition fails the same way (a full disk at start-up), thousands of copies of one message
// would bury it. The others are logged.
func (b *Broker) joinPartitionErrors(errs []error) error {
	if len(errs) <= maxPartitionErrors {
		return errors.Join(errs...)
	}
	for _, err := range errs[maxPartitionErrors:] {
		b.logger.Error("opening partition", "err", err)
	}
	shown := append(errs[:maxPartitionErrors:maxPartitionErrors],
		fmt.Errorf("and %d more partitions failed (logged above)", len(errs)-maxPartitionErrors))
	return errors.Join(shown...)
}

// dropPartition stops serving a partition and deletes its data. A request that found the
// partition before it left the map and reaches its log while or after it closes gets
// segment.ErrDeleted from Log.Delete (not the ErrClosed of a log closed at shutdown or
// stopped by a disk error), which errorCode answers with UNKNOWN_TOPIC_OR_PARTITION: the topic
// is gone, not the disk.
func (b *Broker) dropPartition(p *partition) {
	b.dropPartitionAs(p, fmt.Errorf("%w: %s: deleted", ErrUnknownPartition, p.tp))
}

// dropPartitionAs is dropPartition with the error its acks=all waits are answered with.
func (b *Broker) dropPartitionAs(p *partition, waitErr error) {
	b.mu.Lock()
	if b.mu.partitions[p.tp] == p {
		delete(b.mu.partitions, p.tp)
	}
	b.mu.Unlock()
	b.retireReplica(p, waitErr)
	p.wake()
	if err := p.log().Delete(); err != nil {
		b.logger.Warn("deleting partition data", "partition", p.tp.String(), "err", err)
	}
	b.disk.kick() // space freed: produce may resume
	b.logger.Info("deleted partition", "partition", p.tp.String())
}

// dropStandbys has every log give back its standby segment, reserved ahead of its next roll
// (the disk-space monitor's onLow: the disk runs low).
func (b *Broker) dropStandbys() {
	dropped := 0
	for _, p := range b.partitionList() {
		if err := p.log().DropStandby(); err != nil {
			b.logger.Warn("dropping a standby segment", "partition", p.tp.String(), "err", err)
			continue
		}
		dropped++
	}
	b.logger.Info("disk space low: reserves ahead given back", "logs", dropped)
}

// removeStrayDirs deletes partition directories of topics that no longer exist (deleted while
// the broker was down).
func (b *Broker) removeStrayDirs(md *cluster.Metadata) error {
	entries, err := os.ReadDir(b.cfg.DataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		tp, ok := partitionDirName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		t, exists := md.Topic(tp.topic)
		if exists {
			if pm, ok := t.Partition(tp.partition); ok && containsID(pm.Replicas, b.cfg.NodeID) {
				continue
			}
		}
		b.logger.Info("removing data of a deleted partition", "dir", e.Name())
		if err := os.RemoveAll(filepath.Join(b.cfg.DataDir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// parkedCount is the number of fetches parked on p (tests).
func (p *partition) parkedCount() int {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	return len(p.waiters)
}
