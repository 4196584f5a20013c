package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// cluster local lays node i out on base+100i (PLAINTEXT) and the next port (CONTROLLER), and
// writes each node a KRaft properties file with Kafka's key names and every voter.
func TestClusterLocalLayout(t *testing.T) {
	dir := t.TempDir()
	nodes, err := planLocalCluster(localClusterOptions{brokers: 3, dataDir: dir, basePort: 9092})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ listen, controller string }{{"127.0.0.1:9092", "127.0.0.1:9093"}, {"127.0.0.1:9192", "127.0.0.1:9193"}, {"127.0.0.1:9292", "127.0.0.1:9293"}} {
		if nodes[i].listen != want.listen || nodes[i].controller != want.controller {
			t.Errorf("node %d: %s %s, want %s %s", i, nodes[i].listen, nodes[i].controller, want.listen, want.controller)
		}
	}
	props := serverProperties(nodes[1], nodes, []string{"broker.session.timeout.ms=2000"})
	for _, want := range []string{
		"\nnode.id=1\n", "\nprocess.roles=broker,controller\n",
		"\nlisteners=PLAINTEXT://127.0.0.1:9192,CONTROLLER://127.0.0.1:9193\n",
		"\ncontroller.listener.names=CONTROLLER\n",
		"\ncontroller.quorum.voters=0@127.0.0.1:9093,1@127.0.0.1:9193,2@127.0.0.1:9293\n",
		"\nlog.dirs=" + dir + "/broker1\n", "\nbroker.session.timeout.ms=2000\n",
	} {
		if !strings.Contains(props, want) {
			t.Errorf("node 1's properties lack %q:\n%s", want, props)
		}
	}
	free, err := planLocalCluster(localClusterOptions{brokers: 3, dataDir: dir, basePort: 0})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range free {
		for _, a := range []string{n.listen, n.controller} {
			if seen[a] || strings.HasSuffix(a, ":0") {
				t.Errorf("--base-port 0: port %s reused or unset", a)
			}
			seen[a] = true
		}
	}
	for _, tc := range []struct {
		o    localClusterOptions
		want string
	}{
		{localClusterOptions{brokers: 0, dataDir: dir, basePort: 9092}, "--brokers 0"},
		{localClusterOptions{brokers: 3, dataDir: dir, basePort: 65400}, "--base-port 65400: node 2's ports would be past 65535"},
	} {
		if _, err := planLocalCluster(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	for kv, want := range map[string]string{"node.id=4": "cluster local sets it", "listeners=x": "cluster local sets it", "nokey": "want key=value"} {
		if err := checkServerProperties([]string{kv}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--property %s: %v, want %q", kv, err, want)
		}
	}
	if err := checkServerProperties([]string{"broker.session.timeout.ms=2000"}); err != nil {
		t.Error(err)
	}
}

// A broker that cannot start (here: num.partitions=0, which it refuses) fails cluster local at once,
// naming the node and quoting its log, and the others are stopped.
func TestClusterLocalReportsABrokerThatExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSluice(t)
	dir := t.TempDir()
	_, err := startClusterProc(bin, []string{"--brokers", "2", "--base-port", "0", "--data-dir", dir, "--property", "num.partitions=0", "--ready-timeout", "20s"}, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before the cluster was ready") || !strings.Contains(err.Error(), "broker0.log") {
		t.Fatalf("a cluster whose brokers refuse their properties: %v", err)
	}
	if !strings.Contains(err.Error(), "stopped 2 brokers") {
		t.Errorf("the other broker was not stopped: %v", err)
	}
	if _, err := os.Stat(dir + "/broker1.properties"); err != nil {
		t.Errorf("node 1's properties: %v", err)
	}
}

func TestParseNodeLineAndMedians(t *testing.T) {
	id, n, err := parseNodeLine("node 2: pid=1234 listener=127.0.0.1:9292 controller=127.0.0.1:9293 data=/d/broker2 log=/d/broker2.log")
	if err != nil || id != 2 || n.pid != 1234 || n.listen != "127.0.0.1:9292" {
		t.Fatalf("parseNodeLine: %d %+v %v", id, n, err)
	}
	m := medianRun([]failoverRun{{"s": 3, "e": 1}, {"s": 1, "e": 0}, {"s": 2, "e": 5}})
	if m["s"] != 2 || m["e"] != 1 {
		t.Fatalf("medians %v, want s=2 e=1", m)
	}
	if m := medianRun([]failoverRun{{"s": 1}, {"s": 4}}); m["s"] != 2.5 {
		t.Fatalf("median of two: %v", m)
	}
}
