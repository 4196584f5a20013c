package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// With --broker-process the broker runs as a child process of the bench (its `serve`), the
// run's CPU counts the child's, reported apart, and the child is gone afterwards with its data.
func TestBenchBrokerProcess(t *testing.T) {
	bin := buildSluice(t)
	dir := t.TempDir()
	for _, transport := range []string{"unix", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			out, err := exec.Command(bin, "bench", "produce", "--embedded", "--broker-process", "--transport", transport,
				"--data-dir", dir, "--records", "20000", "--record-size", "1024", "--json").Output()
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
			checkRun(t, m, "produce", 20000)
			if m["driver"] != "sluice-"+transport {
				t.Errorf("driver %v", m["driver"])
			}
			shared, _ := m["shared_requests"].(float64)
			if runtime.GOOS == "linux" && (transport == "unix") != (shared > 0) {
				t.Errorf("%v requests through shared memory over %s", shared, transport)
			}
			brokerCPU, _ := m["broker_cpu_seconds"].(float64)
			cpu, _ := m["cpu_seconds"].(float64)
			if runtime.GOOS == "linux" && (brokerCPU <= 0 || cpu < brokerCPU) {
				t.Errorf("cpu_seconds %v, broker_cpu_seconds %v: want the broker's part, above zero", cpu, brokerCPU)
			}
			if rss, _ := m["broker_rss_peak_mb"].(float64); runtime.GOOS == "linux" && rss <= 0 {
				t.Errorf("broker_rss_peak_mb %v, want the broker process's peak RSS", m["broker_rss_peak_mb"])
			}
		})
	}
	// --broker-config reaches the broker process (serve --config): message.max.bytes below
	// the run's batches refuses every record.
	small := filepath.Join(t.TempDir(), "small.properties")
	if err := os.WriteFile(small, []byte("message.max.bytes=1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "bench", "produce", "--embedded", "--broker-process", "--broker-config", small,
		"--data-dir", dir, "--records", "50", "--record-size", "2000", "--json").Output()
	if err != nil {
		t.Fatalf("bench with --broker-config: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("stdout %q: %v", out, err)
	}
	if errs, _ := m["errors"].(float64); errs != 50 {
		t.Errorf("errors %v: want all 50 records refused by the broker process's message.max.bytes=1000", m["errors"])
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "sluice-bench-*")); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}
