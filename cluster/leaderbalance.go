package cluster

import (
	"slices"
)

// Auto leader balance (Kafka's auto.leader.rebalance.enable): placement makes
// each partition's first replica its preferred leader and spreads those over
// the brokers, but failovers move leaderships to followers and nothing moves
// them back. Every LeaderImbalanceCheckInterval (on Config.Clock) the active
// controller computes, per broker,
//
//	imbalance = partitions preferring it and led by another / partitions preferring it
//
// and for each broker above LeaderImbalancePerBrokerPercentage proposes
// preferred elections of those of its partitions where it is in the ISR and
// eligible. Partitions being moved are left out of both counts: their
// leadership settles when the move completes.

// LeaderBalanceCandidates returns, in topic and partition order, the partitions the auto
// leader balance would elect their preferred leader for, with percentage as
// leader.imbalance.per.broker.percentage.
func LeaderBalanceCandidates(md *Metadata, percentage int) []PartitionRef {
	type count struct{ preferred, elsewhere int }
	counts := map[int32]*count{}
	for _, name := range md.names {
		for _, p := range md.topics[name].Partitions {
			if p.Reassigning() || len(p.Replicas) == 0 {
				continue
			}
			b := p.Replicas[0]
			n := counts[b]
			if n == nil {
				n = &count{}
				counts[b] = n
			}
			n.preferred++
			if p.Leader != b {
				n.elsewhere++
			}
		}
	}
	var out []PartitionRef
	for _, name := range md.names {
		for _, p := range md.topics[name].Partitions {
			if p.Reassigning() || len(p.Replicas) == 0 {
				continue
			}
			b := p.Replicas[0]
			n := counts[b]
			if p.Leader == b || n.elsewhere*100 <= percentage*n.preferred {
				continue
			}
			if slices.Contains(p.ISR, b) && md.eligible(b) && epochsCanGrow(p) {
				out = append(out, PartitionRef{name, p.Partition})
			}
		}
	}
	return out
}

// balanceLeaders is the auto leader balance loop; it runs on every node and acts only on the
// active controller.
func (c *Controller) balanceLeaders() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.cfg.Clock.After(c.cfg.LeaderImbalanceCheckInterval):
		}
		c.balanceLeadersOnce()
	}
}

// balanceLeadersOnce runs one check and returns how many leaders it moved.
func (c *Controller) balanceLeadersOnce() int {
	if !c.live.leading.Load() {
		return 0
	}
	parts := LeaderBalanceCandidates(c.Metadata(), c.cfg.LeaderImbalancePerBrokerPercentage)
	if len(parts) == 0 {
		return 0
	}
	ctx, cancel := contextWithTimeout(c.stop, c.cfg.ApplyTimeout)
	defer cancel()
	// On this node's raft only, as fences are: a controller that lost its leadership acts no more.
	res, _, err := c.proposeLocal(ctx, &electLeadersCmd{Type: ElectionPreferred, Partitions: parts})
	if err != nil {
		c.log.Warn("auto leader balance: cannot elect preferred leaders", "partitions", len(parts), "err", err)
		return 0
	}
	c.log.Info("auto leader balance: preferred leaders elected", "partitions", len(res.Elections),
		"leader.imbalance.per.broker.percentage", c.cfg.LeaderImbalancePerBrokerPercentage)
	return len(res.Elections)
}
