package cluster

import (
	"fmt"
	"slices"
	"strings"
)

// Partition reassignment (Kafka's KIP-455, as KRaft keeps it in the
// partition record): a move is started by AlterPartitionReassignments and
// lives in the partition's metadata, so a controller failover or a broker
// restart in the middle resumes it.
//
//	start    Replicas = target ++ (original − target)
//	         Adding   = target − original, Removing = original − target
//	         (ISR and leader unchanged; the adding replicas catch up by
//	         follower fetch and the leader adds them to the ISR)
//	complete once the ISR holds the whole target, in the same command that
//	         made it so: Replicas = target, ISR = ISR ∩ target, no Adding or
//	         Removing; a leader outside the target hands over to
//	         ElectLeader over the target (waiting, while nobody there can
//	         lead, with the old leader serving)
//	cancel   Replicas = original (Replicas − Adding), ISR = ISR − Adding; a
//	         leader among the adding replicas hands over to ElectLeader over
//	         the original; if no original replica is in the ISR, the first
//	         eligible one becomes leader uncleanly (ISR just it), since the
//	         operator asked to go back (refused while none is eligible)
//
// Every such change bumps the partition epoch once, and the leader epoch
// once when the leader changes, as any ISR or leader change does.

// Reassignment is one partition's entry in an AlterPartitionReassignments:
// the target replicas, first the preferred leader, or nil to cancel the
// partition's move.
type Reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"` // no omitempty: nil (cancel) and empty (refused) differ
}

// maxReassignments bounds one request (Apply validates every entry).
const maxReassignments = 1_000_000

type alterReassignmentsCmd struct {
	Reassignments []Reassignment `json:"reassignments"`
}

func (c *alterReassignmentsCmd) apply(m *Metadata, index uint64) (*Metadata, applyResult) {
	if err := c.validate(m); err != nil {
		return m, applyResult{Err: fmt.Errorf("alter partition reassignments: %w", err)}
	}
	next := m.clone()
	changed := map[string]*TopicMeta{}
	var elections []Election
	for _, r := range c.Reassignments {
		t := changed[r.Topic]
		if t == nil {
			t = m.topics[r.Topic] // read only, until a partition of it changes
		}
		ch := newPartitionChange(t.Partitions[r.Partition])
		if r.Replicas == nil {
			ch.cancelReassignment(next.eligible, uncleanElection(t))
		} else {
			ch.startReassignment(r.Replicas)
			ch.completeReassignment(next.eligible)
		}
		if !ch.changed {
			continue
		}
		np, el := ch.result(r.Topic)
		if changed[r.Topic] == nil {
			cp := *t
			cp.Partitions = slices.Clone(t.Partitions)
			t = &cp
			changed[r.Topic] = t
			next.topics[r.Topic] = t
		}
		t.Partitions[r.Partition] = np
		if el != nil {
			elections = append(elections, *el)
		}
	}
	if len(changed) == 0 {
		return m, applyResult{}
	}
	return next.finish(index), applyResult{Elections: elections}
}

// validate checks every entry and returns one error listing every problem, or nil.
func (c *alterReassignmentsCmd) validate(m *Metadata) error {
	if len(c.Reassignments) > maxReassignments {
		return fmt.Errorf("%w: %d partitions in one request; at most %d", ErrInvalidReassignment, len(c.Reassignments), maxReassignments)
	}
	problems := m.ReassignmentProblems(c.Reassignments)
	if len(problems) == 0 {
		return nil
	}
	sentinel := ErrInvalidReassignment
	texts := make([]string, len(problems))
	for i, pr := range problems {
		texts[i] = pr.String()
		if pr.NotMoving {
			sentinel = ErrNoReassignmentInProgress // wraps ErrInvalidReassignment
		}
	}
	return fmt.Errorf("%w: %s", sentinel, strings.Join(texts, "; "))
}

// ReassignmentProblem is one problem of one entry of an AlterPartitionReassignments.
type ReassignmentProblem struct {
	PartitionRef
	Problem string
	// NotMoving: the entry cancels a partition that is not being moved.
	NotMoving bool
}

func (p ReassignmentProblem) String() string {
	return fmt.Sprintf("%s-%d: %s", p.Topic, p.Partition, p.Problem)
}

// ReassignmentProblems lists every problem of rs against m, in rs's order (an entry may have
// several): what the command refuses a request for as a whole. A broker asks it first, so that
// its answer names each partition's own problem.
func (m *Metadata) ReassignmentProblems(rs []Reassignment) []ReassignmentProblem {
	var problems []ReassignmentProblem
	seen := make(map[PartitionRef]bool, len(rs))
	for _, r := range rs {
		ref := PartitionRef{r.Topic, r.Partition}
		problem := func(format string, args ...any) {
			problems = append(problems, ReassignmentProblem{PartitionRef: ref, Problem: fmt.Sprintf(format, args...)})
		}
		if seen[ref] {
			problem("named twice")
			continue
		}
		seen[ref] = true
		t, ok := m.topics[r.Topic]
		if !ok {
			problem("no such topic")
			continue
		}
		p, ok := t.Partition(r.Partition)
		if !ok {
			problem("no such partition")
			continue
		}
		if r.Replicas == nil {
			if !p.Reassigning() {
				problems = append(problems, ReassignmentProblem{PartitionRef: ref, Problem: "no reassignment in progress", NotMoving: true})
			} else if !epochsCanGrow(p) {
				problem("leader epoch %d or partition epoch %d cannot grow", p.LeaderEpoch, p.PartitionEpoch)
			} else if l, _ := ElectLeader(p.OriginalReplicas(), nil, m.eligible, true); l == NoLeader && len(without(p.ISR, p.AddingReplicas)) == 0 {
				problem("only adding replicas are in sync and no original replica can lead")
			}
			continue
		}
		switch {
		case len(r.Replicas) == 0:
			problem("empty replica list")
			continue
		case len(r.Replicas) > len(m.brokers):
			problem("%d replicas, but only %d brokers are registered", len(r.Replicas), len(m.brokers))
			continue
		}
		for i, b := range r.Replicas {
			if slices.Contains(r.Replicas[:i], b) {
				problem("broker %d twice", b)
			} else if _, ok := m.brokers[b]; !ok {
				problem("broker %d is not registered", b)
			}
		}
		if p.Reassigning() {
			problem("already being moved to %v", p.TargetReplicas())
		} else if !epochsCanGrow(p) && !slices.Equal(p.Replicas, r.Replicas) {
			problem("leader epoch %d or partition epoch %d cannot grow", p.LeaderEpoch, p.PartitionEpoch)
		}
	}
	return problems
}

// startReassignment lays out a move to target (validated). A target equal to
// the replicas changes nothing; the same replicas in another order are
// reordered at once (nothing to copy).
func (c *partitionChange) startReassignment(target []int32) {
	p := &c.p
	if slices.Equal(p.Replicas, target) {
		return
	}
	adding := without(target, p.Replicas)
	removing := without(p.Replicas, target)
	p.Replicas = append(slices.Clone(target), removing...)
	p.AddingReplicas, p.RemovingReplicas = nilIfEmpty(adding), nilIfEmpty(removing)
	c.changed = true
}

// completeReassignment ends the move once the ISR holds the whole target (see
// the top of the file); it does nothing for a partition that is not moving.
func (c *partitionChange) completeReassignment(eligible func(int32) bool) {
	p := &c.p
	if !p.Reassigning() {
		return
	}
	target := p.TargetReplicas()
	for _, r := range target {
		if !slices.Contains(p.ISR, r) {
			return
		}
	}
	isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return !slices.Contains(target, r) })
	if !slices.Contains(target, p.Leader) {
		l, _ := ElectLeader(target, isr, eligible, false)
		if l == NoLeader && p.Leader != NoLeader {
			return // nobody in the target can lead yet: the old leader goes on serving
		}
		c.setLeader(l, false)
	}
	p.Replicas, p.ISR, p.AddingReplicas, p.RemovingReplicas = target, isr, nil, nil
	c.changed = true
}

// cancelReassignment returns a moving partition to its original replicas.
func (c *partitionChange) cancelReassignment(eligible func(int32) bool, unclean bool) {
	p := &c.p
	if !p.Reassigning() {
		return
	}
	adding := p.AddingReplicas
	original := p.OriginalReplicas()
	isr := without(p.ISR, adding)
	p.Replicas, p.AddingReplicas, p.RemovingReplicas = original, nil, nil
	c.changed = true
	switch {
	case len(isr) == 0:
		// Only adding replicas were in sync: the operator asked to go back, so the first
		// eligible original replica leads, uncleanly (validate made sure there is one).
		c.setLeader(ElectLeader(original, nil, eligible, true))
	case p.Leader == NoLeader || slices.Contains(adding, p.Leader):
		p.ISR = isr
		c.setLeader(ElectLeader(original, isr, eligible, unclean))
	default:
		p.ISR = isr
	}
}

func nilIfEmpty(s []int32) []int32 {
	if len(s) == 0 {
		return nil
	}
	return s
}
