package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluicemq/sluice/client"
)

// The reassignment fault (Reassign): a random partition of the workload is moved, while the
// workload runs, to a random set of brokers, between min.insync.replicas and the replication
// factor of them, in a random order (so the preferred leader changes too). The move is left
// to run through whatever faults come next; the heal only moves a partition left with fewer
// replicas than the replication factor back up to it, so that the next faults find the
// redundancy the workload was made with. The settle before the final read waits for every
// move to finish (a partition being moved has replicas outside its ISR).

// moveTarget chooses a move's replica set: minISR to rf of nodes, in a random order, unlike
// current where nodes allow (a move to the set and order it has is no move).
func moveTarget(rng *rand.Rand, nodes, current []int32, rf, minISR int) []int32 {
	lo, hi := max(1, min(minISR, len(nodes))), min(rf, len(nodes))
	lo = min(lo, hi)
	var target []int32
	for range 8 {
		n := lo + rng.IntN(hi-lo+1)
		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		target = shuffled[:n]
		if !slices.Equal(target, current) {
			break
		}
	}
	return target
}

// restoreTarget is current grown to rf replicas with brokers of nodes it lacks, chosen at
// random; current itself when it has rf already.
func restoreTarget(rng *rand.Rand, nodes, current []int32, rf int) []int32 {
	out := slices.Clone(current)
	var spare []int32
	for _, id := range nodes {
		if !slices.Contains(out, id) {
			spare = append(spare, id)
		}
	}
	rng.Shuffle(len(spare), func(i, j int) { spare[i], spare[j] = spare[j], spare[i] })
	for _, id := range spare {
		if len(out) >= rf {
			break
		}
		out = append(out, id)
	}
	return out
}

// mover makes the reassignment fault's moves through any broker of bootstrap: the injector's
// (over the fault proxy) and in-process tests' alike.
type mover struct {
	bootstrap  []string
	nodes      []int32  // the brokers a move may choose
	topics     []string // the workload's: the partitions a move may choose
	rf, minISR int
}

func (in *injector) mover() *mover {
	var ids []int32
	for _, n := range in.c.Nodes() {
		ids = append(ids, n.ID)
	}
	return &mover{bootstrap: in.c.Bootstrap(), nodes: ids, topics: in.topics, rf: in.rf, minISR: in.minISR}
}

// admin is an admin client of the cluster: the first broker that answers.
func (m *mover) admin(ctx context.Context) (*client.Admin, error) {
	return client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{
		Brokers: m.bootstrap, ClientID: "sluice-chaos",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, DefaultAPITimeout: 10 * time.Second})
}

// replicaTarget is the replica set tp is at or moving to, and the move in progress (nil if
// none).
func (m *mover) replicaTarget(ctx context.Context, a *client.Admin, tp client.TopicPartition) ([]int32, *client.PartitionReassignment, error) {
	moves, err := a.ListPartitionReassignments(ctx, []client.TopicPartition{tp})
	if err != nil {
		return nil, nil, err
	}
	for _, mv := range moves {
		if mv.TopicPartition == tp {
			return mv.Target(), &mv, nil
		}
	}
	topics, err := m.partitions(ctx, []string{tp.Topic})
	if err != nil {
		return nil, nil, err
	}
	if r, ok := topics[tp]; ok {
		return r, nil, nil
	}
	return nil, nil, fmt.Errorf("chaos: %s-%d is not in the metadata", tp.Topic, tp.Partition)
}

// partitions are the replica lists of topics' partitions, from the first broker of bootstrap
// that answers.
func (m *mover) partitions(ctx context.Context, topics []string) (map[client.TopicPartition][]int32, error) {
	var last error
	for _, addr := range m.bootstrap {
		md, err := metadata(ctx, addr, topics)
		if err != nil {
			last = err
			continue
		}
		out := map[client.TopicPartition][]int32{}
		for _, t := range md.Topics {
			for _, p := range t.Partitions {
				out[client.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Replicas
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("chaos: metadata: %w", last)
}

// move is one reassignment fault's move: a partition of the workload chosen with rng, moved to
// a moveTarget. refused says the controller refused it (detail says why); err is anything
// else that stopped it.
type move struct {
	tp      client.TopicPartition
	target  []int32 // the replica list it moves to
	targets []int32 // the brokers the move involves: the old replicas and the new
	detail  string
	refused bool
}

func (m *mover) start(ctx context.Context, rng *rand.Rand) (move, error) {
	parts, err := m.partitions(ctx, m.topics)
	if err != nil {
		return move{}, err
	}
	if len(parts) == 0 {
		return move{}, errors.New("chaos: the metadata lists no partition of the workload's topics")
	}
	sorted := slices.SortedFunc(maps.Keys(parts), func(a, b client.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	tp := sorted[rng.IntN(len(sorted))]
	a, err := m.admin(ctx)
	if err != nil {
		return move{}, err
	}
	defer a.Close()
	current, inProgress, err := m.replicaTarget(ctx, a, tp)
	if err != nil {
		return move{}, err
	}
	target := moveTarget(rng, m.nodes, current, m.rf, m.minISR)
	mv := move{tp: tp, target: target, detail: fmt.Sprintf("move %s-%d from replicas %v to %v", tp.Topic, tp.Partition, current, target)}
	if inProgress != nil {
		mv.detail += fmt.Sprintf(" (while a move is in progress: replicas %v, adding %v, removing %v; the controller refuses a second)", inProgress.Replicas, inProgress.Adding, inProgress.Removing)
	}
	err = a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: tp.Topic, Partition: tp.Partition, Replicas: target}})
	var refused *client.ReassignmentError
	switch {
	case errors.As(err, &refused):
		mv.refused, mv.detail = true, mv.detail+": refused: "+err.Error()
		return mv, nil
	case err != nil:
		return move{}, fmt.Errorf("chaos: %s: %w", mv.detail, err)
	}
	mv.targets = slices.Clone(current)
	for _, id := range target {
		if !slices.Contains(mv.targets, id) {
			mv.targets = append(mv.targets, id)
		}
	}
	mv.targets = sortedIDs(mv.targets)
	return mv, nil
}

// injectReassign starts the move. A refusal is not a failure of the run (the move is an
// operator's request, which the controller may refuse): the fault's detail says so and its
// heal restores nothing.
func (in *injector) injectReassign(ctx context.Context, rng *rand.Rand) (*injected, error) {
	m := in.mover()
	mv, err := m.start(ctx, rng)
	if err != nil {
		return nil, err
	}
	if mv.refused {
		return &injected{detail: mv.detail,
			heal: func(context.Context) (string, error) { return "nothing to heal (the move was refused)", nil }}, nil
	}
	return &injected{targets: mv.targets, detail: mv.detail,
		heal: func(ctx context.Context) (string, error) { return m.restore(ctx, rng, mv.tp) }}, nil
}

// restore moves tp back up to the replication factor if the move left it with fewer,
// retrying for 30 s: a move still in progress refuses another (the partition is already being
// moved) until it ends, and the cluster is healthy at the heal (faults do not overlap), so a
// move that cannot be made within that is a failure.
func (m *mover) restore(ctx context.Context, rng *rand.Rand, tp client.TopicPartition) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		how, err := m.restoreOnce(ctx, rng, tp)
		if err == nil {
			return how, nil
		}
		last = err
		if err := waitUntil(ctx, time.Now().Add(500*time.Millisecond)); err != nil {
			return "", fmt.Errorf("chaos: restoring the replicas of %s-%d: %w (last: %w)", tp.Topic, tp.Partition, err, last)
		}
	}
}

func (m *mover) restoreOnce(ctx context.Context, rng *rand.Rand, tp client.TopicPartition) (string, error) {
	a, err := m.admin(ctx)
	if err != nil {
		return "", err
	}
	defer a.Close()
	current, inProgress, err := m.replicaTarget(ctx, a, tp)
	if err != nil {
		return "", err
	}
	state := fmt.Sprintf("replicas %v", current)
	if inProgress != nil {
		state = fmt.Sprintf("moving to %v (adding %v, removing %v)", current, inProgress.Adding, inProgress.Removing)
	}
	if len(current) >= m.rf {
		return fmt.Sprintf("%s-%d %s: left as it is", tp.Topic, tp.Partition, state), nil
	}
	target := restoreTarget(rng, m.nodes, current, m.rf)
	if err := a.AlterPartitionReassignments(ctx, []client.Reassignment{{Topic: tp.Topic, Partition: tp.Partition, Replicas: target}}); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%d %s: moved back up to %d replicas, %v", tp.Topic, tp.Partition, state, m.rf, target), nil
}
