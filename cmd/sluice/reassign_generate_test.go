package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/net/wire"
	"github.com/sluicemq/sluice/reassign"
)

// threeBrokers starts three combined broker+controller nodes (ids 0, 1, 2) in this process
// (brokertest.ClusterConfigs, each config changed by tune if it is not nil), waits until the
// metadata lists all three and a controller, and returns their addresses as a
// --bootstrap-server list.
func threeBrokers(t *testing.T, tune func(*broker.Config)) string {
	t.Helper()
	cfgs := brokertest.ClusterConfigs(t, 3)
	for i := range cfgs {
		cfgs[i].DisableControlledShutdown = true
		cfgs[i].BallastBytes, cfgs[i].ScrubBytesPerSec = -1, -1
		cfgs[i].OffsetsTopicPartitions = 1
		if tune != nil {
			tune(&cfgs[i])
		}
	}
	var addrs []string
	for _, b := range brokertest.OpenCluster(t, cfgs) {
		addrs = append(addrs, b.Addr().String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		md := wire.MetadataResponse{Version: 1}
		c, err := client.Dial(ctx, addrs[0], "reassign-test")
		if err == nil {
			err = c.Call(ctx, &wire.MetadataRequest{Version: 1, Topics: []string{}}, &md)
			_ = c.Close()
		}
		if err == nil && len(md.Brokers) == 3 && md.ControllerID >= 0 {
			return strings.Join(addrs, ",")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the metadata never listed three brokers and a controller: %+v, %v", md, err)
		case <-tick.C:
		}
	}
}

// Against three brokers: generate reads each topic's replicas from the cluster, prints them as
// the current assignment and a proposal that parses, is balanced (replicas and preferred
// leaders within one of each other per broker), keeps every replication factor, and moves
// only what balance needs; the same seed prints the same. Unknown topics, brokers the cluster
// does not have, and a malformed file are refused, each named.
func TestReassignGenerateOnThreeBrokers(t *testing.T) {
	bootstrap := threeBrokers(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := client.NewAdminWithConfig(ctx, client.AdminConfig{Config: client.Config{Brokers: strings.Split(bootstrap, ","), ClientID: "reassign-test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// skew: six partitions, RF 2, all on brokers 0 and 1; single: four partitions on broker 2.
	skew := [][]int32{{0, 1}, {1, 0}, {0, 1}, {1, 0}, {0, 1}, {1, 0}}
	single := [][]int32{{2}, {2}, {2}, {2}}
	for name, asg := range map[string][][]int32{"skew": skew, "single": single} {
		if err := a.CreateTopic(ctx, client.TopicSpec{Name: name, Assignment: asg}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) (string, error) {
		cmd := reassignCmd()
		cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under the root command
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append(args, "--bootstrap-server", bootstrap))
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	topics := file("topics.json", "{\"topics\": [{\"topic\": \"skew\"}, {\"topic\": \"single\"}],\n \"version\": 1}\n")
	out, err := run("generate", "--topics-to-move-json-file", topics, "--broker-list", "0,1,2", "--seed", "5")
	if err != nil {
		t.Fatal(err)
	}
	const curHead, propHead = "Current partition replica assignment\n", "\n\nProposed partition reassignment configuration\n"
	i := strings.Index(out, propHead)
	if !strings.HasPrefix(out, curHead) || i < 0 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("output is not Kafka's two sections:\n%s", out)
	}
	current, err := reassign.ParsePlan([]byte(out[len(curHead):i]))
	if err != nil {
		t.Fatalf("current assignment: %v\n%s", err, out)
	}
	proposed, err := reassign.ParsePlan([]byte(strings.TrimSuffix(out[i+len(propHead):], "\n")))
	if err != nil {
		t.Fatalf("proposal: %v\n%s", err, out)
	}
	want := map[string][][]int32{"skew": skew, "single": single}
	if len(current.Partitions) != 10 {
		t.Fatalf("current assignment has %d partitions, want 10:\n%s", len(current.Partitions), out)
	}
	for _, pp := range current.Partitions {
		if !slices.Equal(pp.Replicas, want[pp.Topic][pp.Partition]) {
			t.Fatalf("current %s-%d: %v, want %v", pp.Topic, pp.Partition, pp.Replicas, want[pp.Topic][pp.Partition])
		}
	}
	replicas, leaders := map[int32]int{}, map[int32]int{}
	moved := 0
	for j, pp := range proposed.Partitions {
		cur := current.Partitions[j]
		if pp.Topic != cur.Topic || pp.Partition != cur.Partition || len(pp.Replicas) != len(cur.Replicas) {
			t.Fatalf("proposed %+v for current %+v", pp, cur)
		}
		leaders[pp.Replicas[0]]++
		for _, b := range pp.Replicas {
			replicas[b]++
			if !slices.Contains(cur.Replicas, b) {
				moved++
			}
		}
	}
	// Per topic, skew's 12 replicas are 4 per broker: brokers 0 and 1 each give 2 to broker 2;
	// single's 4 are 2, 1, 1: broker 2 gives 2 away. 6 moves, the fewest balance allows, and
	// over all 5, 5, 6.
	if spread3(replicas) > 1 || spread3(leaders) > 1 || moved != 6 {
		t.Fatalf("replicas per broker %v, leaders %v, %d moved (want spreads ≤ 1, 6 moved):\n%s", replicas, leaders, moved, out)
	}
	again, err := run("generate", "--topics-to-move-json-file", topics, "--broker-list", "0,1,2", "--seed", "5")
	if err != nil || again != out {
		t.Fatalf("the same seed again:\n%s\n%v", again, err)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown topic", []string{"--topics-to-move-json-file", file("unknown.json", `{"version":1,"topics":[{"topic":"skew"},{"topic":"nope"}]}`), "--broker-list", "0,1"},
			`topic "nope" not found`},
		{"brokers not in the cluster", []string{"--topics-to-move-json-file", topics, "--broker-list", "0,7,9"},
			"broker 7 is not in the cluster (its brokers: 0,1,2); broker 9 is not in the cluster (its brokers: 0,1,2)"},
		{"malformed file", []string{"--topics-to-move-json-file", file("bad.json", "{\"version\":1,\n \"topics\":[{\"topic\":\"skew\",}]}"), "--broker-list", "0,1"},
			"bad.json: line 2, column 28: malformed JSON: invalid character '}' looking for beginning of object key string"},
		{"wrong shape", []string{"--topics-to-move-json-file", file("shape.json", `{"version":1,"partitions":[]}`), "--broker-list", "0,1"},
			`shape.json: line 1, column 14: partitions: unknown field "partitions" (want "version", "topics")`},
		{"RF above the brokers", []string{"--topics-to-move-json-file", topics, "--broker-list", "1"},
			"skew-0 has 2 replicas"},
		{"broker list", []string{"--topics-to-move-json-file", topics, "--broker-list", "0,x"}, `"x" is not a broker id`},
		{"broker twice", []string{"--topics-to-move-json-file", topics, "--broker-list", "0,1,0"}, "broker 0 is listed twice"},
		{"no file", []string{"--broker-list", "0,1"}, "--topics-to-move-json-file and --broker-list are required"},
	} {
		out, err := run(append([]string{"generate"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out != "" {
			t.Errorf("%s: %v (printed %q), want an error with %q", tc.name, err, out, tc.want)
		}
	}
}

func spread3(m map[int32]int) int {
	lo, hi := m[0], m[0]
	for b := int32(1); b < 3; b++ {
		lo, hi = min(lo, m[b]), max(hi, m[b])
	}
	return hi - lo
}

// `sluice reassign` is a group of subcommands: alone it fails; generate takes no arguments.
func TestReassignCommandShape(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reassign"}, `missing subcommand for "sluice reassign"`},
		{[]string{"reassign", "genrate"}, `unknown command "genrate" for "sluice reassign"; did you mean generate?`},
		{[]string{"reassign", "generate", "topics.json"}, `sluice reassign generate takes no arguments, got "topics.json": the topics are in --topics-to-move-json-file`},
	} {
		root := rootCmd()
		var stdout, stderr bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		root.SetArgs(append(c.args, "--broker", "unix:///nonexistent/s.sock"))
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), c.want) || stdout.Len() > 0 {
			t.Errorf("sluice %v: %v (stdout %q), want %q", c.args, err, stdout.String(), c.want)
		}
	}
}
