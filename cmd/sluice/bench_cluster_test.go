package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The cluster flags are checked before anything starts: the shape must fit the brokers, the
// one-broker flags are refused with them, and the shape's flags need --brokers.
func TestBenchClusterFlagChecks(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string // "": accepted
	}{
		{[]string{"produce", "--brokers", "3", "--replication-factor", "3", "--min-insync-replicas", "2", "--acks", "all"}, ""},
		{[]string{"e2e", "--brokers", "3", "--replication-factor", "3"}, ""},
		{[]string{"consume", "--brokers", "2", "--data-dir", "/tmp"}, ""},
		{[]string{"run", "w.yaml", "--brokers", "3", "--replication-factor", "2"}, ""},
		{[]string{"produce", "--brokers", "3", "--broker-property", "log.segment.bytes=1048576"}, ""},
		{[]string{"produce", "--brokers", "3", "--replication-factor", "4"}, "--replication-factor"},
		{[]string{"produce", "--brokers", "3", "--replication-factor", "2", "--min-insync-replicas", "3"}, "--min-insync-replicas"},
		{[]string{"produce", "--brokers", "0", "--replication-factor", "1"}, "--brokers"},
		{[]string{"produce", "--embedded", "--replication-factor", "3"}, "--brokers"},
		{[]string{"produce", "--embedded", "--min-insync-replicas", "2"}, "--brokers"},
		{[]string{"produce", "--broker-property", "a=b"}, "--brokers"},
		{[]string{"produce", "--brokers", "3", "--embedded"}, "--embedded"},
		{[]string{"produce", "--brokers", "3", "--broker", "127.0.0.1:1"}, "--broker"},
		{[]string{"produce", "--brokers", "3", "--broker-process"}, "--broker-process"},
		{[]string{"produce", "--brokers", "3", "--broker-config", "b.properties"}, "--broker-config"},
		{[]string{"produce", "--brokers", "3", "--transport", "unix"}, "--transport"},
		{[]string{"produce", "--brokers", "3", "--driver", "kfake"}, "--driver"},
		{[]string{"produce", "--brokers", "3", "--cpuprofile", "c.prof"}, "--cpuprofile"},
		{[]string{"produce", "--brokers", "3", "--broker-property", "node.id=7"}, "node.id"},
		{[]string{"produce", "--brokers", "3", "--broker-property", "nokey"}, "--property"},
		{[]string{"produce", "--brokers", "3", "--replication-factor", "3", "--follower-lag-every", "20ms"}, ""},
		{[]string{"e2e", "--brokers", "3", "--replication-factor", "2", "--follower-lag-every", "10ms"}, ""},
		{[]string{"produce", "--brokers", "3", "--follower-lag-every", "20ms"}, "--follower-lag-every"},
		{[]string{"produce", "--brokers", "3", "--replication-factor", "3", "--follower-lag-every", "-1s"}, "--follower-lag-every"},
		{[]string{"produce", "--embedded", "--follower-lag-every", "20ms"}, "--brokers"},
		{[]string{"consume", "--brokers", "3", "--replication-factor", "3", "--follower-lag-every", "20ms"}, "--follower-lag-every"},
	} {
		err := checkBenchFlags(t, c.args...)
		switch {
		case c.flag == "" && err != nil:
			t.Errorf("bench %s: %v", strings.Join(c.args, " "), err)
		case c.flag != "" && (err == nil || !strings.Contains(err.Error(), c.flag)):
			t.Errorf("bench %s: error %v, want one naming %s", strings.Join(c.args, " "), err, c.flag)
		}
	}
}

// TestBenchCluster: `bench produce --brokers 3` starts three broker processes, creates the
// topic in the asked shape, produces to it with acks=all through the bootstrap list of all
// three, samples the followers' lag, and reports the cluster's shape and every broker
// process's CPU and peak RSS; the
// brokers are gone afterwards with their directory. A cluster that cannot start fails the
// run with its brokers' logs kept, and named.
func TestBenchCluster(t *testing.T) {
	bin := buildSluice(t)
	dir := t.TempDir()
	out, err := exec.Command(bin, "bench", "produce", "--brokers", "3", "--replication-factor", "3", "--min-insync-replicas", "2",
		"--acks", "all", "--partitions", "3", "--data-dir", dir, "--records", "3000", "--record-size", "1024", "--follower-lag-every", "10ms", "--json").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("stdout %q: %v", out, err)
	}
	checkRun(t, m, "produce", 3000)
	if m["driver"] != "sluice-cluster" || m["cluster"] != "3 brokers, RF 3, min.insync.replicas 2" {
		t.Errorf("driver %v, cluster %v: want the cluster's shape named", m["driver"], m["cluster"])
	}
	// The followers were sampled (how many positions there were to read depends on whether
	// they had fetched yet).
	if lag, _ := m["follower_lag"].(map[string]any); lag == nil || lag["samples"] == nil || lag["errors"] != nil {
		t.Errorf("follower_lag %v: want the sampler's figures, no failed reads", m["follower_lag"])
	}
	if runtime.GOOS == "linux" {
		each, _ := m["broker_rss_peak_mb_each"].([]any)
		if len(each) != 3 {
			t.Errorf("broker_rss_peak_mb_each %v: want the three brokers'", m["broker_rss_peak_mb_each"])
		}
		for i, v := range each {
			if mb, _ := v.(float64); mb <= 0 {
				t.Errorf("broker %d's peak RSS %v", i, v)
			}
		}
		if cpu, _ := m["broker_cpu_seconds"].(float64); cpu <= 0 {
			t.Errorf("broker_cpu_seconds %v: want the brokers' CPU", m["broker_cpu_seconds"])
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "sluice-bench-cluster-*")); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}

	// A broker that refuses its properties: the cluster does not start, the run fails, and
	// the directory with the brokers' logs stays.
	failDir := t.TempDir()
	cmd := exec.Command(bin, "bench", "produce", "--brokers", "1", "--broker-property", "log.segment.bytes=-1",
		"--data-dir", failDir, "--records", "10")
	combined, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("bench with a broker that cannot start succeeded:\n%s", combined)
	}
	ents, _ := filepath.Glob(filepath.Join(failDir, "sluice-bench-cluster-*", "broker0.log"))
	if len(ents) != 1 {
		t.Fatalf("the failed cluster's log was not kept (%v):\n%s", ents, combined)
	}
	if !strings.Contains(string(combined), filepath.Dir(ents[0])) {
		t.Errorf("the error does not say where the logs are (%s):\n%s", filepath.Dir(ents[0]), combined)
	}
	if b, _ := os.ReadFile(ents[0]); !strings.Contains(string(b), "log.segment.bytes") {
		t.Errorf("broker0.log does not say why it stopped:\n%s", b)
	}
}
