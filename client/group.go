package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/client/internal/assign"
	"github.com/sluicemq/sluice/net/wire"
)

// groupMember is a subscribed consumer's membership of its group, Kafka's classic protocol:
// JoinGroup (retried with the member id a MEMBER_ID_REQUIRED answer gives), SyncGroup (the
// leader runs the assignor over the members' subscriptions and the topics' metadata), then
// heartbeats every HeartbeatInterval until the coordinator says REBALANCE_IN_PROGRESS (rejoin)
// or that the member is no longer in the generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID, or no successful heartbeat within SessionTimeout): its partitions are
// lost and it rejoins.
//
// Goroutines: Poll decides that a rebalance is needed (poll) and, with an eager protocol, gives
// every partition up first; the join and sync then run on a goroutine of their own (rebalance),
// so that Poll goes on returning the records of the partitions a cooperative member keeps while
// the group waits for its other members. The sync's outcome waits in result until the next
// Poll applies it (revocations, assignments, and their listeners run on the caller's
// goroutine). heartbeatLoop only sets flags (rejoin, lost) and wakes Poll. The coordinator is
// found as every group request finds it (coordinatorCall: the leader of the group's
// __consumer_offsets partition, NOT_COORDINATOR refreshes).
//
// Ownership: mu guards the fields below it; it is never held across I/O or a listener, and is
// taken after Consumer.mu is released (never inside it).
type groupMember struct {
	c          *Consumer
	instanceID *string // GroupInstanceID, nil for a dynamic member

	mu         sync.Mutex
	topics     []string
	memberID   string
	generation int32  // -1: not in a generation
	protocol   string // the chosen assignor's name
	stable     bool   // synced into generation: heartbeats run
	rejoin     bool   // a rebalance is needed (REBALANCE_IN_PROGRESS, a cooperative revocation, new topics)
	lost       bool   // the member is out of its generation: its partitions are lost
	fatal      error  // FENCED_INSTANCE_ID and other errors no rejoin mends; Poll returns it
	lastPoll   time.Time
	lastBeat   time.Time // last heartbeat (or sync) the coordinator accepted
	// joining is the cancel of the join and sync in flight (nil: none), joined closes when
	// that goroutine has returned.
	joining context.CancelFunc
	joined  chan struct{}
	// result is the assignment of the last sync, for the next Poll to apply; nil: applied.
	result []TopicPartition
}

func newGroupMember(c *Consumer, topics []string) *groupMember {
	g := &groupMember{c: c, topics: topics, generation: -1, lastPoll: time.Now()}
	if c.cfg.GroupInstanceID != "" {
		id := c.cfg.GroupInstanceID
		g.instanceID = &id
	}
	return g
}

func (g *groupMember) setTopics(topics []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Equal(g.topics, topics) {
		g.topics, g.rejoin = topics, true
	}
}

// identity is what a member's commit carries.
func (g *groupMember) identity() (generation int32, memberID string, instanceID *string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.generation, g.memberID, g.instanceID
}

// fenced handles a commit refused with code (fencedCommit). While a join is in flight the
// refusal is about the generation being replaced, and the join already mends it.
func (g *groupMember) fenced(code wire.ErrorCode) {
	g.mu.Lock()
	switch {
	case code == wire.ErrFencedInstanceID:
		g.fatal = fmt.Errorf("client: group %s: instance id %s: %w", g.c.cfg.GroupID, g.c.cfg.GroupInstanceID, code)
	case g.joining != nil:
	case code == wire.ErrRebalanceInProgress:
		g.rejoin = true
	default:
		g.loseLocked(code == wire.ErrUnknownMemberID)
	}
	g.mu.Unlock()
	g.c.signal()
}

// loseLocked marks the member out of its generation; forget drops its member id too (the
// coordinator does not know it any more). An assignment not applied yet is of that
// generation, and dropped with it.
func (g *groupMember) loseLocked(forget bool) {
	g.lost, g.stable, g.generation, g.result = true, false, -1, nil
	if forget && g.instanceID == nil {
		g.memberID = ""
	}
}

// poll runs in Poll: it applies the outcome of a finished rebalance, its listeners included,
// and starts one if one is needed.
func (g *groupMember) poll(ctx context.Context) error {
	g.mu.Lock()
	g.lastPoll = time.Now()
	fatal, lost, result := g.fatal, g.lost, g.result
	g.lost, g.result = false, nil
	g.mu.Unlock()
	if fatal != nil {
		return fatal
	}
	if lost {
		g.c.losePartitions(ctx, g.c.Assignment())
	}
	if result != nil {
		g.apply(ctx, result)
	}
	g.mu.Lock()
	need := g.joining == nil && g.fatal == nil && (g.generation < 0 || g.rejoin || g.lost)
	g.mu.Unlock()
	if !need {
		return nil
	}
	if !g.cooperative() {
		// Eager: everything is given up before the join (Kafka's onJoinPrepare), while the
		// member is still in its generation, so the commit on revocation is accepted.
		g.c.revokePartitions(ctx, g.c.Assignment())
	}
	g.startRebalance()
	return nil
}

// apply makes assigned the consumer's assignment: the partitions it drops are revoked, the new
// ones assigned. A cooperative member that gave some up rejoins at once, so that a second
// rebalance hands them to their new owners (KIP-429).
func (g *groupMember) apply(ctx context.Context, assigned []TopicPartition) {
	c := g.c
	owned := c.Assignment()
	revoked := diffTPs(owned, assigned)
	c.revokePartitions(ctx, revoked)
	c.assignPartitions(ctx, assigned, diffTPs(assigned, owned))
	if len(revoked) > 0 && g.cooperative() {
		g.mu.Lock()
		g.rejoin = true
		g.mu.Unlock()
	}
}

// cooperative reports whether the protocol of the current generation is cooperative.
func (g *groupMember) cooperative() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, ok := assign.ByName(g.protocol)
	return ok && a.Protocol() == assign.Cooperative
}

// startRebalance starts the join and sync on a goroutine of their own (rebalance). The
// consumer's wait group counts it; its context ends with the consumer's, or with close.
func (g *groupMember) startRebalance() {
	c := g.c
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	g.mu.Lock()
	g.joining, g.joined = cancel, done
	g.stable, g.rejoin = false, false
	g.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(done)
		defer cancel()
		err := g.rebalance(ctx)
		g.mu.Lock()
		g.joining = nil
		if err != nil && ctx.Err() == nil && g.fatal == nil {
			g.fatal = err
		}
		g.mu.Unlock()
		c.signal()
	}()
}

// rebalance joins and syncs until the member is in a generation, and leaves the assignment
// for the next Poll. It returns an error only for what no rejoin mends, or when ctx ends.
func (g *groupMember) rebalance(ctx context.Context) error {
	c := g.c
	for failures := 0; ; {
		join, err := g.join(ctx)
		if err != nil {
			return err
		}
		var assignments []wire.SyncGroupAssignment
		if join.Leader == join.MemberID && !join.SkipAssignment {
			if assignments, err = g.assign(ctx, join); err != nil {
				return err
			}
		}
		sync := &wire.SyncGroupRequest{GroupID: c.cfg.GroupID, GenerationID: join.GenerationID, MemberID: join.MemberID,
			GroupInstanceID: g.instanceID, ProtocolType: join.ProtocolType, ProtocolName: join.ProtocolName, Assignments: assignments}
		var resp wire.SyncGroupResponse
		err = c.coordinatorCallWithin(ctx, c.cfg.MaxPollInterval+c.cfg.RequestTimeout, sync, &resp)
		if err == nil {
			err = codeErr(resp.ErrorCode, nil)
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case resp.ErrorCode == wire.ErrUnknownMemberID || resp.ErrorCode == wire.ErrIllegalGeneration || resp.ErrorCode == wire.ErrRebalanceInProgress:
			if resp.ErrorCode == wire.ErrUnknownMemberID && g.instanceID == nil {
				g.mu.Lock()
				g.memberID = ""
				g.mu.Unlock()
			}
			continue // rejoin at once
		case resp.ErrorCode == wire.ErrFencedInstanceID:
			return g.fail(err)
		default:
			failures++
			c.cfg.Logger.Warn("sluice consumer: sync group failed, rejoining", "group", c.cfg.GroupID, "err", err)
			if err := c.backoffFor(ctx, failures); err != nil {
				return ctx.Err()
			}
			continue
		}
		var a wire.ConsumerAssignment
		if len(resp.Assignment) > 0 {
			if err := a.ReadFrom(resp.Assignment); err != nil {
				return g.fail(fmt.Errorf("client: group %s: undecodable assignment: %w", c.cfg.GroupID, err))
			}
		}
		protocol := ""
		if join.ProtocolName != nil {
			protocol = *join.ProtocolName
		}
		// In the generation from here on: heartbeats start now, whenever the next Poll comes.
		g.mu.Lock()
		g.generation, g.protocol, g.stable, g.lastBeat = join.GenerationID, protocol, true, time.Now()
		g.result = fromTopicPartitions(a.Partitions)
		g.mu.Unlock()
		return nil
	}
}

func (g *groupMember) fail(err error) error {
	g.mu.Lock()
	g.fatal = err
	g.mu.Unlock()
	return err
}

// join sends JoinGroup until the coordinator answers with a generation.
func (g *groupMember) join(ctx context.Context) (*wire.JoinGroupResponse, error) {
	c := g.c
	for failures := 0; ; {
		g.mu.Lock()
		topics, memberID := g.topics, g.memberID
		g.mu.Unlock()
		owned, generation := c.Assignment(), int32(-1)
		if len(owned) > 0 {
			generation, _, _ = g.identity()
		}
		req := &wire.JoinGroupRequest{GroupID: c.cfg.GroupID, SessionTimeoutMs: int32(c.cfg.SessionTimeout.Milliseconds()),
			RebalanceTimeoutMs: int32(min(c.cfg.MaxPollInterval.Milliseconds(), 1<<31-1)), MemberID: memberID,
			GroupInstanceID: g.instanceID, ProtocolType: wire.ConsumerProtocolType}
		meta := subscriptionMetadata(topics, owned, generation)
		for _, a := range c.cfg.assignors {
			req.Protocols = append(req.Protocols, wire.JoinGroupProtocol{Name: a.Name(), Metadata: meta})
		}
		var resp wire.JoinGroupResponse
		err := c.coordinatorCallWithin(ctx, c.cfg.MaxPollInterval+c.cfg.RequestTimeout, req, &resp)
		if err == nil {
			err = codeErr(resp.ErrorCode, nil)
		}
		switch {
		case err == nil:
			g.mu.Lock()
			g.memberID = resp.MemberID
			g.mu.Unlock()
			return &resp, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case resp.ErrorCode == wire.ErrMemberIDRequired:
			g.mu.Lock()
			g.memberID = resp.MemberID // KIP-394: rejoin at once with it
			g.mu.Unlock()
			continue
		case resp.ErrorCode == wire.ErrUnknownMemberID:
			g.mu.Lock()
			g.memberID = ""
			g.mu.Unlock()
			continue
		case resp.ErrorCode == wire.ErrFencedInstanceID, resp.ErrorCode == wire.ErrInconsistentGroupProtocol,
			resp.ErrorCode == wire.ErrInvalidSessionTimeout, resp.ErrorCode == wire.ErrGroupMaxSizeReached,
			resp.ErrorCode == wire.ErrInvalidGroupID:
			return nil, g.fail(fmt.Errorf("client: join group %s: %w", c.cfg.GroupID, err))
		}
		// Coordinator moving or loading, a connection lost: try again.
		failures++
		if failures == 1 {
			c.cfg.Logger.Warn("sluice consumer: join group failed, retrying", "group", c.cfg.GroupID, "err", err)
		}
		if err := c.backoffFor(ctx, failures); err != nil {
			return nil, ctx.Err()
		}
	}
}

// assign is the leader's part: the chosen assignor over the members' subscriptions and the
// partition counts of their topics.
func (g *groupMember) assign(ctx context.Context, join *wire.JoinGroupResponse) ([]wire.SyncGroupAssignment, error) {
	c := g.c
	name := ""
	if join.ProtocolName != nil {
		name = *join.ProtocolName
	}
	a, ok := assign.ByName(name)
	if !ok {
		return nil, g.fail(fmt.Errorf("client: group %s: coordinator chose unknown assignor %q", c.cfg.GroupID, name))
	}
	members := make([]assign.Member, 0, len(join.Members))
	counts := map[string]int32{}
	for _, m := range join.Members {
		var s wire.ConsumerSubscription
		if err := s.ReadFrom(m.Metadata); err != nil {
			c.cfg.Logger.Warn("sluice consumer: undecodable subscription, member gets nothing", "group", c.cfg.GroupID, "member", m.MemberID, "err", err)
		}
		am := assign.Member{ID: m.MemberID, Topics: s.Topics, Generation: s.GenerationID}
		if m.GroupInstanceID != nil {
			am.InstanceID = *m.GroupInstanceID
		}
		if a.Protocol() == assign.Cooperative {
			for _, tp := range s.OwnedPartitions {
				am.Owned = append(am.Owned, assign.TopicPartitions{Topic: tp.Topic, Partitions: slices.Sorted(slices.Values(tp.Partitions))})
			}
		}
		members = append(members, am)
		for _, t := range s.Topics {
			counts[t] = 0
		}
	}
	c.cl.InvalidateMetadata() // topics created or grown since: the assignment must see them
	for t := range counts {
		tm, err := c.cl.Topic(ctx, t)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !errors.Is(err, ErrUnknownTopic) {
				c.cfg.Logger.Warn("sluice consumer: metadata for the assignment", "group", c.cfg.GroupID, "topic", t, "err", err)
			}
			delete(counts, t)
			continue
		}
		counts[t] = int32(len(tm.Partitions))
	}
	result := a.Assign(members, counts)
	out := make([]wire.SyncGroupAssignment, 0, len(members))
	for _, m := range members {
		ca := wire.ConsumerAssignment{Version: 0}
		for _, tp := range result[m.ID] {
			ca.Partitions = append(ca.Partitions, wire.ConsumerTopicPartitions{Topic: tp.Topic, Partitions: tp.Partitions})
		}
		out = append(out, wire.SyncGroupAssignment{MemberID: m.ID, Assignment: ca.AppendTo(nil)})
	}
	return out, nil
}

// heartbeatLoop heartbeats every HeartbeatInterval while the member is in a stable generation,
// and leaves the group when Poll has not been called within MaxPollInterval.
func (g *groupMember) heartbeatLoop() {
	c := g.c
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		stable, gen, memberID, lastPoll := g.stable, g.generation, g.memberID, g.lastPoll
		g.mu.Unlock()
		if !stable {
			continue
		}
		if time.Since(lastPoll) > c.cfg.MaxPollInterval {
			c.cfg.Logger.Warn("sluice consumer: Poll not called within max.poll.interval.ms: leaving the group", "group", c.cfg.GroupID)
			g.mu.Lock()
			g.loseLocked(true)
			g.mu.Unlock()
			if g.instanceID == nil {
				g.leave(c.ctx, memberID)
			}
			c.signal()
			continue
		}
		req := &wire.HeartbeatRequest{GroupID: c.cfg.GroupID, GenerationID: gen, MemberID: memberID, GroupInstanceID: g.instanceID}
		var resp wire.HeartbeatResponse
		err := c.coordinatorCall(c.ctx, req, &resp)
		g.mu.Lock()
		if g.generation != gen || !g.stable {
			g.mu.Unlock()
			continue // a rebalance ran meanwhile: this answer is about the old generation
		}
		switch {
		case err != nil || resp.ErrorCode.Retriable() || resp.ErrorCode == wire.ErrNotCoordinator || resp.ErrorCode == wire.ErrCoordinatorNotAvailable:
			if time.Since(g.lastBeat) > c.cfg.SessionTimeout {
				// The coordinator has removed us by now, or will when it is back.
				g.loseLocked(true)
			}
		case resp.ErrorCode == wire.NoError:
			g.lastBeat = time.Now()
		case resp.ErrorCode == wire.ErrRebalanceInProgress:
			// Heartbeats go on until Poll sends the JoinGroup (as Kafka's): a member busy
			// with its records keeps its place for up to max.poll.interval.ms, the
			// rebalance timeout, rather than the session timeout.
			g.lastBeat, g.rejoin = time.Now(), true
		case resp.ErrorCode == wire.ErrFencedInstanceID:
			g.loseLocked(false)
			g.fatal = fmt.Errorf("client: group %s: instance id %s: %w", c.cfg.GroupID, c.cfg.GroupInstanceID, resp.ErrorCode)
		default: // ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
			g.loseLocked(resp.ErrorCode == wire.ErrUnknownMemberID)
		}
		g.mu.Unlock()
		c.signal()
	}
}

// leave sends LeaveGroup for memberID (dynamic members only, as Kafka: a static member's
// partitions wait SessionTimeout for it to come back).
func (g *groupMember) leave(ctx context.Context, memberID string) {
	if memberID == "" || g.instanceID != nil {
		return
	}
	c := g.c
	reason := "the consumer is closing"
	req := &wire.LeaveGroupRequest{GroupID: c.cfg.GroupID, Members: []wire.LeaveGroupMember{{MemberID: memberID, Reason: &reason}}}
	var resp wire.LeaveGroupResponse
	if err := c.coordinatorCall(ctx, req, &resp); err != nil || resp.ErrorCode != wire.NoError {
		c.cfg.Logger.Debug("sluice consumer: leave group", "group", c.cfg.GroupID, "err", errors.Join(err, codeErr(resp.ErrorCode, nil)))
	}
}

// close runs in Close, after the final commit: the listener gives the partitions up and a
// dynamic member leaves the group, so that its partitions move at once.
func (g *groupMember) close(ctx context.Context) {
	g.mu.Lock()
	cancel, joined := g.joining, g.joined
	g.mu.Unlock()
	if cancel != nil {
		// A join in flight is abandoned: the LeaveGroup below takes the member out of it.
		cancel()
		<-joined
	}
	g.mu.Lock()
	inGen, memberID := g.generation >= 0 && !g.lost, g.memberID
	g.stable, g.generation, g.result = false, -1, nil
	g.mu.Unlock()
	if l := g.c.cfg.RebalanceListener; l != nil {
		if tps := g.c.Assignment(); len(tps) > 0 {
			if inGen {
				l.OnPartitionsRevoked(ctx, tps)
			} else {
				l.OnPartitionsLost(ctx, tps)
			}
		}
	}
	g.leave(ctx, memberID)
}
