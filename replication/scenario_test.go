package replication

import (
	"flag"
	"fmt"
	"github.com/sluicemq/sluice/internal/scenario"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/batch"
)

// Scenario scripts (testdata/scenarios/*.txt) drive replicas step by step and compare what each
// step prints with what the script expects, in the format of cluster/testdata/scenarios: blocks
// of one command line, a line "----", and the expected output up to a blank line; lines
// starting with '#' between blocks are comments. `go test -run TestScenarios ./replication/
// -rewrite` writes the actual output back into the scripts, to be reviewed in the diff.
//
// A script hosts several replicas of one partition, each named by its broker id, each over a
// simulated log (the leader epoch of every record). Every command names its replica with r=ID
// and may set the time with t=SECONDS (it stays where the last command left it). Each is one
// call on the replica, doing to the simulated log what the driver in broker/ would:
//
//	new r=ID [end=N durable=N hw=N start=N] [log=E*N,E*N] [min-insync=N] [lag=S] [write-caching]
//	                             a replica over a log of N records at epoch E, ... (epochs
//	                             cached from the log), Offline
//	leader r=ID epoch=N [pepoch=N] replicas=1,2,3 isr=1,2,3       BecomeLeader
//	follower r=ID leader=ID epoch=N [pepoch=N] replicas=1,2,3     BecomeFollower (leader=none: Offline)
//	append r=ID n=N              the leader appends N records at its epoch; Appended
//	sync r=ID [to=N]             Synced up to N (default: the log end)
//	fetched r=ID from=ID [offset=N durable=N]   FollowerFetched with the follower's log end and
//	                             durable end (or the ones given)
//	answer r=ID                  the follower's planned epoch query answered by its leader's
//	                             EndOffsetFor; EpochAnswered
//	answer r=ID leader-epoch=N end=N        EpochAnswered with that answer
//	truncated r=ID               the asked-for truncation made on the log; Truncated
//	fetch-answer r=ID            the leader's records past the follower's log end copied
//	                             (Appended with their epochs), then FetchAnswered with the
//	                             leader's high watermark and log start
//	out-of-range r=ID            OutOfRange with the leader's log bounds
//	tick r=ID | failed r=ID      Tick | ProposalFailed
//	await r=ID id=N last=N | cancel r=ID id=N
//	config r=ID min-insync=N [write-caching]   SetConfig
//	log-start r=ID start=N       the log's start moved; LogStartMoved
//	end-offset r=ID epoch=N      EndOffsetFor
//	accepts r=ID                 AcceptsAcksAll
//	status r=ID | log r=ID       Status | the simulated log
//
// A command prints what the replica's Ready holds (or "ok"), then, for a follower, its next
// fetch. Every step checks the package's invariants (checkInvariants).
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/scenarios with the actual output")

func TestScenarios(t *testing.T) {
	scenario.Run(t, "testdata/scenarios/*.txt", *rewrite, func(t *testing.T, file string) func(string) []string {
		s := &scenarioState{t: t, file: file, nodes: map[int32]*node{}}
		return func(cmd string) []string {
			s.line = cmd
			return s.run(cmd)
		}
	})
}

// node is one replica and its simulated log.
type node struct {
	id      int32
	r       *Replica
	start   batch.Offset
	log     []int32 // log[i] is the leader epoch of the record at start+i
	durable batch.Offset
	trunc   *Truncation // asked for, not yet made

	lastHW  batch.Offset
	wasLead bool
	epoch   int32
}

func (n *node) end() batch.Offset { return n.start + batch.Offset(len(n.log)) }

type scenarioState struct {
	t     *testing.T
	file  string
	line  string
	nodes map[int32]*node
	now   time.Time
	// released counts each wait id's releases, per replica: a wait is released once.
	released map[[2]int64]int
}

var scenarioBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *scenarioState) fatalf(format string, args ...any) {
	s.t.Fatalf("%s: %s: %s", s.file, s.line, fmt.Sprintf(format, args...))
}

func (s *scenarioState) run(line string) []string {
	f := strings.Fields(line)
	opts := map[string]string{}
	for _, a := range f[1:] {
		k, v, _ := strings.Cut(a, "=")
		opts[k] = v
	}
	if v, ok := opts["t"]; ok {
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil {
			s.fatalf("bad t=%q", v)
		}
		now := scenarioBase.Add(time.Duration(sec * float64(time.Second)))
		if now.Before(s.now) {
			s.fatalf("time goes back")
		}
		s.now = now
	} else if s.now.IsZero() {
		s.now = scenarioBase
	}
	num := func(k string, def int64) int64 {
		v, ok := opts[k]
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.fatalf("bad %s=%q", k, v)
		}
		return n
	}
	need := func(k string) int64 {
		if _, ok := opts[k]; !ok {
			s.fatalf("missing %s=", k)
		}
		return num(k, 0)
	}
	ids := func(k string) []int32 {
		var out []int32
		for _, x := range strings.Split(opts[k], ",") {
			if x == "" {
				continue
			}
			n, err := strconv.ParseInt(x, 10, 32)
			if err != nil {
				s.fatalf("bad %s=%q", k, opts[k])
			}
			out = append(out, int32(n))
		}
		return out
	}
	id := int32(need("r"))
	if f[0] == "new" {
		s.nodes[id] = s.newNode(id, opts, num)
		return s.after(s.nodes[id], nil)
	}
	n := s.nodes[id]
	if n == nil {
		s.fatalf("no replica %d", id)
	}
	var out []string
	switch f[0] {
	case "leader":
		n.r.BecomeLeader(LeaderUpdate{
			LeaderEpoch: int32(need("epoch")), PartitionEpoch: int32(num("pepoch", 0)),
			Replicas: ids("replicas"), ISR: ids("isr"),
		}, s.now)
	case "follower":
		leader := NoLeader
		if opts["leader"] != "none" {
			leader = int32(need("leader"))
		}
		n.r.BecomeFollower(FollowerUpdate{
			Leader: leader, LeaderEpoch: int32(need("epoch")), PartitionEpoch: int32(num("pepoch", 0)),
			Replicas: ids("replicas"),
		}, s.now)
	case "append":
		for range need("n") {
			n.log = append(n.log, n.r.LeaderEpoch())
		}
		n.r.Appended(n.end(), nil, s.now)
	case "sync":
		n.durable = batch.Offset(num("to", int64(n.end())))
		n.r.Synced(n.durable, s.now)
	case "fetched":
		from := s.nodes[int32(need("from"))]
		ff := FollowerFetch{ReplicaID: int32(need("from")), FetchOffset: -1, DurableOffset: -1}
		if from != nil {
			ff.FetchOffset, ff.DurableOffset, ff.LogStartOffset = from.end(), from.durable, from.start
		}
		ff.FetchOffset = batch.Offset(num("offset", int64(ff.FetchOffset)))
		ff.DurableOffset = batch.Offset(num("durable", int64(ff.DurableOffset)))
		if !n.r.FollowerFetched(ff, s.now) {
			out = append(out, "refused")
		}
	case "answer":
		plan := n.r.NextFetch()
		if plan.Kind != FetchEpochQuery {
			s.fatalf("replica %d plans no epoch query", id)
		}
		var le int32
		var end batch.Offset
		if _, ok := opts["end"]; ok {
			le, end = int32(need("leader-epoch")), batch.Offset(need("end"))
		} else {
			le, end = s.leaderOf(n, plan).r.EndOffsetFor(plan.Epoch)
		}
		out = append(out, fmt.Sprintf("asked epoch %d: leader answers epoch %d end %d", plan.Epoch, le, end))
		n.r.EpochAnswered(le, plan.Epoch, end)
	case "truncated":
		if n.trunc == nil {
			s.fatalf("replica %d has no truncation to make", id)
		}
		tr := *n.trunc
		n.trunc = nil
		if tr.Fully {
			n.start, n.log = tr.To, nil
		} else if tr.To < n.end() {
			n.log = n.log[:tr.To-n.start]
		}
		n.durable = min(n.durable, n.end())
		n.r.Truncated(n.start, n.end())
	case "fetch-answer":
		plan := n.r.NextFetch()
		if plan.Kind != FetchRecords {
			s.fatalf("replica %d plans no record fetch", id)
		}
		l := s.leaderOf(n, plan)
		if plan.Offset < l.start || plan.Offset > l.end() {
			s.fatalf("fetch at %d out of the leader's range [%d, %d]", plan.Offset, l.start, l.end())
		}
		var epochs []EpochEntry
		last := n.r.Epochs()
		latest := UndefinedEpoch
		if len(last) > 0 {
			latest = last[len(last)-1].Epoch
		}
		for o := plan.Offset; o < l.end(); o++ {
			e := l.log[o-l.start]
			if e > latest {
				epochs = append(epochs, EpochEntry{Epoch: e, StartOffset: o})
				latest = e
			}
			n.log = append(n.log, e)
		}
		if l.end() > plan.Offset {
			out = append(out, fmt.Sprintf("copied [%d, %d)", plan.Offset, l.end()))
			n.r.Appended(n.end(), epochs, s.now)
		}
		n.r.FetchAnswered(l.r.LeaderEpoch(), l.r.HighWatermark(), l.start, s.now)
	case "out-of-range":
		l := s.leaderOf(n, n.r.NextFetch())
		n.r.OutOfRange(l.start, l.end())
	case "tick":
		n.r.Tick(s.now)
	case "failed":
		n.r.ProposalFailed(s.now)
	case "await":
		n.r.Await(WaitID(need("id")), batch.Offset(need("last")))
	case "cancel":
		n.r.Cancel(WaitID(need("id")))
	case "ineligible":
		// ids= are brokers the controller would not let join an ISR (fenced, shutting
		// down); an empty list makes every broker eligible again.
		cfg := n.r.cfg
		cfg.Eligible = nil
		if out := ids("ids"); len(out) > 0 {
			cfg.Eligible = func(id int32) bool { return !slices.Contains(out, id) }
		}
		n.r.SetConfig(cfg)
	case "config":
		cfg := n.r.cfg
		cfg.MinInsync = int(num("min-insync", int64(cfg.MinInsync)))
		_, cfg.WriteCaching = opts["write-caching"]
		n.r.SetConfig(cfg)
	case "log-start":
		st := batch.Offset(need("start"))
		if st > n.start {
			drop := min(st-n.start, batch.Offset(len(n.log)))
			n.log = n.log[drop:]
			n.start = st
		}
		n.r.LogStartMoved(st)
	case "end-offset":
		e, o := n.r.EndOffsetFor(int32(need("epoch")))
		out = append(out, fmt.Sprintf("epoch %d end %d", e, o))
	case "accepts":
		out = append(out, fmt.Sprintf("accepts acks=all: %v", n.r.AcceptsAcksAll()))
	case "status":
		out = append(out, formatStatus(n.r.Status(s.now))...)
	case "log":
		out = append(out, formatLog(n))
	default:
		s.fatalf("unknown command %q", f[0])
	}
	return s.after(n, out)
}

func (s *scenarioState) newNode(id int32, opts map[string]string, num func(string, int64) int64) *node {
	n := &node{id: id, start: batch.Offset(num("start", 0))}
	var epochs []EpochEntry
	if v := opts["log"]; v != "" {
		for _, part := range strings.Split(v, ",") {
			es, cs, _ := strings.Cut(part, "*")
			e, err1 := strconv.ParseInt(es, 10, 32)
			c, err2 := strconv.ParseInt(cs, 10, 32)
			if err1 != nil || err2 != nil {
				s.fatalf("bad log=%q", v)
			}
			if len(epochs) == 0 || epochs[len(epochs)-1].Epoch != int32(e) {
				epochs = append(epochs, EpochEntry{Epoch: int32(e), StartOffset: n.end()})
			}
			for range c {
				n.log = append(n.log, int32(e))
			}
		}
	}
	n.durable = batch.Offset(num("durable", int64(n.end())))
	_, wc := opts["write-caching"]
	lag := time.Duration(num("lag", 30)) * time.Second
	n.r = New(Config{ReplicaID: id, LagTimeMax: lag, MinInsync: int(num("min-insync", 1)), WriteCaching: wc}, LogState{
		StartOffset: n.start, EndOffset: n.end(), DurableOffset: n.durable,
		HighWatermark: batch.Offset(num("hw", 0)), Epochs: epochs,
	})
	n.lastHW = n.r.HighWatermark()
	n.epoch = n.r.LeaderEpoch()
	return n
}

// leaderOf is the node a follower's plan names.
func (s *scenarioState) leaderOf(n *node, plan FetchPlan) *node {
	l := s.nodes[plan.Leader]
	if l == nil {
		s.fatalf("replica %d follows %d, which the script has not created", n.id, plan.Leader)
	}
	return l
}

// after takes n's Ready, checks the invariants, and prints what the step did.
func (s *scenarioState) after(n *node, out []string) []string {
	rd := n.r.Ready()
	if rd.Truncate != nil {
		tr := *rd.Truncate
		n.trunc = &tr
	}
	s.checkInvariants(n, rd)
	out = append(out, formatReady(rd)...)
	if n.r.Role() == Follower {
		out = append(out, formatPlan(n.r.NextFetch()))
	}
	if len(out) == 0 {
		out = append(out, "ok")
	}
	return out
}

// checkInvariants checks, after every step, what the package doc promises: the high watermark
// never moves back while the replica leads at one epoch and stays within the log; the epoch
// cache is ascending; a wait is released once.
func (s *scenarioState) checkInvariants(n *node, rd Ready) {
	r := n.r
	hw := r.HighWatermark()
	if hw < r.logStart || hw > r.logEnd {
		s.fatalf("high watermark %d outside the log [%d, %d]", hw, r.logStart, r.logEnd)
	}
	if r.logEnd != n.end() || r.logStart != n.start {
		s.fatalf("replica's log [%d, %d) is not the simulated log [%d, %d)", r.logStart, r.logEnd, n.start, n.end())
	}
	lead := r.Role() == Leader
	if lead && n.wasLead && n.epoch == r.LeaderEpoch() && hw < n.lastHW {
		s.fatalf("high watermark moved back from %d to %d", n.lastHW, hw)
	}
	if rd.HighWatermarkChanged && rd.HighWatermark != hw {
		s.fatalf("Ready's high watermark %d is not the replica's %d", rd.HighWatermark, hw)
	}
	n.lastHW, n.wasLead, n.epoch = hw, lead, r.LeaderEpoch()
	es := r.Epochs()
	for i := 1; i < len(es); i++ {
		if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset < es[i-1].StartOffset {
			s.fatalf("epoch cache not ascending: %v", es)
		}
	}
	if s.released == nil {
		s.released = map[[2]int64]int{}
	}
	for _, x := range rd.Released {
		k := [2]int64{int64(n.id), int64(x.ID)}
		if s.released[k]++; s.released[k] > 1 {
			s.fatalf("wait %d released twice", x.ID)
		}
	}
}

var waitResults = [...]string{WaitDone: "done", WaitNotEnoughISR: "not-enough-replicas-after-append", WaitNotLeader: "not-leader"}

func formatReady(rd Ready) []string {
	var out []string
	if rd.HighWatermarkChanged {
		out = append(out, fmt.Sprintf("hw: %d", rd.HighWatermark))
	}
	for _, x := range rd.Released {
		out = append(out, fmt.Sprintf("released: wait %d %s", x.ID, waitResults[x.Result]))
	}
	if p := rd.Propose; p != nil {
		out = append(out, fmt.Sprintf("propose: isr=%s leader-epoch=%d partition-epoch=%d", joinIDs(p.ISR), p.LeaderEpoch, p.PartitionEpoch))
	}
	if tr := rd.Truncate; tr != nil {
		full := ""
		if tr.Fully {
			full = " fully"
		}
		out = append(out, fmt.Sprintf("truncate: to %d%s", tr.To, full))
	}
	if rd.EpochsChanged {
		out = append(out, "epochs: "+formatEpochs(rd.Epochs))
	}
	return out
}

func formatEpochs(es []EpochEntry) string {
	if len(es) == 0 {
		return "(none)"
	}
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset)
	}
	return strings.Join(s, " ")
}

func formatPlan(p FetchPlan) string {
	switch p.Kind {
	case FetchEpochQuery:
		return fmt.Sprintf("next: epoch query to %d at leader epoch %d for epoch %d", p.Leader, p.LeaderEpoch, p.Epoch)
	case FetchRecords:
		return fmt.Sprintf("next: fetch from %d at leader epoch %d offset %d durable %d", p.Leader, p.LeaderEpoch, p.Offset, p.DurableOffset)
	}
	return "next: none"
}

var roleNames = [...]string{Offline: "offline", Leader: "leader", Follower: "follower"}

func formatStatus(st Status) []string {
	out := []string{fmt.Sprintf("%s leader=%d epoch=%d partition-epoch=%d log=[%d, %d) durable=%d hw=%d",
		roleNames[st.Role], st.Leader, st.LeaderEpoch, st.PartitionEpoch, st.LogStartOffset, st.LogEndOffset, st.DurableOffset, st.HighWatermark)}
	if st.Role == Leader {
		pending := "none"
		if st.PendingISR != nil {
			pending = joinIDs(st.PendingISR)
		}
		out = append(out, fmt.Sprintf("isr=%s pending=%s", joinIDs(st.ISR), pending))
	}
	for _, f := range st.Followers {
		caught := "never"
		if !f.LastCaughtUp.IsZero() {
			caught = fmt.Sprintf("%gs", f.LastCaughtUp.Sub(scenarioBase).Seconds())
		}
		out = append(out, fmt.Sprintf("follower %d: leo=%d durable=%d caught-up=%s in-isr=%v", f.ReplicaID, f.LogEndOffset, f.DurableOffset, caught, f.InISR))
	}
	return out
}

// formatLog prints the simulated log as runs of records per epoch.
func formatLog(n *node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "log [%d, %d):", n.start, n.end())
	for i := 0; i < len(n.log); {
		j := i
		for j < len(n.log) && n.log[j] == n.log[i] {
			j++
		}
		fmt.Fprintf(&b, " %d-%d@e%d", n.start+batch.Offset(i), n.start+batch.Offset(j-1), n.log[i])
		i = j
	}
	return b.String()
}

func joinIDs(ids []int32) string {
	if len(ids) == 0 {
		return "(none)"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}
