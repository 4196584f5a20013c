package client

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluicemq/sluice/internal/coordinator"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/net/wire"
)

// offsetsTopic is the broker's internal topic of committed offsets; its partition for a group
// is led by the group's coordinator.
const offsetsTopic = "__consumer_offsets"

// ---- Positions: committed offsets, resets, leaders ----

// posWant is one partition a maintenance step works on, with the epoch it saw.
type posWant struct {
	tp    TopicPartition
	ps    *partState
	epoch uint64
	ts    int64
}

// maintain resolves what fetching needs: committed offsets (with a group), pending resets
// and seeks by ListOffsets, and partition leaders. Transient failures are logged and reported
// as retry (try again after RetryBackoff); the error is the context's or ErrConsumerClosed.
func (c *Consumer) maintain(ctx context.Context) (retry bool, err error) {
	c.maintMu.Lock()
	defer c.maintMu.Unlock()
	defer func() {
		switch {
		case err != nil:
		case retry:
			c.maintFailures.Add(1)
		default:
			c.maintFailures.Store(0)
		}
	}()
	snapshot := func(pick func(*partState) bool) ([]posWant, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.mu.closed {
			return nil, ErrConsumerClosed
		}
		var out []posWant
		for _, ps := range c.mu.parts {
			if ps.err == nil && pick(ps) {
				out = append(out, posWant{ps.tp, ps, ps.epoch, ps.resetTs})
			}
		}
		return out, nil
	}
	fail := func(step string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.ctx.Err() != nil || errors.Is(err, ErrClientClosed) {
			return ErrConsumerClosed
		}
		// The first failure of a run is a warning; its repeats, while the broker stays away,
		// are debug: a consumer used to log 30 warnings a second.
		level := slog.LevelWarn
		if c.maintFailures.Load() > 0 {
			level = slog.LevelDebug
		}
		c.cfg.Logger.Log(ctx, level, "sluice consumer: "+step, "err", err, "failures_in_a_row", c.maintFailures.Load()+1)
		retry = true
		return nil
	}

	wants, err := snapshot(func(ps *partState) bool { return ps.needCommitted })
	if err != nil {
		return false, err
	}
	if len(wants) > 0 {
		if err := c.lookupCommitted(ctx, wants); err != nil {
			if err := fail("offset fetch", err); err != nil {
				return false, err
			}
		}
	}
	for range 2 { // a second round when a timestamp had no offset and became "latest"
		wants, err = snapshot(func(ps *partState) bool { return ps.needReset })
		if err != nil {
			return false, err
		}
		if len(wants) == 0 {
			break
		}
		again, err := c.lookupResets(ctx, wants)
		if err != nil {
			if err := fail("list offsets", err); err != nil {
				return false, err
			}
		}
		if !again {
			break
		}
	}
	wants, err = snapshot(func(ps *partState) bool { return ps.leader < 0 })
	if err != nil {
		return false, err
	}
	for _, w := range wants {
		id, epoch, err := c.cl.LeaderFor(ctx, w.tp.Topic, w.tp.Partition)
		if err != nil {
			if err := fail("leader lookup", fmt.Errorf("%s: %w", w.tp, err)); err != nil {
				return false, err
			}
			c.cl.InvalidateMetadata()
			continue
		}
		c.mu.Lock()
		if c.mu.parts[w.tp] == w.ps && w.ps.leader < 0 {
			w.ps.leader, w.ps.currentLeaderEpoch = id, epoch
			c.ensureFetcherLocked(id)
			c.wakeFetcherLocked(w.ps)
		}
		c.mu.Unlock()
	}
	return retry, nil
}

// current returns w's partition if it is still assigned and unmoved. Call with mu held.
func (c *Consumer) currentLocked(w posWant) *partState {
	if ps := c.mu.parts[w.tp]; ps == w.ps && ps.epoch == w.epoch {
		return ps
	}
	return nil
}

// lookupCommitted sets the positions of wants from the group's committed offsets, or from
// AutoOffsetReset where nothing is committed.
func (c *Consumer) lookupCommitted(ctx context.Context, wants []posWant) error {
	req := &wire.OffsetFetchRequest{GroupID: c.cfg.GroupID, Topics: []wire.OffsetFetchRequestTopic{}}
	byTopic := map[string]int{}
	for _, w := range wants {
		i, ok := byTopic[w.tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[w.tp.Topic] = i
			req.Topics = append(req.Topics, wire.OffsetFetchRequestTopic{Topic: w.tp.Topic})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, w.tp.Partition)
	}
	var resp wire.OffsetFetchResponse
	if err := c.coordinatorCall(ctx, req, &resp); err != nil {
		return err
	}
	if resp.ErrorCode != wire.NoError {
		return fmt.Errorf("offset fetch for group %s: %w", c.cfg.GroupID, resp.ErrorCode)
	}
	var errs []error
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			i := slices.IndexFunc(wants, func(w posWant) bool { return w.tp == tp })
			if i < 0 {
				continue
			}
			ps := c.currentLocked(wants[i])
			switch {
			case ps == nil:
			case p.ErrorCode == wire.NoError && p.Offset >= 0:
				c.setPositionLocked(ps, p.Offset)
				ps.committed, ps.leaderEpoch = p.Offset, p.LeaderEpoch
			case p.ErrorCode == wire.NoError:
				c.setResetLocked(ps, c.cfg.AutoOffsetReset)
			case p.ErrorCode.Retriable():
				errs = append(errs, fmt.Errorf("%s: %w", tp, p.ErrorCode))
			default:
				ps.err = fmt.Errorf("client: offset fetch %s for group %s: %w", tp, c.cfg.GroupID, p.ErrorCode)
			}
		}
	}
	return errors.Join(errs...)
}

// lookupResets answers pending resets and seeks with ListOffsets, one request per leader.
// again reports a timestamp with no offset at or after it, now reset to the end.
func (c *Consumer) lookupResets(ctx context.Context, wants []posWant) (again bool, err error) {
	type leaderReq struct {
		conn  *Conn
		req   wire.ListOffsetsRequest
		wants []posWant
	}
	var reqs []*leaderReq
	var errs []error
	for _, w := range wants {
		_, conn, err := c.cl.Leader(ctx, w.tp.Topic, w.tp.Partition)
		if err != nil {
			c.cl.InvalidateMetadata()
			errs = append(errs, fmt.Errorf("%s: %w", w.tp, err))
			continue
		}
		i := slices.IndexFunc(reqs, func(r *leaderReq) bool { return r.conn == conn })
		if i < 0 {
			i = len(reqs)
			reqs = append(reqs, &leaderReq{conn: conn, req: wire.ListOffsetsRequest{ReplicaID: wire.ConsumerReplicaID}})
		}
		r := reqs[i]
		r.wants = append(r.wants, w)
		if n := len(r.req.Topics); n == 0 || r.req.Topics[n-1].Topic != w.tp.Topic {
			r.req.Topics = append(r.req.Topics, wire.ListOffsetsRequestTopic{Topic: w.tp.Topic})
		}
		t := &r.req.Topics[len(r.req.Topics)-1]
		t.Partitions = append(t.Partitions, wire.ListOffsetsRequestPartition{Partition: w.tp.Partition, CurrentLeaderEpoch: -1, Timestamp: w.ts})
	}
	for _, r := range reqs {
		var resp wire.ListOffsetsResponse
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		err := r.conn.Call(rctx, &r.req, &resp)
		cancel()
		if err != nil {
			c.cl.InvalidateMetadata()
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				tp := TopicPartition{t.Topic, p.Partition}
				i := slices.IndexFunc(r.wants, func(w posWant) bool { return w.tp == tp })
				if i < 0 {
					continue
				}
				w := r.wants[i]
				ps := c.currentLocked(w)
				switch {
				case ps == nil || !ps.needReset || ps.resetTs != w.ts:
				case p.ErrorCode == wire.NoError && p.Offset >= 0:
					c.setPositionLocked(ps, p.Offset)
				case p.ErrorCode == wire.NoError && w.ts >= 0:
					ps.resetTs = wire.LatestTimestamp // nothing at or after ts: the end
					again = true
				case p.ErrorCode.Retriable() || p.ErrorCode == wire.NoError:
					c.cl.InvalidateMetadata()
					errs = append(errs, fmt.Errorf("%s: %w", tp, p.ErrorCode))
				default:
					ps.err = fmt.Errorf("client: list offsets %s: %w", tp, p.ErrorCode)
				}
			}
		}
		c.mu.Unlock()
	}
	return again, errors.Join(errs...)
}

// ---- Commits ----

// commitOffset is what is committed for one partition: the next offset to consume.
type commitOffset struct {
	offset      int64
	leaderEpoch int32
}

// consumedLocked returns the positions that differ from what was last committed.
func (c *Consumer) consumedLocked() map[TopicPartition]commitOffset {
	out := map[TopicPartition]commitOffset{}
	for tp, ps := range c.mu.parts {
		if ps.hasPos && ps.position != ps.committed {
			out[tp] = commitOffset{ps.position, ps.leaderEpoch}
		}
	}
	return out
}

// CommitSync commits the positions of the records Poll has returned (and of seeks) for every
// assigned partition whose position changed since the last commit, and waits for the
// coordinator's answer. Retriable errors are retried until ctx is done (DefaultAPITimeout for
// a ctx without a deadline). After Close it returns ErrConsumerClosed, even with nothing to
// commit.
//
// When ctx ends first, the error matches ctx's: a commit still queued behind another one
// (commits go one at a time, in order) is then dropped, never sent; but one whose request
// was already on its way may have reached the coordinator, which may apply it although its
// answer is not waited for (as with Kafka's commitSync and its TimeoutException).
func (c *Consumer) CommitSync(ctx context.Context) error {
	if c.cfg.GroupID == "" {
		return ErrNoGroup
	}
	c.mu.Lock()
	offsets := c.consumedLocked()
	c.mu.Unlock()
	return c.commitWait(ctx, offsets)
}

// CommitOffsets commits the given offsets (each the NEXT offset to consume, as in Kafka) and
// waits for the answer, as CommitSync does (bounded by ctx, or DefaultAPITimeout for a ctx
// without a deadline; when that ends first, see CommitSync). The partitions need not be
// assigned. After Close it returns ErrConsumerClosed.
func (c *Consumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	if c.cfg.GroupID == "" {
		return ErrNoGroup
	}
	m := make(map[TopicPartition]commitOffset, len(offsets))
	for tp, o := range offsets {
		if o < 0 {
			return fmt.Errorf("client: commit %s: negative offset %d", tp, o)
		}
		m[tp] = commitOffset{o, -1}
	}
	return c.commitWait(ctx, m)
}

func (c *Consumer) commitWait(ctx context.Context, offsets map[TopicPartition]commitOffset) error {
	if c.isClosed() {
		// Checked before the empty case: a commit after Close must not look like a success
		// (Close's own final commit runs before closed is set).
		return ErrConsumerClosed
	}
	if len(offsets) == 0 {
		return nil
	}
	ctx, cancel := c.apiContext(ctx)
	defer cancel()
	done := make(chan error, 1)
	if !c.commits.enqueue(commitJob{ctx: ctx, offsets: offsets, done: func(err error) { done <- err }}) {
		return ErrConsumerClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The commit ends with ctx too, with the error it was retrying after: give it a
		// moment to say it (it may also still be queued behind another commit).
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		select {
		case err := <-done:
			return err
		case <-t.C:
			return ctx.Err()
		}
	}
}

// CommitAsync commits as CommitSync does without waiting. cb (may be nil) gets the offsets
// and the result; callbacks run on the committer goroutine, in the order of the CommitAsync
// calls, and every commit is sent in that order, so a later commit is never overtaken by an
// earlier one. A retriable failure is retried for up to RequestTimeout.
func (c *Consumer) CommitAsync(cb func(offsets map[TopicPartition]int64, err error)) {
	if c.cfg.GroupID == "" {
		if cb != nil {
			cb(nil, ErrNoGroup)
		}
		return
	}
	c.mu.Lock()
	offsets := c.consumedLocked()
	c.mu.Unlock()
	job := commitJob{offsets: offsets, done: func(err error) {
		if cb != nil {
			plain := make(map[TopicPartition]int64, len(offsets))
			for tp, o := range offsets {
				plain[tp] = o.offset
			}
			cb(plain, err)
		}
	}}
	if !c.commits.enqueue(job) {
		job.done(ErrConsumerClosed)
	}
}

// autoCommitLoop commits what Poll has returned every AutoCommitInterval.
func (c *Consumer) autoCommitLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.AutoCommitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			// One auto-commit at a time: with a slow coordinator (each commit is fsynced) the
			// ticks would otherwise queue commits of the same positions.
			if !c.autoPending.CompareAndSwap(false, true) {
				continue
			}
			c.CommitAsync(func(_ map[TopicPartition]int64, err error) {
				c.autoPending.Store(false)
				if err != nil && !errors.Is(err, ErrConsumerClosed) {
					c.cfg.Logger.Warn("sluice consumer: auto-commit failed", "group", c.cfg.GroupID, "err", err)
				}
			})
		case <-c.ctx.Done():
			return
		}
	}
}

// commitJob is one commit for the committer. ctx nil: bounded by RequestTimeout.
type commitJob struct {
	ctx     context.Context
	offsets map[TopicPartition]commitOffset
	done    func(error)
}

// committer sends commits one at a time, in order, on its own goroutine.
//
// Ownership: mu guards queue and stopped.
type committer struct {
	c      *Consumer
	wake   chan struct{}
	exited chan struct{}

	mu      sync.Mutex
	queue   []commitJob
	stopped bool
}

func (q *committer) start(c *Consumer) {
	q.c, q.wake, q.exited = c, make(chan struct{}, 1), make(chan struct{})
	go q.run()
}

// enqueue adds a job; false if the committer has stopped.
func (q *committer) enqueue(j commitJob) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return false
	}
	q.queue = append(q.queue, j)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// drain waits until every job queued so far has run, or ctx is done.
func (q *committer) drain(ctx context.Context) {
	done := make(chan struct{})
	if !q.enqueue(commitJob{done: func(error) { close(done) }}) {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// stop makes the committer fail what is left with ErrConsumerClosed and exit, and waits.
func (q *committer) stop() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.exited
}

func (q *committer) run() {
	defer close(q.exited)
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			stopped := q.stopped
			q.mu.Unlock()
			if stopped {
				return
			}
			<-q.wake
			continue
		}
		j := q.queue[0]
		q.queue[0] = commitJob{}
		q.queue = q.queue[1:]
		stopped := q.stopped
		q.mu.Unlock()
		if stopped || q.c.ctx.Err() != nil {
			j.done(ErrConsumerClosed)
			continue
		}
		if len(j.offsets) == 0 {
			j.done(nil)
			continue
		}
		ctx, cancel := j.ctx, context.CancelFunc(func() {})
		if ctx == nil {
			ctx, cancel = context.WithTimeout(q.c.ctx, q.c.cfg.RequestTimeout)
		}
		err := q.c.commit(ctx, j.offsets)
		cancel()
		j.done(err)
	}
}

// commit sends one OffsetCommit, retrying partitions that fail retriably until ctx is done,
// and records what was committed.
func (c *Consumer) commit(ctx context.Context, offsets map[TopicPartition]commitOffset) error {
	pending := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		pending = append(pending, tp)
	}
	sortTPs(pending)
	var errs []error
	var last error // the latest retriable failure, reported if ctx ends before a success
	// unsure are the partitions an attempt may have committed without the answer saying so (a
	// connection lost, a retriable error): a later refusal of theirs is ambiguous.
	unsure := map[TopicPartition]bool{}
	gaveUp := func(err error) error {
		err = fmt.Errorf("client: commit for group %s: %w", c.cfg.GroupID, err)
		if last != nil {
			err = fmt.Errorf("%w (retrying after: %w)", err, last)
		}
		return errors.Join(append(errs, err)...)
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			// Never send a commit whose caller has been told it failed: one queued behind a
			// slow commit until its ctx ended (CommitSync returned ctx's error) would reach the
			// coordinator afterwards, as Conn.Call sends before it looks at ctx.
			return gaveUp(err)
		}
		req := &wire.OffsetCommitRequest{GroupID: c.cfg.GroupID, GenerationID: -1}
		if g := c.groupOf(); g != nil {
			// A member's commit is fenced by its generation (OffsetCommit v1 adds the
			// instance id): one kicked out of the group cannot overwrite its successor's.
			req.Version = 1
			req.GenerationID, req.MemberID, req.GroupInstanceID = g.identity()
		}
		for _, tp := range pending {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				req.Topics = append(req.Topics, wire.OffsetCommitRequestTopic{Topic: tp.Topic})
			}
			t := &req.Topics[len(req.Topics)-1]
			o := offsets[tp]
			t.Partitions = append(t.Partitions, wire.OffsetCommitRequestPartition{Partition: tp.Partition, Offset: o.offset, LeaderEpoch: o.leaderEpoch})
		}
		var resp wire.OffsetCommitResponse
		err := c.coordinatorCallAttempts(ctx, c.cfg.RequestTimeout, 1, req, &resp)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrClientClosed) {
				return gaveUp(err)
			}
			last = err
			for _, tp := range pending {
				unsure[tp] = true
			}
			c.cl.InvalidateMetadata()
		} else {
			var retry []TopicPartition
			fenced := wire.NoError
			c.mu.Lock()
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					tp := TopicPartition{t.Topic, p.Partition}
					switch {
					case p.ErrorCode == wire.NoError:
						if ps := c.mu.parts[tp]; ps != nil {
							ps.committed = offsets[tp].offset
						}
					case p.ErrorCode.Retriable():
						retry = append(retry, tp)
						unsure[tp] = true
						last = fmt.Errorf("%s: %w", tp, p.ErrorCode)
					case fencedCommit(p.ErrorCode) && unsure[tp]:
						fenced = p.ErrorCode
						errs = append(errs, fmt.Errorf("client: commit %s for group %s: %w: %w (%w)", tp, c.cfg.GroupID, ErrCommitFailed, p.ErrorCode, ErrCommitOutcomeUnknown))
					case fencedCommit(p.ErrorCode):
						fenced = p.ErrorCode
						errs = append(errs, fmt.Errorf("client: commit %s for group %s: %w: %w", tp, c.cfg.GroupID, ErrCommitFailed, p.ErrorCode))
					default:
						errs = append(errs, fmt.Errorf("client: commit %s for group %s: %w", tp, c.cfg.GroupID, p.ErrorCode))
					}
				}
			}
			c.mu.Unlock()
			if fenced != wire.NoError {
				c.commitFenced(fenced) // the next Poll rejoins
			}
			if len(retry) == 0 {
				return errors.Join(errs...)
			}
			pending = retry
			c.cl.InvalidateMetadata()
		}
		if attempt == 0 {
			// Retried until ctx ends (Close bounds its final commit): say so once.
			c.cfg.Logger.Warn("sluice consumer: commit failed, retrying", "group", c.cfg.GroupID, "err", last)
		}
		if err := c.backoffFor(ctx, attempt+1); err != nil {
			return gaveUp(err)
		}
	}
}

// coordinatorCall sends a group request to the group's coordinator: the leader of the group's
// partition of __consumer_offsets, coordinator.Partition (Kafka's abs(hashCode(group.id)) % the
// partition count: the broker has no FindCoordinator yet). If the topic or its leader is not
// known, any broker is asked. A NOT_COORDINATOR answer (leadership of the partition moved)
// refreshes the metadata and asks the new leader, a few times within the caller's context.
func (c *Consumer) coordinatorCall(ctx context.Context, req wire.Request, resp wire.Response) error {
	return c.coordinatorCallWithin(ctx, c.cfg.RequestTimeout, req, resp)
}

// coordinatorCallWithin is coordinatorCall with each attempt bounded by d rather than
// RequestTimeout: a JoinGroup waits up to the rebalance timeout for its answer.
func (c *Consumer) coordinatorCallWithin(ctx context.Context, d time.Duration, req wire.Request, resp wire.Response) error {
	return c.coordinatorCallAttempts(ctx, d, 3, req, resp)
}

// coordinatorCallAttempts is coordinatorCallWithin with attempts tries. An OffsetCommit gets
// one: a try that failed (a timeout, a lost connection, NOT_COORDINATOR from a coordinator
// whose leadership moved after it appended) may have committed the offset, and only the
// commit loop, which retries, can say so when the next try is refused (found by sluice
// chaos: a commit retried in here after an append reported REBALANCE_IN_PROGRESS, plainly
// failed, and the group resumed at its offset).
func (c *Consumer) coordinatorCallAttempts(ctx context.Context, d time.Duration, attempts int, req wire.Request, resp wire.Response) error {
	var err error
	for attempt := range attempts {
		var conn *Conn
		if conn, err = c.coordinator(ctx); err != nil {
			return err
		}
		if err = conn.callWithin(ctx, d, req, resp); err == nil && !notCoordinator(resp) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("group %s: %w", c.cfg.GroupID, codeErr(wire.ErrNotCoordinator, nil))
		}
		if ctx.Err() != nil || attempt == attempts-1 {
			break
		}
		c.cl.InvalidateMetadata()
		if rerr := c.cl.RefreshMetadata(ctx); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return err
}

// notCoordinator reports whether a group response says the broker is not the group's
// coordinator, for the whole request or any partition.
func notCoordinator(resp wire.Response) bool {
	switch r := resp.(type) {
	case *wire.OffsetFetchResponse:
		if r.ErrorCode == wire.ErrNotCoordinator {
			return true
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == wire.ErrNotCoordinator {
					return true
				}
			}
		}
	case *wire.JoinGroupResponse:
		return r.ErrorCode == wire.ErrNotCoordinator
	case *wire.SyncGroupResponse:
		return r.ErrorCode == wire.ErrNotCoordinator
	case *wire.HeartbeatResponse:
		return r.ErrorCode == wire.ErrNotCoordinator
	case *wire.LeaveGroupResponse:
		return r.ErrorCode == wire.ErrNotCoordinator
	case *wire.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == wire.ErrNotCoordinator {
					return true
				}
			}
		}
	}
	return false
}

func (c *Consumer) coordinator(ctx context.Context) (*Conn, error) {
	if t, err := c.cl.Topic(ctx, offsetsTopic); err == nil && len(t.Partitions) > 0 {
		p := coordinator.Partition(c.cfg.GroupID, int32(len(t.Partitions)))
		if _, conn, err := c.cl.Leader(ctx, offsetsTopic, p); err == nil {
			return conn, nil
		}
	}
	return c.cl.anyConn(ctx)
}

// ---- Lookups for the application ----

// ListOffsets looks up one offset per partition at its leader, as Admin.ListOffsets does
// (Kafka's consumer has beginningOffsets, endOffsets and offsetsForTimes for it): the log
// start, the high watermark, or the offset at a time, as specs says. The partitions need not
// be assigned, and the consumer's positions do not move: with Committed, the high watermarks
// give a group's lag. The partitions that could not be looked up are left out of the result,
// and the error joins one error per partition, naming it. A ctx without a deadline is bounded
// by DefaultAPITimeout.
func (c *Consumer) ListOffsets(ctx context.Context, specs map[TopicPartition]OffsetSpec) (map[TopicPartition]ListedOffset, error) {
	if c.isClosed() {
		return nil, ErrConsumerClosed
	}
	ctx, cancel := c.apiContext(ctx)
	defer cancel()
	out := make(map[TopicPartition]ListedOffset, len(specs))
	var errs []error
	byLeader := map[*Conn]map[TopicPartition]OffsetSpec{}
	for tp, spec := range specs {
		_, conn, err := c.cl.Leader(ctx, tp.Topic, tp.Partition)
		if err != nil {
			errs = append(errs, fmt.Errorf("client: list offsets of %s (%s): %w", tp, spec, err))
			continue
		}
		if byLeader[conn] == nil {
			byLeader[conn] = map[TopicPartition]OffsetSpec{}
		}
		byLeader[conn][tp] = spec
	}
	for conn, leaderSpecs := range byLeader {
		call := func(ctx context.Context, req wire.Request, resp wire.Response) error {
			ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
			defer cancel()
			return conn.Call(ctx, req, resp)
		}
		if err := listOffsets(ctx, call, leaderSpecs, out); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		c.cl.InvalidateMetadata() // a leader may have moved: the next call looks again
	}
	return out, errors.Join(errs...)
}

// Committed returns the group's committed offsets for tps (Kafka's committed): each the next
// offset the group's consumers read. A partition the group has committed nothing in is left
// out. It needs a GroupID (ErrNoGroup). A ctx without a deadline is bounded by
// DefaultAPITimeout.
func (c *Consumer) Committed(ctx context.Context, tps []TopicPartition) (map[TopicPartition]int64, error) {
	if c.cfg.GroupID == "" {
		return nil, ErrNoGroup
	}
	if c.isClosed() {
		return nil, ErrConsumerClosed
	}
	ctx, cancel := c.apiContext(ctx)
	defer cancel()
	if len(tps) == 0 {
		return map[TopicPartition]int64{}, nil
	}
	sorted := slices.Clone(tps)
	sortTopicPartitions(sorted)
	req := &wire.OffsetFetchRequest{GroupID: c.cfg.GroupID, Topics: []wire.OffsetFetchRequestTopic{}}
	for _, tp := range slices.Compact(sorted) {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
			req.Topics = append(req.Topics, wire.OffsetFetchRequestTopic{Topic: tp.Topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	op := fmt.Sprintf("committed offsets of group %.300q", c.cfg.GroupID)
	var resp wire.OffsetFetchResponse
	if err := c.coordinatorCall(ctx, req, &resp); err != nil {
		return nil, fmt.Errorf("client: %s: %w", op, err)
	}
	return committedOffsets(op, &resp)
}
