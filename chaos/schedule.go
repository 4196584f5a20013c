package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/suggest"
)

// FaultKind names one kind of fault (--faults).
type FaultKind string

const (
	KillLeader     FaultKind = "kill-leader"     // kill -9 the leader of a random partition, restart it after the hold
	KillFollower   FaultKind = "kill-follower"   // kill -9 a follower of a random partition
	KillController FaultKind = "kill-controller" // kill -9 the active controller
	KillRandom     FaultKind = "kill-random"     // kill -9 a random broker
	KillMajority   FaultKind = "kill-majority"   // kill -9 a majority of the brokers at once
	Bounce         FaultKind = "bounce"          // SIGTERM (controlled shutdown, within 30 s) a partition leader, restart it
	Pause          FaultKind = "pause"           // SIGSTOP a partition leader past the broker session timeout, then SIGCONT (a zombie leader)
	Isolate        FaultKind = "isolate"         // cut a partition leader from every other broker and from the clients
	Split          FaultKind = "split"           // split the brokers into a majority and a minority that holds a leader
	OneWay         FaultKind = "one-way"         // drop the bytes one way between a leader and a follower
	Delay          FaultKind = "delay"           // delay every link of one broker by 50-250 ms
	PowerLoss      FaultKind = "power-loss"      // a power cut of one broker: unsynced bytes lost, the last page maybe torn
	DamageFiles    FaultKind = "damage"          // kill a broker, damage its files (DamageKinds in turn), restart it
	DiskFull       FaultKind = "disk-full"       // writes of one broker fail with ENOSPC for the hold
	// Reassign moves a random partition's replicas to a random set of min.insync.replicas to
	// replication-factor brokers, in a random order (reassign.go); the heal moves a partition
	// left with fewer than the replication factor back up to it, and lets a move in progress
	// go on.
	Reassign FaultKind = "reassign"
	// BitRot kills a broker, flips bits in log bytes its recovery point vouches for, and
	// restarts it. Not among FaultKinds (nor in "all"): such a replica stays in the ISR with a
	// corrupt batch until the scrub reaches it, and nothing repairs it yet, so a run with it
	// reports divergence. `--faults bitrot` shows it.
	BitRot FaultKind = "bitrot"
)

// optInKinds are the kinds --faults accepts by name only.
var optInKinds = []FaultKind{BitRot}

// FaultKinds are every kind, in the order the help lists them.
var FaultKinds = []FaultKind{KillLeader, KillFollower, KillController, KillRandom, KillMajority, Bounce, Pause,
	Isolate, Split, OneWay, Delay, PowerLoss, DamageFiles, DiskFull, Reassign}

// faultGroups are the names --faults takes for several kinds.
var faultGroups = map[string][]FaultKind{
	"all":       FaultKinds,
	"kill":      {KillLeader, KillFollower, KillController, KillRandom, KillMajority},
	"partition": {Isolate, Split, OneWay, Delay},
	"process":   {Bounce, Pause},
	"disk":      {PowerLoss, DamageFiles, DiskFull},
	"admin":     {Reassign},
}

// needsFileLayer reports whether a kind needs the brokers on vfs.PowerLossFS.
func (k FaultKind) needsFileLayer() bool { return k == PowerLoss || k == DiskFull }

// ParseFaults reads --faults: a comma-separated list of kinds and groups (all, kill,
// partition, process, disk, admin). An unknown name is refused, naming it and the nearest one.
func ParseFaults(s string) ([]FaultKind, error) {
	var out []FaultKind
	add := func(k FaultKind) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if g, ok := faultGroups[name]; ok {
			for _, k := range g {
				add(k)
			}
			continue
		}
		if slices.Contains(FaultKinds, FaultKind(name)) || slices.Contains(optInKinds, FaultKind(name)) {
			add(FaultKind(name))
			continue
		}
		return nil, fmt.Errorf("--faults: unknown fault %q%s (kinds: %s, and %s by name; groups: all, kill, partition, process, disk, admin)",
			name, nearest(name), joinKinds(FaultKinds), joinKinds(optInKinds))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--faults %q: names no fault", s)
	}
	return out, nil
}

func nearest(name string) string {
	best, bestD := "", 4
	cands := []string{"all", "kill", "partition", "process", "disk", "admin"}
	for _, k := range append(slices.Clone(FaultKinds), optInKinds...) {
		cands = append(cands, string(k))
	}
	for _, c := range cands {
		if d := suggest.Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func joinKinds(ks []FaultKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Planned is one fault of a schedule: injected At (since the fault phase began), healed Hold
// later.
type Planned struct {
	ID   int
	At   time.Duration
	Kind FaultKind
	Hold time.Duration
}

// Plan is the schedule a seed replays: one fault every interval over duration, the kinds in
// rounds, each round every kind once in an order the seed shuffles (so that every kind comes
// in the first len(kinds) faults), each held for 40-70 % of the interval; a pause is held
// past the broker session timeout (minPause).
func Plan(seed uint64, kinds []FaultKind, duration, interval, minPause time.Duration) []Planned {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []Planned
	var round []FaultKind
	for at := time.Duration(0); at+interval/2 <= duration; at += interval {
		if len(round) == 0 {
			round = slices.Clone(kinds)
			rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		k := round[0]
		round = round[1:]
		hold := interval*4/10 + time.Duration(rng.Int64N(int64(interval*3/10)+1))
		if k == Pause && hold < minPause {
			hold = minPause
		}
		out = append(out, Planned{ID: len(out) + 1, At: at, Kind: k, Hold: hold})
	}
	return out
}

// targetRand is fault id's rng for choosing targets: a function of the seed and the id only,
// so that a replay chooses alike wherever the cluster lets it.
func targetRand(seed uint64, id int) *rand.Rand { return rand.New(rand.NewPCG(seed, uint64(id))) }
