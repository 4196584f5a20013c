package main

import (
	"bytes"
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/broker/brokertest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/localhost"
	"github.com/sluicemq/sluice/net/wire"
)

// nodeID is the in-process broker's id.
func (e *consumeEnv) nodeID() int32 {
	e.t.Helper()
	brokers := e.b.Controller().Metadata().Brokers()
	if len(brokers) != 1 {
		e.t.Fatalf("brokers: %v", brokers)
	}
	return brokers[0].ID
}

// runRaw runs cmd with exactly args (no --broker added).
func (e *consumeEnv) runRaw(cmd *cobra.Command, stdin string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(e.ctx)
	return out.String(), errOut.String(), err
}

// Every client command takes --bootstrap-server (-b) with a list, the first address that
// answers serving, and keeps --broker as its alias.
func TestBootstrapServerFlags(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("boot", 1)
	addr := e.b.Addr().String()
	dead := freeAddr(t)
	for _, args := range [][]string{
		{"list", "--bootstrap-server", addr},
		{"list", "-b", addr},
		{"list", "--broker", addr},
		{"list", "--bootstrap-server", dead + "," + addr},
	} {
		out, _, err := e.runRaw(topicCmd(), "", args...)
		if err != nil || !strings.Contains(out, "boot\n") {
			t.Errorf("topic %v: %q, %v; want the topic listed", args, out, err)
		}
	}
	if _, _, err := e.runRaw(topicCmd(), "", "list", "-b", " , "); err == nil || !strings.Contains(err.Error(), "no address") {
		t.Errorf("an empty list: %v, want it refused", err)
	}
	// produce and consume too, with -t.
	if _, errOut, err := e.runRaw(produceCmd(), "one\ntwo\n", "-b", dead+","+addr, "-t", "boot"); err != nil {
		t.Fatalf("produce -b -t: %v\n%s", err, errOut)
	}
	out, errOut, err := e.runRaw(consumeCmd(), "", "-b", addr, "-t", "boot", "--from-beginning", "--max-messages", "2")
	if err != nil || out != "one\ntwo\n" {
		t.Fatalf("consume -b -t: %q, %v\n%s", out, err, errOut)
	}
}

// freeAddr is a loopback address nothing listens on (a port just closed).
func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
}

// topic create places replicas from --replica-assignment (Kafka's format, the partition count
// from it), --if-not-exists makes an existing topic a success, and topic describe without a
// name prints Kafka's line for every partition of every topic.
func TestTopicCreateDescribeKafkaForms(t *testing.T) {
	e := newConsumeEnv(t)
	id := e.nodeID()
	run := func(args ...string) (string, string, error) { return e.runCmd(topicCmd(), args...) }
	asg := fmt.Sprintf("%d,%d,%d", id, id, id)
	if out, _, err := run("create", "placed", "--replica-assignment", asg); err != nil || out != "Created topic placed.\n" {
		t.Fatalf("create --replica-assignment %s: %q, %v", asg, out, err)
	}
	if out, errOut, err := run("create", "placed", "--if-not-exists"); err != nil || out != "" || errOut != "" {
		t.Fatalf("create --if-not-exists of an existing topic: %q %q %v; want success, silent", out, errOut, err)
	}
	if _, _, err := run("create", "placed"); err == nil || !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("create of an existing topic without --if-not-exists: %v", err)
	}
	if _, _, err := run("create", "other", "--replica-assignment", asg, "--partitions", "3"); err == nil || !strings.Contains(err.Error(), "--replica-assignment and --partitions cannot be used together") {
		t.Fatalf("--replica-assignment with --partitions: %v", err)
	}
	if _, _, err := run("create", "second", "--partitions", "1"); err != nil {
		t.Fatal(err)
	}

	out, _, err := run("describe")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Topic: placed\tPartitionCount: 3\tReplicationFactor: 1\tInternal: false\n",
		fmt.Sprintf("\tTopic: placed\tPartition: 2\tLeader: %d\tReplicas: %d\tIsr: %d\tLeaderEpoch: ", id, id, id),
		fmt.Sprintf("\tTopic: second\tPartition: 0\tLeader: %d\tReplicas: %d\tIsr: %d\t", id, id, id),
		"Topic: __consumer_offsets\t",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe of every topic lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Configs:") {
		t.Errorf("describe of every topic printed configs:\n%s", out)
	}
	if out, _, err := run("describe", "--exclude-internal"); err != nil || strings.Contains(out, "__consumer_offsets") {
		t.Errorf("describe --exclude-internal: %v\n%s", err, out)
	}
	// A healthy broker: no partition is under-replicated or unavailable.
	for _, f := range []string{"--under-replicated-partitions", "--unavailable-partitions"} {
		if out, _, err := run("describe", f); err != nil || out != "" {
			t.Errorf("describe %s on a healthy broker: %q, %v; want nothing", f, out, err)
		}
	}
	out, _, err = run("describe", "second")
	if err != nil || !strings.Contains(out, "Configs:\n") || strings.Contains(out, "placed") {
		t.Errorf("describe of one topic: %v\n%s", err, out)
	}
	if _, _, err := run("describe", "absent"); err == nil || strings.Count(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") != 1 {
		t.Errorf("describe of a missing topic: %v; want UNKNOWN_TOPIC_OR_PARTITION, said once", err)
	}

	out, _, err = run("list", "--exclude-internal")
	if err != nil || out != "placed\nsecond\n" {
		t.Errorf("list --exclude-internal: %q, %v", out, err)
	}
	if out, _, _ := run("list"); !strings.Contains(out, "__consumer_offsets\n") {
		t.Errorf("list without --exclude-internal: %q; want the internal topic", out)
	}
}

func TestParseReplicaAssignment(t *testing.T) {
	got, err := parseReplicaAssignment("0:1,1:0,0:1,1:0")
	if err != nil || fmt.Sprint(got) != "[[0 1] [1 0] [0 1] [1 0]]" {
		t.Fatalf("the seed's assignment: %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"":        "empty",
		"0:x":     `partition 0: "x" is not a broker id`,
		"0:1,2:2": "partition 1 names broker 2 twice",
		"0:1,2":   "partition 1 has 1 replicas, partition 0 has 2",
		"0,-1":    `partition 1: "-1" is not a broker id`,
		"0,,1":    `partition 1: "" is not a broker id`,
	} {
		if _, err := parseReplicaAssignment(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", in, err, want)
		}
	}
}

func TestDescribeFilters(t *testing.T) {
	live := map[int32]bool{0: true, 1: true}
	for _, tc := range []struct {
		p                  wire.MetadataPartition
		under, unavailable bool
	}{
		{wire.MetadataPartition{Leader: 0, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}, false, false},
		{wire.MetadataPartition{Leader: 0, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1}}, true, false},
		{wire.MetadataPartition{Leader: -1, Replicas: []int32{2}, ISR: []int32{2}}, false, true},
		{wire.MetadataPartition{Leader: 2, Replicas: []int32{2, 0}, ISR: []int32{2}}, true, true}, // leader not alive
	} {
		if got := isUnderReplicated(tc.p); got != tc.under {
			t.Errorf("%+v: under-replicated %v, want %v", tc.p, got, tc.under)
		}
		if got := isUnavailable(tc.p, live); got != tc.unavailable {
			t.Errorf("%+v: unavailable %v, want %v", tc.p, got, tc.unavailable)
		}
	}
}

// produce --partition sends every record there; headers come from --header and, with
// parse.headers=true, from each line as kafka-console-producer reads them.
func TestProducePartitionAndHeaders(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("hdr", 3)
	addr := e.b.Addr().String()
	in := "a:1,b:2\tk1\tv1\n\tk2\tv2\n"
	if _, errOut, err := e.runRaw(produceCmd(), in, "-b", addr, "-t", "hdr", "--partition", "2",
		"--property", "parse.headers=true", "--property", "parse.key=true", "--header", "src=cli"); err != nil {
		t.Fatalf("produce: %v\n%s", err, errOut)
	}
	out, errOut, err := e.runRaw(consumeCmd(), "", "-b", addr, "-t", "hdr", "--from-beginning", "--max-messages", "2", "--format", `%p|%h|%k|%s\n`)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, errOut)
	}
	if want := "2|a=1,b=2,src=cli|k1|v1\n2|src=cli|k2|v2\n"; out != want {
		t.Fatalf("consumed %q, want %q", out, want)
	}
	for _, tc := range []struct {
		stdin   string
		args    []string
		wantErr string
	}{
		{"x\n", []string{"--property", "parse.header=true"}, "--property parse.header: unknown property; did you mean parse.headers?"},
		{"x\n", []string{"--property", "acks=1"}, "acks is a producer property: give it with --producer-property"},
		{"x\n", []string{"--header", "novalue"}, `--header "novalue": want key=value`},
		{"x\n", []string{"--partition", "-2"}, "--partition -2"},
		{"nodelim\n", []string{"--property", "parse.headers=true"}, `line 1: no headers delimiter "\t"`},
		{"h\tv\n", []string{"--property", "parse.headers=true"}, `line 1: header "h": want key:value`},
	} {
		args := append([]string{"-b", addr, "-t", "hdr"}, tc.args...)
		if _, errOut, err := e.runRaw(produceCmd(), tc.stdin, args...); err == nil || !strings.Contains(err.Error()+errOut, tc.wantErr) {
			t.Errorf("produce %v: %v\n%s\nwant an error saying %q", tc.args, err, errOut, tc.wantErr)
		}
	}
}

// --producer-property and --consumer-property take the clients' Kafka names; an unknown one is
// refused with the names it may be a misspelling of, and a property set both by a flag and as
// a property is refused.
func TestClientProperties(t *testing.T) {
	e := newConsumeEnv(t)
	e.topic("props", 1)
	addr := e.b.Addr().String()
	if _, errOut, err := e.runRaw(produceCmd(), "p1\np2\np3\n", "-b", addr, "-t", "props",
		"--producer-property", "acks=1", "--producer-property", "linger.ms=0", "--producer-property", "delivery.timeout.ms=30000",
		"--producer-property", "max.in.flight.requests.per.connection=1", "--producer-property", "enable.idempotence=false"); err != nil {
		t.Fatalf("produce with properties: %v\n%s", err, errOut)
	}
	// auto.offset.reset=earliest as --from-beginning; --timeout-ms ends the wait for more.
	out, errOut, err := e.runRaw(consumeCmd(), "", "-b", addr, "-t", "props", "--consumer-property", "auto.offset.reset=earliest",
		"--consumer-property", "max.poll.records=1", "--timeout-ms", "300")
	if err != nil || out != "p1\np2\np3\n" || !strings.Contains(errOut, "Processed a total of 3 messages") {
		t.Fatalf("consume with properties and --timeout-ms: %q, %v\n%s", out, err, errOut)
	}
	for _, tc := range []struct {
		cmd     func() *cobra.Command
		args    []string
		wantErr string
	}{
		{produceCmd, []string{"--producer-property", "lingr.ms=5"}, "--producer-property lingr.ms: unknown property; did you mean linger.ms?"},
		{produceCmd, []string{"--acks", "1", "--producer-property", "enable.idempotence=true"}, "enable.idempotence=true: acks must be all, not 1"},
		{produceCmd, []string{"--acks", "0", "--enable-idempotence"}, "enable.idempotence=true: acks must be all, not 0"},
		{produceCmd, []string{"--enable-idempotence=false", "--producer-property", "enable.idempotence=true"}, "--enable-idempotence and --producer-property enable.idempotence= both set enable.idempotence: give one"},
		{produceCmd, []string{"--producer-property", "acks=2"}, "--producer-property acks=2: want all, -1, 1 or 0"},
		{produceCmd, []string{"--acks", "2"}, "--acks 2: want all, -1, 1 or 0"},
		{produceCmd, []string{"--acks", "1", "--producer-property", "acks=all"}, "--acks and --producer-property acks= both set acks: give one"},
		{produceCmd, []string{"--producer-property", "batch.size"}, `--producer-property "batch.size": want key=value`},
		{consumeCmd, []string{"--consumer-property", "max.poll.record=1"}, "did you mean max.poll.records?"},
		{consumeCmd, []string{"--consumer-property", "fetch.max.wait.ms=soon"}, "--consumer-property fetch.max.wait.ms=soon: want milliseconds"},
		{consumeCmd, []string{"--group", "g", "--consumer-property", "group.id=h"}, "--group and --consumer-property group.id= both set group.id"},
		{consumeCmd, []string{"--from-beginning", "--consumer-property", "auto.offset.reset=latest"}, "both say where to start"},
		{consumeCmd, []string{"--timeout", "1s", "--timeout-ms", "5"}, "--timeout and --timeout-ms both set"},
	} {
		args := append([]string{"-b", addr, "-t", "props"}, tc.args...)
		if _, errOut, err := e.runRaw(tc.cmd(), "x\n", args...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: %v\n%s\nwant an error saying %q", tc.args, err, errOut, tc.wantErr)
		}
	}
}

func TestSuggest(t *testing.T) {
	names := producerProperties.names()
	for in, want := range map[string]string{"lingr.ms": "linger.ms", "ack": "acks", "delivery.timeout": "delivery.timeout.ms", "compression": "compression.type"} {
		if got := suggest(in, names); len(got) == 0 || got[0] != want {
			t.Errorf("suggest(%q) = %v, want %s first", in, got, want)
		}
	}
	if got := suggest("zzzzzz", names); len(got) != 0 {
		t.Errorf("suggest of nothing alike: %v", got)
	}
}

// group delete deletes a group's committed offsets, once they are durable; a group with none
// is GROUP_ID_NOT_FOUND.
func TestGroupDelete(t *testing.T) {
	dir := t.TempDir()
	cfg := brokertest.Config(dir, "127.0.0.1:0")
	e := &consumeEnv{t: t, b: brokertest.Open(t, cfg)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.ctx = ctx
	conn, err := client.Dial(ctx, e.b.Addr().String(), "group-delete-test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.conn.Close() }()
	e.conn = conn
	e.topic("gd", 1)
	e.produce("gd", 0, 1_000, "a", "b")
	if out := e.run("-t", "gd", "--group", "doomed", "--from-beginning", "--max-messages", "1"); out != "a\n" {
		t.Fatalf("consume: %q", out)
	}
	run := func(args ...string) (string, string, error) { return e.runCmd(groupCmd(), args...) }
	if out, _, err := run("list"); err != nil || strings.Join(strings.Fields(out), " ") != "GROUP PROTOCOL-TYPE STATE doomed - Empty" {
		t.Fatalf("group list: %q %v", out, err)
	}
	out, _, err := run("delete", "doomed")
	if err != nil || out != "Deletion of requested consumer groups ('doomed') was successful.\n" {
		t.Fatalf("group delete: %q, %v", out, err)
	}
	if out, _, err := run("list"); err != nil || out != "" {
		t.Fatalf("group list after delete: %q %v; want none", out, err)
	}
	// The group starts over: its committed offset is gone.
	if out := e.run("-t", "gd", "--group", "doomed", "--from-beginning", "--max-messages", "1"); out != "a\n" {
		t.Fatalf("consume after delete: %q, want the first record again", out)
	}
	// A known and an unknown group: the known one goes, the unknown one is reported alone.
	out, _, err = run("delete", "doomed", "never")
	if err == nil || !strings.Contains(err.Error(), `delete group "never": the group does not exist (GROUP_ID_NOT_FOUND)`) || strings.Contains(err.Error(), "doomed") ||
		!strings.Contains(out, "('doomed') was successful") {
		t.Fatalf("delete of a known and an unknown group: %q, %v; want doomed deleted, only never's GROUP_ID_NOT_FOUND", out, err)
	}
	// The deletion is durable: the tombstones replay at the next start.
	_ = e.conn.Close()
	if err := e.b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.b = brokertest.Open(t, cfg)
	if e.conn, err = client.Dial(ctx, e.b.Addr().String(), "group-delete-test"); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run("list"); err != nil || out != "" {
		t.Fatalf("group list after delete and restart: %q %v; want none", out, err)
	}
	if _, _, err := run("delete", "doomed"); err == nil || !strings.Contains(err.Error(), `delete group "doomed": the group does not exist (GROUP_ID_NOT_FOUND)`) {
		t.Fatalf("delete of a deleted group after a restart: %v", err)
	}
	if _, _, err := run("delete"); err == nil {
		t.Fatal("group delete without a group succeeded")
	}
}

func TestClusterDescribe(t *testing.T) {
	e := newConsumeEnv(t)
	id := e.nodeID()
	out, _, err := e.runCmd(clusterCmd(), "describe")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "Cluster ID: ") || lines[1] != fmt.Sprintf("Controller: %d", id) {
		t.Fatalf("cluster describe:\n%s", out)
	}
	row := strings.Fields(lines[3])
	if len(row) < 3 || row[0] != fmt.Sprint(id) || !strings.Contains(row[1], "PLAINTEXT://"+e.b.Addr().String()) || row[2] != "alive" {
		t.Fatalf("broker row %q, want id %d, its PLAINTEXT endpoint, alive", lines[3], id)
	}
}

func TestVersion(t *testing.T) {
	var b bytes.Buffer
	writeVersion(&b, &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}})
	if want := "sluice v1.2.3\ngo: go1.99\ncommit: abc123-dirty (2026-12-01T00:00:00Z)\n"; b.String() != want {
		t.Fatalf("version: %q, want %q", b.String(), want)
	}
	b.Reset()
	writeVersion(&b, &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}})
	if want := "sluice (devel)\ngo: go1.99\n"; b.String() != want {
		t.Fatalf("version without VCS: %q, want %q", b.String(), want)
	}
	cmd := rootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil || !strings.HasPrefix(out.String(), "sluice ") || !strings.Contains(out.String(), "\ngo: go") {
		t.Fatalf("sluice version: %q, %v", out.String(), err)
	}
}

// freePorts is localhost.FreePorts for a test.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := localhost.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}
