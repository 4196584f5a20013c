package replication

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// TestRandomized drives three replicas of one partition and a model controller with random
// appends, acks=all waits, fsyncs, follower fetch rounds, ticks, ISR commits and refusals, and
// leader changes in which the old leader crashes (losing what it had not fsynced) and comes
// back as a follower. After every step it checks what the package promises:
//   - while a replica leads at one epoch its high watermark never moves back, never passes its
//     log end, and never passes the smallest counted offset it knows over the maximal ISR;
//   - every wait is released exactly once, and one released WaitDone is durable, with the
//     same leader epoch, on at least min.insync.replicas replicas at that moment;
//   - every record acknowledged is in every later leader's log with the epoch it was written
//     at (leader epochs and truncation never lose acknowledged data on a clean election);
//   - the replicas' logs agree, record for record, below each follower's high watermark.
//
// Seeded and bounded: a failure prints the seed and the step.
func TestRandomized(t *testing.T) {
	seeds, steps := 40, 1500
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandomized(t, uint64(seed), steps) })
	}
}

type acked struct {
	offset batch.Offset
	epoch  int32
}

type sim struct {
	t     *testing.T
	rng   *rand.Rand
	step  int
	now   time.Time
	nodes []*node
	cfg   Config

	// The controller's committed state.
	leader, leaderEpoch, partitionEpoch int32
	isr                                 []int32
	proposal                            *ISRProposal

	nextWait WaitID
	waits    map[WaitID]bool // parked: not yet released
	acked    []acked
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("step %d: %s", s.step, fmt.Sprintf(format, args...))
}

func runRandomized(t *testing.T, seed uint64, steps int) {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 23)), now: testNow, waits: map[WaitID]bool{}}
	s.cfg = Config{LagTimeMax: 10 * time.Second, MinInsync: 2, WriteCaching: seed%4 == 3}
	replicas := []int32{0, 1, 2}
	for _, id := range replicas {
		cfg := s.cfg
		cfg.ReplicaID = id
		s.nodes = append(s.nodes, &node{id: id, r: New(cfg, LogState{}), lastHW: -1})
	}
	s.leader, s.isr = 0, slices.Clone(replicas)
	s.elect(0)
	for s.step = 0; s.step < steps; s.step++ {
		s.now = s.now.Add(time.Duration(s.rng.IntN(1500)) * time.Millisecond)
		l := s.nodes[s.leader]
		switch x := s.rng.IntN(100); {
		case x < 20:
			n := 1 + s.rng.IntN(3)
			for range n {
				l.log = append(l.log, s.leaderEpoch)
			}
			l.r.Appended(l.end(), nil, s.now)
			s.drain(l)
			if l.r.AcceptsAcksAll() {
				s.nextWait++
				s.waits[s.nextWait] = true
				l.r.Await(s.nextWait, l.end()-1)
				s.drain(l)
			}
		case x < 35:
			n := s.nodes[s.rng.IntN(len(s.nodes))]
			n.durable = n.end()
			n.r.Synced(n.durable, s.now)
			s.drain(n)
		case x < 75:
			s.fetchRound(s.nodes[s.rng.IntN(len(s.nodes))])
		case x < 85:
			l.r.Tick(s.now)
			s.drain(l)
		case x < 98:
			s.settleProposal()
		default:
			s.changeLeader()
		}
	}
}

// elect makes s.leader lead at the next epoch and every other replica follow it.
func (s *sim) elect(prev int32) {
	s.leaderEpoch++
	s.partitionEpoch++
	s.proposal = nil
	l := s.nodes[s.leader]
	for _, acked := range s.acked {
		if acked.offset >= l.end() || l.log[acked.offset-l.start] != acked.epoch {
			s.fatalf("new leader %d (%s) lost acknowledged offset %d at epoch %d", l.id, formatLog(l), acked.offset, acked.epoch)
		}
	}
	l.r.BecomeLeader(LeaderUpdate{LeaderEpoch: s.leaderEpoch, PartitionEpoch: s.partitionEpoch, Replicas: []int32{0, 1, 2}, ISR: slices.Clone(s.isr)}, s.now)
	s.drain(l)
	for _, n := range s.nodes {
		if n != l {
			n.r.BecomeFollower(FollowerUpdate{Leader: s.leader, LeaderEpoch: s.leaderEpoch, PartitionEpoch: s.partitionEpoch, Replicas: []int32{0, 1, 2}}, s.now)
			s.drain(n)
		}
	}
}

// changeLeader crashes the leader (it loses its unsynced tail and restarts from its log and
// checkpoints) and elects another member of the ISR, as the controller would; with the
// leader alone in the ISR there is no clean election, and nothing happens.
func (s *sim) changeLeader() {
	var candidates []int32
	for _, id := range s.isr {
		if id != s.leader {
			candidates = append(candidates, id)
		}
	}
	if len(candidates) == 0 {
		return
	}
	old := s.nodes[s.leader]
	for id := range s.waits {
		delete(s.waits, id) // the crashed leader's waits die with it
	}
	old.log = old.log[:old.durable-old.start]
	epochs := epochCache(old.r.Epochs())
	epochs.truncateFromEnd(old.end())
	cfg := s.cfg
	cfg.ReplicaID = old.id
	old.r = New(cfg, LogState{StartOffset: old.start, EndOffset: old.end(), DurableOffset: old.durable, HighWatermark: old.r.HighWatermark(), Epochs: epochs})
	old.trunc = nil
	old.lastHW = -1
	s.leader = candidates[s.rng.IntN(len(candidates))]
	s.isr = slices.DeleteFunc(slices.Clone(s.isr), func(id int32) bool { return id == old.id })
	s.elect(old.id)
}

// settleProposal answers the outstanding AlterPartition: committed (if it is based on the
// controller's state) or refused.
func (s *sim) settleProposal() {
	p := s.proposal
	if p == nil {
		return
	}
	s.proposal = nil
	l := s.nodes[s.leader]
	if s.rng.IntN(4) == 0 || p.LeaderEpoch != s.leaderEpoch || p.PartitionEpoch != s.partitionEpoch {
		l.r.ProposalFailed(s.now)
		s.drain(l)
		return
	}
	s.partitionEpoch++
	s.isr = slices.Clone(p.ISR)
	l.r.BecomeLeader(LeaderUpdate{LeaderEpoch: s.leaderEpoch, PartitionEpoch: s.partitionEpoch, Replicas: []int32{0, 1, 2}, ISR: slices.Clone(s.isr)}, s.now)
	s.drain(l)
}

// fetchRound runs one step of a follower's plan against the leader, as the fetcher would.
func (s *sim) fetchRound(n *node) {
	l := s.nodes[s.leader]
	if n == l {
		return
	}
	if n.trunc != nil {
		tr := *n.trunc
		n.trunc = nil
		if tr.Fully {
			n.start, n.log = tr.To, nil
		} else if tr.To < n.end() {
			n.log = n.log[:tr.To-n.start]
		}
		n.durable = min(n.durable, n.end())
		n.r.Truncated(n.start, n.end())
		s.drain(n)
		return
	}
	p := n.r.NextFetch()
	if p.Leader != l.id || p.LeaderEpoch != s.leaderEpoch {
		s.fatalf("replica %d plans %+v, the leader is %d at %d", n.id, p, l.id, s.leaderEpoch)
	}
	switch p.Kind {
	case FetchEpochQuery:
		e, end := l.r.EndOffsetFor(p.Epoch)
		n.r.EpochAnswered(e, p.Epoch, end)
		s.drain(n)
	case FetchRecords:
		if p.Offset > l.end() || p.Offset < l.start {
			n.r.OutOfRange(l.start, l.end())
			s.drain(n)
			return
		}
		if p.Offset > 0 && p.Offset <= l.end() && p.Offset-1 >= n.start && n.log[p.Offset-1-n.start] != l.log[p.Offset-1-l.start] {
			s.fatalf("replica %d fetches from %d after a record the leader does not have: %s vs %s", n.id, p.Offset, formatLog(n), formatLog(l))
		}
		l.r.FollowerFetched(FollowerFetch{ReplicaID: n.id, FetchOffset: p.Offset, DurableOffset: p.DurableOffset, LogStartOffset: p.LogStartOffset}, s.now)
		s.drain(l)
		latest := UndefinedEpoch
		if es := n.r.Epochs(); len(es) > 0 {
			latest = es[len(es)-1].Epoch
		}
		var epochs []EpochEntry
		for o := p.Offset; o < l.end(); o++ {
			e := l.log[o-l.start]
			if e > latest {
				epochs = append(epochs, EpochEntry{Epoch: e, StartOffset: o})
				latest = e
			}
			n.log = append(n.log, e)
		}
		n.r.Appended(n.end(), epochs, s.now)
		n.r.FetchAnswered(s.leaderEpoch, l.r.HighWatermark(), l.start, s.now)
		s.drain(n)
		// Below the follower's high watermark its log is the leader's.
		for o := n.start; o < n.r.HighWatermark(); o++ {
			if n.log[o-n.start] != l.log[o-l.start] {
				s.fatalf("replica %d differs from the leader at %d below its high watermark %d", n.id, o, n.r.HighWatermark())
			}
		}
	case FetchNone:
		s.fatalf("replica %d plans nothing and has no truncation to make", n.id)
	}
}

// drain takes n's Ready, acts on it as a driver would, and checks the invariants.
func (s *sim) drain(n *node) {
	rd := n.r.Ready()
	r := n.r
	if rd.HighWatermarkChanged && rd.HighWatermark != r.HighWatermark() {
		s.fatalf("Ready's high watermark %d, the replica's %d", rd.HighWatermark, r.HighWatermark())
	}
	if rd.Truncate != nil {
		tr := *rd.Truncate
		n.trunc = &tr
	}
	if rd.Propose != nil {
		if s.proposal != nil {
			s.fatalf("a second proposal while one is outstanding")
		}
		s.proposal = rd.Propose
	}
	hw := r.HighWatermark()
	if hw > r.logEnd || hw < r.logStart {
		s.fatalf("replica %d high watermark %d outside [%d, %d]", n.id, hw, r.logStart, r.logEnd)
	}
	if r.Role() == Leader {
		if n.epoch == r.LeaderEpoch() && n.wasLead && hw < n.lastHW {
			s.fatalf("leader %d high watermark moved back from %d to %d", n.id, n.lastHW, hw)
		}
		st := r.Status(s.now)
		counted := r.durable
		if s.cfg.WriteCaching {
			counted = r.logEnd
		}
		if hw > counted && hw > n.lastHW {
			s.fatalf("leader %d high watermark %d above its own counted %d", n.id, hw, counted)
		}
		for _, f := range st.Followers {
			c := f.DurableOffset
			if s.cfg.WriteCaching {
				c = f.LogEndOffset
			}
			if (f.InISR || slices.Contains(st.PendingISR, f.ReplicaID)) && c >= 0 && hw > c && hw > n.lastHW {
				s.fatalf("leader %d high watermark moved to %d above follower %d's counted %d", n.id, hw, f.ReplicaID, c)
			}
		}
	}
	n.lastHW, n.wasLead, n.epoch = hw, r.Role() == Leader, r.LeaderEpoch()
	for _, x := range rd.Released {
		if !s.waits[x.ID] {
			s.fatalf("wait %d released twice, or never parked", x.ID)
		}
		delete(s.waits, x.ID)
		if x.Result != WaitDone {
			continue
		}
		// Which offset: waits are parked at the leader's end-1 when they are made; find it
		// from the leader's log as the largest offset below the high watermark is not enough,
		// so the ack is checked against every replica's durable log at that moment.
		s.checkAck(n, x.ID)
	}
}

// checkAck checks a wait released done: the leader's high watermark passed it, and the
// records below the high watermark are durable on min.insync.replicas replicas.
func (s *sim) checkAck(l *node, id WaitID) {
	hw := l.r.HighWatermark()
	last := hw - 1
	epoch := l.log[last-l.start]
	copies := 0
	for _, n := range s.nodes {
		end := n.end()
		if !s.cfg.WriteCaching {
			end = n.durable
		}
		if end > last && last >= n.start && n.log[last-n.start] == epoch {
			copies++
		}
	}
	if copies < s.cfg.MinInsync {
		s.fatalf("wait %d acknowledged with offset %d on %d replicas, want %d", id, last, copies, s.cfg.MinInsync)
	}
	s.acked = append(s.acked, acked{offset: last, epoch: epoch})
}
