package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/chaos/faultproxy"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/net/wire"
)

// termTimeout is how long a controlled shutdown may take (the bound); past it the
// broker is killed and the run fails.
const termTimeout = 30 * time.Second

// injector injects the faults of a run into its cluster. Only the run's schedule loop uses it.
type injector struct {
	c          *Cluster
	topics     []string
	torn       bool // power cuts tear the last page kept
	damageNext int  // the next of DamageKinds
	rf, minISR int  // the workload's replication factor and min.insync.replicas (reassign.go)
}

// injected is a fault in force: what it hit, and how to end it.
type injected struct {
	targets []int32
	detail  string
	// heal ends the fault and says how (a restart, a heal); an error is a harness failure
	// (a broker that does not come back).
	heal func(ctx context.Context) (string, error)
	// failures are the ways the fault broke a promise outright (a controlled shutdown past
	// 30 s): the run fails on any.
	failures []string
}

// partitionRoles is one partition's leader and followers, from the metadata.
type partitionRoles struct {
	topic     string
	partition int32
	leader    int32
	followers []int32
}

// pickPartition chooses a partition at random and reads its roles. A partition with no
// leader (it is between leaders) has leader -1.
func (in *injector) pickPartition(ctx context.Context, rng *rand.Rand) (partitionRoles, error) {
	md, err := in.c.Metadata(ctx, in.topics)
	if err != nil {
		return partitionRoles{}, err
	}
	var all []wire.MetadataPartition
	var names []string
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			all = append(all, p)
			names = append(names, t.Topic)
		}
	}
	if len(all) == 0 {
		return partitionRoles{}, errors.New("chaos: the metadata lists no partition of the workload's topics")
	}
	i := rng.IntN(len(all))
	p := all[i]
	r := partitionRoles{topic: names[i], partition: p.Partition, leader: p.Leader}
	for _, id := range p.Replicas {
		if id != p.Leader {
			r.followers = append(r.followers, id)
		}
	}
	return r, nil
}

// leaderOrAny is a random partition's leader, or a random running broker if it has none.
func (in *injector) leaderOrAny(ctx context.Context, rng *rand.Rand) (int32, string) {
	r, err := in.pickPartition(ctx, rng)
	if err == nil && r.leader >= 0 && in.c.Running(r.leader) {
		return r.leader, fmt.Sprintf("leader of %s-%d", r.topic, r.partition)
	}
	up := in.running()
	if len(up) == 0 {
		return -1, "no broker running"
	}
	return up[rng.IntN(len(up))], "a random broker (no partition leader known)"
}

func (in *injector) running() []int32 {
	var out []int32
	for _, id := range in.c.Up() {
		if in.c.Running(id) {
			out = append(out, id)
		}
	}
	return out
}

func (in *injector) others(id int32) []int32 {
	var out []int32
	for _, n := range in.c.Nodes() {
		if n.ID != id {
			out = append(out, n.ID)
		}
	}
	return out
}

// restartAll starts the stopped brokers of ids and waits for the cluster.
func (in *injector) restart(ids []int32) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		pids := make([]string, len(ids))
		for i, id := range ids {
			if err := in.c.Start(id); err != nil {
				return "", err
			}
			pids[i] = fmt.Sprint(in.c.PID(id))
		}
		return fmt.Sprintf("restarted %s (pid %s)", idList(ids), strings.Join(pids, ",")), nil
	}
}

func idList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "broker " + strings.Join(s, ",")
}

// errNoBroker is a fault's error when no broker runs to inject it into.
var errNoBroker = errors.New("chaos: no broker is running")

// inject injects p, choosing its targets with rng.
func (in *injector) inject(ctx context.Context, p Planned, rng *rand.Rand) (*injected, error) {
	c := in.c
	if len(in.running()) == 0 {
		return nil, errNoBroker
	}
	if (p.Kind == OneWay || p.Kind == Split) && len(c.Nodes()) < 2 {
		return nil, fmt.Errorf("chaos: %s needs two brokers", p.Kind)
	}
	kill := func(ids []int32, why string) (*injected, error) {
		for _, id := range ids {
			if err := c.Kill(id); err != nil {
				return nil, err
			}
		}
		return &injected{targets: ids, detail: fmt.Sprintf("kill -9 %s (%s)", idList(ids), why), heal: in.restart(ids)}, nil
	}
	switch p.Kind {
	case KillLeader:
		id, why := in.leaderOrAny(ctx, rng)
		return kill([]int32{id}, why)
	case KillFollower:
		r, err := in.pickPartition(ctx, rng)
		var live []int32
		if err == nil {
			for _, f := range r.followers {
				if c.Running(f) {
					live = append(live, f)
				}
			}
		}
		if len(live) == 0 {
			up := in.running()
			return kill([]int32{up[rng.IntN(len(up))]}, "a random broker (no follower known)")
		}
		return kill([]int32{live[rng.IntN(len(live))]}, fmt.Sprintf("follower of %s-%d", r.topic, r.partition))
	case KillController:
		md, err := c.Metadata(ctx, nil)
		if err != nil || md.ControllerID < 0 || !c.Running(md.ControllerID) {
			up := in.running()
			return kill([]int32{up[rng.IntN(len(up))]}, "a random broker (no active controller known)")
		}
		return kill([]int32{md.ControllerID}, "the active controller")
	case KillRandom:
		up := in.running()
		return kill([]int32{up[rng.IntN(len(up))]}, "random")
	case KillMajority:
		up := in.running()
		rng.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
		n := len(c.Nodes())/2 + 1
		if n > len(up) {
			n = len(up)
		}
		return kill(sortedIDs(up[:n]), "a majority")
	case Bounce:
		id, why := in.leaderOrAny(ctx, rng)
		took, err := c.Term(id, termTimeout)
		f := &injected{targets: []int32{id}, heal: in.restart([]int32{id}),
			detail: fmt.Sprintf("SIGTERM broker %d (%s): stopped in %.1f s", id, why, took.Seconds())}
		if err != nil {
			f.failures = append(f.failures, err.Error())
		}
		return f, nil
	case Pause:
		id, why := in.leaderOrAny(ctx, rng)
		if err := c.Pause(id); err != nil {
			return nil, err
		}
		return &injected{targets: []int32{id}, detail: fmt.Sprintf("SIGSTOP broker %d (%s) for %v", id, why, p.Hold.Round(time.Millisecond)),
			heal: func(context.Context) (string, error) { return fmt.Sprintf("SIGCONT broker %d", id), c.Resume(id) }}, nil
	case Isolate:
		id, why := in.leaderOrAny(ctx, rng)
		c.Proxy.Isolate(id, true, in.others(id)...)
		return &injected{targets: []int32{id}, detail: fmt.Sprintf("isolate broker %d (%s) from the brokers and the clients", id, why), heal: in.healNet}, nil
	case Split:
		id, why := in.leaderOrAny(ctx, rng)
		rest := in.others(id)
		rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		m := max(1, (len(c.Nodes())-1)/2) // 1 of 3, 2 of 5
		minority := append([]int32{id}, rest[:m-1]...)
		var majority []int32
		for _, n := range c.Nodes() {
			if !slices.Contains(minority, n.ID) {
				majority = append(majority, n.ID)
			}
		}
		for _, a := range minority {
			for _, b := range majority {
				c.Proxy.Cut(a, b)
			}
		}
		return &injected{targets: sortedIDs(minority), heal: in.healNet,
			detail: fmt.Sprintf("split minority %s (with the %s) from majority %s; clients reach both", idList(sortedIDs(minority)), why, idList(majority))}, nil
	case OneWay:
		r, err := in.pickPartition(ctx, rng)
		if err != nil || r.leader < 0 || len(r.followers) == 0 {
			up := in.running()
			a := up[rng.IntN(len(up))]
			b := in.others(a)[rng.IntN(len(c.Nodes())-1)]
			c.Proxy.Set(a, b, faultproxy.Rule{Drop: true})
			return &injected{targets: []int32{a, b}, detail: fmt.Sprintf("drop the bytes from broker %d to broker %d", a, b), heal: in.healNet}, nil
		}
		f := r.followers[rng.IntN(len(r.followers))]
		from, to := r.leader, f
		if rng.IntN(2) == 0 {
			from, to = f, r.leader
		}
		c.Proxy.Set(from, to, faultproxy.Rule{Drop: true})
		return &injected{targets: []int32{from, to}, heal: in.healNet,
			detail: fmt.Sprintf("drop the bytes from broker %d to broker %d (leader %d and follower %d of %s-%d)", from, to, r.leader, f, r.topic, r.partition)}, nil
	case Delay:
		id, why := in.leaderOrAny(ctx, rng)
		d := time.Duration(50+rng.IntN(201)) * time.Millisecond
		for _, o := range in.others(id) {
			c.Proxy.Delay(id, o, d)
		}
		c.Proxy.Set(id, faultproxy.Clients, faultproxy.Rule{Delay: d})
		c.Proxy.Set(faultproxy.Clients, id, faultproxy.Rule{Delay: d})
		return &injected{targets: []int32{id}, detail: fmt.Sprintf("delay every link of broker %d (%s) by %v", id, why, d), heal: in.healNet}, nil
	case PowerLoss:
		id, why := in.leaderOrAny(ctx, rng)
		opts := vfs.CrashOptions{Rand: rng, KeepUnsyncedPrefix: rng.IntN(2) == 0}
		opts.TearLastPage = in.torn && opts.KeepUnsyncedPrefix
		rep, err := c.PowerCut(id, opts)
		if err != nil {
			return nil, err
		}
		return &injected{targets: []int32{id}, heal: in.restart([]int32{id}),
			detail: fmt.Sprintf("power cut of broker %d (%s): %d files rolled back to their synced sizes (%d bytes past them dropped, index preallocation included), %d torn", id, why, rep.Files, rep.BytesLost, rep.TornFiles)}, nil
	case DamageFiles, BitRot:
		id, why := in.leaderOrAny(ctx, rng)
		if err := c.Kill(id); err != nil {
			return nil, err
		}
		kind := DamageBitRot
		if p.Kind == DamageFiles {
			kind = DamageKinds[in.damageNext%len(DamageKinds)]
			in.damageNext++
		}
		what, err := Damage(c.nodes[id].DataDir, in.topics, kind, rng)
		if err != nil {
			return nil, err
		}
		return &injected{targets: []int32{id}, heal: in.restart([]int32{id}),
			detail: fmt.Sprintf("kill -9 broker %d (%s), then %s", id, why, what)}, nil
	case DiskFull:
		id, why := in.leaderOrAny(ctx, rng)
		ctl := c.nodes[id].JournalFile + ".disk-full"
		if err := os.WriteFile(ctl, nil, 0o644); err != nil {
			return nil, err
		}
		return &injected{targets: []int32{id}, detail: fmt.Sprintf("disk of broker %d (%s) full (ENOSPC)", id, why),
			heal: func(context.Context) (string, error) {
				return fmt.Sprintf("disk of broker %d has room again", id), os.Remove(ctl)
			}}, nil
	case Reassign:
		return in.injectReassign(ctx, rng)
	}
	return nil, fmt.Errorf("chaos: no injector for fault %q", p.Kind)
}

// healNet lifts every rule of the proxy.
func (in *injector) healNet(context.Context) (string, error) {
	in.c.Proxy.Heal()
	return "network healed", nil
}
