package broker

// The group coordinator: consumer groups and their committed offsets.
//
// A group's coordinator is the leader of its partition of __consumer_offsets,
// coordinator.Partition(group.id, partitions) (Kafka's abs(javaHashCode) % the count), so a
// client finds it by metadata or FindCoordinator and it moves with the partition's leadership.
// Each offsets partition this broker leads is a shard: the groups (group.Group, the pure state
// machine) and committed offsets of the groups that hash to it, rebuilt by replaying the
// partition from its log start to its log end when the leadership is gained (requests meanwhile
// answer COORDINATOR_LOAD_IN_PROGRESS), and dropped when it is lost (its parked joins and syncs
// answer NOT_COORDINATOR). A broker that does not lead a group's partition keeps nothing of the
// group in memory and answers every request for it NOT_COORDINATOR, the offset fetch included:
// what it would answer could be stale.
//
// Every write (a commit, a group's snapshot at the end of a rebalance, a deletion) is appended
// by the leader and acknowledged once the high watermark passes it (acks=all, coordappend.go),
// and is applied to memory only then: an acknowledged commit is in every in-sync replica, so
// the coordinator elected after a failover replays it, and a commit never goes backwards.
//
// In a cluster the topic is created on the first group request (not at start: the first broker
// to start would make it single-replica), with offsets.topic.replication.factor replicas, or
// the live brokers if fewer, as Kafka; until then group requests answer
// COORDINATOR_NOT_AVAILABLE, which clients retry. A single-node quorum creates it at start.
//
// Ownership: groupCoordinator.mu guards shards; each shard's mu guards its state, groups,
// offsets and parked requests, and is held while a request runs its group's state machine and
// appends its write (so that one group's writes are in the log in the order they were decided).
// writeMu (taken before any shard's mu) serialises offset appends against the forgetting of a
// deleted topic's offsets, as before shards: a commit to the old topic is never written after
// its tombstones.

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluicemq/sluice/batch"
	"github.com/sluicemq/sluice/cluster"
	"github.com/sluicemq/sluice/group"
	"github.com/sluicemq/sluice/internal/coordinator"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/segment"
)

// OffsetsTopic is the internal topic of committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

type groupCoordinator struct {
	b   *Broker
	cfg group.Config

	writeMu sync.Mutex
	// topics are the topics' ids as last reconciled (guarded by writeMu): a name gone, or with
	// another id, is a deleted topic whose offsets go (reconcileTopics).
	topics map[string]cluster.TopicID

	mu     sync.Mutex
	shards map[int32]*shard

	createMu sync.Mutex // one creation of the topic at a time
	creating bool       // guarded by createMu
}

type shardState uint8

const (
	shardLoading shardState = iota
	shardActive
	shardGone
)

// shard is one led partition of __consumer_offsets and the groups that hash to it.
type shard struct {
	c     *groupCoordinator
	p     *partition
	part  int32
	mu    sync.Mutex // guards everything below
	epoch int32      // the leader epoch writes are appended at
	state shardState
	// groups by id: every group with members, a snapshot or a committed offset.
	groups map[string]*groupEntry
}

// groupEntry is a group as its coordinator holds it: the state machine, its committed offsets
// and the requests parked on it (answered by the machine's Effects).
type groupEntry struct {
	g       *group.Group
	offsets map[topicPartition]committed
	// joins and syncs are the parked requests by member id, oldest first: a member's second
	// join (or sync) while one is parked has the machine answer the first in the same Effects
	// (REBALANCE_IN_PROGRESS), and replies are matched to requests in that order.
	joins map[string][]func(*group.JoinResponse)
	syncs map[string][]func(*group.SyncResponse)
}

// pop takes the oldest callback parked under id.
func pop[T any](m map[string][]func(T), id string) func(T) {
	q := m[id]
	if len(q) == 0 {
		return nil
	}
	cb := q[0]
	if len(q) == 1 {
		delete(m, id)
	} else {
		m[id] = q[1:]
	}
	return cb
}

type committed struct {
	offset      int64
	leaderEpoch int32
	metadata    *string
}

func newGroupCoordinator(b *Broker) *groupCoordinator {
	cfg := group.Config{
		InitialRebalanceDelay: max(b.cfg.GroupInitialRebalanceDelay, 0),
		MinSessionTimeout:     b.cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     b.cfg.GroupMaxSessionTimeout,
		MaxSize:               b.cfg.GroupMaxSize,
	}
	return &groupCoordinator{b: b, cfg: cfg, shards: map[int32]*shard{}, topics: map[string]cluster.TopicID{}}
}

// partitions is the partition count of __consumer_offsets, 0 while it does not exist.
func (c *groupCoordinator) partitions() int32 {
	t, ok := c.b.ctrl.Metadata().Topic(OffsetsTopic)
	if !ok {
		return 0
	}
	return int32(len(t.Partitions))
}

// partitionFor is group's partition of OffsetsTopic (n partitions).
func partitionFor(group string, n int32) int32 { return coordinator.Partition(group, n) }

// shardFor is the active shard of group, or why this broker does not serve it:
// ErrNotCoordinator (another broker leads its partition), ErrCoordinatorLoadInProgress
// (loading), ErrCoordinatorNotAvailable (no leader, or no topic yet: its creation starts).
func (c *groupCoordinator) shardFor(group string) (*shard, error) {
	n := c.partitions()
	if n == 0 {
		c.createTopic()
		return nil, fmt.Errorf("%w: %s is being created", ErrCoordinatorNotAvailable, OffsetsTopic)
	}
	part := partitionFor(group, n)
	c.mu.Lock()
	sh := c.shards[part]
	c.mu.Unlock()
	if sh != nil {
		sh.mu.Lock()
		st := sh.state
		sh.mu.Unlock()
		switch st {
		case shardActive:
			return sh, nil
		case shardLoading:
			return nil, fmt.Errorf("%w: %s-%d", ErrCoordinatorLoadInProgress, OffsetsTopic, part)
		}
	}
	p := c.b.partition(OffsetsTopic, part)
	if p != nil && p.servesAt(c.b.cfg.NodeID, -1) {
		// Led here, and the shard not yet (or no longer) set up: the reconciler is on it.
		return nil, fmt.Errorf("%w: %s-%d", ErrCoordinatorLoadInProgress, OffsetsTopic, part)
	}
	_, err := c.b.refuse(OffsetsTopic, part, p, -1)
	if errors.Is(err, ErrNotLeaderOrFollower) {
		return nil, fmt.Errorf("%w: group %q (%v)", ErrNotCoordinator, group, err)
	}
	return nil, fmt.Errorf("%w: group %q (%v)", ErrCoordinatorNotAvailable, group, err)
}

// lock takes sh.mu and reports whether sh is still active (it may have been dropped between
// shardFor and now); on false the lock is released again.
func (sh *shard) lock() bool {
	sh.mu.Lock()
	if sh.state != shardActive {
		sh.mu.Unlock()
		return false
	}
	return true
}

// createTopic creates OffsetsTopic in the background, once at a time.
func (c *groupCoordinator) createTopic() {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if c.creating {
		return
	}
	c.creating = true
	b := c.b
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() {
			c.createMu.Lock()
			c.creating = false
			c.createMu.Unlock()
		}()
		if err := c.createTopicNow(); err != nil && b.ctx.Err() == nil {
			b.logger.Warn("creating "+OffsetsTopic, "err", err)
		}
	}()
}

// createTopicNow creates OffsetsTopic unless it exists, with offsets.topic.replication.factor
// replicas or the live brokers if fewer, and waits until this broker hosts its replicas.
func (c *groupCoordinator) createTopicNow() error {
	b := c.b
	if _, ok := b.ctrl.Metadata().Topic(OffsetsTopic); ok {
		return nil
	}
	rf := b.cfg.OffsetsTopicReplication
	if live := len(b.ctrl.Metadata().LiveBrokers()); live < rf {
		rf = max(live, 1)
	}
	spec := cluster.TopicSpec{
		Name: OffsetsTopic, NumPartitions: int32(b.cfg.OffsetsTopicPartitions), ReplicationFactor: int16(rf),
		Configs:  map[string]string{"retention.ms": "-1", "segment.bytes": strconv100MiB},
		Internal: true,
	}
	if err := b.createTopic(spec, 30*time.Second); err != nil && !errors.Is(err, cluster.ErrTopicExists) {
		return fmt.Errorf("create %s: %w", OffsetsTopic, err)
	}
	b.logger.Info("created "+OffsetsTopic, "partitions", b.cfg.OffsetsTopicPartitions, "replication.factor", rf)
	return nil
}

const strconv100MiB = "104857600"

// leadershipChanged is called by setLeadership for every partition of OffsetsTopic whose
// leader or leader epoch changed: a leadership gained starts a shard's load, one lost drops it.
func (c *groupCoordinator) leadershipChanged(p *partition) {
	leader, epoch := p.leadership()
	part := p.tp.partition
	c.mu.Lock()
	sh := c.shards[part]
	if leader == c.b.cfg.NodeID && sh != nil && sh.p == p {
		// Still the leader, at a new epoch: the log is the same, so is the state.
		sh.mu.Lock()
		sh.epoch = epoch
		sh.mu.Unlock()
		c.mu.Unlock()
		return
	}
	var fresh *shard
	if leader == c.b.cfg.NodeID {
		fresh = &shard{c: c, p: p, part: part, epoch: epoch, state: shardLoading, groups: map[string]*groupEntry{}}
		c.shards[part] = fresh
	} else {
		delete(c.shards, part)
	}
	c.mu.Unlock()
	if sh != nil {
		sh.unload()
	}
	if fresh != nil {
		c.b.wg.Add(1)
		go fresh.load()
	}
}

// closeShards drops every shard (the broker closes).
func (c *groupCoordinator) closeShards() {
	c.mu.Lock()
	shards := c.shards
	c.shards = map[int32]*shard{}
	c.mu.Unlock()
	for _, sh := range shards {
		sh.unload()
	}
}

// unload drops sh: its parked requests answer NOT_COORDINATOR.
func (sh *shard) unload() {
	sh.mu.Lock()
	was := sh.state
	sh.state = shardGone
	var calls []func()
	for _, e := range sh.groups {
		calls = append(calls, e.take(e.g.Unload())...)
		calls = append(calls, e.drain(wire.ErrNotCoordinator)...)
	}
	sh.groups = map[string]*groupEntry{}
	sh.mu.Unlock()
	for _, call := range calls {
		call()
	}
	if was == shardActive {
		sh.c.b.logger.Info("group coordinator unloaded", "partition", sh.p.tp.String())
	}
}

// take moves the callbacks of the requests fx answers out of e, bound to their answers, for
// the caller to run once it has let go of the shard's lock. Call with the shard's mu held.
func (e *groupEntry) take(fx group.Effects) []func() {
	var calls []func()
	for _, r := range fx.Replies {
		switch {
		case r.Join != nil:
			if cb := pop(e.joins, r.MemberID); cb != nil {
				resp := r.Join
				calls = append(calls, func() { cb(resp) })
			}
		case r.Sync != nil:
			if cb := pop(e.syncs, r.MemberID); cb != nil {
				resp := r.Sync
				calls = append(calls, func() { cb(resp) })
			}
		}
	}
	return calls
}

// drain answers every request still parked on e with code: those whose answers waited for a
// snapshot's write when the group went (unloaded, deleted). Call with the shard's mu held.
func (e *groupEntry) drain(code wire.ErrorCode) []func() {
	var calls []func()
	for id, q := range e.joins {
		delete(e.joins, id)
		resp := &group.JoinResponse{Err: code, MemberID: id}
		for _, cb := range q {
			calls = append(calls, func() { cb(resp) })
		}
	}
	for id, q := range e.syncs {
		delete(e.syncs, id)
		resp := &group.SyncResponse{Err: code}
		for _, cb := range q {
			calls = append(calls, func() { cb(resp) })
		}
	}
	return calls
}

// apply carries out fx of e's machine, with sh.mu held: replies are taken for the caller to
// run after unlocking; a Persist is appended now and its replies are answered once it is
// committed (or, if it fails, answered with the failure and the machine told).
func (sh *shard) apply(e *groupEntry, fx group.Effects) []func() {
	if fx.Persist == nil {
		return e.take(fx)
	}
	b := sh.c.b
	rec := &batch.Record{Timestamp: time.Now().UnixMilli(), Key: group.EncodeKey(fx.Persist.Group), Value: fx.Persist.Value}
	gen := e.g.Generation()
	replies := fx.Replies
	b.appendAcksAll(sh.p, sh.epoch, []*batch.Record{rec}, b.cfg.OffsetsCommitTimeout, func(err error) {
		if !sh.lock() {
			// Unloaded meanwhile: its parked requests were answered NOT_COORDINATOR.
			return
		}
		var calls []func()
		if cur := sh.groups[e.g.ID()]; cur == e {
			if err == nil {
				e.g.PersistDone(gen)
				calls = e.take(group.Effects{Replies: replies})
			} else {
				code := errorCode(err)
				b.logger.Warn("writing group metadata", "group", e.g.ID(), "generation", gen, "err", err)
				calls = e.take(group.Effects{Replies: failedReplies(replies, code)})
				calls = append(calls, sh.apply(e, e.g.PersistFailed(time.Now(), gen, code))...)
			}
		}
		sh.mu.Unlock()
		for _, call := range calls {
			call()
		}
	})
	return nil
}

// failedReplies is replies with each answer replaced by the error code.
func failedReplies(replies []group.Reply, code wire.ErrorCode) []group.Reply {
	out := make([]group.Reply, len(replies))
	for i, r := range replies {
		out[i].MemberID = r.MemberID
		if r.Join != nil {
			out[i].Join = &group.JoinResponse{Err: code, MemberID: r.MemberID}
		}
		if r.Sync != nil {
			out[i].Sync = &group.SyncResponse{Err: code}
		}
	}
	return out
}

// load replays sh's partition into memory and, unless sh was dropped meanwhile, makes it
// active. A replay that fails (an unreadable log) is retried while sh is current.
func (sh *shard) load() {
	b := sh.c.b
	defer b.wg.Done()
	t0 := time.Now()
	for attempt := 0; ; attempt++ {
		groups, records, err := sh.c.replay(sh.p)
		sh.mu.Lock()
		if sh.state != shardLoading {
			sh.mu.Unlock()
			return
		}
		if err == nil {
			sh.groups = groups
			sh.state = shardActive
			n, epoch := len(groups), sh.epoch
			calls := sh.forgetLocked(sh.c.deletedPartitions())
			sh.mu.Unlock()
			for _, call := range calls {
				call()
			}
			b.logger.Info("group coordinator loaded", "partition", sh.p.tp.String(), "epoch", epoch, "groups", n,
				"records", records, "took", time.Since(t0).Round(time.Millisecond))
			return
		}
		sh.mu.Unlock()
		b.logger.Error("loading group coordinator", "partition", sh.p.tp.String(), "attempt", attempt+1, "err", err)
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// replay reads p from its log start to its log end: the committed offsets and the latest
// snapshot of every group whose records are in it. It reads past the high watermark: this
// broker leads p, so its log is the partition's, and what lies above the high watermark will
// be committed (or this broker loses the leadership and the shard with it).
func (c *groupCoordinator) replay(p *partition) (map[string]*groupEntry, int, error) {
	offsets := map[groupPartition]committed{}
	snaps := map[string][]byte{} // nil value: deleted
	records := 0
	l := p.log()
	end := l.EndOffset()
	var buf []byte
	for off := l.StartOffset(); off < end; {
		sl, err := l.Read(off, 1<<20, end)
		if err != nil {
			return nil, 0, fmt.Errorf("replay %s at %d: %w", p.tp, off, err)
		}
		buf, err = sl.AppendTo(buf[:0])
		sl.Release()
		if errors.Is(err, segment.ErrTruncated) {
			end = min(end, l.EndOffset())
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		progressed := false
		for rest := buf; len(rest) > 0; {
			bt, r, err := batch.Next(rest)
			if err != nil {
				break // partial batch at the end of the read
			}
			it := bt.Iter(batch.IterOptions{})
			var rec batch.Record
			for it.Next(&rec) {
				records++
				if gp, ok := decodeOffsetKey(rec.Key); ok {
					if rec.Value == nil {
						delete(offsets, gp)
					} else if cm, ok := decodeOffsetValue(rec.Value); ok {
						offsets[gp] = cm
					}
					continue
				}
				if id, ok, err := group.DecodeKey(rec.Key); err == nil && ok {
					// Copied: the record's bytes are the read buffer's, reused.
					if rec.Value == nil {
						snaps[id] = nil
					} else {
						snaps[id] = append([]byte{}, rec.Value...)
					}
				}
			}
			if err := it.Err(); err != nil {
				return nil, 0, fmt.Errorf("replay %s at %d: %w", p.tp, bt.BaseOffset(), err)
			}
			off, progressed = bt.NextOffset(), true
			rest = r
		}
		if !progressed {
			return nil, 0, fmt.Errorf("replay %s: no whole batch at offset %d", p.tp, off)
		}
	}
	now := time.Now()
	groups := map[string]*groupEntry{}
	for id, value := range snaps {
		if value == nil {
			continue
		}
		g, err := group.Restore(id, c.cfg, value, now)
		if err != nil {
			c.b.logger.Warn("skipping an unreadable group snapshot", "partition", p.tp.String(), "group", id, "err", err)
			continue
		}
		groups[id] = newGroupEntry(g)
	}
	for gp, cm := range offsets {
		e := groups[gp.group]
		if e == nil {
			e = newGroupEntry(group.New(gp.group, c.cfg, now))
			groups[gp.group] = e
		}
		e.offsets[gp.tp] = cm
	}
	return groups, records, nil
}

func newGroupEntry(g *group.Group) *groupEntry {
	return &groupEntry{g: g, offsets: map[topicPartition]committed{}, joins: map[string][]func(*group.JoinResponse){},
		syncs: map[string][]func(*group.SyncResponse){}}
}

// entry is group's entry in sh, created (Empty) if create and it has none. Call with sh.mu held.
func (sh *shard) entry(id string, create bool) *groupEntry {
	e := sh.groups[id]
	if e == nil && create {
		e = newGroupEntry(group.New(id, sh.c.cfg, time.Now()))
		sh.groups[id] = e
	}
	return e
}

// deletedPartitions reports the partitions the metadata no longer has: their offsets go.
func (c *groupCoordinator) deletedPartitions() func(topicPartition) bool {
	md := c.b.ctrl.Metadata()
	return func(tp topicPartition) bool {
		t, ok := md.Topic(tp.topic)
		if !ok {
			return true
		}
		_, ok = t.Partition(tp.partition)
		return !ok
	}
}

// reconcileTopics forgets the offsets of the topics md no longer has (or has under another id:
// deleted and created again) since the last call, in every shard; the reconciler calls it with
// each metadata it applies.
func (c *groupCoordinator) reconcileTopics(md *cluster.Metadata) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	var gone map[string]bool
	for name, id := range c.topics {
		if t, ok := md.Topic(name); !ok || t.ID != id {
			if gone == nil {
				gone = map[string]bool{}
			}
			gone[name] = true
		}
	}
	c.topics = topicIDs(md)
	if gone == nil {
		return
	}
	for _, sh := range c.activeShards() {
		if !sh.lock() {
			continue
		}
		calls := sh.forgetLocked(func(tp topicPartition) bool { return gone[tp.topic] })
		sh.mu.Unlock()
		for _, call := range calls {
			call()
		}
	}
}

// topicIDs is every topic's id in md.
func topicIDs(md *cluster.Metadata) map[string]cluster.TopicID {
	ids := make(map[string]cluster.TopicID, md.NumTopics())
	for _, t := range md.Topics() {
		ids[t.Name] = t.ID
	}
	return ids
}

// forgetLocked deletes every group's committed offset for the partitions gone reports, from
// memory and with tombstones in sh's partition, so that a later coordinator does not bring them
// back. Call with sh.mu held.
func (sh *shard) forgetLocked(gone func(topicPartition) bool) []func() {
	now := time.Now().UnixMilli()
	var recs []*batch.Record
	for id, e := range sh.groups {
		had := len(e.offsets)
		for tp := range e.offsets {
			if gone(tp) {
				delete(e.offsets, tp)
				recs = append(recs, &batch.Record{Timestamp: now, Key: encodeOffsetKey(groupPartition{id, tp})})
			}
		}
		// A group left with no members and no offsets is gone, as Kafka's offset expiry
		// removes it (Dead): its snapshot is deleted too.
		if had > 0 && len(e.offsets) == 0 && e.g.Empty() && len(e.joins) == 0 && len(e.syncs) == 0 {
			e.g.MarkDead()
			delete(sh.groups, id)
			recs = append(recs, &batch.Record{Timestamp: now, Key: group.EncodeKey(id)})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	b := sh.c.b
	b.appendAcksAll(sh.p, sh.epoch, recs, b.cfg.OffsetsCommitTimeout, func(err error) {
		if err != nil && b.ctx.Err() == nil {
			b.logger.Warn("deleting committed offsets of deleted partitions", "partition", sh.p.tp.String(), "offsets", len(recs), "err", err)
		}
	})
	return nil
}

// tick runs the machines' timers (session and rebalance timeouts) of every active shard.
func (c *groupCoordinator) tick() {
	now := time.Now()
	for _, sh := range c.activeShards() {
		if !sh.lock() {
			continue
		}
		var calls []func()
		for _, e := range sh.groups {
			if d := e.g.NextDeadline(); !d.IsZero() && !now.Before(d) {
				calls = append(calls, sh.apply(e, e.g.Tick(now))...)
			}
		}
		sh.mu.Unlock()
		for _, call := range calls {
			call()
		}
	}
}

// activeShards is every shard (loading ones too: sh.lock tells), by partition, for the
// caller to lock in turn.
func (c *groupCoordinator) activeShards() []*shard {
	c.mu.Lock()
	defer c.mu.Unlock()
	shards := make([]*shard, 0, len(c.shards))
	for _, sh := range c.shards {
		shards = append(shards, sh)
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i].part < shards[j].part })
	return shards
}

// groupTickInterval is how often the machines' timers run: the resolution of session and
// rebalance timeouts.
const groupTickInterval = 50 * time.Millisecond
