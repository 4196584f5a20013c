package client

import (
	"context"
	"slices"
)

// RebalanceListener is told of the partitions a group rebalance takes from the consumer or
// gives it (Kafka's ConsumerRebalanceListener). Its methods run inside Poll (or Close), on the
// caller's goroutine, so they may call CommitSync, CommitOffsets or Seek; ctx is Poll's.
//
// With the eager protocols (range, roundrobin) every owned partition is revoked before the
// consumer rejoins, and the whole new assignment is then assigned. With cooperative-sticky the
// consumer keeps its partitions through the rebalance: only those the new assignment drops are
// revoked, and only the new ones are assigned (often none).
type RebalanceListener interface {
	// OnPartitionsRevoked: tps leave the consumer while it is still a member of the group, so a
	// commit of their offsets is accepted. With enable.auto.commit their consumed positions were
	// committed just before the call.
	OnPartitionsRevoked(ctx context.Context, tps []TopicPartition)
	// OnPartitionsAssigned: tps (possibly none) are now the consumer's; their positions come
	// from the group's committed offsets or auto.offset.reset unless the listener seeks.
	OnPartitionsAssigned(ctx context.Context, tps []TopicPartition)
	// OnPartitionsLost: the consumer was no longer a member when it learnt of it (session
	// expired, fenced, max.poll.interval.ms passed): tps may already belong to another member,
	// and a commit of them would fail. Nothing is committed.
	OnPartitionsLost(ctx context.Context, tps []TopicPartition)
}

// RebalanceFuncs is a RebalanceListener of functions, each optional. A nil Lost calls
// Revoked, as Kafka's default onPartitionsLost does.
type RebalanceFuncs struct {
	Revoked, Assigned, Lost func(ctx context.Context, tps []TopicPartition)
}

func (f RebalanceFuncs) OnPartitionsRevoked(ctx context.Context, tps []TopicPartition) {
	if f.Revoked != nil {
		f.Revoked(ctx, tps)
	}
}

func (f RebalanceFuncs) OnPartitionsAssigned(ctx context.Context, tps []TopicPartition) {
	if f.Assigned != nil {
		f.Assigned(ctx, tps)
	}
}

func (f RebalanceFuncs) OnPartitionsLost(ctx context.Context, tps []TopicPartition) {
	if f.Lost == nil {
		f.OnPartitionsRevoked(ctx, tps)
		return
	}
	f.Lost(ctx, tps)
}

// revokePartitions gives up tps: with auto-commit their consumed positions are committed
// first (commit on revocation), then the listener is told, then they are unassigned.
func (c *Consumer) revokePartitions(ctx context.Context, tps []TopicPartition) {
	if len(tps) == 0 {
		return
	}
	if c.cfg.autoCommit() {
		c.mu.Lock()
		all := c.consumedLocked()
		c.mu.Unlock()
		offsets := map[TopicPartition]commitOffset{}
		for _, tp := range tps {
			if o, ok := all[tp]; ok {
				offsets[tp] = o
			}
		}
		if err := c.commitWait(ctx, offsets); err != nil {
			c.cfg.Logger.Warn("sluice consumer: commit on revocation failed", "group", c.cfg.GroupID, "err", err)
		}
	}
	if l := c.cfg.RebalanceListener; l != nil {
		l.OnPartitionsRevoked(ctx, tps)
	}
	c.unassign(tps)
}

// losePartitions drops tps without a commit and tells the listener they were lost.
func (c *Consumer) losePartitions(ctx context.Context, tps []TopicPartition) {
	if len(tps) == 0 {
		return
	}
	if l := c.cfg.RebalanceListener; l != nil {
		l.OnPartitionsLost(ctx, tps)
	}
	c.unassign(tps)
}

// assignPartitions makes all the assignment and tells the listener of added.
func (c *Consumer) assignPartitions(ctx context.Context, all, added []TopicPartition) {
	c.mu.Lock()
	c.replaceAssignmentLocked(all)
	c.mu.Unlock()
	if l := c.cfg.RebalanceListener; l != nil {
		l.OnPartitionsAssigned(ctx, added)
	}
}

func (c *Consumer) unassign(tps []TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keep []TopicPartition
	for tp := range c.mu.parts {
		if !slices.Contains(tps, tp) {
			keep = append(keep, tp)
		}
	}
	c.replaceAssignmentLocked(keep)
}

// diffTPs returns the partitions of a not in b, sorted.
func diffTPs(a, b []TopicPartition) []TopicPartition {
	out := []TopicPartition{}
	for _, tp := range a {
		if !slices.Contains(b, tp) {
			out = append(out, tp)
		}
	}
	sortTPs(out)
	return out
}
