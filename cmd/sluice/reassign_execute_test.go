package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/client"
)

// End-to-end tests of the commands that move replicas and leaders (reassign execute, verify,
// cancel, list; leader-election; topic alter --partitions): the cobra commands run in this
// process against three in-process brokers, and each test checks what they print and what
// the cluster's metadata says afterwards.
//
// A move is held in progress by data and a throttle: the replicas fetch at most
// moveFetchBytes per partition a request, so a partition holding several times that, with a
// throttle of 1 B/s, has its new replica fetch once and then wait for hours.

const moveFetchBytes = 16 << 10

// moveEnv is a three-broker cluster, an Admin on it, and a directory for plan files.
type moveEnv struct {
	t         *testing.T
	ctx       context.Context
	bootstrap string
	a         *client.Admin
	dir       string
}

func newMoveEnv(t *testing.T) *moveEnv {
	t.Helper()
	bootstrap := threeBrokers(t, func(c *broker.Config) {
		c.ReplicaFetchMaxBytes = moveFetchBytes
		c.DisableAutoLeaderRebalance = true // the leader-election test moves leaders itself
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: strings.Split(bootstrap, ","), ClientID: "move-test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return &moveEnv{t: t, ctx: ctx, bootstrap: bootstrap, a: a, dir: t.TempDir()}
}

// run executes the command cmd builds with args (and --bootstrap-server) as the root command
// would, and returns what it printed and its error (the root turns one into exit status 1).
func (e *moveEnv) run(cmd *cobra.Command, args ...string) (string, error) {
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(args, "--bootstrap-server", e.bootstrap))
	err := cmd.ExecuteContext(e.ctx)
	return out.String(), err
}

// must is run that fails the test on an error.
func (e *moveEnv) must(cmd *cobra.Command, args ...string) string {
	e.t.Helper()
	out, err := e.run(cmd, args...)
	if err != nil {
		e.t.Fatalf("%s %v: %v\n%s", cmd.Name(), args, err, out)
	}
	return out
}

// plan writes a plan file moving each "topic-partition" of moves to its replicas.
func (e *moveEnv) plan(name string, moves map[string][]int32) string {
	e.t.Helper()
	var parts []string
	for tp, replicas := range moves {
		i := strings.LastIndex(tp, "-")
		parts = append(parts, fmt.Sprintf(`{"topic":%q,"partition":%s,"replicas":[%s]}`, tp[:i], tp[i+1:], joinIDs(replicas)))
	}
	slices.Sort(parts)
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(`{"version":1,"partitions":[`+strings.Join(parts, ",")+"]}\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// topic creates a topic with the given replica lists, waits until every broker's metadata
// has it, and writes records bytes of data to each partition (acks=all).
func (e *moveEnv) topic(name string, assignment [][]int32, bytes int) {
	e.t.Helper()
	if err := e.a.CreateTopic(e.ctx, client.TopicSpec{Name: name, Assignment: assignment}); err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
	e.eventually("topic "+name+" led on every partition", func() (bool, string) {
		info, _, err := e.a.DescribeTopic(e.ctx, name)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range info.Partitions {
			if p.Leader < 0 {
				return false, fmt.Sprintf("%+v", info.Partitions)
			}
		}
		return len(info.Partitions) == len(assignment), fmt.Sprintf("%+v", info.Partitions)
	})
	if bytes == 0 {
		return
	}
	p, err := client.NewProducer(e.ctx, client.ProducerConfig{Config: client.Config{Brokers: strings.Split(e.bootstrap, ",")}, Acks: client.AcksAll})
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()
	value := make([]byte, 2<<10)
	for part := range assignment {
		for range bytes / len(value) {
			p.Send(e.ctx, &client.Record{Topic: name, Partition: int32(part), PartitionSet: true, Value: value}, nil)
		}
	}
	if err := p.Flush(e.ctx); err != nil {
		e.t.Fatalf("fill %s: %v", name, err)
	}
}

// partition is topic-partition's replicas and leader in the metadata.
func (e *moveEnv) partition(topic string, partition int32) ([]int32, int32) {
	e.t.Helper()
	info, _, err := e.a.DescribeTopic(e.ctx, topic)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range info.Partitions {
		if p.Partition == partition {
			return p.Replicas, p.Leader
		}
	}
	e.t.Fatalf("%s-%d is not in the metadata", topic, partition)
	return nil, -1
}

// wantThrottles waits until brokers 0, 1 and 2 have the replication throttle rates of want,
// "leader/follower" each ("/" for none): the broker that answers may have the metadata a
// moment after the controller.
func (e *moveEnv) wantThrottles(what string, want []string) {
	e.t.Helper()
	e.eventually(what+": throttles "+strings.Join(want, " "), func() (bool, string) {
		var got []string
		for id := range 3 {
			cfgs, err := e.a.DescribeBrokerConfigs(e.ctx, strconv.Itoa(id))
			if err != nil {
				return false, err.Error()
			}
			got = append(got, cfgs[client.LeaderThrottledRate]+"/"+cfgs[client.FollowerThrottledRate])
		}
		return slices.Equal(got, want), strings.Join(got, " ")
	})
}

// eventually polls cond until it holds, failing the test with cond's last word after 20 s.
func (e *moveEnv) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not after 20 s; last: %s", what, last)
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("%s: %v; last: %s", what, e.ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// A throttled move runs to the end: execute prints the rollback plan and the throttle, and
// sets the rates on every broker the plan names; verify says the move is in progress or done,
// and once it is done the metadata has the plan's replicas, a leader among them, and verify
// has removed the rates.
func TestReassignExecuteVerifyThrottled(t *testing.T) {
	e := newMoveEnv(t)
	e.topic("moves", [][]int32{{0, 1}}, 64<<10)
	plan := e.plan("plan.json", map[string][]int32{"moves-0": {1, 2}})

	out := e.must(reassignCmd(), "execute", "--reassignment-json-file", plan, "--throttle", "50000000")
	for _, want := range []string{
		"Current partition replica assignment\n\n" + `{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[0,1],"log_dirs":["any","any"]}]}` + "\n\nSave this to use as the --reassignment-json-file option during rollback\n",
		"The inter-broker throttle limit was set to 50000000 B/s on brokers 0,1,2\n",
		"Successfully started partition reassignments for moves-0\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("execute printed\n%s\nwant it to contain\n%s", out, want)
		}
	}
	e.wantThrottles("throttles after execute", []string{"50000000/50000000", "50000000/50000000", "50000000/50000000"})

	var last string
	e.eventually("verify says moves-0 is complete", func() (bool, string) {
		out, err := e.run(reassignCmd(), "verify", "--reassignment-json-file", plan)
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		last = out
		if strings.Contains(out, "still in progress") && strings.Contains(out, "Clearing") {
			t.Fatalf("verify cleared the throttles of a move in progress:\n%s", out)
		}
		return strings.Contains(out, "Reassignment of partition moves-0 is complete."), out
	})
	if want := "Clearing broker-level throttles on brokers 0,1,2\n"; !strings.HasSuffix(last, want) {
		t.Fatalf("the verify that saw the move complete printed\n%s\nwant it to end with %q", last, want)
	}
	e.wantThrottles("throttles after verify", []string{"/", "/", "/"})
	e.eventually("the metadata has moves-0 on 1,2", func() (bool, string) {
		r, l := e.partition("moves", 0)
		return slices.Equal(r, []int32{1, 2}) && (l == 1 || l == 2), fmt.Sprintf("replicas %v leader %d", r, l)
	})
	// Again, nothing to move, nothing throttled: complete, nothing cleared.
	if out := e.must(reassignCmd(), "verify", "--reassignment-json-file", plan); out != "Status of partition reassignment:\nReassignment of partition moves-0 is complete.\n" {
		t.Fatalf("verify of a finished plan printed %q", out)
	}
}

// A move held by a 1 B/s throttle: list shows it with its adding and removing replicas, verify
// says it is in progress and leaves the throttle; cancel puts the partition back on its
// original replicas and removes the throttle; list then shows nothing, and verify calls the
// plan failed.
func TestReassignListAndCancel(t *testing.T) {
	e := newMoveEnv(t)
	e.topic("slow", [][]int32{{0, 1}}, 8*moveFetchBytes)
	plan := e.plan("plan.json", map[string][]int32{"slow-0": {1, 2}})
	e.must(reassignCmd(), "execute", "--reassignment-json-file", plan, "--throttle", "1")

	e.eventually("list shows slow-0 moving", func() (bool, string) {
		out, err := e.run(reassignCmd(), "list")
		return err == nil && out == "Current partition reassignments:\nslow-0: replicas: 1,2,0. adding: 2. removing: 0.\n", fmt.Sprintf("%v: %q", err, out)
	})
	out := e.must(reassignCmd(), "verify", "--reassignment-json-file", plan)
	if !strings.Contains(out, "Reassignment of partition slow-0 is still in progress (broker 2: ") || strings.Contains(out, "Clearing") {
		t.Fatalf("verify of a move in progress printed\n%s", out)
	}
	e.wantThrottles("throttles during the move", []string{"1/1", "1/1", "1/1"})

	out = e.must(reassignCmd(), "cancel", "--reassignment-json-file", plan)
	if want := "Successfully cancelled partition reassignments for: slow-0\nClearing broker-level throttles on brokers 0,1,2\n"; out != want {
		t.Fatalf("cancel printed %q, want %q", out, want)
	}
	// Back on brokers 0 and 1, though not in their order: during the move the metadata keeps
	// the target then the replicas being removed (1,2,0), and a cancel takes the adding ones
	// out (1,0); the original order is not kept (cluster.PartitionMeta.OriginalReplicas).
	// The rollback plan execute printed puts it back.
	e.eventually("slow-0 back on 0,1, nothing moving", func() (bool, string) {
		r, l := e.partition("slow", 0)
		out, _ := e.run(reassignCmd(), "list")
		return slices.Equal(slices.Sorted(slices.Values(r)), []int32{0, 1}) && (l == 0 || l == 1) && out == "No partition reassignments found.\n",
			fmt.Sprintf("replicas %v leader %d; list: %q", r, l, out)
	})
	e.wantThrottles("throttles after cancel", []string{"/", "/", "/"})
	out, err := e.run(reassignCmd(), "verify", "--reassignment-json-file", plan)
	if err == nil || !strings.Contains(out, "Reassignment of partition slow-0 failed: its replicas are ") {
		t.Fatalf("verify of a cancelled plan: %v\n%s", err, out)
	}
	out = e.must(reassignCmd(), "cancel", "--reassignment-json-file", plan)
	if out != "None of the plan's partitions is being moved: nothing to cancel.\n" {
		t.Fatalf("a second cancel printed %q", out)
	}
}

// Two throttled moves: slow-0 (held by its 1 B/s throttle) from broker 0 to 0 and 1, then
// quick-0 (empty, done at once) from 1 to 2. The verify that finds quick-0 done clears the
// rate of broker 2, which only quick-0 used, and keeps those of 0 and 1 that slow-0 still
// catches up under (broker 1 is the one quick-0 left: the plan no longer names it); the
// cancel of slow-0 then clears them.
func TestReassignVerifyKeepsAnotherMovesThrottle(t *testing.T) {
	e := newMoveEnv(t)
	e.topic("slow", [][]int32{{0}}, 8*moveFetchBytes)
	e.topic("quick", [][]int32{{1}}, 0)
	slow := e.plan("slow.json", map[string][]int32{"slow-0": {0, 1}})
	quick := e.plan("quick.json", map[string][]int32{"quick-0": {2}})
	e.must(reassignCmd(), "execute", "--reassignment-json-file", slow, "--throttle", "1")
	e.must(reassignCmd(), "execute", "--reassignment-json-file", quick, "--throttle", "1")
	e.wantThrottles("throttles of the two moves", []string{"1/1", "1/1", "1/1"})
	var last string
	e.eventually("verify says quick-0 is complete", func() (bool, string) {
		out, err := e.run(reassignCmd(), "verify", "--reassignment-json-file", quick)
		last = out
		return err == nil && strings.Contains(out, "Reassignment of partition quick-0 is complete."), fmt.Sprintf("%v: %s", err, out)
	})
	if want := "\nClearing broker-level throttles on brokers 2\nKeeping the throttles on brokers 0,1: moves still in progress use them (slow-0)\n"; !strings.HasSuffix(last, want) {
		t.Fatalf("verify of quick printed\n%s\nwant it to end with\n%s", last, want)
	}
	e.wantThrottles("throttles after quick's verify", []string{"1/1", "1/1", "/"})
	if moving, err := e.a.ListPartitionReassignments(e.ctx, nil); err != nil || len(moving) != 1 || moving[0].Topic != "slow" {
		t.Fatalf("moves in progress: %+v, %v; want slow-0's alone", moving, err)
	}
	out := e.must(reassignCmd(), "cancel", "--reassignment-json-file", slow)
	if !strings.HasSuffix(out, "Clearing broker-level throttles on brokers 0,1\n") {
		t.Fatalf("cancel of slow printed\n%s", out)
	}
	e.wantThrottles("throttles after slow's cancel", []string{"/", "/", "/"})
}

// A plan with any bad entry is refused as a whole: every problem named, a non-zero exit,
// nothing started, and the throttle it would have set not left behind.
func TestReassignExecuteRefusesBadPlan(t *testing.T) {
	e := newMoveEnv(t)
	e.topic("good", [][]int32{{0, 1}, {1, 2}}, 0)
	for _, tc := range []struct {
		name  string
		moves map[string][]int32
		want  []string
	}{
		{"unknown broker", map[string][]int32{"good-0": {1, 2}, "good-1": {0, 7}}, []string{"good-1", "broker 7"}},
		{"unknown topic", map[string][]int32{"good-0": {1, 2}, "nope-0": {0, 1}}, []string{"nope-0"}},
		{"unknown partition", map[string][]int32{"good-0": {1, 2}, "good-5": {0, 1}}, []string{"good-5"}},
		{"both", map[string][]int32{"good-0": {1, 2}, "good-1": {0, 9}, "nope-3": {0, 1}}, []string{"good-1", "broker 9", "nope-3"}},
		{"replica twice", map[string][]int32{"good-0": {1, 1}}, []string{"good-0", "twice"}},
	} {
		out, err := e.run(reassignCmd(), "execute", "--reassignment-json-file", e.plan(tc.name+".json", tc.moves), "--throttle", "1000")
		if err == nil {
			t.Fatalf("%s: execute succeeded:\n%s", tc.name, out)
		}
		if !strings.Contains(err.Error(), tc.name+".json: ") || strings.Count(err.Error(), "nothing started") > 1 {
			t.Errorf("%s: error %q does not name the file, or repeats itself", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", tc.name, err, w)
			}
		}
		if strings.Contains(out, "Successfully started") {
			t.Errorf("%s: execute printed %q", tc.name, out)
		}
	}
	if moving, err := e.a.ListPartitionReassignments(e.ctx, nil); err != nil || len(moving) != 0 {
		t.Fatalf("moves after refused plans: %+v, %v", moving, err)
	}
	for p, want := range [][]int32{{0, 1}, {1, 2}} {
		if r, _ := e.partition("good", int32(p)); !slices.Equal(r, want) {
			t.Errorf("good-%d: replicas %v after refused plans, want %v", p, r, want)
		}
	}
	e.wantThrottles("throttles after refused plans", []string{"/", "/", "/"})
}

// Preferred leader election: a reassignment that only reorders a partition's replicas leaves
// the leader where it was, off the new preferred replica; the election puts it back; then
// nothing needs one. An unclean election of a partition that has a leader is not needed.
func TestLeaderElection(t *testing.T) {
	e := newMoveEnv(t)
	e.topic("lead", [][]int32{{0, 1}, {1, 2}}, 0)
	e.must(reassignCmd(), "execute", "--reassignment-json-file", e.plan("order.json", map[string][]int32{"lead-0": {1, 0}}))
	e.eventually("lead-0's replicas reordered to 1,0 with 0 still leading", func() (bool, string) {
		r, l := e.partition("lead", 0)
		return slices.Equal(r, []int32{1, 0}) && l == 0, fmt.Sprintf("replicas %v leader %d", r, l)
	})

	out := e.must(leaderElectionCmd(), "--election-type", "preferred", "--topic", "lead", "--partition", "0")
	if out != "Successfully completed leader election (PREFERRED) for partitions lead-0\n" {
		t.Fatalf("preferred election printed %q", out)
	}
	e.eventually("broker 1 leads lead-0", func() (bool, string) {
		_, l := e.partition("lead", 0)
		return l == 1, fmt.Sprintf("leader %d", l)
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"all, none needed", []string{"--election-type", "preferred", "--all-topic-partitions"}, "No partition needed an election.\n"},
		{"one, not needed", []string{"--election-type", "preferred", "--topic", "lead", "--partition", "1"}, "Valid replica already elected for partitions lead-1\n"},
		{"unclean with a leader", []string{"--election-type", "unclean", "--topic", "lead", "--partition", "0"}, "Valid replica already elected for partitions lead-0\n"},
		{"file", []string{"--election-type", "preferred", "--path-to-json-file", writeFile(t, e.dir, "el.json", `{"partitions":[{"topic":"lead","partition":0},{"topic":"lead","partition":1}]}`)},
			"Valid replica already elected for partitions lead-0, lead-1\n"},
	} {
		if out := e.must(leaderElectionCmd(), tc.args...); out != tc.want {
			t.Errorf("%s: printed %q, want %q", tc.name, out, tc.want)
		}
	}
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"bad type", `--election-type "fair": want preferred or unclean`, []string{"--election-type", "fair", "--all-topic-partitions"}},
		{"two selections", "give one of --topic T --partition P, --all-topic-partitions, --path-to-json-file F", []string{"--election-type", "preferred", "--all-topic-partitions", "--topic", "lead", "--partition", "0"}},
		{"topic alone", "--topic and --partition go together", []string{"--election-type", "preferred", "--topic", "lead"}},
		{"unknown partition", "leader election failed for lead-9", []string{"--election-type", "preferred", "--topic", "lead", "--partition", "9"}},
	} {
		if _, err := e.run(leaderElectionCmd(), tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// topic alter --partitions grows a topic (the new partitions led and placed on the cluster's
// brokers) and refuses to shrink it or to keep its count.
func TestTopicAlterPartitions(t *testing.T) {
	e := newMoveEnv(t)
	e.topic("grow", [][]int32{{0, 1}}, 0)
	if out := e.must(topicCmd(), "alter", "grow", "--partitions", "3"); out != "Topic grow now has 3 partitions.\n" {
		t.Fatalf("alter printed %q", out)
	}
	e.eventually("grow has 3 led partitions of 2 replicas", func() (bool, string) {
		info, _, err := e.a.DescribeTopic(e.ctx, "grow")
		if err != nil {
			return false, err.Error()
		}
		ok := len(info.Partitions) == 3
		for _, p := range info.Partitions {
			ok = ok && len(p.Replicas) == 2 && p.Leader >= 0
		}
		return ok, fmt.Sprintf("%+v", info.Partitions)
	})
	for _, tc := range []struct {
		name  string
		count string
		want  string
	}{
		{"shrink", "2", "grow has 3 partitions; the new count 2 must be more"},
		{"same count", "3", "grow has 3 partitions; the new count 3 must be more"},
		{"zero", "0", "--partitions 0: the new total must be at least 1"},
	} {
		if out, err := e.run(topicCmd(), "alter", "grow", "--partitions", tc.count); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (printed %q), want an error with %q", tc.name, err, out, tc.want)
		}
	}
	if info, _, err := e.a.DescribeTopic(e.ctx, "grow"); err != nil || len(info.Partitions) != 3 {
		t.Fatalf("grow after refused alters: %+v, %v", info.Partitions, err)
	}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
